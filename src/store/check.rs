//! The record of the project's own check: what ran, on which commit, how it
//! ended and what it printed last. Written with the end of the run it checked (`RunEnd`),
//! read by `sprint log` and by the next sister's composition. Knows no engine.

use serde::Serialize;

use super::{Result, StoreError};

/// One of the forge's checks at a sprint's base commit, as it was read: its name and its
/// result in the forge's word (`success`, `failure`, `pending`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BaseCheck {
    pub name: String,
    pub result: String,
}

impl BaseCheck {
    /// Whether it passed, failed, or has no word yet (`None`).
    pub fn passed(&self) -> Option<bool> {
        match self.result.as_str() {
            "success" | "neutral" | "skipped" => Some(true),
            "pending" | "queued" | "in_progress" | "waiting" | "requested" | "" => None,
            _ => Some(false),
        }
    }

    /// Its mark where people read it: ✅ passed, ❌ failed, ⏳ no word yet.
    pub fn mark(&self) -> &'static str {
        match self.passed() {
            Some(true) => "✅",
            Some(false) => "❌",
            None => "⏳",
        }
    }

    /// The forge's checks at a base as the store keeps them.
    pub(super) fn encode(checks: &[BaseCheck]) -> Result<String> {
        serde_json::to_string(checks).map_err(|e| StoreError::Encode("base checks", e))
    }

    pub(super) fn decode(repository: &str, commit: &str, text: &str) -> Result<Vec<BaseCheck>> {
        serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
            table: "forge_base_checks",
            key: format!("{repository} {commit}"),
            what: e.to_string(),
        })
    }
}

/// One check, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRecord {
    /// The implementer's run it checked (at the base: the run it was made for).
    #[serde(rename = "run")]
    pub run_id: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The workdir's HEAD it checked; `None` when the workdir is no git repository.
    pub head: Option<String>,
    /// `None` when it was killed (its timeout, a stop) or could not run.
    pub exit_code: Option<i32>,
    pub duration_ms: i64,
    /// The last lines of its stdout and stderr.
    pub output_tail: String,
    /// When it ended (unix ms).
    pub at: i64,
    /// Run at the sprint's base commit, before any of its work: what the check said
    /// before the sprint (a check whose head is the sprint's base commit; not stored).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub at_base: bool,
}

impl CheckRecord {
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// The command as it is stored: a JSON array.
    pub(super) fn command_json(&self) -> Result<String> {
        serde_json::to_string(&self.command).map_err(|e| StoreError::Encode("check command", e))
    }
}

/// A `checks` row as both engines read it.
#[derive(sqlx::FromRow)]
pub(super) struct CheckRaw {
    pub id: i64,
    pub run_id: String,
    pub command: String,
    pub head: Option<String>,
    pub exit_code: Option<i64>,
    pub duration_ms: i64,
    pub output_tail: String,
    pub at: i64,
    pub at_base: bool,
}

impl TryFrom<CheckRaw> for CheckRecord {
    type Error = StoreError;

    fn try_from(r: CheckRaw) -> Result<Self, StoreError> {
        let bad = |what: &str| StoreError::corrupt("checks", &r.id.to_string(), what);
        Ok(CheckRecord {
            command: serde_json::from_str(&r.command).map_err(|e| bad(&format!("command: {e}")))?,
            head: r.head,
            exit_code: r
                .exit_code
                .map(i32::try_from)
                .transpose()
                .map_err(|_| bad("exit_code"))?,
            duration_ms: r.duration_ms,
            output_tail: r.output_tail,
            at: r.at,
            at_base: r.at_base,
            run_id: r.run_id,
        })
    }
}
