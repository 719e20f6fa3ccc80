//! The handoff document the orchestrator composes when a sister sends none: from the
//! sprint's goal, the last validated message and the stage that comes next. Marked
//! `synthesized` wherever it is stored.

use super::document::HandoffDocument;
use super::message::{Actor, DarangVerdict, HandoffMessage, HarangVerdict, NarangVerdict};
use crate::pipeline::Stage;

/// What the orchestrator knows of a sprint when it composes a document.
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    pub goal: &'a str,
    pub branch: &'a str,
    pub contract_id: &'a str,
    pub round: u32,
}

/// What could be seen of a run that a user handed off to a fresh session.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub duration: std::time::Duration,
    /// The end of its stderr.
    pub log_tail: String,
    /// In a git workdir: files changed and commits made since it started.
    pub files_changed: Vec<String>,
    pub commits: Vec<String>,
}

/// The document for the fresh session after a handoff: the one the stopped session was
/// given, plus what it observably did.
pub fn after_handoff(
    given: &HandoffDocument,
    sister: &str,
    observed: &Observed,
) -> HandoffDocument {
    const LOG_LINES: usize = 20;
    const LIST_MAX: usize = 30;
    let mut doc = given.clone();
    let secs = observed.duration.as_secs();
    doc.progress.push(format!(
        "A previous session of {sister} worked for {} and was handed off to this fresh session by a user.",
        humantime::format_duration(std::time::Duration::from_secs(secs))
    ));
    let list = |items: &[String]| {
        let mut shown: Vec<&str> = items.iter().take(LIST_MAX).map(String::as_str).collect();
        let more = items.len().saturating_sub(LIST_MAX);
        let more_note = format!("and {more} more");
        if more > 0 {
            shown.push(&more_note);
        }
        shown.join(", ")
    };
    if !observed.commits.is_empty() {
        doc.progress
            .push(format!("Commits it made: {}", list(&observed.commits)));
    }
    if !observed.files_changed.is_empty() {
        doc.progress.push(format!(
            "Files it changed: {}",
            list(&observed.files_changed)
        ));
    }
    let tail: Vec<&str> = observed.log_tail.lines().rev().take(LOG_LINES).collect();
    if !tail.is_empty() {
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        doc.critical_context
            .push(format!("The end of its log:\n{}", tail.join("\n")));
    }
    doc
}

/// A sister as a document names it: `하랑이 (harang)`.
pub fn sister_name(actor: Actor) -> String {
    format!("{} ({actor})", actor.korean_name())
}

/// A document for the sister of `next`, from the last validated message (if any).
pub fn synthesize(
    known: Known<'_>,
    previous: Option<&HandoffMessage>,
    next: Stage,
) -> HandoffDocument {
    let who = previous.map(|m| sister_name(m.actor())).unwrap_or_default();
    let progress = match previous {
        None => vec!["The sprint was just created; nothing has been done yet.".to_string()],
        Some(HandoffMessage::Harang(m)) => match (&m.verdict, &m.payload) {
            (HarangVerdict::PlanReady, Some(p)) => vec![format!(
                "{who} wrote the plan in {} (contract {}).",
                p.plan_dir, p.contract_id
            )],
            _ => vec![format!("{who} finished planning.")],
        },
        Some(HandoffMessage::Narang(m)) => match (&m.verdict, &m.payload) {
            (NarangVerdict::ImplDone, Some(p)) => vec![format!(
                "{who} implemented round {} on branch {} ({} commit{}).",
                known.round,
                p.branch,
                p.commits.len(),
                if p.commits.len() == 1 { "" } else { "s" }
            )],
            _ => vec![format!("{who} reported an error.")],
        },
        Some(HandoffMessage::Darang(m)) => match m.verdict {
            DarangVerdict::Approve => vec![format!("{who} approved the work.")],
            DarangVerdict::RequestChanges => vec![format!(
                "{who} asked for changes: {} issue{}, {} failed checklist item{}.",
                m.payload.issues.len(),
                if m.payload.issues.len() == 1 { "" } else { "s" },
                m.payload
                    .checklist_results
                    .iter()
                    .filter(|c| !c.passed)
                    .count(),
                if m.payload
                    .checklist_results
                    .iter()
                    .filter(|c| !c.passed)
                    .count()
                    == 1
                {
                    ""
                } else {
                    "s"
                },
            )],
            DarangVerdict::Abort => vec![format!("{who} called the sprint off.")],
        },
        Some(HandoffMessage::Erang(_)) => vec![format!("{who} attempted the deploy.")],
    };
    let next_step = match next {
        Stage::Planning => format!("Write the plan and its contract for: {}", known.goal.trim()),
        Stage::Implementing => match previous {
            Some(HandoffMessage::Darang(_)) => {
                "Fix every review issue listed in the contract file (reviewIssues), then commit."
                    .to_string()
            }
            _ => format!(
                "Implement the plan on branch {} and commit the work.",
                known.branch
            ),
        },
        Stage::Reviewing => format!(
            "Review branch {} against contract {}; approve it or request changes.",
            known.branch, known.contract_id
        ),
        Stage::Deploying => format!("Deploy branch {} and verify the deployment.", known.branch),
    };
    HandoffDocument {
        goal: known.goal.trim().to_string(),
        constraints: Vec::new(),
        progress,
        key_decisions: Vec::new(),
        critical_context: vec![
            format!("Branch: {}", known.branch),
            format!("Contract: {}", known.contract_id),
        ],
        next_steps: vec![next_step],
    }
}
