//! The orchestrator checks the work itself: the project's `check` runs
//! after narang's `IMPL_DONE`; a failing one sends narang back with its output, a hanging
//! one is killed with its whole group at `check_timeout` (or an abort, a shutdown, the
//! recovery after a crash), darang hears that it passed, and `sprint log` shows every
//! check. Without `check`, none runs. Check programs: `tests/fixtures/checks/check.sh`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hanarang::notify::messages::{Context, render};
use hanarang::pipeline::State;
use hanarang::sister::RunOutcome;
use hanarang::store::{CommandKind, Run};
use serde_json::json;

use hanarang::store::Store;

use crate::crash::{Serve, cli};
use crate::support::alive;
use crate::support::pipeline::{Files, PATIENCE, Pipeline, Setup, wait_for};

/// The check fixture, run as `check.sh MODE... DIR`.
fn check_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/checks/check.sh")
        .display()
        .to_string()
}

/// A pipeline whose project `app` checks with `check.sh <mode> <state dir>` (and
/// `check_timeout`), plus where the check keeps its state.
fn with_check(setup: &Setup, mode: &str, timeout: &str) -> (Files, PathBuf) {
    let files = Files::new(setup);
    let dir = files.state_dir.join("check");
    std::fs::create_dir_all(&dir).expect("the check's folder");
    let mut command = vec![check_script()];
    command.extend(mode.split(' ').map(str::to_string));
    command.push(dir.display().to_string());
    files.append_config(&format!(
        "check = {}\ncheck_timeout = \"{timeout}\"\n",
        serde_json::to_string(&command).expect("a TOML array of strings")
    ));
    (files, dir)
}

/// A sprint run to `done` on a pipeline whose check is `mode` (see `with_check`): the
/// pipeline, the check's folder, the sprint's id and its runs.
async fn sprint_to_done(mode: &str, timeout: &str) -> (Pipeline, PathBuf, String, Vec<Run>) {
    let (files, dir) = with_check(&Setup::default(), mode, timeout);
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let runs = p.runs(&s.id).await;
    (p, dir, s.id, runs)
}

/// The pids a hanging check wrote: its own and its grandchild's.
fn check_pids(dir: &Path) -> Vec<u32> {
    ["check.pid", "grandchild.pid"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(dir.join(f))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or_else(|| panic!("the check wrote no {f}"))
        })
        .collect()
}

fn narang(runs: &[Run]) -> Vec<&Run> {
    runs.iter()
        .filter(|r| r.actor.as_str() == "narang")
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_check_sends_narang_back_with_its_output_and_darang_hears_it_passed() {
    let (p, dir, id, runs) = sprint_to_done("fail-first 1", "1m").await;
    let narang = narang(&runs);
    assert_eq!(narang.len(), 2, "{runs:#?}");
    // The first IMPL_DONE did not pass the check: a failure with what a person needs.
    let failed = narang[0];
    assert_eq!(failed.outcome, Some(RunOutcome::CheckFailed), "{failed:#?}");
    let detail = failed.detail.clone().unwrap_or_default();
    let command = format!("check `{} fail-first 1 {}`", check_script(), dir.display());
    assert!(detail.starts_with(&command), "{detail}");
    assert!(detail.contains("exited with code 1"), "{detail}");
    assert!(
        detail.contains("its last line: FAILED: login::rejects_an_empty_password (run 1)"),
        "{detail}"
    );
    // The last 40 lines of its output, not more.
    assert!(detail.contains("\nrunning test 11\n"), "{detail}");
    assert!(!detail.contains("running test 10\n"), "{detail}");
    // The line the console and Discord print for the retry names the outcome, the
    // command and the failing line.
    let retry = p
        .transitions(&id)
        .await
        .into_iter()
        .find(|t| t.event == "failed:check_failed")
        .expect("a retry after check_failed");
    let sprint = p
        .store
        .sprint(&id)
        .await
        .expect("read")
        .expect("the sprint");
    let line = render(&retry, &Context::new(&p.config, &sprint)).text;
    assert!(line.contains("check_failed — check `"), "{line}");
    assert!(
        line.contains("its last line: FAILED: login::rejects_an_empty_password (run 1)"),
        "{line}"
    );
    // The check ran in the workdir, with the run's markers (recovery finds it by them).
    let log = std::fs::read_to_string(dir.join("check.log")).expect("the check ran");
    let workdir = std::fs::canonicalize(p.files.dir.path().join("app")).expect("workdir");
    assert!(
        log.contains(&format!("run 1 in {}", workdir.display())),
        "{log}"
    );
    assert!(log.contains(&format!("run id {}", failed.run_id)), "{log}");

    // The retry is told why, in a block naming its source, in its prompt and contract.
    let retry = p.files.stdin_of(&narang[1].run_id);
    let block = retry
        .split("<check-output from=\"check\">")
        .nth(1)
        .and_then(|rest| rest.split("</check-output>").next())
        .unwrap_or_else(|| panic!("no check-output block in\n{retry}"));
    assert!(
        block.contains("FAILED: login::rejects_an_empty_password (run 1)"),
        "{block}"
    );
    assert!(
        retry.contains("did not pass the project's check"),
        "{retry}"
    );
    let contract = p.files.contract_of(&narang[1].run_id);
    assert_eq!(
        contract["checkResult"]["passed"],
        json!(false),
        "{contract}"
    );
    assert_eq!(contract["checkResult"]["exitCode"], json!(1), "{contract}");
    assert_eq!(contract["checkResult"]["run"], json!(failed.run_id));
    // The first attempt was told nothing of a check that had not run yet.
    assert!(
        !p.files
            .stdin_of(&failed.run_id)
            .contains("did not pass the project's check")
    );

    // The second passed: the sprint went to review, and darang was told.
    assert_eq!(narang[1].outcome, Some(RunOutcome::Handoff));
    let darang = runs
        .iter()
        .find(|r| r.actor.as_str() == "darang")
        .expect("darang reviewed");
    let prompt = p.files.stdin_of(&darang.run_id);
    assert!(
        prompt.contains(&format!(
            "The orchestrator ran the project's check `{} fail-first 1 {}` after narang's IMPL_DONE (run {}): it passed (exit code 0) in",
            check_script(),
            dir.display(),
            narang[1].run_id
        )),
        "{prompt}"
    );
    let contract = p.files.contract_of(&darang.run_id);
    assert_eq!(contract["checkResult"]["passed"], json!(true), "{contract}");
    assert_eq!(contract["checkResult"]["exitCode"], json!(0), "{contract}");
    assert!(contract["checkResult"]["durationMs"].is_i64(), "{contract}");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_check_is_killed_with_its_group_at_check_timeout() {
    let (p, dir, _, runs) = sprint_to_done("hang-first 1", "1s").await;
    let narang = narang(&runs);
    let detail = narang[0].detail.clone().unwrap_or_default();
    assert_eq!(narang[0].outcome, Some(RunOutcome::CheckFailed), "{detail}");
    assert!(
        detail.contains("timed out after 1s (projects.app.check_timeout)"),
        "{detail}"
    );
    assert!(
        detail.contains("its last line: waiting for a server that never answers"),
        "{detail}"
    );
    // The check and the grandchild it started are gone: the whole group was killed.
    assert_eq!(alive(&check_pids(&dir)), Vec::<u32>::new(), "left behind");
    let contract = p.files.contract_of(&narang[1].run_id);
    assert_eq!(
        contract["checkResult"]["exitCode"],
        json!(null),
        "{contract}"
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_abort_while_the_check_runs_stops_it() {
    let (files, dir) = with_check(&Setup::default(), "hang-first 1", "10m");
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let pids = check_hangs(&dir).await;
    p.command(&s.id, CommandKind::Abort, Some("wrong approach"))
        .await;
    p.wait_for(&s.id, State::Aborted).await;

    assert_eq!(alive(&pids), Vec::<u32>::new(), "left behind");
    let runs = p.runs(&s.id).await;
    let narang = narang(&runs);
    assert_eq!(narang[0].outcome, Some(RunOutcome::Cancelled), "{runs:#?}");
    assert!(
        narang[0]
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("during the check")),
        "{runs:#?}"
    );
    // The check stopped is on record too, without an exit code.
    let checks = p.store.checks(&s.id).await.expect("read checks");
    assert_eq!(checks.len(), 1, "{checks:#?}");
    assert_eq!(checks[0].exit_code, None);
    p.stop().await;
}

/// Waits until the hanging check of `check.sh hang-first` has written its pids.
async fn check_hangs(dir: &Path) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !dir.join("check.pid").exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the check never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check_pids(dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shutdown_while_the_check_runs_stops_it_and_the_run_is_interrupted() {
    let (files, dir) = with_check(&Setup::default(), "hang-first 1", "10m");
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let pids = check_hangs(&dir).await;
    let store = p.store.clone();
    p.stop().await;
    assert_eq!(alive(&pids), Vec::<u32>::new(), "left behind");
    let runs = store.runs(&s.id).await.expect("runs");
    let narang = narang(&runs);
    assert_eq!(
        narang[0].outcome,
        Some(RunOutcome::Interrupted),
        "{runs:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_check_left_by_a_crashed_orchestrator_is_stopped_at_restart() {
    let (files, dir) = with_check(&Setup::default(), "hang-first 1", "10m");
    let serve = Serve::start(&files, "serve-1.log");
    let store = Store::open(&files.config().database.url)
        .await
        .expect("open");
    let id = cli(&files, &["sprint", "start", "Add a login page"]);
    let pids = check_hangs(&dir).await;
    serve.kill_9();
    assert_eq!(
        alive(&pids),
        pids,
        "the check outlives the killed orchestrator"
    );

    let _serve = Serve::start(&files, "serve-2.log");
    wait_for(&store, &id, |s| s.state == State::Done, "done").await;
    assert_eq!(
        alive(&pids),
        Vec::<u32>::new(),
        "the restart stopped the check"
    );
    let runs = store.runs(&id).await.expect("runs");
    let narang = narang(&runs);
    assert_eq!(
        narang[0].outcome,
        Some(RunOutcome::Interrupted),
        "{runs:#?}"
    );
    assert_eq!(narang[1].outcome, Some(RunOutcome::Handoff), "{runs:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sprint_log_shows_every_check() {
    let (p, dir, id, runs) = sprint_to_done("fail-first 1", "1m").await;
    let narang = narang(&runs);
    let files = p.stop().await;

    let out = files.hanarang(&["sprint", "log", &id, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let checks = log["checks"].as_array().expect("a checks array");
    assert_eq!(checks.len(), 2, "{log:#}");
    let command = json!([check_script(), "fail-first", "1", dir.display().to_string()]);
    for (check, (run, exit)) in checks.iter().zip([(narang[0], 1), (narang[1], 0)]) {
        assert_eq!(check["command"], command, "{check:#}");
        assert_eq!(check["run"], json!(run.run_id), "{check:#}");
        assert_eq!(check["exit_code"], json!(exit), "{check:#}");
        // The workdir is no git repository: no commit to name.
        assert_eq!(check["head"], json!(null), "{check:#}");
        assert!(check["duration_ms"].is_i64(), "{check:#}");
        assert!(check["at"].is_i64(), "{check:#}");
    }
    let failed_tail = checks[0]["output_tail"].as_str().unwrap_or_default();
    assert!(
        failed_tail.ends_with("FAILED: login::rejects_an_empty_password (run 1)"),
        "{failed_tail}"
    );
    assert_eq!(failed_tail.lines().count(), 40, "{failed_tail}");
    assert_eq!(
        checks[1]["output_tail"],
        json!("test result: ok. 12 passed")
    );

    let out = files.hanarang(&["sprint", "log", &id]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Checks (the project's check"), "{text}");
    assert!(text.contains("failed (exit code 1)"), "{text}");
    assert!(
        text.contains("│ FAILED: login::rejects_an_empty_password (run 1)"),
        "{text}"
    );
    assert!(text.contains("check_failed"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_check_that_cannot_start_fails_the_attempt_naming_its_key() {
    let files = Files::new(&Setup {
        max_attempts: 1,
        ..Setup::default()
    });
    files.append_config("check = [\"/nonexistent/run-tests\", \"--all\"]\n");
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;
    let runs = p.runs(&s.id).await;
    let narang = narang(&runs);
    assert_eq!(
        narang[0].outcome,
        Some(RunOutcome::CheckFailed),
        "{runs:#?}"
    );
    let detail = narang[0].detail.clone().unwrap_or_default();
    assert!(
        detail.starts_with("check `/nonexistent/run-tests --all` could not run: cannot start \"/nonexistent/run-tests\" (projects.app.check): "),
        "{detail}"
    );
    assert!(detail.ends_with("; it printed nothing"), "{detail}");
    let checks = p.store.checks(&s.id).await.expect("read checks");
    assert_eq!(checks.len(), 1, "{checks:#?}");
    assert_eq!(checks[0].exit_code, None);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_check_none_runs() {
    let p = Pipeline::start(Setup::default()).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let runs = p.runs(&s.id).await;
    assert!(
        runs.iter().all(|r| r.outcome == Some(RunOutcome::Handoff)),
        "{runs:#?}"
    );
    assert_eq!(p.store.checks(&s.id).await.expect("read checks"), vec![]);
    for run in &runs {
        let prompt = p.files.stdin_of(&run.run_id);
        assert!(!prompt.contains("ran the project's check"), "{prompt}");
        assert!(
            p.files
                .contract_of(&run.run_id)
                .get("checkResult")
                .is_none()
        );
    }
    let files = p.stop().await;
    let out = files.hanarang(&["sprint", "log", &s.id, "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(log["checks"], json!([]), "{log:#}");
}

/// A check given as a shell line (`sh -c '…'`) is shown to the sisters and to people as a
/// shell reads it back, quoted; the JSON keeps the argv.
#[tokio::test(flavor = "multi_thread")]
async fn a_check_is_shown_quoted_as_a_shell_reads_it() {
    let files = Files::new(&Setup::default());
    let command = ["sh", "-c", "echo 'it ran' && exit 0"];
    files.append_config(&format!(
        "check = {}\n",
        serde_json::to_string(&command).expect("a TOML array of strings")
    ));
    let shown = r#"sh -c 'echo '\''it ran'\'' && exit 0'"#;
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let runs = p.runs(&s.id).await;
    for run in &runs {
        let prompt = p.files.stdin_of(&run.run_id);
        if matches!(
            run.actor,
            hanarang::handoff::message::Actor::Narang | hanarang::handoff::message::Actor::Darang
        ) {
            assert!(prompt.contains(shown), "{}: {prompt}", run.run_id);
            assert!(!prompt.contains("sh -c echo"), "{prompt}");
        }
    }
    let log =
        String::from_utf8_lossy(&p.files.hanarang(&["sprint", "log", &s.id]).stdout).into_owned();
    assert!(log.contains(shown), "{log}");
    let show: serde_json::Value = serde_json::from_slice(
        &p.files
            .hanarang(&["sprint", "show", &s.id, "--json"])
            .stdout,
    )
    .expect("show JSON");
    assert_eq!(show["checks"][0]["command"], json!(command));
}
