//! The sprint's contract as its runs and its log recorded it: the checklist of the plan
//! that was handed on, amended by each request a person made of a round since, and what
//! the latest review round said of each item.

use super::{Run, TransitionRecord};
use crate::domain::{Actor, RunOutcome, Stage, Verdict};
use crate::handoff::message::{ChecklistItem, HandoffMessage, ReviewPayload};

/// One contract item with the latest review's word on it: `Some(true)` when every
/// reviewer of that round who reported it passed it, `None` before any did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractItem {
    pub item: ChecklistItem,
    pub passed: Option<bool>,
    /// Each reviewer's word on it, when there are several: `(reviewer, passed)`.
    pub reviewers: Vec<(String, bool)>,
}

/// Who set a contract item: the planner, or the person whose request it is.
pub const PLANNER: &str = Stage::Planning.actor().as_str();

/// The sprint's contract: the checklist of the last plan that was handed on (the
/// PLAN_READY that moved the sprint to implementing), then one item per round a person
/// asked something of (`request-r2`: a request for changes, or the note of a resume or
/// handoff into implementing), quoting the last thing they asked of it. The person's latest
/// word wins: where a request conflicts with an earlier item, the earlier one is reported
/// as superseded (the prompts say so).
pub fn contract(runs: &[Run], log: &[TransitionRecord]) -> Vec<ChecklistItem> {
    sourced(runs, log, None)
        .into_iter()
        .map(|(item, _)| item)
        .collect()
}

/// `contract`, each item with who set it (`PLANNER`, or the person who asked). `now`:
/// the request `(round, by, text)` of the round a run is composed for, when the
/// transition that makes it is not yet in `log`.
pub fn sourced(
    runs: &[Run],
    log: &[TransitionRecord],
    now: Option<(u32, &str, &str)>,
) -> Vec<(ChecklistItem, String)> {
    let mut items: Vec<(ChecklistItem, String)> = planned(runs)
        .into_iter()
        .map(|item| (item, PLANNER.to_string()))
        .collect();
    let mut asked: Vec<(u32, &str, &str)> = Vec::new();
    for t in log {
        if let Some((by, text)) = t.request() {
            asked.retain(|(round, _, _)| *round != t.round);
            asked.push((t.round, by, text));
        }
    }
    if let Some((round, by, text)) = now {
        asked.retain(|(r, _, _)| *r != round);
        asked.push((round, by, text));
    }
    for (round, by, text) in asked {
        let mut id = request_id(round);
        // A plan's own item of that name keeps it; the request's is told apart.
        while items.iter().any(|(item, _)| item.id == id) {
            id.push_str("-person");
        }
        items.push((
            ChecklistItem {
                id,
                text: text.trim().to_string(),
            },
            by.to_string(),
        ));
    }
    items
}

/// The contract item a person's request of `round` becomes.
fn request_id(round: u32) -> String {
    format!("request-r{round}")
}

/// The checklist of the last plan that was handed on; empty when the plan had none.
fn planned(runs: &[Run]) -> Vec<ChecklistItem> {
    handed_on(runs, Stage::Planning.actor())
        .filter(|m| m.verdict() == Verdict::PlanReady)
        .find_map(|m| Some(m.plan()?.checklist.clone().unwrap_or_default()))
        .unwrap_or_default()
}

/// The contract with the verdict of the latest review round on each item.
pub fn contract_results(runs: &[Run], log: &[TransitionRecord]) -> Vec<ContractItem> {
    let reviewer = Stage::Reviewing.actor();
    let handed_on = |r: &&Run| r.actor == reviewer && r.outcome == Some(RunOutcome::Handoff);
    let last_round = runs.iter().filter(handed_on).map(|r| r.round).max();
    let reviews: Vec<(Option<&str>, ReviewPayload)> = runs
        .iter()
        .filter(handed_on)
        .filter(|r| Some(r.round) == last_round)
        .filter_map(|r| {
            let m: HandoffMessage = serde_json::from_value(r.message.clone()?).ok()?;
            let review = m.review().filter(|_| m.verdict() != Verdict::Abort)?;
            Some((r.reviewer.as_deref(), review.clone()))
        })
        .collect();
    contract(runs, log)
        .into_iter()
        .map(|item| {
            let said: Vec<(Option<&str>, bool)> = reviews
                .iter()
                .flat_map(|(who, p)| p.checklist_results.iter().map(move |r| (*who, r)))
                .filter(|(_, r)| r.id == item.id)
                .map(|(who, r)| (who, r.passed))
                .collect();
            let passed = (!said.is_empty()).then(|| said.iter().all(|&(_, p)| p));
            let mut reviewers: Vec<(String, bool)> = if reviews.len() > 1 {
                said.iter()
                    .map(|&(who, p)| (who.unwrap_or(reviewer.as_str()).to_string(), p))
                    .collect()
            } else {
                Vec::new()
            };
            reviewers.sort();
            ContractItem {
                item,
                passed,
                reviewers,
            }
        })
        .collect()
}

/// The valid messages `actor` handed on, newest first.
fn handed_on(runs: &[Run], actor: Actor) -> impl Iterator<Item = HandoffMessage> + '_ {
    runs.iter()
        .rev()
        .filter(move |r| r.actor == actor && r.outcome == Some(RunOutcome::Handoff))
        .filter_map(|r| serde_json::from_value(r.message.clone()?).ok())
}
