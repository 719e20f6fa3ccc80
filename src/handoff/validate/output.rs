//! The first layer: a sister's stdout bytes to one JSON value (cap, UTF-8, exactly one
//! value), the message found in a CLI's envelope, and what the envelope says of the run.

use serde_json::Value;

use super::Problem;

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
