//! The HandoffMessage a sister prints on stdout, as serde types.
//!
//! These types *are* the schema: serde parses them, `schema.rs` generates the JSON
//! Schema from them, and `validate/mod.rs` adds the consistency rules serde cannot state.
//! Field names follow the design (camelCase). Unknown fields are ignored here and kept
//! in the raw JSON the orchestrator stores.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::document::HandoffDocument;
pub use crate::domain::{Actor, Verdict};

/// A sister's structured result, discriminated by `actor`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "actor", rename_all = "lowercase")]
pub enum HandoffMessage {
    Harang(HarangMessage),
    Narang(NarangMessage),
    Darang(DarangMessage),
    Erang(ErangMessage),
}

/// Fields every actor may send besides its verdict and payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Common {
    /// The handoff document for the next session; when absent, the orchestrator composes one from the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffDocument>,
    /// What the run cost, rolled up per sprint and per sister.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HarangMessage {
    pub verdict: HarangVerdict,
    /// Required for PLAN_READY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<PlanPayload>,
    /// Required for ABORT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_reason: Option<String>,
    #[serde(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HarangVerdict {
    PlanReady,
    Abort,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanPayload {
    pub plan_dir: String,
    /// Must be the id of the sprint being planned.
    pub sprint_id: String,
    /// The contract the later sisters work against (`{contract}`).
    pub contract_id: String,
    /// The sprint's contract: what the reviewer must report on, item by item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checklist: Option<Vec<ChecklistItem>>,
}

/// One item of the sprint's contract, as the planner wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChecklistItem {
    /// Unique within the plan; the reviewer's `checklistResults` name it.
    pub id: String,
    pub text: String,
}

/// At most this many contract items in a plan: a contract a reviewer can report on.
pub const MAX_CHECKLIST_ITEMS: usize = 100;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NarangMessage {
    pub verdict: NarangVerdict,
    /// Required for IMPL_DONE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<ImplPayload>,
    /// Required for ERROR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_reason: Option<String>,
    #[serde(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NarangVerdict {
    ImplDone,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImplPayload {
    pub branch: String,
    /// Commit ids on `branch`; checked against the workdir when it is a git repository.
    pub commits: Vec<String>,
    pub workdir: String,
    /// Free-form: whatever the implementer's own tests reported.
    #[serde(default)]
    pub self_test_report: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DarangMessage {
    pub verdict: DarangVerdict,
    pub payload: ReviewPayload,
    /// Optional (an extension of the design): why the reviewer aborts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_reason: Option<String>,
    #[serde(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DarangVerdict {
    Approve,
    RequestChanges,
    Abort,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewPayload {
    pub checklist_results: Vec<ChecklistResult>,
    pub issues: Vec<ReviewIssue>,
    pub artifact_path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChecklistResult {
    pub id: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewIssue {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub severity: Severity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub message: String,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Blocker,
    Major,
    Minor,
    Nit,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErangMessage {
    pub verdict: ErangVerdict,
    pub payload: DeployPayload,
    /// Optional (an extension of the design): why the deploy failed, shown to the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_reason: Option<String>,
    #[serde(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErangVerdict {
    DeployDone,
    DeployFailed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeployPayload {
    pub deploy_artifact_path: String,
    pub project_type: String,
    /// Free-form: what the deployer checked after deploying.
    #[serde(default)]
    pub verification_results: serde_json::Value,
}

/// What one run cost; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl HandoffMessage {
    pub fn actor(&self) -> Actor {
        match self {
            HandoffMessage::Harang(_) => Actor::Harang,
            HandoffMessage::Narang(_) => Actor::Narang,
            HandoffMessage::Darang(_) => Actor::Darang,
            HandoffMessage::Erang(_) => Actor::Erang,
        }
    }

    pub fn verdict(&self) -> Verdict {
        match self {
            HandoffMessage::Harang(m) => match m.verdict {
                HarangVerdict::PlanReady => Verdict::PlanReady,
                HarangVerdict::Abort => Verdict::Abort,
            },
            HandoffMessage::Narang(m) => match m.verdict {
                NarangVerdict::ImplDone => Verdict::ImplDone,
                NarangVerdict::Error => Verdict::Error,
            },
            HandoffMessage::Darang(m) => match m.verdict {
                DarangVerdict::Approve => Verdict::Approve,
                DarangVerdict::RequestChanges => Verdict::RequestChanges,
                DarangVerdict::Abort => Verdict::Abort,
            },
            HandoffMessage::Erang(m) => match m.verdict {
                ErangVerdict::DeployDone => Verdict::DeployDone,
                ErangVerdict::DeployFailed => Verdict::DeployFailed,
            },
        }
    }

    pub fn common(&self) -> &Common {
        match self {
            HandoffMessage::Harang(m) => &m.common,
            HandoffMessage::Narang(m) => &m.common,
            HandoffMessage::Darang(m) => &m.common,
            HandoffMessage::Erang(m) => &m.common,
        }
    }

    /// The plan, when this is the planner's message and it carries one.
    pub fn plan(&self) -> Option<&PlanPayload> {
        match self {
            HandoffMessage::Harang(m) => m.payload.as_ref(),
            _ => None,
        }
    }

    /// The work done, when this is the implementer's message and it carries it.
    pub fn implementation(&self) -> Option<&ImplPayload> {
        match self {
            HandoffMessage::Narang(m) => m.payload.as_ref(),
            _ => None,
        }
    }

    /// The review, when this is a reviewer's message.
    pub fn review(&self) -> Option<&ReviewPayload> {
        match self {
            HandoffMessage::Darang(m) => Some(&m.payload),
            _ => None,
        }
    }

    /// The deploy, when this is the deployer's message.
    pub fn deployment(&self) -> Option<&DeployPayload> {
        match self {
            HandoffMessage::Erang(m) => Some(&m.payload),
            _ => None,
        }
    }

    /// The sprint id the planner claims to have planned, if it says.
    pub fn claimed_sprint_id(&self) -> Option<&str> {
        match self {
            HandoffMessage::Harang(HarangMessage {
                payload: Some(p), ..
            }) => Some(&p.sprint_id),
            _ => None,
        }
    }

    /// The sister's own words on why it stopped or failed, for the user.
    pub fn reason(&self) -> Option<String> {
        match self {
            HandoffMessage::Harang(m) => m.abort_reason.clone(),
            HandoffMessage::Narang(m) => m.error_reason.clone(),
            HandoffMessage::Darang(m) => m.abort_reason.clone().or_else(|| {
                let blocking: Vec<&str> = m
                    .payload
                    .issues
                    .iter()
                    .map(|i| i.message.as_str())
                    .collect();
                (!blocking.is_empty()).then(|| blocking.join("; "))
            }),
            HandoffMessage::Erang(m) => m.error_reason.clone().or_else(|| {
                (!m.payload.verification_results.is_null())
                    .then(|| m.payload.verification_results.to_string())
            }),
        }
    }
}
