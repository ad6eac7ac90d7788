//! The lenient numbers and flags, and the schemas they keep.

use super::*;

#[test]
fn numbers_and_flags_are_taken_as_text_too() {
    let w: Wait = serde_json::from_str(r#"{"timeout_seconds": "2.5"}"#).unwrap();
    assert_eq!(w.timeout_seconds, Some(2.5));
    let w: Wait = serde_json::from_str(r#"{"timeout_seconds": 3}"#).unwrap();
    assert_eq!(w.timeout_seconds, Some(3.0));
    let w: Wait = serde_json::from_str("{}").unwrap();
    assert_eq!(w.timeout_seconds, None);
    let s: RemindSnooze = serde_json::from_str(r#"{"id": "r", "hours": "2"}"#).unwrap();
    assert_eq!(s.hours, 2);
    let n: NudgeSend = serde_json::from_str(
        r#"{"to": "b", "type": "abort", "message": "m", "requires_response": "true"}"#,
    )
    .unwrap();
    assert_eq!(n.requires_response, Some(true));
    let bad = serde_json::from_str::<RemindSnooze>(r#"{"id": "r", "hours": "soon"}"#);
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("expected a number or a flag, got \"soon\"")
    );
    // Exponent notation, as JavaScript writes small and large numbers;
    // `3e1` is an integer, `2.5e0` not one.
    let w: Wait = serde_json::from_str(r#"{"timeout_seconds": 1e2}"#).unwrap();
    assert_eq!(w.timeout_seconds, Some(100.0));
    let w: Wait = serde_json::from_str(r#"{"timeout_seconds": 1E-1}"#).unwrap();
    assert_eq!(w.timeout_seconds, Some(0.1));
    let s: RemindSnooze = serde_json::from_str(r#"{"id": "r", "hours": 3e1}"#).unwrap();
    assert_eq!(s.hours, 30);
    // As the server parses arguments: from a JSON value.
    let v: serde_json::Value = serde_json::from_str(r#"{"timeout_seconds": 1e-5}"#).unwrap();
    let w: Wait = serde_json::from_value(v).unwrap();
    assert_eq!(w.timeout_seconds, Some(1e-5));
    let bad = serde_json::from_str::<RemindSnooze>(r#"{"id": "r", "hours": 2.5e0}"#);
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("expected a number in range")
    );
    let unknown = serde_json::from_str::<Wait>(r#"{"agent": "b"}"#);
    assert!(
        unknown
            .unwrap_err()
            .to_string()
            .contains("unknown field `agent`")
    );
}

#[test]
fn schemas_keep_the_plain_types() {
    let schema = serde_json::to_value(schemars::schema_for!(Wait)).unwrap();
    assert_eq!(schema["properties"]["timeout_seconds"]["type"], "number");
    assert!(
        schema
            .get("required")
            .is_none_or(|r| r == &serde_json::json!([]))
    );
    let schema = serde_json::to_value(schemars::schema_for!(RemindSnooze)).unwrap();
    assert_eq!(schema["properties"]["hours"]["type"], "integer");
    assert_eq!(schema["required"], serde_json::json!(["id", "hours"]));
}
