//! What the reviewers found, for the implementer after them: one reviewer's issues and
//! failed checklist items, and a round of several reviewers' findings merged with their
//! names (`round_findings`).

use super::compose::run_label;
use crate::domain::Stage;
use crate::handoff::HandoffDocument;
use crate::handoff::message::{
    ChecklistResult, HandoffMessage, ReviewIssue, ReviewPayload, Severity,
};
use crate::pipeline::review_round::{Merged, Review, is_review, merge};
use crate::sister::RunOutcome;
use crate::store::{Run, review_round};

/// What the reviewer wants fixed: its issues, plus each failed checklist item.
pub(super) fn review_issues(review: &ReviewPayload) -> Vec<ReviewIssue> {
    let mut issues = review.issues.clone();
    issues.extend(
        review
            .checklist_results
            .iter()
            .filter(|c| !c.passed)
            .map(failed_item),
    );
    issues
}

/// A failed checklist item, as an issue for the implementer.
fn failed_item(item: &ChecklistResult) -> ReviewIssue {
    ReviewIssue {
        id: Some(item.id.clone()),
        severity: Severity::Major,
        file: None,
        line: None,
        message: match &item.note {
            Some(note) => format!("checklist item {:?} failed: {note}", item.id),
            None => format!("checklist item {:?} failed", item.id),
        },
    }
}

/// What the round's reviewers said, for the implementer that comes after it: every issue
/// and failed checklist item with its reviewer's name (and who raised it, as the prompt
/// names it: `darang/<reviewer>`), their documents merged (with the runs they came from),
/// and the reviewer run that finished last (its parent). `None` when the runs end with no
/// reviewer's answer (the reviewer reviewed alone).
pub(super) struct RoundFindings {
    pub issues: Vec<(ReviewIssue, String)>,
    pub handoff: Option<(HandoffDocument, String)>,
    pub parent: Run,
}

pub(super) fn round_findings(runs: &[Run]) -> Option<RoundFindings> {
    let answered: Vec<(&Run, HandoffMessage)> = review_round(runs)
        .iter()
        .filter(|r| r.reviewer.is_some() && r.outcome == Some(RunOutcome::Handoff))
        .filter_map(|r| {
            let m = serde_json::from_value::<HandoffMessage>(r.message.clone()?).ok()?;
            m.review().is_some().then_some((r, m))
        })
        .collect();
    let parent = answered
        .iter()
        .max_by_key(|(r, _)| (r.ended_at, r.number))
        .map(|(r, _)| (*r).clone())?;
    let reviews: Vec<_> = answered
        .iter()
        .filter_map(|(r, m)| review_of(r.reviewer.as_deref().unwrap_or_default(), m))
        .collect();
    let issues = match merge(&reviews) {
        Merged::RequestChanges { issues, failed, .. } => {
            // Each with its reviewer's name first.
            let tagged = |reviewer: &str, issue: ReviewIssue| {
                let by = format!("{}/{reviewer}", Stage::Reviewing.actor());
                let issue = ReviewIssue {
                    message: format!("[{reviewer}] {}", issue.message),
                    ..issue
                };
                (issue, by)
            };
            let failed = failed
                .into_iter()
                .map(|t| tagged(&t.reviewer, failed_item(&t.item)));
            issues
                .into_iter()
                .map(|t| tagged(&t.reviewer, t.item))
                .chain(failed)
                .collect()
        }
        _ => Vec::new(),
    };
    // Their documents, one after the other in reviewer order, each line with its name.
    let mut docs: Vec<(&str, HandoffDocument, String)> = answered
        .iter()
        .filter_map(|(r, m)| {
            let doc = m.common().handoff.clone()?;
            Some((r.reviewer.as_deref()?, doc, run_label(r)))
        })
        .collect();
    docs.sort_by(|a, b| a.0.cmp(b.0));
    let handoff = docs.first().map(|(_, first, _)| {
        let mut merged = HandoffDocument {
            goal: first.goal.clone(),
            ..HandoffDocument::default()
        };
        for (name, doc, _) in &docs {
            let tag = |lines: &[String]| -> Vec<String> {
                lines.iter().map(|l| format!("[{name}] {l}")).collect()
            };
            merged.constraints.extend(tag(&doc.constraints));
            merged.progress.extend(tag(&doc.progress));
            merged.key_decisions.extend(tag(&doc.key_decisions));
            merged.critical_context.extend(tag(&doc.critical_context));
            merged.next_steps.extend(tag(&doc.next_steps));
        }
        let runs: Vec<&str> = docs.iter().map(|(_, _, run)| run.as_str()).collect();
        (merged, format!("{} (merged)", runs.join(", ")))
    });
    Some(RoundFindings {
        issues,
        handoff,
        parent,
    })
}

fn review_of(reviewer: &str, m: &HandoffMessage) -> Option<Review<ReviewIssue, ChecklistResult>> {
    let review = m.review()?;
    Some(Review {
        reviewer: reviewer.to_string(),
        verdict: Some(m.verdict()).filter(|v| is_review(*v))?,
        issues: review.issues.clone(),
        failed: review
            .checklist_results
            .iter()
            .filter(|c| !c.passed)
            .cloned()
            .collect(),
    })
}
