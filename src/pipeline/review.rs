//! The merge of one review round's verdicts, when darang reviews with
//! several reviewers: one pure rule, written here once. Any `ABORT` aborts the sprint;
//! else any `REQUEST_CHANGES` sends it back to the implementer with every reviewer's
//! issues and failed checklist items, each tagged with its reviewer; else (all `APPROVE`)
//! it is done.
//!
//! The order in which verdicts arrive never changes the result: the union is ordered by
//! reviewer name, and within a reviewer as it wrote them. What an issue or a checklist
//! item is, the rule does not look at (`I`, `C`).

use serde::{Deserialize, Serialize};

use crate::domain::Verdict;

/// What one reviewer may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReviewVerdict {
    Approve,
    RequestChanges,
    Abort,
}

impl ReviewVerdict {
    /// A reviewer's verdict among darang's; `None` for any other actor's.
    pub fn of(verdict: Verdict) -> Option<ReviewVerdict> {
        match verdict {
            Verdict::Approve => Some(ReviewVerdict::Approve),
            Verdict::RequestChanges => Some(ReviewVerdict::RequestChanges),
            Verdict::Abort => Some(ReviewVerdict::Abort),
            _ => None,
        }
    }

    /// The same verdict, as darang's.
    pub fn verdict(self) -> Verdict {
        match self {
            ReviewVerdict::Approve => Verdict::Approve,
            ReviewVerdict::RequestChanges => Verdict::RequestChanges,
            ReviewVerdict::Abort => Verdict::Abort,
        }
    }
}

/// One reviewer's verdict of a round, with what it found.
#[derive(Debug, Clone, PartialEq)]
pub struct Review<I, C> {
    pub reviewer: String,
    pub verdict: ReviewVerdict,
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
    pub fn verdict(&self) -> ReviewVerdict {
        match self {
            Merged::Abort { .. } => ReviewVerdict::Abort,
            Merged::RequestChanges { .. } => ReviewVerdict::RequestChanges,
            Merged::Approve => ReviewVerdict::Approve,
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
    let named = |v: ReviewVerdict| -> Vec<String> {
        sorted
            .iter()
            .filter(|r| r.verdict == v)
            .map(|r| r.reviewer.clone())
            .collect()
    };
    let aborted = named(ReviewVerdict::Abort);
    if !aborted.is_empty() {
        return Merged::Abort { by: aborted };
    }
    let asked = named(ReviewVerdict::RequestChanges);
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

fn strictness(v: ReviewVerdict) -> u8 {
    match v {
        ReviewVerdict::Approve => 0,
        ReviewVerdict::RequestChanges => 1,
        ReviewVerdict::Abort => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReviewVerdict::{Abort, Approve, RequestChanges};

    fn review(reviewer: &str, verdict: ReviewVerdict, issues: &[&str]) -> Review<String, String> {
        Review {
            reviewer: reviewer.into(),
            verdict,
            issues: issues.iter().map(|s| s.to_string()).collect(),
            failed: Vec::new(),
        }
    }

    #[test]
    fn the_rule_by_table() {
        let table: &[(&[(&str, ReviewVerdict)], ReviewVerdict)] = &[
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
