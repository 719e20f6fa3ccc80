//! `hanarang run` and `hanarang demo` in the foreground, as a person at a terminal sees
//! them: the sprint's lines on the console, the deploy question, and the exit codes.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support;
use crate::support::pipeline::{Files, Setup};

fn run(files: &Files, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .arg("--config")
        .arg(&files.config_path)
        .arg("run")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run hanarang run");
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().expect("hanarang run ends");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn auto_approve_runs_to_deployed_and_exits_0() {
    let files = Files::new(&Setup::default());
    let (code, out, err) = run(&files, &["Add a login page", "--auto-approve"], "");
    assert_eq!(code, 0, "{out}{err}");
    let approved = format!(
        "🚀 {} --auto-approve님 배포 승인: 이랑이가 배포 시작",
        support::cli_author(&files.config().host.name)
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "SPRINT-001 queued: Add a login page",
            "🦊 하랑이가 SPRINT-001 기획 시작",
            "⚙️ 나랑이가 구현 시작 (feature/sprint-001)",
            "🔍 다랑이가 리뷰 시작 (라운드 1)",
            "✅ SPRINT-001 완료. 배포 승인해주세요",
            approved.as_str(),
            "🎉 SPRINT-001 배포 완료",
        ]
    );
}

#[test]
fn the_terminal_is_asked_before_a_deploy() {
    let files = Files::new(&Setup::default());
    let (code, out, _) = run(&files, &["Add a login page"], "y\n");
    assert_eq!(code, 0, "{out}");
    assert!(
        // The default locale is Korean, and so is the question.
        out.contains(
            "SPRINT-001 배포할까요? [y] 배포 승인 / [n] 변경 요청 / [a] 중단 / [l] 나중에: "
        ),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "🚀 {}님 배포 승인",
            support::cli_author(&files.config().host.name)
        )),
        "{out}"
    );
    assert!(out.trim_end().ends_with("🎉 SPRINT-001 배포 완료"), "{out}");
}

#[test]
fn no_answer_leaves_the_sprint_waiting_in_done() {
    let files = Files::new(&Setup::default());
    let (code, out, _) = run(&files, &["Add a login page"], "");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("SPRINT-001 waits in done for deploy approval"),
        "{out}"
    );
    let status = files.hanarang(&["sprint", "status", "SPRINT-001", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["state"], "done");
}

#[test]
fn an_escalated_sprint_exits_3() {
    let files = Files::new(&Setup {
        narang: "fail-first 3",
        ..Setup::default()
    });
    let (code, out, _) = run(&files, &["Add a login page", "--auto-approve"], "");
    assert_eq!(code, 3, "{out}");
    assert_eq!(out.matches("⚠️ 나랑이 실패").count(), 2, "{out}");
    assert!(out.contains("🚨 SPRINT-001 구현 단계 3회 실패"), "{out}");
    assert!(out.contains("hanarang sprint resume SPRINT-001"), "{out}");
}

#[test]
fn an_aborted_sprint_exits_1() {
    let files = Files::new(&Setup {
        harang: "abort",
        ..Setup::default()
    });
    let (code, out, _) = run(&files, &["Add a login page", "--auto-approve"], "");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("🛑 SPRINT-001 중단: 하랑이가 중단 판정 — the goal contradicts the contract"),
        "{out}"
    );
}

#[test]
fn english_lines_with_locale_en() {
    let files = Files::new(&Setup::default());
    let config = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace("[pipeline]\n", "[pipeline]\nlocale = \"en\"\n");
    std::fs::write(&files.config_path, config).unwrap();
    let (code, out, _) = run(&files, &["Add a login page", "--auto-approve"], "");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("🦊 Harang starts planning SPRINT-001"),
        "{out}"
    );
    assert!(
        out.contains("✅ SPRINT-001 is done. Please approve the deploy"),
        "{out}"
    );
    assert!(out.contains("🎉 SPRINT-001 deployed"), "{out}");
}

#[test]
fn a_second_run_on_the_same_database_is_refused() {
    let files = Files::new(&Setup {
        harang: "hang",
        ..Setup::default()
    });
    let mut first = Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .arg("--config")
        .arg(&files.config_path)
        .args(["run", "first", "--auto-approve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + support::pipeline::PATIENCE;
    let sister = loop {
        if let Some(pid) = files.hanging_pid(hanarang::handoff::message::Actor::Harang) {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the first run never started planning"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let (code, _, err) = run(&files, &["second", "--auto-approve"], "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("another orchestrator already runs on this database"),
        "{err}"
    );
    // Ctrl-C (SIGTERM here) on the first stops its sister too.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = first.wait();
    assert_eq!(support::alive(&[sister]), Vec::<u32>::new());
}

#[test]
fn the_demo_runs_a_whole_sprint_with_no_config() {
    let dir = support::TempDir::new("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .arg("demo")
        .current_dir(dir.path())
        .env_remove("HANARANG_CONFIG")
        .env_remove("DISCORD_TOKEN")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "🦊 하랑이가 SPRINT-001 기획 시작",
        // Two reviewers review each round at once (issue 17).
        "🔍 다랑이 리뷰어 static 판정: REQUEST_CHANGES (라운드 1)",
        "🔍 다랑이 리뷰어 runtime 판정: APPROVE (라운드 1)",
        "🔁 리뷰 종합: 변경 요청 (static) — 나랑이가 라운드 2 구현",
        "🔍 다랑이 리뷰어 static 판정: APPROVE (라운드 2)",
        "✅ SPRINT-001 완료. 배포 승인해주세요",
        "🎉 SPRINT-001 배포 완료",
        "demo finished",
        // The project's recipe, honoured: a plan in its folder, a contract reviewed, the
        // project's check run.
        "SPRINT-001/plan/plan.md (5 lines)",
        "  contract: ✅ page · ✅ tests · ✅ docs",
        // Each round's implementation checked, named by its run.
        "  check of SPRINT-001-R02: passed, `hanarang simulate-check`",
        "  check of SPRINT-001-R05: passed, `hanarang simulate-check`",
    ] {
        assert!(stdout.contains(line), "{line:?} missing from\n{stdout}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing left in the working folder"
    );
}
