//! Canonical JSON: the exact bytes chipset writes, in two forms (a pretty
//! file, a compact log line) built on one sorted `serde_json::Value`.

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::{Map, Value};

/// Serializes `value` as canonical JSON: the body of
/// [`StateDir::to_canonical_json`](crate::StateDir::to_canonical_json).
///
/// # Errors
///
/// Whatever `serde_json` refuses.
pub(crate) fn to_canonical_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = serde_json::to_vec_pretty(&canonical_value(value)?)?;
    out.push(b'\n');
    Ok(out)
}

impl crate::StateDir {
    /// Serializes `value` as canonical JSON.
    ///
    /// The bytes are: object keys sorted by their UTF-8 bytes at every depth;
    /// two-space indentation with `"key": value` and one entry per line; empty
    /// arrays and objects as `[]` and `{}`; strings escaped as `serde_json`
    /// escapes them (`"`, `\`, and control characters; everything else,
    /// non-ASCII included, as raw UTF-8); and exactly one trailing newline.
    /// Structs serialize with sorted keys too, whatever their field order.
    ///
    /// ```
    /// #[derive(serde::Serialize)]
    /// struct Nudge { r#type: &'static str, from: &'static str }
    /// let bytes = chipset_store::StateDir::to_canonical_json(&Nudge { r#type: "abort", from: "mayor" })?;
    /// assert_eq!(bytes, b"{\n  \"from\": \"mayor\",\n  \"type\": \"abort\"\n}\n");
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Whatever `serde_json` refuses: a map key that is not a string, a number,
    /// a bool or a char, a non-finite float.
    pub fn to_canonical_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
        to_canonical_json(value)
    }
}

/// Serializes `value` as one canonical JSONL line: sorted keys, no whitespace
/// between tokens, one trailing newline and no other newline.
///
/// # Errors
///
/// As [`to_canonical_json`].
pub(crate) fn to_canonical_line<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::new();
    append_canonical_line(&mut out, value)?;
    Ok(out)
}

/// Appends the canonical JSONL line of `value` (see [`to_canonical_line`]) to
/// `out`: a batch of records is built in one buffer for one write.
///
/// # Errors
///
/// As [`to_canonical_json`]; on error `out` is unchanged.
pub(crate) fn append_canonical_line<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> serde_json::Result<()> {
    let value = canonical_value(value)?;
    serde_json::to_writer(&mut *out, &value)?;
    out.push(b'\n');
    Ok(())
}

/// Returns `value` as a `serde_json::Value` with every object's keys in
/// sorted order: the one step both forms share. Writing the tree back out
/// is `serde_json`'s own, so numbers (kept exact by its
/// `arbitrary_precision` feature), strings and escapes are its bytes.
fn canonical_value<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Value> {
    Ok(sorted(serde_json::to_value(value)?))
}

/// Returns `value` with every object's keys in sorted order. `serde_json`'s
/// map is a sorted map unless some crate in the build enables its
/// `preserve_order` feature; only then are the objects rebuilt, so the bytes
/// are canonical either way and the common case pays nothing.
fn sorted(value: Value) -> Value {
    if map_is_sorted() {
        value
    } else {
        rebuild_sorted(value)
    }
}

/// Returns whether `serde_json::Map` iterates in key order in this build.
fn map_is_sorted() -> bool {
    static SORTED: OnceLock<bool> = OnceLock::new();
    *SORTED.get_or_init(|| {
        let mut probe = Map::new();
        probe.insert("b".to_owned(), Value::Null);
        probe.insert("a".to_owned(), Value::Null);
        probe.keys().next().map(String::as_str) == Some("a")
    })
}

fn rebuild_sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k, rebuild_sorted(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(rebuild_sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    //! Canonical JSON: exact bytes, and round-trips of arbitrary values with sorted keys.

    use std::fmt;

    use proptest::prelude::*;
    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde_json::{Value, json};

    use super::*;

    /// A JSON tree that keeps object keys in the order they appear in the text.
    #[derive(Debug)]
    enum Ordered {
        Leaf,
        Array(Vec<Ordered>),
        Object(Vec<(String, Ordered)>),
    }

    impl<'de> Deserialize<'de> for Ordered {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Ordered;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("json")
                }
                fn visit_bool<E>(self, _: bool) -> Result<Ordered, E> {
                    Ok(Ordered::Leaf)
                }
                fn visit_i64<E>(self, _: i64) -> Result<Ordered, E> {
                    Ok(Ordered::Leaf)
                }
                fn visit_u64<E>(self, _: u64) -> Result<Ordered, E> {
                    Ok(Ordered::Leaf)
                }
                fn visit_f64<E>(self, _: f64) -> Result<Ordered, E> {
                    Ok(Ordered::Leaf)
                }
                fn visit_str<E>(self, _: &str) -> Result<Ordered, E> {
                    Ok(Ordered::Leaf)
                }
                fn visit_unit<E>(self) -> Result<Ordered, E> {
                    Ok(Ordered::Leaf)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
                    let mut items = Vec::new();
                    while let Some(item) = seq.next_element()? {
                        items.push(item);
                    }
                    Ok(Ordered::Array(items))
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                    let mut entries = Vec::new();
                    while let Some((k, v)) = map.next_entry::<String, Ordered>()? {
                        entries.push((k, v));
                    }
                    Ok(Ordered::Object(entries))
                }
            }
            d.deserialize_any(V)
        }
    }

    fn assert_sorted(node: &Ordered) {
        match node {
            Ordered::Leaf => {}
            Ordered::Array(items) => items.iter().for_each(assert_sorted),
            Ordered::Object(entries) => {
                for pair in entries.windows(2) {
                    assert!(
                        pair[0].0 < pair[1].0,
                        "keys out of order: {:?} then {:?}",
                        pair[0].0,
                        pair[1].0
                    );
                }
                entries.iter().for_each(|(_, v)| assert_sorted(v));
            }
        }
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(".{0,8}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn canonical_json_round_trips_with_sorted_keys(value in arb_value()) {
            let bytes = to_canonical_json(&value).unwrap();
            prop_assert_eq!(bytes.last(), Some(&b'\n'));
            prop_assert_ne!(bytes.get(bytes.len().wrapping_sub(2)), Some(&b'\n'));
            let back: Value = serde_json::from_slice(&bytes).unwrap();
            prop_assert_eq!(&back, &value);
            assert_sorted(&serde_json::from_slice(&bytes).unwrap());
            // Canonical form is a fixed point.
            prop_assert_eq!(to_canonical_json(&back).unwrap(), bytes);

            let line = to_canonical_line(&value).unwrap();
            prop_assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
            // The line form is exactly what serde_json writes for a sorted tree.
            let mut reference = serde_json::to_vec(&value).unwrap();
            reference.push(b'\n');
            prop_assert_eq!(&line, &reference);
            prop_assert_eq!(serde_json::from_slice::<Value>(&line).unwrap(), value);
        }

        #[test]
        fn line_serializer_matches_the_value_path_for_every_serde_shape(shape in arb_shape()) {
            let line = to_canonical_line(&shape).unwrap();
            let mut reference = serde_json::to_vec(&serde_json::to_value(&shape).unwrap()).unwrap();
            reference.push(b'\n');
            prop_assert_eq!(String::from_utf8(line).unwrap(), String::from_utf8(reference).unwrap());
        }
    }

    /// A type that uses every serde shape the line form must handle.
    #[derive(Debug, Clone, serde::Serialize)]
    struct Shape {
        zeta: Option<i64>,
        alpha: Vec<Variant>,
        #[serde(rename = "middle-name")]
        middle: std::collections::HashMap<String, f64>,
        by_number: std::collections::HashMap<u32, bool>,
        unit: (),
        tuple: (u8, String, char),
        newtype: Wrapper,
        #[serde(flatten)]
        extra: std::collections::HashMap<String, Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<String>,
    }

    #[derive(Debug, Clone, serde::Serialize)]
    struct Wrapper(String);

    #[derive(Debug, Clone, serde::Serialize)]
    enum Variant {
        Unit,
        Newtype(i32),
        Tuple(bool, Option<u64>),
        Struct { z: String, a: Vec<u8> },
    }

    fn arb_variant() -> impl Strategy<Value = Variant> {
        prop_oneof![
            Just(Variant::Unit),
            any::<i32>().prop_map(Variant::Newtype),
            (any::<bool>(), any::<Option<u64>>()).prop_map(|(a, b)| Variant::Tuple(a, b)),
            (".{0,6}", prop::collection::vec(any::<u8>(), 0..4))
                .prop_map(|(z, a)| Variant::Struct { z, a }),
        ]
    }

    fn arb_shape() -> impl Strategy<Value = Shape> {
        (
            any::<Option<i64>>(),
            prop::collection::vec(arb_variant(), 0..5),
            prop::collection::hash_map(".{0,6}", any::<f64>(), 0..5),
            prop::collection::hash_map(any::<u32>(), any::<bool>(), 0..5),
            (any::<u8>(), ".{0,6}", any::<char>()),
            ".{0,6}",
            prop::collection::hash_map("x[a-z]{0,5}", arb_value(), 0..3),
            proptest::option::of(".{0,4}"),
        )
            .prop_map(
                |(zeta, alpha, middle, by_number, tuple, newtype, extra, skipped)| Shape {
                    zeta,
                    alpha,
                    middle,
                    by_number,
                    unit: (),
                    tuple,
                    newtype: Wrapper(newtype),
                    extra,
                    skipped,
                },
            )
    }

    #[derive(serde::Serialize)]
    struct Hook {
        status: &'static str,
        agent_id: &'static str,
        work_item: Option<Item>,
        last_activity: &'static str,
    }

    #[derive(serde::Serialize)]
    struct Item {
        title: &'static str,
        bead_id: &'static str,
        assigned_at: &'static str,
    }

    #[test]
    fn struct_bytes_are_pinned() {
        let hook = Hook {
            status: "active",
            agent_id: "polecat-alpha",
            work_item: Some(Item {
                title: "Add README section",
                bead_id: "gt-abc12",
                assigned_at: "2026-03-05T10:30:00.000Z",
            }),
            last_activity: "2026-03-05T10:32:00.000Z",
        };
        let text = String::from_utf8(to_canonical_json(&hook).unwrap()).unwrap();
        insta::assert_snapshot!("struct_sorted", text);
    }

    #[test]
    fn escapes_empties_and_unicode_are_pinned() {
        let value = json!({
            "z": [],
            "a": {},
            "quote\"and\\slash": "line\nbreak\ttab\u{1}",
            "ünïcode": "→ ✓",
            "n": [1, -2, 3.5, null, true],
            "nested": {"b": {"d": 1, "c": 2}, "a": [{"y": 1, "x": 2}]}
        });
        let text = String::from_utf8(to_canonical_json(&value).unwrap()).unwrap();
        insta::assert_snapshot!("escapes_and_nesting", text);
        let line = String::from_utf8(to_canonical_line(&value).unwrap()).unwrap();
        insta::assert_snapshot!("jsonl_line", line);
    }

    /// Issue 12: numbers are kept exactly, in both canonical forms: a bus payload
    /// `{"m":123456789012345678901234567890}` once became `1.2345678901234568e+29`.
    /// (Exact in value: `serde_json` spells an exponent with its sign, `1e+400`.)
    #[test]
    fn numbers_round_trip_exactly() {
        let text = r#"{"big":123456789012345678901234567890,"neg":-98765432109876543210,"f":1.10,"e":1e400,"n":[0.1,7]}"#;
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        let line = to_canonical_line(&value).unwrap();
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"big\":123456789012345678901234567890,\"e\":1e+400,\"f\":1.10,\"n\":[0.1,7],\"neg\":-98765432109876543210}\n"
        );
        let pretty = String::from_utf8(to_canonical_json(&value).unwrap()).unwrap();
        assert!(
            pretty.contains("\"big\": 123456789012345678901234567890,"),
            "{pretty}"
        );
        assert!(pretty.contains("\"f\": 1.10,"), "{pretty}");
        let back: serde_json::Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(back, value);
    }

    /// Map keys of every kind `serde_json` turns into a string (integers,
    /// finite floats, booleans, chars, unit variants, newtype wrappers of
    /// those) are written as it writes them, sorted as strings; other keys
    /// (options, sequences, maps, units, tagged variants) are refused with its
    /// message. The pretty form and the line form take the same keys.
    #[test]
    fn map_keys_are_written_as_serde_json_writes_them_or_refused() {
        use std::collections::BTreeMap;

        #[derive(serde::Serialize, PartialEq, Eq, PartialOrd, Ord)]
        enum Side {
            Left,
            Right,
        }
        #[derive(serde::Serialize, PartialEq, Eq, PartialOrd, Ord)]
        struct Name(String);

        fn same_as_serde_json<T: serde::Serialize>(value: &T) -> String {
            let line = String::from_utf8(to_canonical_line(value).unwrap()).unwrap();
            let mut reference = serde_json::to_vec(&serde_json::to_value(value).unwrap()).unwrap();
            reference.push(b'\n');
            assert_eq!(line, String::from_utf8(reference).unwrap());
            line
        }
        assert_eq!(
            same_as_serde_json(&BTreeMap::from([(10u8, 1), (9u8, 2)])),
            "{\"10\":1,\"9\":2}\n"
        );
        same_as_serde_json(&BTreeMap::from([(-3i8, 0), (4i8, 0)]));
        same_as_serde_json(&BTreeMap::from([(-3i16, 0)]));
        same_as_serde_json(&BTreeMap::from([(-3i32, 0)]));
        same_as_serde_json(&BTreeMap::from([(i64::MIN, 0)]));
        same_as_serde_json(&BTreeMap::from([(i128::MIN, 0)]));
        same_as_serde_json(&BTreeMap::from([(u16::MAX, 0)]));
        same_as_serde_json(&BTreeMap::from([(u64::MAX, 0)]));
        same_as_serde_json(&BTreeMap::from([(u128::MAX, 0)]));
        let floats = KeyMap(vec![(1.5f64, 0), (-0.25f64, 1)]);
        assert_eq!(same_as_serde_json(&floats), "{\"-0.25\":1,\"1.5\":0}\n");
        same_as_serde_json(&KeyMap(vec![(1.5f32, 0)]));
        assert!(to_canonical_json(&floats).is_ok(), "the pretty form agrees");
        assert_eq!(
            same_as_serde_json(&BTreeMap::from([(true, 1), (false, 0)])),
            "{\"false\":0,\"true\":1}\n"
        );
        assert_eq!(
            same_as_serde_json(&BTreeMap::from([('b', 1), ('a', 0)])),
            "{\"a\":0,\"b\":1}\n"
        );
        assert_eq!(
            same_as_serde_json(&BTreeMap::from([(Side::Right, 1), (Side::Left, 0)])),
            "{\"Left\":0,\"Right\":1}\n"
        );
        assert_eq!(
            same_as_serde_json(&BTreeMap::from([
                (Name("z".into()), 1),
                (Name("a".into()), 0)
            ])),
            "{\"a\":0,\"z\":1}\n"
        );

        #[derive(serde::Serialize)]
        struct Unit;
        #[derive(serde::Serialize)]
        enum Wrapped {
            Tag(u8),
        }
        fn refused<K: serde::Serialize>(key: K) {
            let map = KeyMap(vec![(key, 0)]);
            let err = to_canonical_line(&map).unwrap_err();
            assert_eq!(err.to_string(), "key must be a string");
        }
        fn non_finite<K: serde::Serialize>(key: K) {
            let map = KeyMap(vec![(key, 0)]);
            let err = to_canonical_line(&map).unwrap_err();
            assert_eq!(
                err.to_string(),
                "float key must be finite (got NaN or +/-inf)"
            );
        }
        non_finite(f64::NAN);
        non_finite(f32::INFINITY);
        refused(vec![1u8]);
        refused((1u8, 2u8));
        refused(None::<&str>);
        refused(Some("k"));
        refused(());
        refused(Unit);
        refused(Wrapped::Tag(1));
        refused(BTreeMap::from([(1, 2)]));
    }

    /// A map serialized from a list of pairs, keys as they come (any type).
    struct KeyMap<K>(Vec<(K, i32)>);

    impl<K> FromIterator<(K, i32)> for KeyMap<K> {
        fn from_iter<I: IntoIterator<Item = (K, i32)>>(iter: I) -> Self {
            KeyMap(iter.into_iter().collect())
        }
    }

    impl<K: serde::Serialize> serde::Serialize for KeyMap<K> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(self.0.len()))?;
            for (k, v) in &self.0 {
                map.serialize_entry(k, v)?;
            }
            map.end()
        }
    }

    /// A key that comes twice keeps its last value, as a map insert (and so
    /// `serde_json`'s `Value`) would, whether the two are next to each other,
    /// in order or not.
    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        for (pairs, expected) in [
            (vec![("a", 1), ("a", 2)], "{\"a\":2}\n"),
            (vec![("a", 1), ("b", 2), ("a", 3)], "{\"a\":3,\"b\":2}\n"),
            (vec![("b", 1), ("a", 2), ("b", 3)], "{\"a\":2,\"b\":3}\n"),
            (vec![("a", 1), ("b", 2), ("b", 3)], "{\"a\":1,\"b\":3}\n"),
        ] {
            let map: KeyMap<&str> = pairs.iter().copied().collect();
            let line = String::from_utf8(to_canonical_line(&map).unwrap()).unwrap();
            assert_eq!(line, expected, "{pairs:?}");
            let value = serde_json::to_value(&map).unwrap();
            assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), value);
        }
    }

    /// A unit struct is `null` and a tuple struct an array, as `serde_json`
    /// writes them (the shapes the property test's `Shape` does not hold).
    #[test]
    fn unit_and_tuple_structs_are_written_as_serde_json_writes_them() {
        #[derive(serde::Serialize)]
        struct Unit;
        #[derive(serde::Serialize)]
        struct Pair(u8, &'static str);
        #[derive(serde::Serialize)]
        struct Holder {
            unit: Unit,
            pair: Pair,
            pairs: Vec<Pair>,
        }
        let value = Holder {
            unit: Unit,
            pair: Pair(1, "x"),
            pairs: vec![Pair(2, "y"), Pair(3, "z")],
        };
        let line = String::from_utf8(to_canonical_line(&value).unwrap()).unwrap();
        assert_eq!(
            line,
            "{\"pair\":[1,\"x\"],\"pairs\":[[2,\"y\"],[3,\"z\"]],\"unit\":null}\n"
        );
        let reference = serde_json::to_string(&serde_json::to_value(&value).unwrap()).unwrap();
        assert_eq!(line, reference + "\n");
    }

    /// The rebuild that a `preserve_order` build needs sorts at every depth.
    #[test]
    fn rebuild_sorts_nested_objects() {
        let value = serde_json::json!({"b": [{"d": 1, "c": 2}], "a": {"z": 1, "y": 2}});
        let text = serde_json::to_string(&rebuild_sorted(value)).unwrap();
        assert_eq!(text, r#"{"a":{"y":2,"z":1},"b":[{"c":2,"d":1}]}"#);
        assert!(
            map_is_sorted(),
            "this workspace does not enable preserve_order"
        );
    }
}
