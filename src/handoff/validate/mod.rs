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
    Actor, ChecklistItem, DarangVerdict, HandoffMessage, HarangVerdict, MAX_CHECKLIST_ITEMS,
    NarangVerdict, Severity,
};
use super::schema::{MESSAGE_SCHEMA, discriminator};

mod output;
mod shape;

pub use output::{envelope_status, extract_message, parse_output};
use shape::{check_shape, strip_nulls};

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
                    if let Some(items) = &p.checklist {
                        problems.extend(checklist_problems(items));
                    }
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

/// A plan's contract: ids unique and non-empty, every text non-empty, not too long to
/// review item by item.
fn checklist_problems(items: &[ChecklistItem]) -> Vec<Problem> {
    let mut problems = Vec::new();
    if items.len() > MAX_CHECKLIST_ITEMS {
        problems.push(Problem::new(
            "/payload/checklist",
            format!("at most {MAX_CHECKLIST_ITEMS} items (got {})", items.len()),
        ));
    }
    for (i, item) in items.iter().enumerate() {
        if item.id.trim().is_empty() {
            problems.push(Problem::new(
                format!("/payload/checklist/{i}/id"),
                "must not be empty",
            ));
        } else if let Some(first) = items[..i].iter().position(|other| other.id == item.id) {
            problems.push(Problem::new(
                format!("/payload/checklist/{i}/id"),
                format!("duplicate id {:?} (also item {first})", item.id),
            ));
        }
        if item.text.trim().is_empty() {
            problems.push(Problem::new(
                format!("/payload/checklist/{i}/text"),
                "must not be empty",
            ));
        }
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
