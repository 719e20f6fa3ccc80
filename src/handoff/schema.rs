//! JSON Schema of the HandoffMessage, generated from the Rust types.
//!
//! Two dialects: draft-07 (what Claude Code's validator understands) and OpenAI's strict
//! structured-output subset (what Codex accepts). The validator walks the same draft-07
//! schema, so the types stay the one place the message's shape is written down.

use std::sync::LazyLock;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::message::{Actor, HandoffMessage};

/// Which flavour of JSON Schema to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// JSON Schema draft-07, with `$schema` set.
    Draft07,
    /// OpenAI strict mode: `additionalProperties: false`, every property required,
    /// optional ones nullable, free-form values as strings.
    OpenaiStrict,
}

impl Dialect {
    pub const ALL: [Dialect; 2] = [Dialect::Draft07, Dialect::OpenaiStrict];

    /// The name on the command line (`--dialect`).
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Draft07 => "draft-07",
            Dialect::OpenaiStrict => "openai-strict",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchemaError {
    #[error(
        "the openai-strict dialect needs --actor: OpenAI's strict mode does not accept a union of the four sisters at the root"
    )]
    StrictNeedsActor,
}

/// The draft-07 schema of every message, inlined (no `$ref`), as the validator uses it.
pub(crate) static MESSAGE_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    let generator = SchemaSettings::draft07()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    generator
        .into_root_schema_for::<HandoffMessage>()
        .to_value()
});

/// The `format`s draft-07 defines. schemars also writes Rust's own (`uint32`, `double`):
/// Claude Code before 2.1.205 silently dropped a schema it could not compile with them,
/// and then returned no structured output.
const DRAFT07_FORMATS: [&str; 17] = [
    "date-time",
    "date",
    "time",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes every `format` draft-07 does not define, wherever a subschema can be (not in
/// `properties`' names: a field may be called `format`). An integer format the validator
/// checks (`uint32`: 0 to 4294967295) becomes the standard bounds it stands for, so the
/// printed schema allows exactly what the validator accepts.
fn drop_nonstandard_formats(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(format) = obj
        .get("format")
        .and_then(Value::as_str)
        .map(str::to_string)
        && !DRAFT07_FORMATS.contains(&format.as_str())
    {
        obj.remove("format");
        let bounds: Option<(i128, i128)> = match format.as_str() {
            "uint8" => Some((0, u8::MAX.into())),
            "uint16" => Some((0, u16::MAX.into())),
            "uint32" | "uint" => Some((0, u32::MAX.into())),
            "uint64" => Some((0, u64::MAX.into())),
            "int32" | "int" => Some((i32::MIN.into(), i32::MAX.into())),
            "int64" => Some((i64::MIN.into(), i64::MAX.into())),
            _ => None,
        };
        if let Some((min, max)) = bounds {
            for (key, bound) in [("minimum", min), ("maximum", max)] {
                if !obj.contains_key(key)
                    && let Ok(n) = serde_json::to_value(bound)
                {
                    obj.insert(key.into(), n);
                }
            }
        }
    }
    for (key, value) in obj.iter_mut() {
        match key.as_str() {
            "properties" | "definitions" | "$defs" => {
                if let Some(map) = value.as_object_mut() {
                    map.values_mut().for_each(drop_nonstandard_formats);
                }
            }
            "anyOf" | "oneOf" | "allOf" => {
                if let Some(list) = value.as_array_mut() {
                    list.iter_mut().for_each(drop_nonstandard_formats);
                }
            }
            "items" | "additionalProperties" | "not" => drop_nonstandard_formats(value),
            _ => {}
        }
    }
}

/// The alternative of the root `oneOf` that describes one actor's message.
pub(crate) fn actor_branch(root: &Value, actor: Actor) -> Option<&Value> {
    root.get("oneOf")?
        .as_array()?
        .iter()
        .find(|branch| discriminator(branch) == Some(actor.as_str()))
}

/// The `actor` value a branch of the root `oneOf` stands for.
pub(crate) fn discriminator(branch: &Value) -> Option<&str> {
    let actor = branch.get("properties")?.get("actor")?;
    actor
        .get("const")
        .or_else(|| actor.get("enum").and_then(|e| e.get(0)))?
        .as_str()
}

/// The schema to hand to an agent CLI.
pub fn schema(actor: Option<Actor>, dialect: Dialect) -> Result<Value, SchemaError> {
    let root = &*MESSAGE_SCHEMA;
    let mut body = match actor {
        Some(actor) => match actor_branch(root, actor) {
            Some(branch) => branch.clone(),
            None => unreachable_branch(actor),
        },
        None => root.clone(),
    };
    if let Some(obj) = body.as_object_mut() {
        // The flattened `Common` lends its doc comment to each branch; it describes
        // only part of the message, so it goes.
        obj.remove("description");
    }
    let title = match actor {
        Some(actor) => format!("HandoffMessage from {actor} ({})", actor.role()),
        None => "HandoffMessage".to_string(),
    };
    match dialect {
        Dialect::Draft07 => {
            drop_nonstandard_formats(&mut body);
            if let Some(obj) = body.as_object_mut() {
                obj.remove("$schema");
                let mut out = Map::new();
                out.insert(
                    "$schema".into(),
                    json!("http://json-schema.org/draft-07/schema#"),
                );
                out.insert("title".into(), json!(title));
                out.extend(std::mem::take(obj));
                return Ok(Value::Object(out));
            }
            Ok(body)
        }
        Dialect::OpenaiStrict => {
            if actor.is_none() {
                return Err(SchemaError::StrictNeedsActor);
            }
            let mut strict = to_openai_strict(&body);
            if let Some(obj) = strict.as_object_mut() {
                obj.insert("title".into(), json!(title));
            }
            Ok(strict)
        }
    }
}

/// Every actor has a branch in the generated union; a missing one is a bug in this crate,
/// reported as an empty schema rather than a panic.
fn unreachable_branch(actor: Actor) -> Value {
    tracing::error!(%actor, "generated schema has no branch for this actor");
    json!({})
}

/// Rewrites a draft-07 schema into OpenAI's strict subset. Keywords outside that subset
/// (`format`, `default`, `$schema`, ...) are dropped; a number's bounds (`minimum`,
/// `maximum`, which strict mode takes) are kept, so the printed schema allows no more than
/// the validator accepts.
fn to_openai_strict(schema: &Value) -> Value {
    let mut schema = schema.clone();
    drop_nonstandard_formats(&mut schema);
    strict_of(&schema)
}

fn strict_of(schema: &Value) -> Value {
    let Some(obj) = schema.as_object() else {
        return free_form();
    };
    let constrained = [
        "type",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "properties",
        "items",
    ];
    if !constrained.iter().any(|k| obj.contains_key(*k)) {
        let mut any = free_form();
        if let (Some(doc), Some(out)) = (obj.get("description"), any.as_object_mut()) {
            out.insert("description".into(), doc.clone());
        }
        return any;
    }
    let mut out = Map::new();
    for key in ["description", "title"] {
        if let Some(v) = obj.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(t) = obj.get("type") {
        out.insert("type".into(), t.clone());
    }
    if let Some(c) = obj.get("const") {
        out.insert("enum".into(), json!([c]));
    }
    if let Some(e) = obj.get("enum") {
        out.insert("enum".into(), e.clone());
    }
    for bound in ["minimum", "maximum"] {
        if let Some(b) = obj.get(bound) {
            out.insert(bound.into(), b.clone());
        }
    }
    if let Some(items) = obj.get("items") {
        out.insert("items".into(), strict_of(items));
    }
    if let Some(alts) = obj.get("oneOf").or_else(|| obj.get("anyOf")) {
        let alts: Vec<Value> = alts
            .as_array()
            .map(|a| a.iter().map(strict_of).collect())
            .unwrap_or_default();
        out.insert("anyOf".into(), Value::Array(alts));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut strict_props = Map::new();
        for (name, prop) in props {
            let mut prop = strict_of(prop);
            if !required.contains(&name.as_str()) {
                make_nullable(&mut prop);
            }
            strict_props.insert(name.clone(), prop);
        }
        let all: Vec<Value> = strict_props.keys().map(|k| json!(k)).collect();
        out.insert("type".into(), json!("object"));
        out.insert("properties".into(), Value::Object(strict_props));
        out.insert("required".into(), Value::Array(all));
        out.insert("additionalProperties".into(), json!(false));
        // A nullable object is written as a union, the form OpenAI documents.
        if obj
            .get("type")
            .and_then(Value::as_array)
            .is_some_and(|t| t.contains(&json!("null")))
        {
            let description = out.remove("description");
            let mut union = Map::new();
            if let Some(d) = description {
                union.insert("description".into(), d);
            }
            union.insert(
                "anyOf".into(),
                json!([Value::Object(out), {"type": "null"}]),
            );
            return Value::Object(union);
        }
    }
    Value::Object(out)
}

/// OpenAI's strict mode has no "any value"; free-form reports travel as text.
fn free_form() -> Value {
    json!({"type": "string"})
}

fn make_nullable(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(alts) = obj.get_mut("anyOf").and_then(Value::as_array_mut) {
        if !alts.iter().any(|a| a.get("type") == Some(&json!("null"))) {
            alts.push(json!({"type": "null"}));
        }
        return;
    }
    match obj.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            if t != "null" {
                obj.insert("type".into(), json!([t, "null"]));
            }
        }
        Some(Value::Array(types)) if !types.contains(&json!("null")) => {
            types.push(json!("null"));
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every schema object inside `v` (not the `properties` maps themselves).
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a Map<String, Value>>) {
        let Some(o) = v.as_object() else { return };
        out.push(o);
        if let Some(props) = o.get("properties").and_then(Value::as_object) {
            props.values().for_each(|p| walk(p, out));
        }
        if let Some(items) = o.get("items") {
            walk(items, out);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alts) = o.get(key).and_then(Value::as_array) {
                alts.iter().for_each(|a| walk(a, out));
            }
        }
    }

    /// Claude Code before 2.1.205 dropped a schema with a format it did not know without a
    /// word (and then returned no structured output): only draft-07's own are printed, and
    /// the bounds `uint32` stood for stay.
    #[test]
    fn printed_schemas_use_only_standard_formats() {
        for dialect in [Dialect::Draft07, Dialect::OpenaiStrict] {
            let mut printed = vec![schema(None, Dialect::Draft07).unwrap()];
            printed.extend(Actor::ALL.map(|a| schema(Some(a), dialect).unwrap()));
            for s in &printed {
                let mut objects = Vec::new();
                walk(s, &mut objects);
                for o in objects {
                    if let Some(f) = o.get("format").and_then(Value::as_str) {
                        assert!(DRAFT07_FORMATS.contains(&f), "{dialect:?}: format {f:?}");
                    }
                }
            }
        }
        let darang = schema(Some(Actor::Darang), Dialect::Draft07).unwrap();
        let line =
            &darang["properties"]["payload"]["properties"]["issues"]["items"]["properties"]["line"];
        assert_eq!(line["minimum"], 0);
        assert_eq!(line["maximum"], u32::MAX);
    }

    #[test]
    fn draft07_is_declared_and_covers_every_actor() {
        let s = schema(None, Dialect::Draft07).unwrap();
        assert_eq!(s["$schema"], "http://json-schema.org/draft-07/schema#");
        for actor in Actor::ALL {
            assert!(actor_branch(&s, actor).is_some(), "{actor} missing");
            let one = schema(Some(actor), Dialect::Draft07).unwrap();
            assert_eq!(discriminator(&one), Some(actor.as_str()));
        }
    }

    #[test]
    fn openai_strict_objects_are_closed_and_require_every_property() {
        for actor in Actor::ALL {
            let s = schema(Some(actor), Dialect::OpenaiStrict).unwrap();
            let mut objects = Vec::new();
            walk(&s, &mut objects);
            for o in objects {
                if let Some(props) = o.get("properties").and_then(Value::as_object) {
                    assert_eq!(o.get("additionalProperties"), Some(&json!(false)));
                    let required = o["required"].as_array().unwrap();
                    assert_eq!(required.len(), props.len(), "{actor}: {o:?}");
                }
                for banned in ["format", "oneOf", "$schema", "const", "default"] {
                    assert!(!o.contains_key(banned), "{actor}: {banned} in {o:?}");
                }
                if let Some(t) = o.get("type") {
                    assert!(t.is_string() || t.is_array(), "{actor}: {o:?}");
                } else {
                    assert!(
                        o.contains_key("anyOf") || o.contains_key("enum"),
                        "{actor}: untyped {o:?}"
                    );
                }
            }
        }
        assert_eq!(
            schema(None, Dialect::OpenaiStrict),
            Err(SchemaError::StrictNeedsActor)
        );
    }
}
