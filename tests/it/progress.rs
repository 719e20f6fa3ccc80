//! No paying for rounds that change nothing: scripted sisters in a real
//! git repository, an implementer that commits nothing in round 2 and a reviewer that
//! repeats itself, each stopped by one escalation with its line, and no further run.

use hanarang::notify::messages::{Context, render};
use hanarang::pipeline::State;
use std::path::PathBuf;

use hanarang::store::{Run, Sprint, Store, TransitionRecord};

use crate::branch::{ON_THE_BRANCH, in_a_repository};
use crate::support::git;
use crate::support::pipeline::{Files, Pipeline, Setup};

/// The sprint has `n` runs in the database after its pipeline stopped.
async fn assert_runs(files: &Files, id: &str, n: usize) {
    let store = Store::open_existing(&files.config().database.url)
        .await
        .expect("the database");
    assert_eq!(
        store.runs(id).await.expect("runs").len(),
        n,
        "no run after the escalation"
    );
    store.exit().await;
}

fn count(runs: &[Run], actor: &str) -> usize {
    runs.iter().filter(|r| r.actor.as_str() == actor).count()
}

/// A sprint whose implementer runs as `narang` (on the sprint's branch in a repository)
/// and whose reviewer always asks for changes, up to its escalation: the pipeline, the
/// repository, the sprint, its runs and its last transition.
async fn escalated(
    narang: &'static str,
) -> (Pipeline, PathBuf, Sprint, Vec<Run>, TransitionRecord) {
    let (p, repo, _) = in_a_repository(Setup {
        narang,
        darang: "changes-until 9",
        extra: ON_THE_BRANCH,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let sprint = p.wait_for(&s.id, State::Escalated).await;
    let runs = p.runs(&s.id).await;
    let last = p.transitions(&s.id).await.pop().expect("the escalation");
    (p, repo, sprint, runs, last)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_implementer_that_commits_nothing_escalates_instead_of_another_review() {
    let (p, repo, sprint, runs, last) = escalated("commits 1 0").await;
    let head = git(&repo, &["rev-parse", "feature/sprint-001"]);
    assert_eq!(count(&runs, "narang"), 2, "round 1 and the empty round 2");
    assert_eq!(
        count(&runs, "darang"),
        1,
        "round 2 was never sent to review"
    );
    assert_eq!(
        (last.from, last.to, last.event.as_str(), last.round),
        (State::Implementing, State::Escalated, "narang:IMPL_DONE", 2)
    );
    let line = render(&last, &Context::new(&p.config, &sprint));
    assert!(line.mention, "the escalation pings the user");
    assert_eq!(
        line.text,
        format!(
            "🚨 SPRINT-001 라운드 2에서 바뀐 것 없음: head {}가 라운드 1와 같음 (나랑이가 커밋 없이 IMPL_DONE). 자기야 확인 필요",
            &head[..7]
        )
    );
    // Nothing runs after it: the sprint waits for a human.
    let files = p.stop().await;
    assert_runs(&files, &sprint.id, runs.len()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reviewer_that_repeats_its_findings_escalates_instead_of_another_round() {
    let (p, _, sprint, runs, last) = escalated("commits 1").await;
    assert_eq!(count(&runs, "narang"), 2);
    assert_eq!(
        count(&runs, "darang"),
        2,
        "no round 3 (max_review_rounds is 3)"
    );
    assert_eq!(
        (last.from, last.to, last.event.as_str(), last.round),
        (
            State::Reviewing,
            State::Escalated,
            "darang:REQUEST_CHANGES",
            2
        )
    );
    let mut config = (*p.config).clone();
    config.pipeline.locale = hanarang::config::Locale::En;
    let line = render(&last, &Context::new(&config, &sprint));
    assert_eq!(
        line.text,
        format!(
            "🚨 SPRINT-001: round 2's review findings are round 1's again (Darang repeated its request). {}, please take a look",
            config.nickname()
        )
    );
    let files = p.stop().await;
    assert_runs(&files, &sprint.id, runs.len()).await;
}
