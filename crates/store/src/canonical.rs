//! Canonical JSON: the exact bytes chipset writes.

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
/// Whatever `serde_json` refuses: a map with non-string keys, a non-finite float.
pub fn to_canonical_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let value = sorted(serde_json::to_value(value)?);
    let mut out = serde_json::to_vec_pretty(&value)?;
    out.push(b'\n');
    Ok(out)
}

/// Serializes `value` as one canonical JSONL line: sorted keys, no whitespace
/// between tokens, one trailing newline and no other newline.
///
/// # Errors
///
/// As [`to_canonical_json`].
pub fn to_canonical_line<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let value = sorted(serde_json::to_value(value)?);
    let mut out = serde_json::to_vec(&value)?;
    out.push(b'\n');
    Ok(out)
}

/// Rebuilds every object with its keys in sorted order. `serde_json`'s map is
/// already sorted unless some crate in the build enables `preserve_order`;
/// sorting here keeps the bytes canonical either way.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k, sorted(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}
