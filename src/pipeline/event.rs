//! What happens to a sprint (`Event`), why a stage failed (`Failure`), and what a
//! transition tells besides the new position (`Note`: a retry, an escalation, a pause).

use serde::{Deserialize, Serialize};

use super::Stage;
use super::review_round::{Review, merge};
use crate::domain::FailureKind;
use crate::domain::{Actor, Verdict};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    /// What the user needs to know: the exit code, the first validation error, the
    /// sister's own reason.
    pub detail: String,
}

/// Something that happened to a sprint. Human events carry who gave them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The project's pipeline lock was taken for this sprint.
    LockAcquired,
    /// A sister returned a valid HandoffMessage.
    Reported {
        actor: Actor,
        verdict: Verdict,
        /// The sprint the message says it is about (the planner's `payload.sprintId`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sprint_id: Option<String>,
        /// The sister's reason, for ERROR, DEPLOY_FAILED and ABORT.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A run ended without a valid message.
    Failed {
        failure: Failure,
    },
    /// One of the reviewer's parallel reviewers answered, while several review the round in parallel
    ///: the sprint stays in review until every one has.
    Reviewed {
        reviewer: String,
        verdict: Verdict,
    },
    /// One reviewer's run (its `attempt`-th for the round) ended without a valid message:
    /// it runs again alone, or the stage escalates.
    ReviewerFailed {
        reviewer: String,
        attempt: u32,
        failure: Failure,
    },
    /// Every reviewer of the round has answered (or one aborted): their verdicts, merged
    /// by `review::merge` into the reviewer's.
    ReviewMerged {
        verdicts: std::collections::BTreeMap<String, Verdict>,
    },
    Approve {
        by: String,
    },
    RequestChanges {
        by: String,
        note: String,
    },
    Resume {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
    },
    Abort {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A fresh session of the running sister, seeded with a handoff document.
    Handoff {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
    },
    /// The sprint's rolled-up spend passed `pipeline.max_cost_usd`.
    BudgetExceeded {
        spent_usd: f64,
        limit_usd: f64,
    },
    /// The running sister said it hit its usage or rate limit (`[agent].pause_on`): the
    /// stage waits until `resume_at_ms` (unix ms; `delay_ms` from now), using no attempt.
    Paused {
        resume_at_ms: i64,
        delay_ms: u64,
        detail: String,
    },
    /// Before the deployer started, the approved commit `reviewed` was found no longer to
    /// be what the branch holds (`why`): nothing deploys, the branch goes back to review.
    /// With a forge, also someone else's push to the pull request's branch.
    Moved {
        reviewed: String,
        why: String,
    },
    /// The branch was pushed to the forge and its pull request opened or updated.
    Published {
        pr: u64,
        url: String,
        head: String,
    },
    /// The forge's checks on the pushed `head` all passed (`checks`: their names), or
    /// none was reported within the wait (`none`), or none is waited for (`ci = "none"`).
    ChecksPassed {
        head: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        checks: Vec<String>,
        #[serde(default)]
        none: bool,
    },
    /// A forge check failed on the pushed `head`.
    ChecksFailed {
        head: String,
        failed: Vec<FailedCheck>,
    },
    /// The forge's checks on `head` were still pending past `ci_timeout`.
    ChecksTimedOut {
        head: String,
        pending: Vec<String>,
    },
    /// The pull request was merged on the forge (by a person there: `by`) as `commit`.
    ForgeMerged {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
    },
    /// The forge refused what hanarang must do there (its token, the repository, a push
    /// onto a branch it did not make): a person decides.
    ForgeFailed {
        reason: String,
    },
    /// hanarang's merge of the pull request at the approved `head` was made, as `commit`.
    Merged {
        head: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
    },
    /// The forge refused hanarang's merge, in its words: nothing merged, never forced.
    MergeRefused {
        reason: String,
    },
    /// The forge could not be asked to merge (down, rate-limited): the merge is asked
    /// again later; the approval stands.
    MergeDelayed {
        reason: String,
    },
    /// The reviewed `head` changes `files` the forge would run (its workflows): it is not
    /// pushed until a person lets it run.
    CiFilesHeld {
        head: String,
        files: Vec<String>,
    },
    /// A person lets the held head's CI files be pushed and run (`sprint approve-ci`).
    ApproveCi {
        by: String,
    },
    /// The pull request was closed on the forge without a merge.
    ForgeClosed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// The running sister's agent hit its usage limit (until `until_ms`, unix ms) and the
    /// next agent of its chain, `next`, takes the stage over at once, in the same attempt.
    FellBack {
        agent: String,
        until_ms: i64,
        next: String,
        detail: String,
    },
}

impl Event {
    /// A short name for logs and the transitions table.
    pub fn name(&self) -> String {
        match self {
            Event::LockAcquired => "lock_acquired".into(),
            Event::Reported { actor, verdict, .. } => format!("{actor}:{verdict}"),
            Event::Failed { failure } => format!("failed:{}", failure.kind.as_str()),
            Event::Reviewed { reviewer, verdict } => {
                format!("{}/{reviewer}:{verdict}", Stage::Reviewing.actor())
            }
            Event::ReviewerFailed {
                reviewer, failure, ..
            } => format!("failed/{reviewer}:{}", failure.kind.as_str()),
            Event::ReviewMerged { verdicts } => {
                let merged = merged_verdict(verdicts).verdict();
                format!("{}:{merged}", Stage::Reviewing.actor())
            }
            Event::Approve { .. } => "approve".into(),
            Event::RequestChanges { .. } => "request_changes".into(),
            Event::Resume { .. } => "resume".into(),
            Event::Abort { .. } => "abort".into(),
            Event::Handoff { .. } => "handoff".into(),
            Event::BudgetExceeded { .. } => "budget_exceeded".into(),
            Event::Paused { .. } => "paused".into(),
            Event::Moved { .. } => "moved".into(),
            Event::Published { .. } => "forge:published".into(),
            Event::ChecksPassed { .. } => "forge:checks_passed".into(),
            Event::ChecksFailed { .. } => "forge:checks_failed".into(),
            Event::ChecksTimedOut { .. } => "forge:checks_timed_out".into(),
            Event::ForgeMerged { .. } => "forge:merged".into(),
            Event::ForgeClosed { .. } => "forge:closed".into(),
            Event::Merged { .. } => "forge:merge_made".into(),
            Event::CiFilesHeld { .. } => "forge:ci_files_held".into(),
            Event::ApproveCi { .. } => "approve_ci".into(),
            Event::MergeRefused { .. } => "forge:merge_refused".into(),
            Event::MergeDelayed { .. } => "forge:merge_delayed".into(),
            Event::ForgeFailed { .. } => "forge:failed".into(),
            Event::FellBack { next, .. } => format!("fallback:{next}"),
        }
    }

    /// Who gave it, for an event a person gave (`discord:<id>`, `cli:<user>@<host>`).
    pub fn by(&self) -> Option<&str> {
        match self {
            Event::Approve { by }
            | Event::ApproveCi { by }
            | Event::RequestChanges { by, .. }
            | Event::Resume { by, .. }
            | Event::Abort { by, .. }
            | Event::Handoff { by, .. } => Some(by),
            _ => None,
        }
    }

    /// What a person asked the next run to look at, `(by, text)`: a request for changes'
    /// note, or the focus of a resume or a handoff.
    pub fn focus(&self) -> Option<(&str, &str)> {
        match self {
            Event::RequestChanges { by, note } => Some((by, note)),
            Event::Resume {
                by,
                focus: Some(focus),
            }
            | Event::Handoff {
                by,
                focus: Some(focus),
            } => Some((by, focus)),
            _ => None,
        }
    }

    /// Given by a person (CLI or Discord), not by a sister or the orchestrator.
    pub fn is_human(&self) -> bool {
        matches!(
            self,
            Event::Approve { .. }
                | Event::RequestChanges { .. }
                | Event::Resume { .. }
                | Event::Abort { .. }
                | Event::Handoff { .. }
        )
    }
}

/// A forge check that failed, with what a person (and the implementer) needs of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedCheck {
    pub name: String,
    /// The forge's word: `failure`, `timed_out`, `error`, …
    pub conclusion: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The end of its log, where the forge gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_tail: Option<String>,
}

/// Why a sprint needs a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Escalation {
    /// The stage failed `max_attempts` times.
    AttemptsExhausted {
        stage: Stage,
        attempts: u32,
        last: Failure,
    },
    /// The reviewer asked for another round past `max_review_rounds`.
    ReviewRoundsExhausted {
        rounds: u32,
    },
    /// The orchestrator died while a deploy ran: its outcome is unknown and a deploy is
    /// never re-run without a human's word.
    DeployInterrupted {
        detail: String,
    },
    BudgetExceeded {
        spent_usd: f64,
        limit_usd: f64,
    },
    /// the implementer answered `IMPL_DONE` in a later round with the branch where the round
    /// before left it: another review would be paid for nothing.
    NoProgress {
        round: u32,
        /// The branch's head, as in the round before.
        head: String,
    },
    /// The review asked for changes with the round before's findings again.
    SameFindings {
        round: u32,
    },
    /// The forge's checks were still pending past `ci_timeout`.
    ChecksTimedOut {
        pending: Vec<String>,
    },
    /// The forge refused the approved merge, in its words (branch protection, required
    /// reviews, a conflict, a moved head): nothing merged, never forced.
    MergeRefused {
        reason: String,
    },
    /// The forge refused what hanarang must do there (its token, the repository, a push).
    ForgeFailed {
        reason: String,
    },
}

/// What the user should be told about a transition beyond its states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Note {
    /// The stage failed and runs again after `delay`.
    Retry {
        failure: Failure,
        delay_ms: u64,
    },
    Escalated {
        escalation: Escalation,
    },
    /// A valid message that is wrong for the state: the sprint is aborted.
    ProtocolViolation {
        reason: String,
    },
    /// The sister hit its usage limit: the stage runs again at `resume_at_ms`.
    Paused {
        resume_at_ms: i64,
        delay_ms: u64,
        detail: String,
    },
    /// The commit this move is for: into `done`, the head the review approved (what an
    /// approval deploys, and nothing else); into `deploying`, the one the person approved.
    Approved {
        head: String,
    },
    /// The approved commit `reviewed` is no longer what the branch holds (`why`: the branch
    /// moved, an object's bytes changed): nothing deployed, back to review.
    Moved {
        reviewed: String,
        why: String,
    },
    /// `head` changes `files` the forge would run: it waits for a person before the push.
    CiFilesHeld {
        head: String,
        files: Vec<String>,
    },
    /// A person let `head`'s CI files be pushed and run.
    CiApproved {
        head: String,
    },
    /// The forge could not be asked to merge yet: asked again later (`reason`).
    MergeDelayed {
        reason: String,
    },
    /// The approval merged the pull request at the approved `head`, as `commit`.
    Merged {
        head: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
    },
}

/// The round's verdict from its reviewers' (the merge rule, on verdicts alone).
pub fn merged_verdict(
    verdicts: &std::collections::BTreeMap<String, Verdict>,
) -> super::review_round::Merged<(), ()> {
    let reviews: Vec<Review<(), ()>> = verdicts
        .iter()
        .map(|(reviewer, verdict)| Review {
            reviewer: reviewer.clone(),
            verdict: *verdict,
            issues: Vec::new(),
            failed: Vec::new(),
        })
        .collect();
    merge(&reviews)
}
