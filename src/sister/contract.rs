//! What a sister is given: the contract file (JSON, written before the spawn) and the
//! prompt on stdin, which ends with the handoff document as the design wraps it.

use serde::{Deserialize, Serialize};

use crate::handoff::message::{Actor, ChecklistItem, ReviewIssue};
use crate::handoff::{HandoffDocument, HandoffMessage};

/// A person's words to a round, with who said them (`discord:<id>`, `cli:<user>@<host>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonRequest {
    pub by: String,
    pub text: String,
}

/// A note a person left for the sprint while it ran, given to the next
/// sister run: who, what, and when (unix ms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonNote {
    pub by: String,
    pub text: String,
    pub at: i64,
}

/// The JSON file at `{contract_file}` / `$HANARANG_CONTRACT_FILE`. Field names are part
/// of the public interface (docs/sisters.md documents them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractFile {
    pub sprint_id: String,
    pub goal: String,
    pub project: String,
    pub role: Actor,
    pub round: u32,
    pub attempt: u32,
    pub branch: String,
    pub contract_id: String,
    pub run_id: String,
    pub workdir: String,
    /// The previous sister's validated message, when there is one.
    pub previous_message: Option<HandoffMessage>,
    /// For the implementer after REQUEST_CHANGES: what the reviewer wants fixed.
    #[serde(default)]
    pub review_issues: Vec<ReviewIssue>,
    /// The handoff document this session starts from.
    pub handoff: HandoffDocument,
    /// True when the orchestrator composed the document (the previous sister sent none).
    pub handoff_synthesized: bool,
    /// A user's focus instructions (start, resume, request-changes, handoff).
    pub focus: Option<String>,
    /// What a person asked of this round's implementation (a request for changes' note,
    /// a resume's or handoff's focus): the implementer's job this round, and what its
    /// reviewers judge besides the contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<PersonRequest>,
    /// Notes people left for the sprint since its last run began, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<PersonNote>,
    /// Why this sister's previous output was rejected, when the last attempt was bad
    /// output: the one repair chance.
    pub previous_rejection: Option<String>,
    /// The JSON Schema (draft-07) of the message this sister must print.
    pub schema: serde_json::Value,
    /// Who queued the sprint, so who wrote the goal: `discord:<id>` or
    /// `cli:<user>@<host>` (unknown for sprints queued before it was recorded).
    #[serde(default)]
    pub goal_by: Option<String>,
    /// Who gave `focus`.
    #[serde(default)]
    pub focus_by: Option<String>,
    /// Who raised each of `review_issues`, in the same order: `darang`, or
    /// `darang/<reviewer>` with several reviewers.
    #[serde(default)]
    pub review_issues_by: Vec<String>,
    /// Where `handoff` comes from: the run that wrote it (`narang run SPRINT-001-R02`),
    /// or `synthesized by the orchestrator` (from a run, when it was handed off).
    #[serde(default)]
    pub handoff_by: Option<String>,
    /// Where the planner writes the plan: the sprint's folder outside the repository,
    /// or the workdir joined with the project's `plan_dir`.
    #[serde(default)]
    pub plan_dir: String,
    /// Whether `plan_dir` is in the repository (the project keeps plans in its tree, and
    /// the planner commits the plan there).
    #[serde(default)]
    pub plan_in_tree: bool,
    /// The branch the sprint's branch started from: recorded when the orchestrator made
    /// it in a git workdir, else the project's `base_branch`, when it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// The base branch's commit when the sprint's branch was made (git workdirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// This run's folder for its artifacts, outside the repository (absolute).
    #[serde(default)]
    pub artifact_dir: String,
    /// The branch's head as this run starts: what a reviewer reviews, and must leave as
    /// it is (git workdirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The sprint's contract: the checklist of the plan that started the implementation,
    /// then an item per round a person asked something of (`request-r2`).
    #[serde(default)]
    pub checklist: Vec<ChecklistItem>,
    /// Who set each item of `checklist`, in its order: `harang`, or the person who asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checklist_by: Vec<String>,
    /// The project's `check` command (program and arguments), when it sets one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check: Vec<String>,
    /// The text of the project's `instructions` file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// What deploying means for the project (`deploy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<String>,
    /// Which of the reviewer's parallel reviewers this run is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
    /// The project's check of the implementer's last `IMPL_DONE`: for the reviewer, that it passed; for
    /// the implementer after `check_failed`, how it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_result: Option<CheckResult>,
    /// What the project's check said at the sprint's base commit, before any of its work
    /// (the planner, the implementer, the reviewer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_check: Option<CheckResult>,
    /// The forge's checks that failed on the pushed head, for the implementer's round after them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forge_checks: Vec<crate::pipeline::fsm::FailedCheck>,
    /// For the deployer after a merge on the forge: the merge commit on the base, checked out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<String>,
    /// Where the work goes, when the project delivers through its forge: the pull request
    /// onto the base branch and what the team's CI said at the base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge: Option<ForgeRoute>,
}

/// What the orchestrator's run of the project's check found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    /// The implementer's run it checked (at the base: the run it was made before).
    pub run: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    pub passed: bool,
    /// `null` when it was killed (its timeout) or could not run.
    pub exit_code: Option<i32>,
    pub duration_ms: i64,
    /// The commit it checked, in a git workdir.
    pub head: Option<String>,
    /// The last lines of its stdout and stderr.
    pub output_tail: String,
    /// For a failed check: how it failed, with its last lines (the run's detail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Where a text came from, when no one was recorded.
pub const UNKNOWN: &str = "unknown";

/// The route a sprint's work takes through its forge, as every run is told it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeRoute {
    /// `github` or `forgejo`.
    pub kind: String,
    /// `owner/name`.
    pub repo: String,
    /// The pull request, once hanarang opened it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The forge's checks at the sprint's base commit, read when it first ran: the team's
    /// bar. Empty when the forge reported none (or could not be asked).
    #[serde(default)]
    pub checks_at_base: Vec<crate::store::BaseCheck>,
}
