//! The sister runner against misbehaving agents: every row of the design's failure table
//! and the ways real agent CLIs go wrong. Each scenario runs a real child process and
//! checks the outcome, the detail the user sees, and that nothing of the sister's process
//! group is left alive.

use std::time::Duration;

use hanarang::handoff::message::{Actor, Verdict};
use hanarang::pipeline::{Event, Facts, Policy, State, apply};
use hanarang::sister::process::live_members;
use hanarang::sister::{RunControl, RunOutcome, RunReport, Stop, run};
use tokio::sync::oneshot;

use crate::support::pipeline::PATIENCE;
use crate::support::{Fixture, TempDir, alive, git};

async fn run_fixture(fixture: &Fixture) -> RunReport {
    let report = run(&fixture.request, RunControl::unattended()).await;
    assert_group_gone(&report);
    report
}

fn assert_group_gone(report: &RunReport) {
    if let Some(pgid) = report.pid {
        let members = live_members(pgid).unwrap_or_default();
        assert!(
            members.is_empty(),
            "processes of the sister's group still alive: {members:?}"
        );
    }
}

fn assert_outcome(report: &RunReport, outcome: RunOutcome, detail: &str) {
    assert_eq!(report.outcome, outcome, "detail: {}", report.detail);
    assert!(
        report.detail.contains(detail),
        "expected the detail to mention {detail:?}, got {:?}",
        report.detail
    );
}

#[tokio::test]
async fn a_well_behaved_sister_hands_off_a_validated_message() {
    let report = run_fixture(&Fixture::new(Actor::Harang, "valid.sh")).await;
    assert_outcome(&report, RunOutcome::Handoff, "harang PLAN_READY");
    let message = report.message.expect("a message");
    assert_eq!(message.message.claimed_sprint_id(), Some("SPRINT-001"));
    assert_eq!(report.exit_code, Some(0));
}

// --- the design's failure table -------------------------------------------------------

#[tokio::test]
async fn spawn_failure_a_missing_program() {
    let mut f = Fixture::new(Actor::Narang, "valid.sh");
    f.request.spec.program = "hanarang-no-such-agent-cli".into();
    let report = run_fixture(&f).await;
    assert_outcome(
        &report,
        RunOutcome::SpawnFailed,
        "program not found: \"hanarang-no-such-agent-cli\"",
    );
    assert_eq!(report.pid, None);
}

#[tokio::test]
async fn spawn_failure_a_file_that_is_not_executable() {
    let f = Fixture::new(Actor::Narang, "valid.sh");
    let path = f.dir.path().join("agent.sh");
    std::fs::write(&path, "#!/bin/sh\necho hi\n").unwrap();
    let mut f = f;
    f.request.spec.program = path.display().to_string();
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::SpawnFailed, "not executable");
}

#[tokio::test]
async fn spawn_failure_a_workdir_that_is_gone() {
    let mut f = Fixture::new(Actor::Narang, "valid.sh");
    f.request.workdir = f.dir.path().join("deleted");
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::SpawnFailed, "does not exist");
}

#[tokio::test]
async fn parse_failure_exit_0_with_empty_stdout() {
    let report = run_fixture(&Fixture::new(Actor::Narang, "empty_stdout.sh")).await;
    assert_outcome(&report, RunOutcome::BadOutput, "output is empty");
}

#[tokio::test]
async fn parse_failure_json_only_on_stderr() {
    let report = run_fixture(&Fixture::new(Actor::Narang, "json_on_stderr.sh")).await;
    assert_outcome(&report, RunOutcome::BadOutput, "output is empty");
    assert!(
        report.stderr_tail.contains("IMPL_DONE"),
        "stderr is kept as the sister's log"
    );
}

#[tokio::test]
async fn parse_failure_truncated_json() {
    let report = run_fixture(&Fixture::new(Actor::Harang, "truncated_json.sh")).await;
    assert_outcome(
        &report,
        RunOutcome::BadOutput,
        "not valid JSON: EOF while parsing",
    );
}

#[tokio::test]
async fn parse_failure_non_utf8_bytes() {
    let report = run_fixture(&Fixture::new(Actor::Harang, "non_utf8.sh")).await;
    assert_outcome(&report, RunOutcome::BadOutput, "not UTF-8");
}

#[tokio::test]
async fn parse_failure_two_json_objects() {
    let report = run_fixture(&Fixture::new(Actor::Harang, "two_objects.sh")).await;
    assert_outcome(&report, RunOutcome::BadOutput, "more than one JSON value");
}

#[tokio::test]
async fn parse_failure_schema_violation_names_the_path() {
    let f = Fixture::new(Actor::Narang, "error_verdict.sh");
    let mut f = f;
    // An ERROR without its reason: rewrite the fixture's answer through an envelope-free
    // inline script.
    f.request.spec.program = "/bin/sh".into();
    f.request.spec.args = vec![
        "-c".into(),
        r#"cat >/dev/null; echo '{"actor":"narang","verdict":"ERROR","errorReason":"  "}'"#.into(),
    ];
    let report = run_fixture(&f).await;
    assert_outcome(
        &report,
        RunOutcome::BadOutput,
        "/errorReason: must not be empty",
    );
    assert_eq!(report.problems.len(), 1);
}

#[tokio::test]
async fn timeout_a_hang_with_no_output() {
    let mut f = Fixture::new(Actor::Darang, "hang.sh");
    f.request.spec.timeout = Duration::from_millis(500);
    let report = run_fixture(&f).await;
    assert_outcome(
        &report,
        RunOutcome::Timeout,
        "timed out after 500ms (agent.darang.timeout)",
    );
}

#[tokio::test]
async fn odd_verdict_a_valid_message_from_the_wrong_actor_aborts_the_sprint() {
    let report = run_fixture(&Fixture::new(Actor::Narang, "wrong_actor.sh")).await;
    // The runner vouches only for the message; the state machine judges it for the state.
    assert_eq!(report.outcome, RunOutcome::Handoff);
    let message = report.message.expect("a message").message;
    assert_eq!(message.actor(), Actor::Darang);
    let event = Event::Reported {
        actor: message.actor(),
        verdict: message.verdict(),
        sprint_id: None,
        reason: None,
    };
    let at = hanarang::pipeline::Position {
        state: State::Implementing,
        round: 1,
        attempt: 1,
        resume: None,
    };
    let facts = Facts::of("SPRINT-001", false);
    let t = apply(at, &event, facts, &Policy::default()).expect("accepted as a violation");
    assert_eq!(t.to.state, State::Aborted);
}

// --- how real agents misbehave --------------------------------------------------------

#[tokio::test]
async fn two_hundred_megabytes_of_stdout_is_stopped_at_the_cap() {
    let report = run_fixture(&Fixture::new(Actor::Narang, "flood_stdout.sh")).await;
    assert_outcome(
        &report,
        RunOutcome::BadOutput,
        "output too large: more than 1048576 bytes",
    );
    assert!(report.stdout_tail.len() <= hanarang::sister::TAIL_BYTES);
}

#[tokio::test]
async fn a_fifty_megabyte_line_without_newline_is_stopped_at_the_cap() {
    let report = run_fixture(&Fixture::new(Actor::Narang, "long_line.sh")).await;
    assert_outcome(&report, RunOutcome::BadOutput, "output too large");
}

#[tokio::test]
async fn a_grandchild_daemon_that_ignores_sigterm_does_not_survive() {
    let f = Fixture::new(Actor::Erang, "daemon_ignores_term.sh");
    let pid_file = f.dir.path().join("daemon.pid");
    let f = f.env("DAEMON_PID_FILE", pid_file.display().to_string());
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::Handoff, "erang DEPLOY_DONE");
    let daemon: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(alive(&[daemon]), Vec::<u32>::new(), "the daemon was killed");
}

#[tokio::test]
async fn a_hanging_sister_with_a_daemon_is_killed_whole_on_timeout() {
    let f = Fixture::new(Actor::Narang, "hang_with_daemon.sh");
    let pid_file = f.dir.path().join("daemon.pid");
    let mut f = f.env("DAEMON_PID_FILE", pid_file.display().to_string());
    f.request.spec.timeout = Duration::from_millis(400);
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::Timeout, "timed out");
    assert_eq!(
        report.signal,
        Some(9),
        "it ignored SIGTERM, so SIGKILL ended it"
    );
    let daemon: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(alive(&[daemon]), Vec::<u32>::new());
}

#[tokio::test]
async fn exit_137_is_a_nonzero_exit_with_its_code() {
    let report = run_fixture(&Fixture::new(Actor::Narang, "exit_137.sh")).await;
    assert_outcome(&report, RunOutcome::ExitNonzero, "exited with code 137");
    assert_eq!(report.exit_code, Some(137));
}

#[tokio::test]
async fn a_sister_killed_by_a_signal_names_the_signal() {
    let report = run_fixture(&Fixture::new(Actor::Narang, "killed_by_signal.sh")).await;
    assert_outcome(&report, RunOutcome::ExitNonzero, "killed by SIGKILL");
    assert_eq!(report.signal, Some(9));
}

#[tokio::test]
async fn a_slow_but_valid_sister_is_fine() {
    let report = run_fixture(&Fixture::new(Actor::Darang, "slow_valid.sh")).await;
    assert_outcome(&report, RunOutcome::Handoff, "darang APPROVE");
}

#[tokio::test]
async fn a_chatty_stderr_is_never_a_failure_and_only_its_tail_is_kept() {
    let report = run_fixture(&Fixture::new(Actor::Harang, "chatty_stderr.sh")).await;
    assert_outcome(&report, RunOutcome::Handoff, "PLAN_READY");
    assert!(report.stderr_bytes > 5_000_000);
    assert!(report.stderr_tail.len() <= hanarang::sister::TAIL_BYTES);
    assert!(report.stderr_tail.ends_with("last log line\n"));
}

#[tokio::test]
async fn a_sister_that_never_reads_a_large_prompt_is_normal() {
    let mut f = Fixture::new(Actor::Harang, "ignores_stdin.sh");
    // Far more than a pipe holds: a blocking writer would hang the run.
    f.request.contract.goal = "x".repeat(1_000_000);
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::Handoff, "PLAN_READY");
}

#[tokio::test]
async fn an_envelope_is_opened_with_output_pointer() {
    let mut f = Fixture::new(Actor::Darang, "envelope_claude.sh");
    let without = run_fixture(&f).await;
    assert_outcome(&without, RunOutcome::BadOutput, "/actor: missing");
    f.request.spec.output_pointer = "/structured_output".into();
    let with = run_fixture(&f).await;
    assert_outcome(&with, RunOutcome::Handoff, "darang APPROVE");
}

#[tokio::test]
async fn an_error_verdict_is_a_valid_handoff_with_its_reason() {
    let report = run_fixture(&Fixture::new(Actor::Narang, "error_verdict.sh")).await;
    assert_outcome(&report, RunOutcome::Handoff, "narang ERROR");
    let message = report.message.expect("a message").message;
    assert_eq!(message.verdict(), Verdict::Error);
    assert_eq!(
        message.reason().as_deref(),
        Some("the build needs a newer compiler")
    );
}

// --- stopping a run -------------------------------------------------------------------

/// A host frozen between recording a run and starting it (SIGSTOP) may have lost the
/// sprint to another host meanwhile: past its claim, the sister is never started.
#[tokio::test]
async fn a_run_whose_claim_ran_out_before_its_start_never_starts_its_sister() {
    let f = Fixture::new(Actor::Narang, "hang_with_daemon.sh");
    let pid_file = f.dir.path().join("daemon.pid");
    let f = f.env("DAEMON_PID_FILE", pid_file.display().to_string());
    let (_stop_tx, stop) = oneshot::channel();
    let claimed_until = tokio::time::Instant::now() - Duration::from_millis(1);
    let control = RunControl {
        stop,
        start_by: Some(claimed_until),
        progress: None,
    };
    let report = run(&f.request, control).await;
    assert_eq!(report.outcome, RunOutcome::Interrupted, "{}", report.detail);
    assert!(
        report.detail.contains("claim on the sprint ran out"),
        "{}",
        report.detail
    );
    assert_eq!(report.pid, None);
    assert!(!pid_file.exists(), "the sister never ran");
}

async fn stopped(script: &str, stop_with: Stop) -> RunReport {
    let f = Fixture::new(Actor::Narang, script);
    let pid_file = f.dir.path().join("daemon.pid");
    let f = f.env("DAEMON_PID_FILE", pid_file.display().to_string());
    let (stop_tx, stop) = oneshot::channel();
    let running = tokio::spawn({
        let request = f.request.clone();
        async move {
            run(
                &request,
                RunControl {
                    stop,
                    start_by: None,
                    progress: None,
                },
            )
            .await
        }
    });
    // Stop it once it has started its daemon.
    while !pid_file.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop_tx.send(stop_with).expect("the run listens");
    let report = running.await.expect("the run ends");
    assert!(report.pid.is_some(), "it was spawned");
    assert_group_gone(&report);
    report
}

#[tokio::test]
async fn an_abort_kills_the_whole_group_and_is_cancelled_not_failed() {
    let report = stopped("hang_with_daemon.sh", Stop::Abort).await;
    assert_outcome(&report, RunOutcome::Cancelled, "abort");
    assert_eq!(
        report.outcome.failure_kind(),
        None,
        "a cancellation is not a failure"
    );
}

#[tokio::test]
async fn a_handoff_stops_the_session_as_handed_off() {
    let report = stopped("hang_with_daemon.sh", Stop::Handoff).await;
    assert_outcome(&report, RunOutcome::HandedOff, "handoff");
    assert_eq!(report.outcome.failure_kind(), None);
}

#[tokio::test]
async fn failures_are_never_cancellations() {
    for outcome in [
        RunOutcome::SpawnFailed,
        RunOutcome::ExitNonzero,
        RunOutcome::BadOutput,
        RunOutcome::Timeout,
        RunOutcome::Interrupted,
    ] {
        assert!(
            outcome.failure_kind().is_some(),
            "{outcome} counts as a failure"
        );
    }
}

// --- stall detection --------------------------------------------------------------------

#[tokio::test]
async fn a_silent_sister_is_stopped_as_stalled() {
    let mut f = Fixture::new(Actor::Narang, "silent.sh");
    f.request.spec.stall_timeout = Some(Duration::from_millis(300));
    let report = run_fixture(&f).await;
    assert_outcome(
        &report,
        RunOutcome::Timeout,
        "stalled: nothing on stdout or stderr for 300ms",
    );
}

#[tokio::test]
async fn a_sister_that_keeps_logging_is_never_stalled() {
    let mut f = Fixture::new(Actor::Narang, "steady_logger.sh");
    // Each log line comes 50 ms after the last; the whole run takes far longer than this.
    f.request.spec.stall_timeout = Some(Duration::from_millis(1000));
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::Handoff, "IMPL_DONE");
}

// --- what the sister is given ---------------------------------------------------------

#[tokio::test]
async fn inputs_reach_the_sister_unchanged_and_no_shell_runs() {
    let nasty = "--rm -rf; $(touch pwned) `touch pwned2` \"quoted\" 'single' && echo hi";
    let f = Fixture::new(Actor::Narang, "echo_inputs.sh");
    let echo = f.dir.path().join("echo");
    std::fs::create_dir_all(&echo).unwrap();
    let mut f = f
        .env("ECHO_DIR", echo.display().to_string())
        .env("EXTRA", "from [agent].env");
    f.request.spec.args = [
        "--role",
        "{role}",
        "--branch={branch}",
        "{sprint}",
        "{round}/{attempt}",
        "{contract_file}",
        "{run}",
        "{contract}",
        "{workdir}",
    ]
    .map(String::from)
    .to_vec();
    f.request.contract.branch = nasty.into();
    f.request.contract.goal = format!("goal {nasty}");
    f.request.contract.focus = Some(format!("focus {nasty}"));
    f.request.contract.round = 2;
    f.request.contract.attempt = 3;
    // Stand-in for the token: a variable this test process really has (setting one would
    // need unsafe code), named as the token variable.
    let secret = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME for tests");
    f.request.token_env = "CARGO_PKG_NAME".into();
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::Handoff, "IMPL_DONE");

    let argv = std::fs::read(echo.join("argv")).unwrap();
    let argv: Vec<String> = argv
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let workdir = f.request.workdir.display().to_string();
    let contract_file = f.request.contract_path.display().to_string();
    assert_eq!(
        argv,
        vec![
            "--role".to_string(),
            "narang".into(),
            format!("--branch={nasty}"),
            "SPRINT-001".into(),
            "2/3".into(),
            contract_file.clone(),
            "R1".into(),
            "C-SPRINT-001".into(),
            workdir.clone(),
        ]
    );
    assert!(
        !f.request.workdir.join("pwned").exists() && !f.request.workdir.join("pwned2").exists()
    );

    let stdin = std::fs::read_to_string(echo.join("stdin")).unwrap();
    assert!(
        stdin.contains(&format!(
            "Goal: <goal from=\"unknown\">goal {nasty}</goal>\n"
        )),
        "{stdin}"
    );
    assert!(
        stdin.contains("<handoff-context>\n## Goal\nAdd a login page\n"),
        "{stdin}"
    );
    assert!(
        stdin.ends_with(&format!(
            "</handoff-context>\n\nThe above is a handoff document from a previous session. Use this context to continue the work seamlessly.\n\nAdditional focus: <focus from=\"unknown\">focus {nasty}</focus>\n"
        )),
        "{stdin}"
    );

    let env = std::fs::read_to_string(echo.join("env")).unwrap();
    for line in [
        "HANARANG_SPRINT_ID=SPRINT-001",
        "HANARANG_ROLE=narang",
        "HANARANG_RUN_ID=R1",
        &format!("HANARANG_CONTRACT_FILE={contract_file}"),
        "HANARANG_ROUND=2",
        "HANARANG_ATTEMPT=3",
        "EXTRA=from [agent].env",
    ] {
        assert!(
            env.lines().any(|l| l == line),
            "{line} missing from the sister's env"
        );
    }
    let leaked: Vec<&str> = env
        .lines()
        .filter(|l| l.starts_with("CARGO_PKG_NAME=") || l.ends_with(&format!("={secret}")))
        .collect();
    assert!(
        leaked.is_empty(),
        "the token variable reached the sister: {leaked:?}"
    );

    let cwd = std::fs::read_to_string(echo.join("cwd")).unwrap();
    assert_eq!(
        cwd.trim(),
        std::fs::canonicalize(&f.request.workdir)
            .unwrap()
            .display()
            .to_string()
    );

    let contract: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(echo.join("contract.json")).unwrap())
            .unwrap();
    assert_eq!(contract["sprintId"], "SPRINT-001");
    assert_eq!(contract["goal"], format!("goal {nasty}"));
    assert_eq!(contract["role"], "narang");
    assert_eq!(contract["round"], 2);
    assert_eq!(contract["branch"], nasty);
    assert_eq!(contract["handoff"]["goal"], "Add a login page");
    assert_eq!(contract["schema"]["properties"]["actor"]["const"], "narang");
}

#[tokio::test]
async fn after_bad_output_the_next_prompt_and_contract_say_why() {
    let f = Fixture::new(Actor::Narang, "echo_inputs.sh");
    let echo = f.dir.path().join("echo");
    std::fs::create_dir_all(&echo).unwrap();
    let mut f = f.env("ECHO_DIR", echo.display().to_string());
    let reason = "/payload/branch: must not be empty";
    f.request.contract.previous_rejection = Some(reason.into());
    f.request.contract.attempt = 2;
    let report = run_fixture(&f).await;
    assert_eq!(report.outcome, RunOutcome::Handoff);
    let stdin = std::fs::read_to_string(echo.join("stdin")).unwrap();
    assert!(
        stdin.contains(&format!(
            "Your previous answer was rejected: <rejection from=\"validator\">{reason}</rejection>\n"
        )),
        "{stdin}"
    );
    let contract: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(echo.join("contract.json")).unwrap())
            .unwrap();
    assert_eq!(contract["previousRejection"], reason);
}

/// The contract file is one per sprint, rewritten in place for each run: a shorter
/// contract after a longer one must leave nothing of the old one behind.
#[tokio::test]
async fn each_run_rewrites_the_contract_file_whole() {
    let f = Fixture::new(Actor::Narang, "echo_inputs.sh");
    let echo = f.dir.path().join("echo");
    std::fs::create_dir_all(&echo).unwrap();
    let mut f = f.env("ECHO_DIR", echo.display().to_string());
    f.request.contract.focus = Some("a long focus ".repeat(2000));
    assert_eq!(run_fixture(&f).await.outcome, RunOutcome::Handoff);
    let long = std::fs::metadata(&f.request.contract_path).unwrap().len();

    f.request.contract.focus = None;
    f.request.contract.attempt = 2;
    assert_eq!(run_fixture(&f).await.outcome, RunOutcome::Handoff);
    let seen = std::fs::read_to_string(echo.join("contract.json")).unwrap();
    let contract: serde_json::Value = serde_json::from_str(&seen).expect("the whole file parses");
    assert_eq!(contract["attempt"], 2);
    assert!(
        contract.get("focus").is_none_or(serde_json::Value::is_null),
        "{contract}"
    );
    let short = std::fs::metadata(&f.request.contract_path).unwrap().len();
    assert!(
        short < long / 4,
        "cut to length: {short} bytes after {long}"
    );
}

/// What an unfenced sister could leave at its sprint's contract path for the next run —
/// a symbolic link, or a second name of a file it wants overwritten, or a FIFO nobody
/// reads — is replaced by a plain file: the file it pointed at keeps its bytes, and the
/// next run starts without waiting.
#[tokio::test]
async fn a_link_planted_at_the_contract_path_is_replaced_never_written_through() {
    for kind in ["symbolic link", "hard link", "FIFO"] {
        let f = Fixture::new(Actor::Harang, "valid.sh");
        let victim = f.dir.path().join("hanarang.toml");
        std::fs::write(&victim, "precious = true\n").unwrap();
        let path = &f.request.contract_path;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match kind {
            "symbolic link" => std::os::unix::fs::symlink(&victim, path).unwrap(),
            "hard link" => std::fs::hard_link(&victim, path).unwrap(),
            _ => nix::unistd::mkfifo(path.as_path(), nix::sys::stat::Mode::S_IRWXU).unwrap(),
        }
        // On a thread of its own: a run stuck in a system call holds its runtime too.
        let (tx, rx) = std::sync::mpsc::channel();
        let request = f.request.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let _ = tx.send(rt.block_on(run(&request, RunControl::unattended())));
        });
        let report = rx
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("the run waited at a {kind}"));
        assert_group_gone(&report);
        assert_eq!(
            report.outcome,
            RunOutcome::Handoff,
            "{kind}: {}",
            report.detail
        );
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious = true\n",
            "written through a {kind}"
        );
        let meta = std::fs::symlink_metadata(path).unwrap();
        assert!(meta.file_type().is_file(), "{kind} left in place");
        let contract: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(contract["runId"], f.request.contract.run_id, "{kind}");
    }
}

// --- facts over claims ----------------------------------------------------------------

/// A repository with `main` and `feature/login`, each one commit ahead of the root.
fn repo(workdir: &std::path::Path) -> (String, String) {
    git(workdir, &["init", "-q", "-b", "main"]);
    git(workdir, &["commit", "-q", "--allow-empty", "-m", "root"]);
    git(workdir, &["checkout", "-q", "-b", "feature/login"]);
    git(
        workdir,
        &["commit", "-q", "--allow-empty", "-m", "login form"],
    );
    let on_feature = git(workdir, &["rev-parse", "HEAD"]);
    git(workdir, &["checkout", "-q", "main"]);
    git(
        workdir,
        &["commit", "-q", "--allow-empty", "-m", "elsewhere"],
    );
    let on_main = git(workdir, &["rev-parse", "HEAD"]);
    (on_feature, on_main)
}

async fn claim(branch: &str, commit: &str) -> RunReport {
    let f = Fixture::new(Actor::Narang, "impl_claim.sh");
    let (on_feature, on_main) = repo(&f.request.workdir);
    let commit = match commit {
        "feature" => on_feature,
        "main" => on_main,
        other => other.to_string(),
    };
    let f = f.env("CLAIM_BRANCH", branch).env("CLAIM_COMMIT", commit);
    run_fixture(&f).await
}

#[tokio::test]
async fn an_impl_done_whose_claims_hold_is_accepted() {
    let report = claim("feature/login", "feature").await;
    assert_outcome(&report, RunOutcome::Handoff, "IMPL_DONE");
}

#[tokio::test]
async fn an_impl_done_on_a_branch_that_does_not_exist_is_bad_output() {
    let report = claim("feature/logn", "feature").await;
    assert_outcome(
        &report,
        RunOutcome::BadOutput,
        "branch \"feature/logn\" does not exist",
    );
}

#[tokio::test]
async fn an_impl_done_with_a_commit_that_does_not_resolve_is_bad_output() {
    let report = claim("feature/login", "deadbeefdeadbeef").await;
    assert_outcome(
        &report,
        RunOutcome::BadOutput,
        "commit deadbeefdeadbeef does not exist",
    );
}

#[tokio::test]
async fn an_impl_done_with_a_commit_not_on_its_branch_is_bad_output() {
    let report = claim("feature/login", "main").await;
    assert_outcome(
        &report,
        RunOutcome::BadOutput,
        "is not on branch \"feature/login\"",
    );
}

#[tokio::test]
async fn outside_a_git_repository_claims_are_taken_as_given() {
    let f = Fixture::new(Actor::Narang, "impl_claim.sh")
        .env("CLAIM_BRANCH", "feature/anything")
        .env("CLAIM_COMMIT", "abcdef12");
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::Handoff, "IMPL_DONE");
    let _ = TempDir::new("unused");
}

fn daemon_pid(pid_file: &std::path::Path) -> u32 {
    std::fs::read_to_string(pid_file)
        .expect("the daemon wrote its pid")
        .trim()
        .parse()
        .expect("a pid")
}

#[tokio::test]
async fn a_daemon_that_left_the_group_with_setsid_does_not_outlive_the_run() {
    let f = Fixture::new(Actor::Erang, "setsid_daemon.sh");
    let pid_file = f.dir.path().join("daemon.pid");
    let mut f = f.env("DAEMON_PID_FILE", pid_file.display().to_string());
    // A run that waited for the daemon's pipes would wait this long; it must not.
    f.request.spec.kill_grace = Duration::from_secs(120);
    let report = tokio::time::timeout(PATIENCE, run_fixture(&f))
        .await
        .expect("the run ended without waiting for the daemon's pipes");
    assert_outcome(&report, RunOutcome::Handoff, "erang DEPLOY_DONE");
    let daemon = daemon_pid(&pid_file);
    assert_eq!(alive(&[daemon]), Vec::<u32>::new(), "the daemon was killed");
}

#[tokio::test]
async fn a_stubborn_setsid_daemon_of_a_hanging_sister_is_killed_on_timeout() {
    let mut f = Fixture::new(Actor::Narang, "setsid_daemon.sh");
    f.request.spec.args = vec!["hang".into(), "stubborn".into()];
    let pid_file = f.dir.path().join("daemon.pid");
    let mut f = f.env("DAEMON_PID_FILE", pid_file.display().to_string());
    // Long enough for the daemon to start on a loaded machine before the timeout fires.
    f.request.spec.timeout = Duration::from_secs(3);
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::Timeout, "timed out");
    let daemon = daemon_pid(&pid_file);
    assert_eq!(alive(&[daemon]), Vec::<u32>::new(), "SIGKILL ended it");
}

/// A daemon with nothing of its run left on it (a double fork, `setsid`, its descriptors
/// closed, an empty environment, another name) is still in the run's container, and ends
/// with the run. Without a container, nothing finds it: what the container is for.
#[tokio::test]
async fn a_daemon_that_shed_its_group_environment_and_name_does_not_outlive_the_run() {
    let f = Fixture::new(Actor::Erang, "hiding_daemon.sh");
    if f.request.containers.is_none() {
        eprintln!("no cgroup v2 to give runs containers here: nothing to test");
        return;
    }
    let pid_file = f.dir.path().join("daemon.pid");
    let mut f = f.env("DAEMON_PID_FILE", pid_file.display().to_string());
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::Handoff, "erang DEPLOY_DONE");
    let daemon = daemon_pid(&pid_file);
    assert_eq!(
        alive(&[daemon]),
        Vec::<u32>::new(),
        "the daemon ended with the run"
    );

    std::fs::remove_file(&pid_file).expect("the pid file");
    f.request.containers = None;
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::Handoff, "erang DEPLOY_DONE");
    let daemon = daemon_pid(&pid_file);
    let survived = alive(&[daemon]);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert_eq!(
        survived,
        vec![daemon],
        "a process group alone does not hold it"
    );
}

/// Claude Code's preset, as config.toml.example ships it, on one of the envelope's shapes.
fn claude_envelope(mode: &str) -> Fixture {
    let mut f = Fixture::new(Actor::Darang, "claude_envelope.sh");
    f.request.spec.args = vec![mode.into()];
    f.request.spec.output_pointer = "/structured_output".into();
    f.request.spec.fallback_pointer = Some("/result".into());
    f.request.spec.usage = hanarang::config::UsagePointers {
        input_tokens: Some("/usage/input_tokens".into()),
        output_tokens: Some("/usage/output_tokens".into()),
        cost_usd: Some("/total_cost_usd".into()),
    };
    f
}

#[tokio::test]
async fn the_envelope_s_usage_counts_over_what_the_message_claims() {
    let report = run_fixture(&claude_envelope("structured")).await;
    assert_outcome(&report, RunOutcome::Handoff, "darang APPROVE");
    // The message says 9.99; the CLI counted 0.42.
    let claimed = report
        .message
        .as_ref()
        .unwrap()
        .message
        .common()
        .usage
        .clone();
    assert_eq!(claimed.and_then(|u| u.cost_usd), Some(9.99));
    let usage = report.usage.expect("the envelope's usage");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.cost_usd),
        (Some(1234), Some(56), Some(0.42))
    );
}

#[tokio::test]
async fn a_message_only_in_result_is_taken_from_the_fallback_pointer() {
    let report = run_fixture(&claude_envelope("text-only")).await;
    assert_outcome(&report, RunOutcome::Handoff, "darang APPROVE");
    assert!(
        report
            .detail
            .contains("(taken from /result: nothing was at /structured_output)"),
        "{}",
        report.detail
    );
    // Without the fallback, the run says where it looked and what the envelope said.
    let mut f = claude_envelope("text-only");
    f.request.spec.fallback_pointer = None;
    let report = run_fixture(&f).await;
    assert_outcome(&report, RunOutcome::BadOutput, "nothing at output_pointer");
}

#[tokio::test]
async fn a_missing_message_quotes_the_envelope_s_status() {
    let report = run_fixture(&claude_envelope("max-turns-0")).await;
    assert_outcome(
        &report,
        RunOutcome::BadOutput,
        "the envelope says subtype: error_max_turns, is_error: true",
    );
    let report = run_fixture(&claude_envelope("max-turns")).await;
    assert_outcome(
        &report,
        RunOutcome::ExitNonzero,
        "exited with code 1 (the envelope says subtype: error_max_turns, is_error: true)",
    );
    // A failed run spent too: what the CLI counted is kept for the budget.
    let usage = report.usage.expect("the envelope's usage of a failed run");
    assert_eq!(usage.cost_usd, Some(0.42));
}

/// A repository git cannot read (an agent broke its config) is no reason to take narang's
/// word: the claim is bad output saying git could not check it.
#[tokio::test]
async fn an_impl_done_in_a_repository_git_cannot_read_is_bad_output() {
    let f = Fixture::new(Actor::Narang, "impl_claim.sh");
    let (on_feature, _) = repo(&f.request.workdir);
    std::fs::write(f.request.workdir.join(".git/config"), "[core\nbroken").expect("config");
    let f = f
        .env("CLAIM_BRANCH", "feature/login")
        .env("CLAIM_COMMIT", &on_feature);
    let report = run_fixture(&f).await;
    assert_outcome(
        &report,
        RunOutcome::BadOutput,
        "git cannot read the repository",
    );
}
