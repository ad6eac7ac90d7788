//! What the seed's own reader lists: nubos-pilot's `lib/messaging.cjs`
//! reads every `*.json` file of a message folder and keeps those that
//! validate against its `message.v1` schema. The doctor never moves such a
//! file aside, even when chipset cannot use it.

use serde_json::{Map, Value};

use crate::id::is_seed_id;

/// The largest body `message.v1` accepts, in UTF-8 bytes.
const MAX_BODY_BYTES: usize = 262_144;

/// Returns true when `bytes` is a message nubos-pilot's reader lists: a
/// JSON object valid against `message.v1` (required `id`, `from`, `to`,
/// `phase`, `kind`, `subject`, `body`, `created_at`; each field present of
/// the schema's type and pattern).
pub(super) fn seed_reader_lists(bytes: &[u8]) -> bool {
    let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(bytes) else {
        return false;
    };
    valid(&m)
}

fn valid(m: &Map<String, Value>) -> bool {
    let text = |key: &str| m.get(key).and_then(Value::as_str);
    let optional = |key: &str, ok: &dyn Fn(&Value) -> bool| m.get(key).is_none_or(ok);
    let slug = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    text("id").is_some_and(is_seed_id)
        && text("from").is_some_and(slug)
        && text("to").is_some_and(slug)
        && text("phase").is_some_and(|s| !s.is_empty())
        && text("kind").is_some_and(|k| matches!(k, "request" | "response" | "notify"))
        && text("subject").is_some_and(|s| !s.is_empty())
        && text("body").is_some_and(|b| b.len() <= MAX_BODY_BYTES)
        && text("created_at").is_some()
        && optional("round", &|v| {
            v.is_null()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f >= 0.0 && f.fract() == 0.0)
        })
        && optional("expects_reply", &Value::is_boolean)
        && optional("in_reply_to", &|v| v.is_null() || v.is_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "1795408569995-7a703292-f1d1-4900-b635-8fd9f1df7f88";

    fn message(extra: &str) -> String {
        format!(
            r#"{{"id":"{ID}","from":"np-critic","to":"np-executor","phase":"a/b","round":null,
            "kind":"request","subject":"dead-code","body":"x","expects_reply":true,
            "in_reply_to":null,"created_at":"not a time"{extra}}}"#
        )
    }

    #[test]
    fn the_seed_reader_lists_what_its_schema_accepts() {
        // A phase chipset refuses and a time it cannot parse: still listed.
        assert!(seed_reader_lists(message("").as_bytes()));
        assert!(seed_reader_lists(message(r#","round":2"#).as_bytes()));
        assert!(!seed_reader_lists(message(r#","round":-1"#).as_bytes()));
        assert!(!seed_reader_lists(
            message(r#","kind":"question""#).as_bytes()
        ));
        assert!(!seed_reader_lists(
            message(r#","to":"np/executor""#).as_bytes()
        ));
        assert!(!seed_reader_lists(
            message(r#","expects_reply":"yes""#).as_bytes()
        ));
        let big = format!(r#","body":"{}""#, "x".repeat(MAX_BODY_BYTES + 1));
        assert!(!seed_reader_lists(message(&big).as_bytes()));
        assert!(!seed_reader_lists(b"{\"id\":"));
        assert!(!seed_reader_lists(b"[]"));
    }

    #[test]
    fn seed_ids_match_the_seed_pattern() {
        assert!(is_seed_id(ID));
        assert!(!is_seed_id("1-a"));
        assert!(!is_seed_id(&ID.to_uppercase()));
        assert!(!is_seed_id(&format!("{ID}-0")));
        assert!(!is_seed_id(&ID[1..].replacen('7', "x", 1)));
    }
}
