//! The second layer: a value walked against the schema generated from the message types,
//! every shape problem with its JSON path (not just serde's first), and the nulls an
//! OpenAI-strict answer writes for absent fields.

use serde_json::Value;

use super::Problem;
use crate::handoff::schema::discriminator;

/// `without_nulls` below one schema: the members it names are its fields.
pub(super) fn strip_nulls(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            let Some(fields) = object_schema(schema)
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
            else {
                return;
            };
            // A free-form field takes a null as its value: only a typed one reads it as
            // absent.
            map.retain(|key, v| !(v.is_null() && fields.get(key).is_some_and(is_typed)));
            for (key, v) in map.iter_mut() {
                if let Some(field) = fields.get(key) {
                    strip_nulls(v, field);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = array_schema(schema).and_then(|s| s.get("items")) {
                items.iter_mut().for_each(|v| strip_nulls(v, item));
            }
        }
        _ => {}
    }
}

/// Whether a field's schema says what its value is (a free-form one says nothing).
fn is_typed(schema: &Value) -> bool {
    schema.as_object().is_some_and(|o| {
        [
            "type",
            "anyOf",
            "oneOf",
            "enum",
            "const",
            "properties",
            "items",
        ]
        .iter()
        .any(|k| o.contains_key(*k))
    })
}

/// The alternative of a (possibly nullable) schema that describes an object.
fn object_schema(schema: &Value) -> Option<&Value> {
    alternative(schema, "properties")
}

/// The alternative of a (possibly nullable) schema that describes an array.
fn array_schema(schema: &Value) -> Option<&Value> {
    alternative(schema, "items")
}

fn alternative<'a>(schema: &'a Value, keyword: &str) -> Option<&'a Value> {
    if schema.get(keyword).is_some() {
        return Some(schema);
    }
    ["anyOf", "oneOf"].iter().find_map(|union| {
        schema
            .get(union)?
            .as_array()?
            .iter()
            .find_map(|alt| alternative(alt, keyword))
    })
}

pub(super) fn check_shape(
    schema: &Value,
    value: &Value,
    path: &mut String,
    problems: &mut Vec<Problem>,
) {
    let Some(schema) = schema.as_object() else {
        return; // `true`: anything goes
    };
    if let Some(alternatives) = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)
    {
        check_alternatives(alternatives, value, path, problems);
        return;
    }
    if let Some(types) = schema.get("type")
        && !type_matches(types, value)
    {
        problems.push(Problem::new(
            path.clone(),
            format!(
                "expected {}, got {}",
                describe_types(types),
                describe_value(value)
            ),
        ));
        return;
    }
    if let Some(expected) = schema.get("const")
        && value != expected
    {
        problems.push(Problem::new(
            path.clone(),
            format!("expected {expected}, got {}", short(value)),
        ));
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        problems.push(Problem::new(
            path.clone(),
            format!("expected one of {}, got {}", list(options), short(value)),
        ));
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        check_integer_range(format, value, path, problems);
    }
    if let Value::Object(fields) = value {
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !fields.contains_key(name) {
                    problems.push(Problem::new(
                        format!("{path}/{}", escape(name)),
                        "missing (required)",
                    ));
                }
            }
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, sub) in properties {
                if let Some(field) = fields.get(name) {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&escape(name));
                    check_shape(sub, field, path, problems);
                    path.truncate(len);
                }
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            let len = path.len();
            path.push('/');
            path.push_str(&i.to_string());
            check_shape(item_schema, item, path, problems);
            path.truncate(len);
        }
    }
}

/// A union passes if one alternative does. Otherwise the problems of the alternative the
/// value was evidently meant for are reported: the one whose discriminator (`actor`)
/// matches, or the only non-null one.
fn check_alternatives(
    alternatives: &[Value],
    value: &Value,
    path: &mut String,
    problems: &mut Vec<Problem>,
) {
    let mut attempts = Vec::with_capacity(alternatives.len());
    for alternative in alternatives {
        let mut found = Vec::new();
        check_shape(alternative, value, path, &mut found);
        if found.is_empty() {
            return;
        }
        attempts.push(found);
    }
    let discriminated: Vec<&str> = alternatives.iter().filter_map(discriminator).collect();
    if !discriminated.is_empty() {
        let actor = value.get("actor");
        let chosen = alternatives.iter().position(|a| {
            discriminator(a).is_some() && actor.and_then(Value::as_str) == discriminator(a)
        });
        match chosen {
            Some(i) => problems.append(&mut attempts[i]),
            None if !value.is_object() => problems.push(Problem::new(
                path.clone(),
                format!(
                    "expected a JSON object (a HandoffMessage), got {}",
                    describe_value(value)
                ),
            )),
            None => problems.push(Problem::new(
                format!("{path}/actor"),
                match actor {
                    None => format!("missing (required): one of {}", discriminated.join(", ")),
                    Some(a) => format!(
                        "expected one of {}, got {}",
                        discriminated.join(", "),
                        short(a)
                    ),
                },
            )),
        }
        return;
    }
    let non_null: Vec<usize> = alternatives
        .iter()
        .enumerate()
        .filter(|(_, a)| a.get("type") != Some(&Value::String("null".into())))
        .map(|(i, _)| i)
        .collect();
    if let [only] = non_null[..] {
        problems.append(&mut attempts[only]);
    } else {
        problems.push(Problem::new(
            path.clone(),
            "matches none of the allowed forms",
        ));
    }
}

fn type_matches(types: &Value, value: &Value) -> bool {
    match types {
        Value::String(t) => single_type_matches(t, value),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .any(|t| single_type_matches(t, value)),
        _ => true,
    }
}

fn single_type_matches(t: &str, value: &Value) -> bool {
    match t {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        // An integral float (1e20) is still an integer; its range is checked by `format`.
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => true,
    }
}

fn check_integer_range(format: &str, value: &Value, path: &str, problems: &mut Vec<Problem>) {
    let max = match format {
        "uint32" => u64::from(u32::MAX),
        "uint64" | "uint" => u64::MAX,
        _ => return,
    };
    let Some(n) = value.as_number() else { return };
    let message = if n.is_f64() {
        format!("expected an integer, got {n} (write whole numbers without a fraction or exponent)")
    } else if n.as_u64().is_none_or(|n| n > max) {
        format!("number out of range: expected an integer from 0 to {max}, got {n}")
    } else {
        return;
    };
    problems.push(Problem::new(path, message));
}

fn describe_types(types: &Value) -> String {
    let names: Vec<&str> = match types {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let names: Vec<&str> = names
        .into_iter()
        .map(|t| match t {
            "object" => "an object",
            "array" => "an array",
            "string" => "a string",
            "integer" => "an integer",
            "number" => "a number",
            "boolean" => "true or false",
            "null" => "null",
            other => other,
        })
        .collect();
    names.join(" or ")
}

fn describe_value(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => format!("the string {}", short(value)),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// A value quoted in an error, cut so a huge string cannot flood the report.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn list(options: &[Value]) -> String {
    options
        .iter()
        .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string))
        .collect::<Vec<_>>()
        .join(", ")
}

/// JSON Pointer escaping of one path segment.
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}
