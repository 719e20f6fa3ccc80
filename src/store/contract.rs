//! The sprint's contract as its runs recorded it: the checklist of the plan that was
//! handed on, and what the latest review round said of each item.

use super::Run;
use crate::domain::{Actor, RunOutcome};
use crate::handoff::message::{
    ChecklistItem, DarangVerdict, HandoffMessage, HarangVerdict, ReviewPayload,
};

/// One contract item with the latest review's word on it: `Some(true)` when every
/// reviewer of that round who reported it passed it, `None` before any did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractItem {
    pub item: ChecklistItem,
    pub passed: Option<bool>,
    /// Each reviewer's word on it, when darang has several: `(reviewer, passed)`.
    pub reviewers: Vec<(String, bool)>,
}

/// The checklist of the last plan that was handed on (the PLAN_READY that moved the
/// sprint to implementing); empty when the plan had none.
pub fn contract(runs: &[Run]) -> Vec<ChecklistItem> {
    handed_on(runs, Actor::Harang)
        .find_map(|m| match m {
            HandoffMessage::Harang(m) if m.verdict == HarangVerdict::PlanReady => {
                Some(m.payload?.checklist.unwrap_or_default())
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// The contract with the verdict of the latest review round on each item.
pub fn contract_results(runs: &[Run]) -> Vec<ContractItem> {
    let last_round = runs
        .iter()
        .filter(|r| r.actor == Actor::Darang && r.outcome == Some(RunOutcome::Handoff))
        .map(|r| r.round)
        .max();
    let reviews: Vec<(Option<&str>, ReviewPayload)> = runs
        .iter()
        .filter(|r| r.actor == Actor::Darang && r.outcome == Some(RunOutcome::Handoff))
        .filter(|r| Some(r.round) == last_round)
        .filter_map(|r| match serde_json::from_value(r.message.clone()?).ok()? {
            HandoffMessage::Darang(m) if m.verdict != DarangVerdict::Abort => {
                Some((r.reviewer.as_deref(), m.payload))
            }
            _ => None,
        })
        .collect();
    contract(runs)
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
                    .map(|&(who, p)| (who.unwrap_or("darang").to_string(), p))
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
