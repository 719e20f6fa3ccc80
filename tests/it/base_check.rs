//! The project's check at the sprint's base, through the real orchestrator and scripted
//! sisters in a real git repository: run once before the planner on the untouched base,
//! its result told to the planner, the implementer and the reviewer, recorded with the
//! planner's run, reused by the next sprint from the same base, and shown against the
//! branch's own check; `check_base = false` turns it off.

use std::path::{Path, PathBuf};

use hanarang::pipeline::State;
use hanarang::sister::RunOutcome;
use hanarang::store::{CommandKind, Run};

use crate::branch::a_repository_on_main;
use crate::support::pipeline::{Files, PATIENCE, Pipeline, Setup};
use crate::support::{alive, git};

/// A check that fails until narang's `commits` mode has committed a part, printing a
/// test runner's count as cargo does; run through `sh -c`, so it is shown quoted.
const SCRIPT: &str = "ls part-*.txt >/dev/null 2>&1 && echo 'test result: ok. 5 passed; 0 failed' || { echo 'test result: FAILED. 2 passed; 3 failed'; exit 101; }";

/// Each sprint's narang names the branch its contract gives.
const NARANG_ON_ITS_BRANCH: &str = "[agent.narang.env]\nSAY_BRANCH_FROM_CONTRACT = \"1\"\n";

/// A pipeline on a repository with one commit on `main`, its project checking with
/// `SCRIPT` (plus `more` in its table): the pipeline and the base commit.
async fn a_project_failing_at_its_base(more: &str) -> (Pipeline, String) {
    let files = Files::new(&Setup {
        narang: "commits 1",
        extra: NARANG_ON_ITS_BRANCH,
        ..Setup::default()
    });
    let (_, base) = a_repository_on_main(&files);
    let check = serde_json::to_string(&["sh", "-c", SCRIPT]).expect("a TOML array");
    files.append_config(&format!("check = {check}\n{more}"));
    (Pipeline::start_with(files).await, base)
}

fn first(runs: &[Run], actor: &str) -> Run {
    runs.iter()
        .find(|r| r.actor.as_str() == actor)
        .cloned()
        .unwrap_or_else(|| panic!("no {actor} run in {runs:#?}"))
}

fn at_base(log: &serde_json::Value) -> Vec<&serde_json::Value> {
    log["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["at_base"] == true)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_check_runs_once_at_the_base_and_every_sister_but_erang_is_told_what_it_said() {
    let (p, base) = a_project_failing_at_its_base("").await;
    let short = &base[..7];
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    p.command(&s.id, CommandKind::Approve, None).await;
    p.wait_for(&s.id, State::Deployed).await;
    let runs = p.runs(&s.id).await;

    // What harang, narang and darang read: the command as a shell reads it, the commit,
    // and the check's own last lines as the check's data.
    let said = format!(
        "The project's check `sh -c '{}'` fails at the base {short}, before any work of this sprint: it exited with code 101 after",
        SCRIPT.replace('\'', "'\\''")
    );
    for actor in ["harang", "narang", "darang"] {
        let run = first(&runs, actor);
        let prompt = p.files.stdin_of(&run.run_id);
        assert!(prompt.contains(&said), "{actor}'s prompt:\n{prompt}");
        assert!(
            prompt.contains(&format!(
                "<check-output from=\"check at {short}\">test result: FAILED. 2 passed; 3 failed</check-output>"
            )),
            "{actor}'s prompt:\n{prompt}"
        );
        let contract = p.files.contract_of(&run.run_id);
        assert_eq!(contract["baseCheck"]["passed"], false, "{actor}");
        assert_eq!(contract["baseCheck"]["head"], base.as_str(), "{actor}");
        assert_eq!(contract["baseCheck"]["exitCode"], 101, "{actor}");
    }
    let erang = first(&runs, "erang");
    assert!(
        !p.files.stdin_of(&erang.run_id).contains("at the base"),
        "erang deploys what passed; the base is not its concern"
    );
    let narang = first(&runs, "narang");
    let darang = p.files.stdin_of(&first(&runs, "darang").run_id);
    assert!(
        darang.contains(&format!(
            "after narang's IMPL_DONE (run {}): it passed",
            narang.run_id
        )),
        "{darang}"
    );
    let files = p.stop().await;

    // Recorded once, with the planner's run, at the base; the branch's check after it.
    let log = files.hanarang(&["sprint", "log", &s.id, "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log --json");
    let checks = log["checks"].as_array().cloned().unwrap_or_default();
    assert_eq!(checks.len(), 2, "{log:#}");
    assert_eq!(checks[0]["at_base"], true, "{log:#}");
    assert_eq!(checks[0]["run"], first(&runs, "harang").run_id.as_str());
    assert_eq!(checks[0]["head"], base.as_str());
    assert_eq!(checks[0]["exit_code"], 101);
    assert_eq!(checks[1].get("at_base"), None, "{log:#}");
    assert_eq!(checks[1]["exit_code"], 0);
    let text = files.hanarang(&["sprint", "log", &s.id]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("at {} (the base)", &base[..12])),
        "{text}"
    );

    let show = files.hanarang(&["sprint", "show", &s.id, "--json"]);
    let show: serde_json::Value = serde_json::from_slice(&show.stdout).expect("show --json");
    assert_eq!(show["base_check"]["head"], base.as_str(), "{show:#}");
    assert_eq!(show["base_check"]["exit_code"], 101, "{show:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_later_sprint_from_the_same_base_reuses_the_check_and_a_project_may_turn_it_off() {
    let (p, base) = a_project_failing_at_its_base("").await;
    let first_sprint = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&first_sprint.id, State::Done).await;
    p.command(&first_sprint.id, CommandKind::Approve, None)
        .await;
    p.wait_for(&first_sprint.id, State::Deployed).await;
    // The next sprint starts from the same commit of main.
    let repo = crate::support::pipeline::workdir(&p.files, "app");
    assert_eq!(git(&repo, &["rev-parse", "main"]), base);
    let second = p.start_sprint("app", "Add a logout button", None).await;
    p.wait_for(&second.id, State::Done).await;
    let runs = p.runs(&second.id).await;
    let harang = p.files.stdin_of(&first(&runs, "harang").run_id);
    assert!(
        harang.contains(&format!("fails at the base {}", &base[..7])),
        "{harang}"
    );
    let files = p.stop().await;
    let log = files.hanarang(&["sprint", "log", &second.id, "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log --json");
    assert!(at_base(&log).is_empty(), "not run again: {log:#}");
    let show = files.hanarang(&["sprint", "show", &second.id]);
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.contains(&format!("at {} (the base)", &base[..7])),
        "{show}"
    );

    // Off: no check before the planner, nothing said of the base.
    let (p, _) = a_project_failing_at_its_base("check_base = false\n").await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    for run in p.runs(&s.id).await {
        let prompt = p.files.stdin_of(&run.run_id);
        assert!(!prompt.contains("at the base"), "{prompt}");
        assert!(p.files.contract_of(&run.run_id)["baseCheck"].is_null());
    }
    let files = p.stop().await;
    let log = files.hanarang(&["sprint", "log", &s.id, "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log --json");
    assert!(at_base(&log).is_empty(), "{log:#}");
    assert_eq!(log["checks"].as_array().map(Vec::len), Some(1), "{log:#}");
}

/// A pipeline on a repository whose check is `check.sh hang-first 1 DIR`: its first run
/// (the one at the base) hangs with a grandchild, later ones pass.
async fn a_project_whose_check_hangs_at_its_base(timeout: &str) -> (Pipeline, PathBuf) {
    let files = Files::new(&Setup {
        narang: "commits 1",
        extra: NARANG_ON_ITS_BRANCH,
        ..Setup::default()
    });
    a_repository_on_main(&files);
    let dir = files.state_dir.join("check");
    std::fs::create_dir_all(&dir).expect("the check's folder");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checks/check.sh");
    let check = serde_json::to_string(&[
        script.display().to_string(),
        "hang-first".into(),
        "1".into(),
        dir.display().to_string(),
    ])
    .expect("a TOML array");
    files.append_config(&format!("check = {check}\ncheck_timeout = \"{timeout}\"\n"));
    (Pipeline::start_with(files).await, dir)
}

/// The pids the hanging check wrote, once it wrote them.
async fn hanging_check(dir: &Path) -> Vec<u32> {
    let written = || -> Option<Vec<u32>> {
        ["check.pid", "grandchild.pid"]
            .iter()
            .map(|f| {
                std::fs::read_to_string(dir.join(f))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
            .collect()
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(pids) = written() {
            return pids;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the check never hung"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_check_that_hangs_at_the_base_is_killed_at_its_timeout_and_the_sprint_goes_on() {
    let (p, dir) = a_project_whose_check_hangs_at_its_base("1s").await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let pids = hanging_check(&dir).await;
    p.wait_for(&s.id, State::Done).await;
    assert_eq!(alive(&pids), Vec::<u32>::new(), "left behind");
    let runs = p.runs(&s.id).await;
    let harang = first(&runs, "harang");
    assert_eq!(harang.outcome, Some(RunOutcome::Handoff), "{runs:#?}");
    let prompt = p.files.stdin_of(&harang.run_id);
    assert!(
        prompt.contains("fails at the base")
            && prompt
                .contains(": it timed out after 1s (projects.app.check_timeout); its last lines:"),
        "{prompt}"
    );
    assert!(
        prompt.contains("waiting for a server that never answers"),
        "its output is quoted: {prompt}"
    );
    let checks = p.store.checks(&s.id).await.expect("read checks");
    assert_eq!(checks.len(), 2, "{checks:#?}");
    assert!(
        checks[0].at_base && checks[0].exit_code.is_none(),
        "{checks:#?}"
    );
    assert!(!checks[1].at_base && checks[1].passed(), "{checks:#?}");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_abort_during_the_check_at_the_base_stops_it_before_the_planner_starts() {
    let (p, dir) = a_project_whose_check_hangs_at_its_base("10m").await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let pids = hanging_check(&dir).await;
    p.command(&s.id, CommandKind::Abort, Some("wrong approach"))
        .await;
    p.wait_for(&s.id, State::Aborted).await;
    assert_eq!(alive(&pids), Vec::<u32>::new(), "left behind");
    let runs = p.runs(&s.id).await;
    let harang = first(&runs, "harang");
    assert_eq!(harang.outcome, Some(RunOutcome::Cancelled), "{runs:#?}");
    assert!(
        harang
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("during the check")
                && d.contains("at the base, before the sister started")),
        "{runs:#?}"
    );
    assert_eq!(
        p.files.stdin_of(&harang.run_id),
        "",
        "the planner never started"
    );
    // A check that did not finish says nothing of the base.
    let checks = p.store.checks(&s.id).await.expect("read checks");
    assert_eq!(checks, Vec::new());
    p.stop().await;
}

/// A check whose program does not exist: at the base it is recorded as not run and the
/// planner is told so, and the planner still plans; the implementer's check cannot run
/// either, so its tries fail as `check_failed` and the sprint waits for a person rather
/// than ever reaching review.
#[tokio::test(flavor = "multi_thread")]
async fn a_check_that_cannot_start_at_the_base_is_told_and_never_lets_work_through() {
    let files = Files::new(&Setup {
        narang: "commits 1",
        extra: NARANG_ON_ITS_BRANCH,
        ..Setup::default()
    });
    a_repository_on_main(&files);
    files.append_config("check = [\"/nonexistent/run-the-tests\"]\n");
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;
    let runs = p.runs(&s.id).await;
    let harang = first(&runs, "harang");
    assert_eq!(harang.outcome, Some(RunOutcome::Handoff), "{runs:#?}");
    let prompt = p.files.stdin_of(&harang.run_id);
    assert!(
        prompt.contains("The project's check `/nonexistent/run-the-tests` fails at the base")
            && prompt.contains(": it could not run: "),
        "{prompt}"
    );
    assert!(
        !runs.iter().any(|r| r.actor.as_str() == "darang"),
        "nothing reached review: {runs:#?}"
    );
    let checks = p.store.checks(&s.id).await.expect("read checks");
    assert!(
        checks[0].at_base && !checks[0].passed() && checks[0].exit_code.is_none(),
        "{checks:#?}"
    );
    assert!(
        checks[1..].iter().all(|c| !c.at_base && !c.passed()),
        "{checks:#?}"
    );
    p.stop().await;
}
