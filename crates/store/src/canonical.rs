//! Canonical JSON: the exact bytes chipset writes, in two forms (a pretty
//! file, a compact log line) built on one sorted `serde_json::Value`.

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::{Map, Value};

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
/// let bytes = chipset_store::to_canonical_json(&Nudge { r#type: "abort", from: "mayor" })?;
/// assert_eq!(bytes, b"{\n  \"from\": \"mayor\",\n  \"type\": \"abort\"\n}\n");
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// # Errors
///
/// Whatever `serde_json` refuses: a map key that is not a string, a number,
/// a bool or a char, a non-finite float.
pub fn to_canonical_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = serde_json::to_vec_pretty(&canonical_value(value)?)?;
    out.push(b'\n');
    Ok(out)
}

/// Serializes `value` as one canonical JSONL line: sorted keys, no whitespace
/// between tokens, one trailing newline and no other newline.
///
/// # Errors
///
/// As [`to_canonical_json`].
#[cfg_attr(
    not(feature = "testing"),
    allow(unreachable_pub, reason = "public only for the tests, with `testing`")
)]
pub fn to_canonical_line<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
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
    use super::*;

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
