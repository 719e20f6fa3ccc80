//! A request's body as Discord reads it: JSON or multipart (`payload_json` and the
//! files), checked as Discord checks a message before it accepts it.

use serde_json::Value;

use super::super::super::http::RawRequest;
use super::super::records::FakeFile;
use super::Reply;

/// A multipart form's parts: `(name, filename, content type, data)`.
type FormPart = (String, Option<String>, String, Vec<u8>);

/// The parts of a `multipart/form-data` body (RFC 7578), bytes kept as sent.
fn multipart_parts(request: &RawRequest) -> Option<Vec<FormPart>> {
    let content_type = request.header("content-type")?;
    if !content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        return None;
    }
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))?
        .trim_matches('"');
    let delimiter = format!("--{boundary}").into_bytes();
    let body = &request.body;
    let find = |from: usize, needle: &[u8]| {
        body.get(from..)?
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|i| i + from)
    };
    let mut parts = Vec::new();
    let mut at = find(0, &delimiter)? + delimiter.len();
    loop {
        if body.get(at..at + 2) == Some(b"--") {
            return Some(parts);
        }
        let head_start = at + 2;
        let head_end = find(head_start, b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&body[head_start..head_end]).to_string();
        let next = find(head_end + 4, &delimiter)?;
        let data = body[head_end + 4..next.saturating_sub(2)].to_vec();
        let mut name = String::new();
        let mut filename = None;
        let mut part_type = String::from("text/plain");
        for line in head.lines() {
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("content-disposition:") {
                for field in line.split(';').map(str::trim) {
                    if let Some(v) = field.strip_prefix("name=") {
                        name = v.trim_matches('"').to_string();
                    } else if let Some(v) = field.strip_prefix("filename=") {
                        filename = Some(v.trim_matches('"').to_string());
                    }
                }
            } else if lower.starts_with("content-type:") {
                part_type = line["content-type:".len()..].trim().to_string();
            }
        }
        parts.push((name, filename, part_type, data));
        at = next + delimiter.len();
    }
}

/// The JSON body of a request: plain JSON, or the `payload_json` part of a multipart form.
pub(super) fn parse_body(request: &RawRequest) -> Value {
    if request.body.is_empty() {
        return Value::Null;
    }
    if let Some(parts) = multipart_parts(request) {
        return parts
            .iter()
            .find(|(name, ..)| name == "payload_json")
            .and_then(|(.., data)| serde_json::from_slice(data).ok())
            .unwrap_or(Value::Null);
    }
    serde_json::from_slice(&request.body).unwrap_or(Value::Null)
}

/// The files of a multipart message, in the order of its `attachments`, as Discord
/// matches them: each attachment's `id` N names the part `files[N]`. A part no attachment
/// names, or an attachment with no part, is refused as Discord refuses it.
pub(super) fn uploaded_files(request: &RawRequest, body: &Value) -> Result<Vec<FakeFile>, Reply> {
    let Some(parts) = multipart_parts(request) else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    for attachment in body["attachments"].as_array().into_iter().flatten() {
        let id = match &attachment["id"] {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            _ => {
                return Err(Reply::invalid_form(
                    "attachments",
                    "BASE_TYPE_REQUIRED",
                    "id",
                ));
            }
        };
        let Some((_, filename, content_type, data)) = parts
            .iter()
            .find(|(name, ..)| *name == format!("files[{id}]"))
        else {
            return Err(Reply::invalid_form(
                "attachments",
                "ATTACHMENT_NOT_FOUND",
                &format!("no file part files[{id}]"),
            ));
        };
        if data.len() > MAX_UPLOAD {
            return Err(Reply::error(413, 40005, "Request entity too large"));
        }
        files.push(FakeFile {
            filename: attachment["filename"]
                .as_str()
                .map(str::to_string)
                .or_else(|| filename.clone())
                .unwrap_or_default(),
            content_type: content_type.clone(),
            data: data.clone(),
        });
    }
    let named = parts
        .iter()
        .filter(|(n, ..)| n.starts_with("files["))
        .count();
    if named != files.len() {
        return Err(Reply::invalid_form(
            "attachments",
            "ATTACHMENT_NOT_FOUND",
            "a file part no attachment names",
        ));
    }
    Ok(files)
}

/// Discord's upload limit for a bot without boosts: 10 MiB a file.
const MAX_UPLOAD: usize = 10 * 1024 * 1024;

/// Discord's checks on a message body that the bridge could plausibly get wrong.
pub(super) fn validate_message(body: &Value, require_non_empty: bool) -> Result<(), Reply> {
    if let Some(content) = body.get("content").and_then(Value::as_str)
        && content.chars().count() > 2000
    {
        return Err(Reply::invalid_form(
            "content",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 2000 or fewer in length.",
        ));
    }
    if body
        .get("embeds")
        .and_then(Value::as_array)
        .is_some_and(|e| e.len() > 10)
    {
        return Err(Reply::invalid_form(
            "embeds",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 10 or fewer in length.",
        ));
    }
    if body
        .get("components")
        .and_then(Value::as_array)
        .is_some_and(|c| c.len() > 5)
    {
        return Err(Reply::invalid_form(
            "components",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 5 or fewer in length.",
        ));
    }
    let allowed = &body["allowed_mentions"];
    for kind in ["users", "roles"] {
        let parsed = allowed["parse"]
            .as_array()
            .is_some_and(|p| p.iter().any(|v| v == kind));
        let listed = allowed[kind].as_array().is_some_and(|l| !l.is_empty());
        if parsed && listed {
            return Err(Reply::invalid_form(
                "allowed_mentions",
                "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE",
                &format!("parse:[\"{kind}\"] and {kind}: [ids] are mutually exclusive."),
            ));
        }
    }
    if require_non_empty {
        let has = |k: &str| match &body[k] {
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            _ => false,
        };
        if ![
            "content",
            "embeds",
            "components",
            "attachments",
            "sticker_ids",
            "poll",
        ]
        .iter()
        .any(|k| has(k))
        {
            return Err(Reply::error(400, 50006, "Cannot send an empty message"));
        }
    }
    Ok(())
}
