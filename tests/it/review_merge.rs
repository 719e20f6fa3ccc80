//! The merge of a review round's verdicts over generated rounds: the order in which the
//! reviewers answer never changes the round's verdict or what goes back to the
//! implementer, and the rule holds for every round (any ABORT aborts; else any
//! REQUEST_CHANGES asks, with every reviewer's findings; else approved).

use hanarang::domain::Verdict;
use hanarang::pipeline::review_round::{Merged, Review, merge};
use proptest::prelude::*;

type Round = Vec<Review<String, String>>;

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        Just(Verdict::Approve),
        Just(Verdict::RequestChanges),
        Just(Verdict::Abort),
    ]
}

/// A round of 1 to 5 reviewers with distinct names, each with a few findings.
fn round() -> impl Strategy<Value = Round> {
    prop::collection::btree_map(
        "[a-z]{1,6}",
        (
            verdict(),
            prop::collection::vec("[a-z ]{0,8}", 0..4),
            prop::collection::vec("[a-z]{1,4}", 0..3),
        ),
        1..6,
    )
    .prop_map(|reviewers| {
        reviewers
            .into_iter()
            .map(|(reviewer, (verdict, issues, failed))| Review {
                reviewer,
                verdict,
                issues,
                failed,
            })
            .collect()
    })
}

/// A round and the same round in another order of arrival.
fn round_and_shuffle() -> impl Strategy<Value = (Round, Round)> {
    round().prop_flat_map(|r| {
        let shuffled = Just(r.clone()).prop_shuffle();
        (Just(r), shuffled)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_order_of_arrival_never_changes_the_result((round, arrived) in round_and_shuffle()) {
        prop_assert_eq!(merge(&round), merge(&arrived));
    }

    #[test]
    fn the_rule_holds_for_every_round(round in round()) {
        let any = |v| round.iter().any(|r| r.verdict == v);
        let merged = merge(&round);
        if any(Verdict::Abort) {
            prop_assert!(matches!(merged, Merged::Abort { .. }), "{:?}", merged);
        } else if any(Verdict::RequestChanges) {
            let Merged::RequestChanges { by, issues, failed } = merged else {
                return Err(TestCaseError::fail("expected a request for changes"));
            };
            let asked: Vec<&str> = round
                .iter()
                .filter(|r| r.verdict == Verdict::RequestChanges)
                .map(|r| r.reviewer.as_str())
                .collect();
            prop_assert_eq!(by.len(), asked.len());
            // Every finding once, with the name of the reviewer that wrote it.
            for r in &round {
                let mine: Vec<&String> = issues.iter().filter(|t| t.reviewer == r.reviewer).map(|t| &t.item).collect();
                prop_assert_eq!(mine, r.issues.iter().collect::<Vec<_>>());
                let mine: Vec<&String> = failed.iter().filter(|t| t.reviewer == r.reviewer).map(|t| &t.item).collect();
                prop_assert_eq!(mine, r.failed.iter().collect::<Vec<_>>());
            }
        } else {
            prop_assert_eq!(merged, Merged::Approve);
        }
    }
}
