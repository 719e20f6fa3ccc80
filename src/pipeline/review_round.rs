//! The merge of one review round's verdicts, when the reviewer reviews with
//! several reviewers: one pure rule, written here once. Any `ABORT` aborts the sprint;
//! else any `REQUEST_CHANGES` sends it back to the implementer with every reviewer's
//! issues and failed checklist items, each tagged with its reviewer; else (all `APPROVE`)
//! it is done.
//!
//! The order in which verdicts arrive never changes the result: the union is ordered by
//! reviewer name, and within a reviewer as it wrote them. What an issue or a checklist
//! item is, the rule does not look at (`I`, `C`).

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::domain::{RunOutcome, Stage, Verdict};

/// Whether `verdict` is one a reviewer may answer (`APPROVE`, `REQUEST_CHANGES`, `ABORT`).
pub fn is_review(verdict: Verdict) -> bool {
    Stage::Reviewing.actor().verdicts().contains(&verdict)
}

/// One reviewer's verdict of a round, with what it found.
#[derive(Debug, Clone, PartialEq)]
pub struct Review<I, C> {
    pub reviewer: String,
    pub verdict: Verdict,
    pub issues: Vec<I>,
    /// Its checklist items that failed.
    pub failed: Vec<C>,
}

/// Something a reviewer found, with its name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tagged<T> {
    pub reviewer: String,
    #[serde(flatten)]
    pub item: T,
}

/// The round's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Merged<I, C> {
    /// The reviewers that answered `ABORT`, by name.
    Abort {
        by: Vec<String>,
    },
    /// Back to the implementer with all of it.
    RequestChanges {
        /// The reviewers that asked, by name.
        by: Vec<String>,
        issues: Vec<Tagged<I>>,
        failed: Vec<Tagged<C>>,
    },
    Approve,
}

impl<I, C> Merged<I, C> {
    pub fn verdict(&self) -> Verdict {
        match self {
            Merged::Abort { .. } => Verdict::Abort,
            Merged::RequestChanges { .. } => Verdict::RequestChanges,
            Merged::Approve => Verdict::Approve,
        }
    }
}

/// The merge rule. Every reviewer of the round has answered: `reviews` holds one verdict
/// per reviewer (a reviewer named twice counts once, its first verdict in name order
/// wins, so no duplicate can change the result by where it arrives).
pub fn merge<I: Clone, C: Clone>(reviews: &[Review<I, C>]) -> Merged<I, C> {
    let mut sorted: Vec<&Review<I, C>> = reviews.iter().collect();
    // Stable: for one reviewer named twice, the verdict kept is the strictest, whatever
    // the order they came in.
    sorted.sort_by(|a, b| {
        a.reviewer
            .cmp(&b.reviewer)
            .then_with(|| strictness(b.verdict).cmp(&strictness(a.verdict)))
    });
    sorted.dedup_by(|b, a| a.reviewer == b.reviewer);
    let named = |v: u8| -> Vec<String> {
        sorted
            .iter()
            .filter(|r| strictness(r.verdict) == v)
            .map(|r| r.reviewer.clone())
            .collect()
    };
    let aborted = named(strictness(Verdict::Abort));
    if !aborted.is_empty() {
        return Merged::Abort { by: aborted };
    }
    let asked = named(strictness(Verdict::RequestChanges));
    if asked.is_empty() {
        return Merged::Approve;
    }
    let mut issues = Vec::new();
    let mut failed = Vec::new();
    for review in &sorted {
        issues.extend(tagged(&review.reviewer, &review.issues));
        failed.extend(tagged(&review.reviewer, &review.failed));
    }
    Merged::RequestChanges {
        by: asked,
        issues,
        failed,
    }
}

fn tagged<'a, T: Clone>(reviewer: &'a str, items: &'a [T]) -> impl Iterator<Item = Tagged<T>> + 'a {
    items.iter().map(move |item| Tagged {
        reviewer: reviewer.to_string(),
        item: item.clone(),
    })
}

/// One reviewer's run of the round (a run after the implementer's last), as the round's
/// rule needs it.
#[derive(Debug, Clone, Copy)]
pub struct ReviewerRun<'a> {
    pub reviewer: &'a str,
    pub attempt: u32,
    /// `None` while it runs.
    pub outcome: Option<RunOutcome>,
    /// The verdict of its valid answer, when it gave one.
    pub verdict: Option<Verdict>,
}

/// What a round of several reviewers asks for now.
#[derive(Debug, Clone, PartialEq)]
pub enum Round {
    /// Every reviewer answered, or one aborted (the others are told to stop): the
    /// verdicts to merge (`Event::ReviewMerged`).
    Merge(BTreeMap<String, Verdict>),
    /// Each reviewer with no verdict and no run in flight, with the attempt its next run
    /// is; a reviewer whose run is in flight is waited for.
    Start(Vec<(String, u32)>),
}

/// Where the round stands, from its runs alone (never kept apart): a resume, a crash or a
/// takeover re-runs exactly the reviewers without a verdict. A reviewer's failure retries
/// it alone, up to `max_attempts`; a failure at the last one escalated the stage, so a
/// run after it follows a person's resume, with every attempt again.
pub fn round(reviewers: &[&str], runs: &[ReviewerRun<'_>], max_attempts: u32) -> Round {
    let mut verdicts = BTreeMap::new();
    let mut due = Vec::new();
    for name in reviewers {
        let mine: Vec<&ReviewerRun<'_>> = runs.iter().filter(|r| r.reviewer == *name).collect();
        let answered = mine
            .iter()
            .rev()
            .find_map(|r| r.verdict.filter(|_| r.outcome == Some(RunOutcome::Handoff)));
        let attempt = match (answered, mine.last()) {
            (Some(verdict), _) => {
                verdicts.insert(name.to_string(), verdict);
                continue;
            }
            (None, Some(last)) if last.outcome.is_none() => continue,
            // Stopped because the stage ended otherwise (another reviewer's failure
            // escalated it): not a try of its own.
            (None, Some(last)) if last.outcome == Some(RunOutcome::Cancelled) => last.attempt,
            (None, Some(last)) if last.attempt < max_attempts => last.attempt + 1,
            (None, _) => 1,
        };
        due.push((name.to_string(), attempt));
    }
    let aborted = verdicts
        .values()
        .any(|v| strictness(*v) == strictness(Verdict::Abort));
    if aborted || verdicts.len() == reviewers.len() {
        Round::Merge(verdicts)
    } else {
        Round::Start(due)
    }
}

/// How strict a reviewer's verdict is: `ABORT` most. A verdict no reviewer may give is
/// never recorded as a review (`is_review`); one that got in anyway counts as an `ABORT`,
/// never as an approval.
fn strictness(v: Verdict) -> u8 {
    match v {
        Verdict::Approve => 0,
        Verdict::RequestChanges => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Verdict::{Abort, Approve, RequestChanges};

    fn review(reviewer: &str, verdict: Verdict, issues: &[&str]) -> Review<String, String> {
        Review {
            reviewer: reviewer.into(),
            verdict,
            issues: issues.iter().map(|s| s.to_string()).collect(),
            failed: Vec::new(),
        }
    }

    #[test]
    fn a_verdict_no_reviewer_may_give_never_approves() {
        let reviews = [
            review("a", Approve, &[]),
            review("b", Verdict::ImplDone, &[]),
        ];
        assert!(!is_review(Verdict::ImplDone));
        assert_eq!(
            merge(&reviews),
            Merged::Abort {
                by: vec!["b".into()]
            }
        );
    }

    #[test]
    fn the_rule_by_table() {
        let table: &[(&[(&str, Verdict)], Verdict)] = &[
            (&[("static", Approve), ("runtime", Approve)], Approve),
            (
                &[("static", Approve), ("runtime", RequestChanges)],
                RequestChanges,
            ),
            (
                &[("static", RequestChanges), ("runtime", RequestChanges)],
                RequestChanges,
            ),
            (&[("static", RequestChanges), ("runtime", Abort)], Abort),
            (&[("static", Abort), ("runtime", Approve)], Abort),
            (&[("static", Abort), ("runtime", Abort)], Abort),
            (&[("only", Approve)], Approve),
            (&[("only", RequestChanges)], RequestChanges),
            (&[("only", Abort)], Abort),
        ];
        for (verdicts, expected) in table {
            let reviews: Vec<_> = verdicts.iter().map(|(r, v)| review(r, *v, &[])).collect();
            assert_eq!(merge(&reviews).verdict(), *expected, "{verdicts:?}");
        }
    }

    #[test]
    fn a_reviewer_stands_where_its_runs_of_the_round_say() {
        let run = |reviewer, outcome, attempt| ReviewerRun {
            reviewer,
            attempt,
            outcome,
            verdict: (outcome == Some(RunOutcome::Handoff)).then_some(Approve),
        };
        let runs = [
            run("static", Some(RunOutcome::Handoff), 1),
            run("runtime", Some(RunOutcome::Timeout), 1),
            run("slow", None, 1),
            run("flaky", Some(RunOutcome::BadOutput), 3),
            run("stopped", Some(RunOutcome::Cancelled), 2),
        ];
        let reviewers = ["flaky", "lint", "runtime", "slow", "static", "stopped"];
        assert_eq!(
            round(&reviewers, &runs, 3),
            Round::Start(vec![
                // Failed at its last attempt: the stage escalated, and a resume starts it over.
                ("flaky".into(), 1),
                ("lint".into(), 1),
                ("runtime".into(), 2),
                // Cancelled with the stage: the same attempt again.
                ("stopped".into(), 2),
            ])
        );
        // Every one answered: merged.
        assert_eq!(
            round(&["static"], &runs, 3),
            Round::Merge(BTreeMap::from([("static".to_string(), Approve)]))
        );
        // One aborted: merged at once, whatever the others are doing.
        let aborted = [
            ReviewerRun {
                verdict: Some(Abort),
                ..run("runtime", Some(RunOutcome::Handoff), 1)
            },
            run("slow", None, 1),
        ];
        assert_eq!(
            round(&["runtime", "slow"], &aborted, 3),
            Round::Merge(BTreeMap::from([("runtime".to_string(), Abort)]))
        );
        // A run that handed off without a reviewer's verdict is no answer.
        let wrong = [ReviewerRun {
            verdict: None,
            ..run("static", Some(RunOutcome::Handoff), 1)
        }];
        assert_eq!(
            round(&["static"], &wrong, 3),
            Round::Start(vec![("static".into(), 2)])
        );
    }

    #[test]
    fn changes_carry_every_reviewers_issues_tagged_with_its_name() {
        let merged = merge(&[
            review("static", RequestChanges, &["unused import"]),
            review("runtime", Approve, &["slow start (not blocking)"]),
            review("lint", RequestChanges, &["a", "b"]),
        ]);
        let Merged::RequestChanges { by, issues, .. } = merged else {
            panic!("{merged:?}");
        };
        assert_eq!(by, ["lint", "static"]);
        let tagged: Vec<(&str, &str)> = issues
            .iter()
            .map(|t| (t.reviewer.as_str(), t.item.as_str()))
            .collect();
        assert_eq!(
            tagged,
            [
                ("lint", "a"),
                ("lint", "b"),
                ("runtime", "slow start (not blocking)"),
                ("static", "unused import"),
            ]
        );
    }
}
