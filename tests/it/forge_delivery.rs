//! A project that delivers through its forge, driven through a real `serve` against the
//! fake forge (a real git remote with GitHub's or Forgejo's API): an approving review
//! pushes the branch and opens the pull request, its checks decide between `done` and
//! another round, an approval merges it at the head shown, and what people do on the forge
//! (a merge, a close, a push, a review) counts.

use std::path::Path;

use crate::back_door::wait_for_state;
use crate::branch::{ON_THE_BRANCH, a_repository_on_main};
use crate::crash::{Serve, cli};
use crate::fake_forge::TOKEN;
use crate::support::db::{Engine, on_each_engine};
use crate::support::fake_forge::{Forge as Fake, Kind};
use crate::support::git;
use crate::support::pipeline::{Files, PATIENCE, Setup};

const BRANCH: &str = "feature/sprint-001";

/// A pipeline on a git repository whose project delivers through a fake forge of `kind`,
/// seeded with the repository's `main`; `extra` is added to the forge's table.
fn delivering(
    engine: Engine,
    kind: Kind,
    narang: &'static str,
    extra: &str,
) -> (Files, Fake, std::path::PathBuf) {
    let files = Files::new(&Setup {
        narang,
        extra: ON_THE_BRANCH,
        engine,
        ..Setup::default()
    });
    let (repo, _) = a_repository_on_main(&files);
    let fake = Fake::start(kind, "acme", "app", TOKEN, Some(&repo));
    let token = files.dir.path().join("forge-token");
    std::fs::write(&token, format!("{TOKEN}\n")).expect("the token's file");
    files.append_config(&format!(
        "\n[projects.app.forge]\nkind = {:?}\nrepo = \"acme/app\"\napi_url = {:?}\nremote = {:?}\ntoken_file = {:?}\nmerge = \"squash\"\npoll_interval = \"100ms\"\npeople = {{ octocat = 500 }}\n{extra}\n",
        match kind {
            Kind::GitHub => "github",
            Kind::Forgejo => "forgejo",
        },
        fake.api_url(),
        fake.remote_url(),
        token.display().to_string(),
    ));
    (files, fake, repo)
}

fn wait_until(what: &str, ok: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !ok() {
        assert!(std::time::Instant::now() < deadline, "never {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn log(files: &Files, id: &str) -> serde_json::Value {
    serde_json::from_slice(&files.hanarang(&["sprint", "log", id, "--json"]).stdout)
        .expect("log JSON")
}

async fn green_ci_then_approval_merges_at_the_head_shown(engine: Engine, kind: Kind) {
    let (files, fake, repo) = delivering(engine, kind, "commits 1", "");
    let _serve = Serve::start(&files, "serve.log");
    let id = cli(&files, &["sprint", "start", "Add a login page"]);
    wait_for_state(&files, &id, "verifying");
    wait_until("a pull request was opened", || !fake.prs().is_empty());
    let head = git(&repo, &["rev-parse", BRANCH]);
    assert_eq!(
        fake.branch(BRANCH),
        Some(head.clone()),
        "the reviewed head was pushed"
    );
    let pr = fake.prs()[0].clone();
    match kind {
        Kind::GitHub => {
            fake.set_check(&head, "test", "completed", Some("success"), None);
        }
        Kind::Forgejo => {
            fake.set_status(&head, "ci/test", "success", None, None);
        }
    }
    wait_for_state(&files, &id, "done");
    let done = log(&files, &id);
    let text =
        String::from_utf8_lossy(&files.hanarang(&["sprint", "log", &id]).stdout).into_owned();
    assert!(
        text.contains("CI 통과") || text.contains("CI passed"),
        "{text}"
    );

    cli(&files, &["sprint", "approve", &id]);
    wait_for_state(&files, &id, "deployed");
    let merges = fake.merges();
    assert_eq!(merges.len(), 1, "{merges:?}");
    assert_eq!(merges[0].expected_head.as_deref(), Some(head.as_str()));
    let main = fake.branch("main").expect("main");
    let text =
        String::from_utf8_lossy(&files.hanarang(&["sprint", "log", &id]).stdout).into_owned();
    assert!(
        text.contains(&main[..7]),
        "the merge commit is named: {text}"
    );
    let _ = (pr, done);
    // No token reached the repository's config.
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    assert!(!config.contains(TOKEN));
    let _ = Path::new("");
}

on_each_engine! {
    async fn github_green_ci_then_an_approval_merges_at_the_head_shown(engine) {
        green_ci_then_approval_merges_at_the_head_shown(engine, Kind::GitHub).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn forgejo_green_ci_then_an_approval_merges_at_the_head_shown() {
    green_ci_then_approval_merges_at_the_head_shown(Engine::Sqlite, Kind::Forgejo).await;
}
