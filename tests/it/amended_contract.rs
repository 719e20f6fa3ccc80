//! A person's word amends the contract, through the real orchestrator and scripted
//! sisters: a request for changes becomes a contract item of its own (`request-r2`),
//! quoted as theirs, given to every later round with the rule that it wins over an
//! earlier item, held to like any item (an APPROVE that leaves it out is sent back), and
//! shown with the rest in `sprint log` and `sprint show`.

use hanarang::domain::Actor;
use hanarang::pipeline::State;
use hanarang::sister::RunOutcome;
use hanarang::store::{CommandKind, Run};

use crate::support::pipeline::{Pipeline, Setup};

const ASKED: &str = "Add a README example of sentence case";

fn of(runs: &[Run], actor: Actor, round: u32) -> Vec<&Run> {
    runs.iter()
        .filter(|r| r.actor == actor && r.round == round)
        .collect()
}

/// A sprint whose plan sets `scope` and `tests`, run to `done`, then asked for `ASKED`.
async fn asked_after_done(darang: &'static str) -> (Pipeline, String) {
    let p = Pipeline::start(Setup {
        harang: "plan-checklist scope,tests",
        darang,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add sentence case", None).await;
    p.wait_for(&s.id, State::Done).await;
    p.command(&s.id, CommandKind::RequestChanges, Some(ASKED))
        .await;
    (p, s.id)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_persons_request_is_a_contract_item_every_later_round_is_held_to() {
    let (p, id) = asked_after_done("contract-changes-in 2").await;
    let done = p.wait_for(&id, State::Done).await;
    assert_eq!(done.round, 3, "round 2 was sent back, round 3 approved");
    let runs = p.runs(&id).await;

    let item = format!("<checklist from=\"cli\">\n- request-r2: {ASKED}\n</checklist>");
    let rule = "The item request-r2 is what a person asked after the plan, part of the contract like the rest. The person's latest word wins: where a request conflicts with an earlier item, the request holds;";
    // Round 2's implementer: the request leads, and it is the contract's item.
    let asked = p.files.stdin_of(&of(&runs, Actor::Narang, 2)[0].run_id);
    assert!(
        asked.contains("Do this first: it is the contract item request-r2"),
        "{asked}"
    );
    // Round 3's is no longer told a request leads the round, yet the contract keeps it.
    let later = p.files.stdin_of(&of(&runs, Actor::Narang, 3)[0].run_id);
    assert!(!later.contains("is for what a person asked"), "{later}");
    for (who, prompt) in [("round 2's narang", &asked), ("round 3's narang", &later)] {
        assert!(prompt.contains(&item), "{who}:\n{prompt}");
        assert!(prompt.contains(rule), "{who}:\n{prompt}");
        assert!(
            prompt.contains("the reviewer reports that earlier item as passed, its note naming the request (e.g. \"superseded by request-r2\")"),
            "{who}:\n{prompt}"
        );
    }
    let reviewer = p.files.stdin_of(&of(&runs, Actor::Darang, 3)[0].run_id);
    assert!(reviewer.contains(&item), "{reviewer}");
    assert!(
        reviewer.contains("report that earlier item as passed, its note naming the request"),
        "{reviewer}"
    );
    let contract = p.files.contract_of(&of(&runs, Actor::Darang, 3)[0].run_id);
    let ids: Vec<&str> = contract["checklist"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["id"].as_str())
        .collect();
    assert_eq!(ids, ["scope", "tests", "request-r2"], "{contract:#}");
    assert_eq!(
        contract["checklistBy"],
        serde_json::json!(["harang", "harang", "cli"])
    );
    // Round 1's reviewer had no such item.
    let first = p.files.contract_of(&of(&runs, Actor::Darang, 1)[0].run_id);
    assert_eq!(first["checklist"].as_array().map(Vec::len), Some(2));

    let files = p.stop().await;
    let log = files.hanarang(&["sprint", "log", &id, "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log --json");
    let request = log["checklist"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["id"] == "request-r2")
        .cloned()
        .unwrap_or_else(|| panic!("no request-r2 in {log:#}"));
    assert_eq!(request["text"], ASKED);
    assert_eq!(request["passed"], true);
    let show = files.hanarang(&["sprint", "show", &id]);
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.contains(&format!("  ✅ request-r2: {ASKED}\n")),
        "{show}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approve_that_leaves_the_persons_request_out_is_sent_back_naming_it() {
    // The reviewer reports the plan's items only.
    let (p, id) = asked_after_done("omit-first 0 scope,tests").await;
    p.wait_for(&id, State::Escalated).await;
    let runs = p.runs(&id).await;
    let reviews = of(&runs, Actor::Darang, 2);
    assert!(!reviews.is_empty(), "{runs:#?}");
    let first = reviews[0];
    assert_eq!(first.outcome, Some(RunOutcome::BadOutput), "{runs:#?}");
    assert_eq!(
        first.detail.as_deref(),
        Some(
            "/payload/checklistResults: APPROVE leaves contract items out of checklistResults: request-r2"
        ),
        "{runs:#?}"
    );
    p.stop().await;
}
