//! Turns a sister's raw output into a validated HandoffMessage, or into every problem
//! with its JSON path.
//!
//! Three layers, each reporting in the same `Problem` form: the bytes (cap, UTF-8, exactly
//! one JSON value), the shape (walked against the schema generated from the types, so all
//! shape errors are reported at once, not just serde's first), and the consistency rules
//! the design states beyond the shape.

use std::fmt;

use serde_json::Value;

use super::message::{
    Actor, DarangVerdict, HandoffMessage, HarangVerdict, NarangVerdict, Severity,
};
use super::schema::{MESSAGE_SCHEMA, discriminator};

/// One reason an output is rejected. `path` is a JSON Pointer into the message
/// (`""` is the whole value).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl Problem {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            path: path.into(),
            message: message.into(),
        }
    }

    fn root(message: impl Into<String>) -> Self {
        Problem::new("", message)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "(root): {}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// A message that passed every check, with the JSON it came from (unknown fields kept).
#[derive(Debug, Clone, PartialEq)]
pub struct Validated {
    pub message: HandoffMessage,
    pub raw: Value,
}

/// Reads a sister's stdout: at most `max_bytes`, UTF-8, exactly one JSON value
/// (surrounding whitespace allowed).
pub fn parse_output(bytes: &[u8], max_bytes: usize) -> Result<Value, Problem> {
    if bytes.len() > max_bytes {
        return Err(Problem::root(format!(
            "output too large: {} bytes, over the cap of {max_bytes} bytes (max_output_bytes)",
            bytes.len()
        )));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Problem::root(format!(
            "output is not UTF-8: invalid byte at offset {}",
            e.valid_up_to()
        ))
    })?;
    if trim_json_ws(text).is_empty() {
        return Err(Problem::root(
            "output is empty: expected one JSON value on stdout",
        ));
    }
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let first = match values.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(Problem::root(format!("not valid JSON: {e}"))),
        None => return Err(Problem::root("output is empty: expected one JSON value")),
    };
    let end = values.byte_offset();
    let rest = &text[end..];
    if !trim_json_ws(rest).is_empty() {
        let skipped = rest.len() - rest.trim_start_matches(is_json_ws).len();
        let (line, column) = line_column(text, end + skipped);
        let what = match serde_json::Deserializer::from_str(rest)
            .into_iter::<Value>()
            .next()
        {
            Some(Ok(_)) => "more than one JSON value: a second one starts",
            _ => "unexpected characters after the JSON value",
        };
        return Err(Problem::root(format!(
            "{what} at line {line} column {column}"
        )));
    }
    Ok(first)
}

/// JSON's own whitespace (space, tab, LF, CR); other Unicode spaces are not allowed
/// around the value, as serde_json does not allow them before it.
fn is_json_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn trim_json_ws(text: &str) -> &str {
    text.trim_matches(is_json_ws)
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Takes the message out of a wrapper CLI's envelope. With an empty pointer the stdout
/// value is the message; a string found at the pointer is parsed as JSON (envelopes that
/// carry the agent's final text).
pub fn extract_message(envelope: Value, pointer: &str) -> Result<Value, Problem> {
    if pointer.is_empty() {
        return Ok(envelope);
    }
    if !pointer.starts_with('/') {
        return Err(Problem::root(format!(
            "output_pointer {pointer:?} is not a JSON Pointer: use \"\" for the whole output or start with '/' (e.g. \"/structured_output\")"
        )));
    }
    let mut envelope = envelope;
    let found = envelope
        .pointer_mut(pointer)
        .map(Value::take)
        .ok_or_else(|| {
            Problem::new(
                pointer,
                format!("nothing at output_pointer {pointer:?} in the sister's stdout JSON"),
            )
        })?;
    match found {
        Value::String(text) => serde_json::from_str(text.trim()).map_err(|e| {
            Problem::new(
                pointer,
                format!("the text at output_pointer {pointer:?} is not one JSON value: {e}"),
            )
        }),
        other => Ok(other),
    }
}

/// What a CLI's envelope says of itself, for a run whose message is not where it should
/// be: its status fields (Claude Code's `subtype` and `is_error`, OpenClaw's `status` and
/// `error`), e.g. `subtype: error_max_turns, is_error: true`.
pub fn envelope_status(envelope: &Value) -> Option<String> {
    const MAX_CHARS: usize = 200;
    let obj = envelope.as_object()?;
    let parts: Vec<String> = ["subtype", "is_error", "status", "error"]
        .iter()
        .filter_map(|key| {
            let value = obj.get(*key)?;
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let text = match text.char_indices().nth(MAX_CHARS) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text,
            };
            Some(format!("{key}: {text}"))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// Checks one JSON value as the orchestrator would. With `expected` set, a message from
/// another actor is a problem too (the orchestrator instead treats it as a protocol
/// violation, since it is valid but wrong for the state).
pub fn validate_value(value: Value, expected: Option<Actor>) -> Result<Validated, Vec<Problem>> {
    let value = without_nulls(value);
    let mut problems = Vec::new();
    // Checked on the raw value so it is reported even when the shape is wrong too.
    if let Some(expected) = expected
        && let Some(actor) = value.get("actor").and_then(Value::as_str)
        && actor != expected.as_str()
    {
        problems.push(Problem::new(
            "/actor",
            format!("expected a message from {expected}, got one from {actor}"),
        ));
    }
    let before_shape = problems.len();
    check_shape(&MESSAGE_SCHEMA, &value, &mut String::new(), &mut problems);
    if problems.len() > before_shape {
        return Err(problems);
    }
    let message: HandoffMessage = match serde_json::from_value(value.clone()) {
        Ok(m) => m,
        Err(e) => {
            problems.push(Problem::root(format!(
                "does not match the message types: {e}"
            )));
            return Err(problems);
        }
    };
    problems.extend(consistency(&message));
    if problems.is_empty() {
        Ok(Validated {
            message,
            raw: value,
        })
    } else {
        Err(problems)
    }
}

/// The message with every `null` in a field of the message's own taken out: a `null` in
/// an optional field reads as absent. OpenAI's strict mode (Codex) must send every
/// property, and sends `null` for the ones it has nothing for; the openai-strict schema
/// this crate prints says so, and the validator accepts what its schemas allow. A `null`
/// where a value is required is then reported as missing. Free-form values
/// (`selfTestReport`, `verificationResults`) and unknown fields are the sister's own, and
/// stay as sent.
pub fn without_nulls(mut value: Value) -> Value {
    let root = &*MESSAGE_SCHEMA;
    let branch = value
        .get("actor")
        .and_then(Value::as_str)
        .and_then(|actor| {
            root.get("oneOf")?
                .as_array()?
                .iter()
                .find(|b| discriminator(b) == Some(actor))
        });
    if let Some(branch) = branch {
        strip_nulls(&mut value, branch);
    }
    value
}

/// `without_nulls` below one schema: the members it names are its fields.
fn strip_nulls(value: &mut Value, schema: &Value) {
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

/// The whole pipeline from raw stdout bytes to a validated message.
pub fn validate_output(
    bytes: &[u8],
    max_bytes: usize,
    pointer: &str,
    expected: Option<Actor>,
) -> Result<Validated, Vec<Problem>> {
    let envelope = parse_output(bytes, max_bytes).map_err(|p| vec![p])?;
    let value = extract_message(envelope, pointer).map_err(|p| vec![p])?;
    validate_value(value, expected)
}

/// The design's rules beyond the shape. A breach is bad output.
pub fn consistency(message: &HandoffMessage) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut non_empty = |path: &str, value: &str| {
        if value.trim().is_empty() {
            problems.push(Problem::new(path, "must not be empty"));
        }
    };
    match message {
        HandoffMessage::Harang(m) => match m.verdict {
            HarangVerdict::PlanReady => match &m.payload {
                None => problems.push(Problem::new("/payload", "required for PLAN_READY")),
                Some(p) => {
                    non_empty("/payload/planDir", &p.plan_dir);
                    non_empty("/payload/sprintId", &p.sprint_id);
                    non_empty("/payload/contractId", &p.contract_id);
                }
            },
            HarangVerdict::Abort => {
                required_reason(&mut problems, "/abortReason", &m.abort_reason, "ABORT")
            }
        },
        HandoffMessage::Narang(m) => match m.verdict {
            NarangVerdict::ImplDone => match &m.payload {
                None => problems.push(Problem::new("/payload", "required for IMPL_DONE")),
                Some(p) => {
                    non_empty("/payload/branch", &p.branch);
                    non_empty("/payload/workdir", &p.workdir);
                    for (i, c) in p.commits.iter().enumerate() {
                        non_empty(&format!("/payload/commits/{i}"), c);
                    }
                }
            },
            NarangVerdict::Error => {
                required_reason(&mut problems, "/errorReason", &m.error_reason, "ERROR")
            }
        },
        HandoffMessage::Darang(m) => {
            let p = &m.payload;
            non_empty("/payload/artifactPath", &p.artifact_path);
            for (i, item) in p.checklist_results.iter().enumerate() {
                non_empty(&format!("/payload/checklistResults/{i}/id"), &item.id);
            }
            for (i, issue) in p.issues.iter().enumerate() {
                non_empty(&format!("/payload/issues/{i}/message"), &issue.message);
            }
            let failed: Vec<usize> = p
                .checklist_results
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.passed)
                .map(|(i, _)| i)
                .collect();
            match m.verdict {
                DarangVerdict::Approve => {
                    for i in failed {
                        problems.push(Problem::new(
                            format!("/payload/checklistResults/{i}/passed"),
                            "APPROVE with a failed checklist item",
                        ));
                    }
                    for (i, issue) in p.issues.iter().enumerate() {
                        if issue.severity == Severity::Blocker {
                            problems.push(Problem::new(
                                format!("/payload/issues/{i}/severity"),
                                "APPROVE with a blocker issue",
                            ));
                        }
                    }
                }
                DarangVerdict::RequestChanges => {
                    if failed.is_empty() && p.issues.is_empty() {
                        problems.push(Problem::new(
                            "/payload",
                            "REQUEST_CHANGES with no failed checklist item and no issue: nothing to change",
                        ));
                    }
                }
                DarangVerdict::Abort => {}
            }
        }
        HandoffMessage::Erang(m) => {
            non_empty(
                "/payload/deployArtifactPath",
                &m.payload.deploy_artifact_path,
            );
            non_empty("/payload/projectType", &m.payload.project_type);
        }
    }
    let common = message.common();
    if let Some(doc) = &common.handoff {
        if doc.goal.trim().is_empty() {
            problems.push(Problem::new("/handoff/goal", "must not be empty"));
        }
        if doc.is_empty() {
            problems.push(Problem::new(
                "/handoff",
                "nothing to hand off: the document has no progress and no next steps",
            ));
        }
    }
    if let Some(cost) = common.usage.as_ref().and_then(|u| u.cost_usd)
        && !(cost.is_finite() && cost >= 0.0)
    {
        problems.push(Problem::new(
            "/usage/costUsd",
            "must be a non-negative number",
        ));
    }
    problems
}

fn required_reason(
    problems: &mut Vec<Problem>,
    path: &str,
    reason: &Option<String>,
    verdict: &str,
) {
    match reason {
        None => problems.push(Problem::new(path, format!("required for {verdict}"))),
        Some(r) if r.trim().is_empty() => problems.push(Problem::new(path, "must not be empty")),
        Some(_) => {}
    }
}

// ---------------------------------------------------------------------------------------
// The shape check: a small walker over the draft-07 schema generated from the types. It
// knows the keywords schemars emits for these types and reports every mismatch.

fn check_shape(schema: &Value, value: &Value, path: &mut String, problems: &mut Vec<Problem>) {
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
