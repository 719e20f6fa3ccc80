//! The handoff document the orchestrator composes when a sister sends none: from the
//! sprint's goal, the last validated message and the stage that comes next. Marked
//! `synthesized` wherever it is stored.

use super::document::HandoffDocument;
use super::message::{DarangVerdict, HandoffMessage, HarangVerdict, NarangVerdict};
use crate::pipeline::Stage;

/// What the orchestrator knows of a sprint when it composes a document.
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    pub goal: &'a str,
    pub branch: &'a str,
    pub contract_id: &'a str,
    pub round: u32,
}

/// A document for the sister of `next`, from the last validated message (if any).
pub fn synthesize(
    known: Known<'_>,
    previous: Option<&HandoffMessage>,
    next: Stage,
) -> HandoffDocument {
    let progress = match previous {
        None => vec!["The sprint was just created; nothing has been done yet.".to_string()],
        Some(HandoffMessage::Harang(m)) => match (&m.verdict, &m.payload) {
            (HarangVerdict::PlanReady, Some(p)) => vec![format!(
                "하랑이 (harang) wrote the plan in {} (contract {}).",
                p.plan_dir, p.contract_id
            )],
            _ => vec!["하랑이 (harang) finished planning.".to_string()],
        },
        Some(HandoffMessage::Narang(m)) => match (&m.verdict, &m.payload) {
            (NarangVerdict::ImplDone, Some(p)) => vec![format!(
                "나랑이 (narang) implemented round {} on branch {} ({} commit{}).",
                known.round,
                p.branch,
                p.commits.len(),
                if p.commits.len() == 1 { "" } else { "s" }
            )],
            _ => vec!["나랑이 (narang) reported an error.".to_string()],
        },
        Some(HandoffMessage::Darang(m)) => match m.verdict {
            DarangVerdict::Approve => vec!["다랑이 (darang) approved the work.".to_string()],
            DarangVerdict::RequestChanges => vec![format!(
                "다랑이 (darang) asked for changes: {} issue{}, {} failed checklist item{}.",
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
            DarangVerdict::Abort => vec!["다랑이 (darang) called the sprint off.".to_string()],
        },
        Some(HandoffMessage::Erang(_)) => vec!["이랑이 (erang) attempted the deploy.".to_string()],
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
