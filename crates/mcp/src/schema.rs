//! The tools' JSON Schemas: output schemas derived from the view types,
//! trimmed to what a client validates with, and a small structural check of
//! a value against a schema. The check is how arguments are refused with the
//! field and the type it expects (`hours: expected an integer, got "soon"`)
//! rather than serde's words for Rust types; the server's tests use it to
//! check every result against its tool's output schema.

use std::borrow::Cow;
use std::sync::Arc;

use chipset_failure::Failure;
use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Returns the output schema of a tool whose structured result is a `T`:
/// an object at the root (a tagged enum gets `"type": "object"` beside its
/// `oneOf`), without titles and descriptions (the tool's description says
/// what it returns, and tools/list stays small).
pub(crate) fn output<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let schema = rmcp::handler::server::common::schema_for_output::<T>();
    let mut object = (*schema).clone();
    object.remove("$schema");
    trim(&mut object);
    object
        .entry("type")
        .or_insert_with(|| Value::String("object".to_owned()));
    Arc::new(object)
}

/// Returns `router` with every tool's schemas compacted: no `$schema`, no
/// `format` (schemars' `uint64` is not one a client knows), no `default:
/// null`; output schemas also lose their bounds (they describe what the
/// server writes, not what it accepts).
pub(crate) fn compact<S>(
    mut router: rmcp::handler::server::router::tool::ToolRouter<S>,
) -> rmcp::handler::server::router::tool::ToolRouter<S> {
    for route in router.map.values_mut() {
        let tool = &mut route.attr;
        let mut input = (*tool.input_schema).clone();
        input.remove("$schema");
        if let Some(Value::Object(defs)) = input.get_mut("$defs") {
            // A shared type's doc repeats what each field that uses it says.
            for def in defs.values_mut().filter_map(Value::as_object_mut) {
                def.remove("description");
            }
        }
        walk(&mut input, &mut |s| {
            s.remove("format");
            if s.get("default") == Some(&Value::Null) {
                s.remove("default");
            }
        });
        tool.input_schema = Arc::new(input);
        if let Some(output) = &tool.output_schema {
            let mut output = envelope((**output).clone());
            walk(&mut output, &mut |s| {
                s.remove("format");
                s.remove("minimum");
                enumerate(s);
            });
            tool.output_schema = Some(Arc::new(output));
        }
    }
    router
}

/// Returns the envelope of an output schema: the result's own fields with
/// their types (enums and nulls kept), and the records inside it (a
/// message, a hook, an event) as plain objects. The records' fields are
/// the libraries' on-disk formats, documented there and checked against
/// `view/records.rs` by the tests; listing them for every tool would more
/// than double tools/list, which every agent session pays for.
fn envelope(mut schema: Map<String, Value>) -> Map<String, Value> {
    let defs = match schema.remove("$defs") {
        Some(Value::Object(defs)) => defs,
        _ => Map::new(),
    };
    // A result that is one of several views (`hook_clear`) keeps each
    // view's fields.
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = schema.get_mut(key) {
            for option in options.iter_mut() {
                if let Some(def) = referenced(option, &defs) {
                    *option = Value::Object(def.clone());
                }
            }
        }
    }
    stub_refs(&mut schema, &defs);
    schema
}

/// Returns the definition `schema` refers to, if it is a `$ref`.
fn referenced<'d>(schema: &Value, defs: &'d Map<String, Value>) -> Option<&'d Map<String, Value>> {
    let name = schema.get("$ref")?.as_str()?.strip_prefix("#/$defs/")?;
    defs.get(name)?.as_object()
}

/// Replaces every `$ref` inside `schema` by the referenced type alone.
fn stub_refs(schema: &mut Map<String, Value>, defs: &Map<String, Value>) {
    let mut visit = |sub: &mut Value| {
        if let Some(def) = referenced(sub, defs) {
            let mut def = def.clone();
            enumerate(&mut def);
            let mut stub = Map::new();
            for key in ["type", "enum"] {
                if let Some(v) = def.get(key) {
                    stub.insert(key.to_owned(), v.clone());
                }
            }
            if !stub.contains_key("type") && !stub.contains_key("enum") {
                stub.insert("type".to_owned(), Value::String("object".to_owned()));
            }
            *sub = Value::Object(stub);
        } else if let Value::Object(map) = sub {
            stub_refs(map, defs);
        }
    };
    for (key, value) in schema.iter_mut() {
        match (key.as_str(), value) {
            ("properties", Value::Object(map)) => map.values_mut().for_each(&mut visit),
            ("anyOf" | "oneOf" | "allOf", Value::Array(list)) => {
                list.iter_mut().for_each(&mut visit)
            }
            ("items" | "additionalProperties", sub @ Value::Object(_)) => visit(sub),
            _ => {}
        }
    }
}

/// Turns a `oneOf` of string constants (an enum whose variants are
/// documented) into the shorter `enum`.
fn enumerate(schema: &mut Map<String, Value>) {
    let Some(Value::Array(options)) = schema.get("oneOf") else {
        return;
    };
    let names: Option<Vec<Value>> = options
        .iter()
        .map(
            |o| match (o.get("const"), o.get("type"), o.as_object().map(Map::len)) {
                (Some(c), Some(t), Some(2)) if t == "string" => Some(c.clone()),
                _ => None,
            },
        )
        .collect();
    if let Some(names) = names {
        schema.remove("oneOf");
        schema.insert("type".to_owned(), Value::String("string".to_owned()));
        schema.insert("enum".to_owned(), Value::Array(names));
    }
}

/// Removes the annotations of a schema and of the schemas inside it,
/// leaving property names alone (a record may have a `title` field).
fn trim(schema: &mut Map<String, Value>) {
    walk(schema, &mut |s| {
        s.remove("title");
        s.remove("description");
    });
}

/// Calls `f` on a schema and on every schema inside it (not on maps of
/// property names).
fn walk(schema: &mut Map<String, Value>, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    f(schema);
    for (key, value) in schema.iter_mut() {
        match (key.as_str(), value) {
            ("properties" | "$defs", Value::Object(map)) => {
                for sub in map.values_mut() {
                    if let Value::Object(sub) = sub {
                        walk(sub, f);
                    }
                }
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(list)) => {
                for sub in list {
                    if let Value::Object(sub) = sub {
                        walk(sub, f);
                    }
                }
            }
            ("items" | "additionalProperties" | "not", Value::Object(sub)) => walk(sub, f),
            _ => {}
        }
    }
}

/// Checks `value` against `schema` (whose `$defs` resolve `$ref`s): types,
/// required and known properties, enums, items and the alternatives of
/// `anyOf`/`oneOf`. With `lenient`, a string that parses as the number or
/// flag a schema asks for passes (some clients send every argument as text).
///
/// # Errors
///
/// A message naming the field (`a.b`, or `the value` at the root) and what
/// it expected.
pub(crate) fn check(schema: &Value, value: &Value, lenient: bool) -> Result<(), String> {
    Checker {
        root: schema,
        lenient,
    }
    .check(schema, value, "")
}

struct Checker<'a> {
    root: &'a Value,
    lenient: bool,
}

impl Checker<'_> {
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => r
                .strip_prefix("#/$defs/")
                .and_then(|name| self.root.get("$defs")?.get(name))
                .unwrap_or(&Value::Bool(true)),
            None => schema,
        }
    }

    fn check(&self, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
        let schema = self.resolve(schema);
        let Value::Object(s) = schema else {
            return match schema {
                Value::Bool(false) => Err(format!("{}: not allowed", field(at))),
                _ => Ok(()),
            };
        };
        if let Some(types) = s.get("type") {
            let types: Vec<&str> = match types {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !types.iter().any(|t| self.is(t, value)) {
                return Err(format!(
                    "{}: expected {}, got {}",
                    field(at),
                    types
                        .iter()
                        .map(|t| a_type(t))
                        .collect::<Vec<_>>()
                        .join(" or "),
                    shown(value)
                ));
            }
        }
        // The bounds a number may take: the schema's `minimum` and
        // `maximum`, else its unsigned format's.
        let format = s
            .get("format")
            .and_then(Value::as_str)
            .and_then(integer_bound);
        let low = s.get("minimum").and_then(Value::as_f64);
        let high = s.get("maximum").and_then(Value::as_f64);
        if (format.is_some() || low.is_some() || high.is_some())
            && let Some(n) = number(value)
        {
            let low = low.or(format.map(|_| 0.0));
            let high = high.or(format.map(|(max, _)| max));
            if low.is_some_and(|l| n < l) || high.is_some_and(|h| n > h) {
                let kind = if format.is_some() {
                    "an integer"
                } else {
                    "a number"
                };
                let text = |b: f64| match format {
                    Some((max, text)) if b == max => text.to_owned(),
                    _ => b.to_string(),
                };
                let range = match (low, high) {
                    (Some(l), Some(h)) => format!("from {} to {}", text(l), text(h)),
                    (Some(l), None) => format!("of at least {}", text(l)),
                    (None, Some(h)) => format!("of at most {}", text(h)),
                    (None, None) => unreachable!("a bound was broken"),
                };
                return Err(format!(
                    "{}: expected {kind} {range}, got {}",
                    field(at),
                    shown(value)
                ));
            }
        }
        // Lengths, in characters, and counts of items.
        for (key, short, what, len) in [
            (
                "minLength",
                true,
                "character",
                value.as_str().map(|t| t.chars().count()),
            ),
            (
                "maxLength",
                false,
                "character",
                value.as_str().map(|t| t.chars().count()),
            ),
            ("minItems", true, "item", value.as_array().map(Vec::len)),
            ("maxItems", false, "item", value.as_array().map(Vec::len)),
        ] {
            if let (Some(bound), Some(len)) = (s.get(key).and_then(Value::as_u64), len) {
                let bound = usize::try_from(bound).unwrap_or(usize::MAX);
                if (short && len < bound) || (!short && len > bound) {
                    let most = if short { "at least" } else { "at most" };
                    let plural = if bound == 1 { "" } else { "s" };
                    return Err(format!(
                        "{}: expected {most} {bound} {what}{plural}, got {len}",
                        field(at)
                    ));
                }
            }
        }
        if let Some(Value::Array(allowed)) = s.get("enum")
            && !allowed.contains(value)
        {
            let names: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(format!(
                "{}: expected one of {}, got {}",
                field(at),
                names.join(", "),
                shown(value)
            ));
        }
        if let Some(want) = s.get("const")
            && want != value
        {
            return Err(format!(
                "{}: expected {want}, got {}",
                field(at),
                shown(value)
            ));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = s.get(key) {
                let mut first = None;
                let mut matched = false;
                for option in options {
                    match self.check(option, value, at) {
                        Ok(()) => {
                            matched = true;
                            break;
                        }
                        Err(e) => {
                            first.get_or_insert(e);
                        }
                    }
                }
                if !matched && let Some(e) = first {
                    // An enum of documented values: one `const` per option.
                    let consts: Option<Vec<String>> = options
                        .iter()
                        .map(|o| self.resolve(o).get("const").map(Value::to_string))
                        .collect();
                    return Err(match consts {
                        Some(names) => format!(
                            "{}: expected one of {}, got {}",
                            field(at),
                            names.join(", "),
                            shown(value)
                        ),
                        None => e,
                    });
                }
            }
        }
        if let Some(Value::Array(all)) = s.get("allOf") {
            for sub in all {
                self.check(sub, value, at)?;
            }
        }
        if let Value::Object(fields) = value {
            self.fields(s, fields, at)?;
        }
        if let (Some(items), Value::Array(list)) = (s.get("items"), value) {
            for (i, item) in list.iter().enumerate() {
                self.check(items, item, &format!("{at}[{i}]"))?;
            }
        }
        Ok(())
    }

    fn fields(
        &self,
        s: &Map<String, Value>,
        fields: &Map<String, Value>,
        at: &str,
    ) -> Result<(), String> {
        let props = s.get("properties").and_then(Value::as_object);
        if s.get("additionalProperties") == Some(&Value::Bool(false)) {
            let known = props.map(|p| p.keys().map(String::as_str).collect::<Vec<_>>());
            for key in fields.keys() {
                if !props.is_some_and(|p| p.contains_key(key)) {
                    let expected = known.as_ref().filter(|k| !k.is_empty()).map_or_else(
                        || " (this tool takes no arguments)".to_owned(),
                        |k| format!(", expected one of: {}", k.join(", ")),
                    );
                    return Err(format!("unknown field `{}`{expected}", join(at, key)));
                }
            }
        }
        if let Some(Value::Array(required)) = s.get("required") {
            for key in required.iter().filter_map(Value::as_str) {
                if !fields.contains_key(key) {
                    let what = props
                        .and_then(|p| p.get(key))
                        .map(|sub| self.resolve(sub))
                        .and_then(|sub| sub.get("type"))
                        .and_then(Value::as_str)
                        .map_or_else(String::new, |t| format!(" ({})", a_type(t)));
                    return Err(format!("missing field `{}`{what}", join(at, key)));
                }
            }
        }
        if let Some(props) = props {
            for (key, sub) in props {
                if let Some(v) = fields.get(key) {
                    self.check(sub, v, &join(at, key))?;
                }
            }
        }
        Ok(())
    }

    fn is(&self, t: &str, v: &Value) -> bool {
        let text = v.as_str().map(str::trim);
        match t {
            "null" => v.is_null(),
            "boolean" => {
                v.is_boolean() || (self.lenient && text.is_some_and(|s| s.parse::<bool>().is_ok()))
            }
            "integer" => {
                v.is_i64()
                    || v.is_u64()
                    || (self.lenient && text.is_some_and(|s| s.parse::<i128>().is_ok()))
            }
            "number" => {
                v.is_number()
                    || (self.lenient
                        && text.is_some_and(|s| s.parse::<f64>().is_ok_and(f64::is_finite)))
            }
            "string" => v.is_string(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            _ => true,
        }
    }
}

/// The largest value of an unsigned integer format schemars writes, and
/// how a message names it (2^64 - 1 is not exact as a float).
fn integer_bound(format: &str) -> Option<(f64, &'static str)> {
    match format {
        "uint8" => Some((f64::from(u8::MAX), "255")),
        "uint16" => Some((f64::from(u16::MAX), "65535")),
        "uint32" => Some((f64::from(u32::MAX), "4294967295")),
        // serde still refuses anything above 2^64 - 1 the float rounds to.
        "uint64" | "uint" => Some((18_446_744_073_709_551_615.0, "18446744073709551615")),
        _ => None,
    }
}

/// A number as JSON has it, or as text.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    }
}

fn field(at: &str) -> String {
    if at.is_empty() {
        "the value".to_owned()
    } else {
        format!("`{at}`")
    }
}

fn a_type(t: &str) -> &'static str {
    match t {
        "null" => "null",
        "boolean" => "a boolean",
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "array" => "an array",
        "object" => "an object",
        _ => "a value",
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::Object(_) => "an object".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::String(s) if s.chars().count() > 40 => {
            format!("{:?}…", s.chars().take(40).collect::<String>())
        }
        other => other.to_string(),
    }
}

/// A tool's arguments, checked against its input schema and parsed; a
/// mismatch is the usage failure naming the field, which the tool returns
/// as its error, so it reaches the agent like every other refusal.
///
/// Named `Parameters` like rmcp's own wrapper, which is how rmcp's `#[tool]`
/// macro finds the type whose schema is the tool's `inputSchema`.
#[derive(Debug)]
pub(crate) struct Parameters<T>(pub(crate) Result<T, Failure>);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T> FromContextPart<ToolCallContext<'_, S>> for Parameters<T>
where
    T: DeserializeOwned + JsonSchema + 'static,
{
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, rmcp::ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        Ok(Parameters(parse(arguments)))
    }
}

/// Checks `arguments` against `T`'s input schema, then parses them.
pub(crate) fn parse<T>(arguments: JsonObject) -> Result<T, Failure>
where
    T: DeserializeOwned + JsonSchema + 'static,
{
    let value = Value::Object(arguments);
    if let Ok(schema) = rmcp::handler::server::common::schema_for_input::<T>() {
        check(&Value::Object((*schema).clone()), &value, true).map_err(Failure::usage)?;
    }
    serde_json::from_value(value).map_err(|e| Failure::usage(format!("invalid arguments: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_mismatch_names_the_field_and_the_type() {
        let schema = json!({
            "type": "object",
            "properties": {
                "hours": {"type": "integer"},
                "kind": {"$ref": "#/$defs/Kind"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["hours"],
            "additionalProperties": false,
            "$defs": {"Kind": {"type": "string", "enum": ["a", "b"]}},
        });
        let check = |v: Value| super::check(&schema, &v, true);
        assert_eq!(check(json!({"hours": 2})), Ok(()));
        assert_eq!(check(json!({"hours": "2"})), Ok(()), "text is taken");
        assert_eq!(
            check(json!({"hours": "soon"})),
            Err(r#"`hours`: expected an integer, got "soon""#.to_owned())
        );
        assert_eq!(
            check(json!({"hours": {"n": 1}})),
            Err("`hours`: expected an integer, got an object".to_owned())
        );
        assert_eq!(
            check(json!({})),
            Err("missing field `hours` (an integer)".to_owned())
        );
        assert_eq!(
            check(json!({"hours": 1, "agent": "b"})),
            Err("unknown field `agent`, expected one of: hours, kind, tags".to_owned())
        );
        assert_eq!(
            check(json!({"hours": 1, "kind": "c"})),
            Err(r#"`kind`: expected one of "a", "b", got "c""#.to_owned())
        );
        assert_eq!(
            check(json!({"hours": 1, "tags": ["x", 2]})),
            Err("`tags[1]`: expected a string, got 2".to_owned())
        );
        let bounded =
            json!({"type": "object", "properties": {"n": {"type": "integer", "format": "uint32"}}});
        assert_eq!(
            super::check(&bounded, &json!({"n": 5_000_000_000_u64}), true),
            Err("`n`: expected an integer from 0 to 4294967295, got 5000000000".to_owned())
        );
        let strict = super::check(&schema, &json!({"hours": "2"}), false);
        assert!(strict.is_err(), "outputs are checked strictly");
    }

    #[test]
    fn output_schemas_are_objects_without_annotations() {
        let schema = Value::Object((*output::<crate::view::Published>()).clone());
        assert_eq!(schema["type"], "object");
        assert!(schema.get("oneOf").is_some());
        assert!(!schema.to_string().contains("\"description\""));
        let schema = Value::Object((*output::<crate::view::HookRecord>()).clone());
        assert!(schema.to_string().contains("agent_id"));
    }
}
