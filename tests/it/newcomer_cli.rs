//! What a newcomer meets in the first hour, through the real binary: the README's config
//! with relative paths, commands started from another folder, output into a closed pipe,
//! ids typed by hand, a failing agent that must say why, `run` waiting behind another
//! sprint, Ctrl-C, and a terminal.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::support;
use crate::support::pipeline::{Files, Setup};
use crate::support::{TempDir, sister_script};

fn hanarang() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hanarang"));
    cmd.env_remove("RUST_LOG").env_remove("HANARANG_CONFIG");
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `hanarang --config CONFIG ARGS...` started in `cwd`.
fn run_in(cwd: &Path, config: &Path, args: &[&str]) -> Output {
    hanarang()
        .current_dir(cwd)
        .arg("--config")
        .arg(config)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run hanarang")
}

/// An operator's folder: `config.toml` written with relative paths only (the database is
/// the default `sqlite://hanarang.db`), the agent program in `bin/` beside it, and the
/// project in `app/`.
fn operator_folder(agent: &str, args: &str, extra: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new("operator");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for script in [agent, "say.sh"] {
        std::fs::copy(sister_script(script), bin.join(script)).unwrap();
    }
    std::fs::create_dir_all(dir.path().join("app")).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[agent]\nprogram = \"bin/{agent}\"\nargs = {args}\nkill_grace = \"300ms\"\n{extra}\n\n[projects.app]\nworkdir = \"app\"\n"
        ),
    )
    .unwrap();
    (dir, config)
}

#[test]
fn relative_paths_are_the_config_files_and_work_from_any_folder() {
    let (dir, config) = operator_folder(
        "strict_paths.sh",
        r#"["{contract_file}", "{schema_file}", "{openai_schema_file}"]"#,
        "",
    );
    let elsewhere = TempDir::new("elsewhere");
    // From another folder, with the config named relative to it.
    let relative_config = Path::new("..").join(
        config
            .strip_prefix(dir.path().parent().unwrap())
            .expect("the config is under the temp dir"),
    );
    let out = run_in(
        elsewhere.path(),
        &relative_config,
        &["run", "Add a login page", "--auto-approve"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        dir.path().join("hanarang.db").exists(),
        "the database is beside the config"
    );
    assert!(
        !elsewhere.path().join("hanarang.db").exists(),
        "no database where the command was started"
    );
    // Another folder again: the same database, not a new empty one.
    let third = TempDir::new("third");
    let status = run_in(
        third.path(),
        &config,
        &["sprint", "status", "SPRINT-001", "--json"],
    );
    let sprint: serde_json::Value = serde_json::from_slice(&status.stdout)
        .unwrap_or_else(|_| panic!("{}{}", text(&status.stdout), text(&status.stderr)));
    assert_eq!(sprint["state"], "deployed");
    assert!(!third.path().join("hanarang.db").exists());
}

#[test]
fn commands_that_only_read_never_create_a_database() {
    let (dir, config) = operator_folder("strict_paths.sh", "[]", "");
    let db = dir.path().join("hanarang.db");
    let status = run_in(dir.path(), &config, &["sprint", "status"]);
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
    assert!(
        text(&status.stderr).contains(&format!("no database at {}", db.display())),
        "it says where it looked: {}",
        text(&status.stderr)
    );
    assert!(text(&status.stdout).contains("no sprints yet"));
    let json = run_in(dir.path(), &config, &["sprint", "status", "--json"]);
    assert_eq!(text(&json.stdout).trim(), "[]");
    for args in [
        &["sprint", "log", "1"][..],
        &["sprint", "status", "1"],
        &["sprint", "approve", "1"],
    ] {
        let out = run_in(dir.path(), &config, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains("no database at"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let doctor = run_in(dir.path(), &config, &["doctor"]);
    assert!(
        text(&doctor.stdout).contains(&db.display().to_string()),
        "doctor names the database file it checks: {}",
        text(&doctor.stdout)
    );
    assert!(!db.exists(), "no command created the database");
    // The first sprint creates it.
    let start = run_in(dir.path(), &config, &["sprint", "start", "A first goal"]);
    assert_eq!(text(&start.stdout).trim(), "SPRINT-001");
    assert!(db.exists());
}

#[test]
fn a_program_named_alone_gets_no_arguments() {
    // `echo_inputs.sh` would be handed the design's `spawn --role …` otherwise.
    let (dir, config) = operator_folder("strict_paths.sh", "[]", "");
    let config_text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("args = []\n", "");
    std::fs::write(&config, config_text).unwrap();
    let out = run_in(dir.path(), &config, &["config", "check"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(printed.contains("\nargs = []\n"), "{printed}");
    assert!(!printed.contains("--role"), "{printed}");
    let run = run_in(dir.path(), &config, &["run", "goal", "--auto-approve"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
}

/// Runs the command with its stdout a pipe whose reader has already gone.
fn into_closed_pipe(files: &Files, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    hanarang()
        .arg("--config")
        .arg(&files.config_path)
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("run hanarang")
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let files = Files::new(&Setup::default());
    for goal in ["one", "two", "three"] {
        files.hanarang(&["sprint", "start", goal]);
    }
    for args in [
        &["sprint", "status"][..],
        &["sprint", "status", "--json"],
        &["sprint", "status", "2", "--json"],
        &["sprint", "log", "1"],
        &["sprint", "log", "1", "--json"],
        &["sprint", "start", "four"],
        &["schema"],
        &["config", "check"],
        &["doctor"],
    ] {
        let out = into_closed_pipe(&files, args);
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            out.status.code() == Some(0) || args == ["doctor"],
            "{args:?} exited {:?}: {stderr}",
            out.status
        );
    }
}

#[test]
fn output_that_cannot_be_written_fails_the_command() {
    // A full disk under `> file`, unlike a closed pipe, loses output: exit 1, and said.
    let files = Files::new(&Setup::default());
    files.hanarang(&["sprint", "start", "one"]);
    for args in [&["sprint", "status"][..], &["sprint", "log", "1", "--json"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = hanarang()
            .arg("--config")
            .arg(&files.config_path)
            .args(args)
            .stdout(Stdio::from(full))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains("cannot write output"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn sprint_ids_are_taken_as_people_type_them() {
    let files = Files::new(&Setup::default());
    files.hanarang(&["sprint", "start", "Add a login page"]);
    for id in ["SPRINT-001", "sprint-001", "1", "001"] {
        let out = files.hanarang(&["sprint", "status", id, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out.stderr));
        let sprint: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(sprint["id"], "SPRINT-001", "{id}");
        let log = files.hanarang(&["sprint", "log", id]);
        assert!(text(&log.stdout).starts_with("SPRINT-001 · "), "{id}");
    }
    let abort = files.hanarang(&["sprint", "abort", "sprint-1"]);
    assert_eq!(abort.status.code(), Some(0), "{}", text(&abort.stderr));
    assert!(text(&abort.stdout).contains("SPRINT-001: recorded as command"));
}

#[test]
fn a_failing_agent_says_why_in_the_log() {
    let files = Files::new(&Setup {
        narang: "fail-first 5",
        ..Setup::default()
    });
    let run = files.hanarang(&["run", "Add a login page", "--auto-approve"]);
    assert_eq!(
        run.status.code(),
        Some(3),
        "escalated: {}",
        text(&run.stdout)
    );
    assert!(
        text(&run.stdout)
            .contains("exit_nonzero — exited with code 1: simulated failure 1. 10ms 후 다시 시도"),
        "the retry line says why, and when (a 10 ms backoff is 10ms): {}",
        text(&run.stdout)
    );
    let log = text(&files.hanarang(&["sprint", "log", "1"]).stdout);
    assert!(
        log.contains("exited with code 1: simulated failure 3"),
        "{log}"
    );
    assert!(
        log.contains(
            "│ narang run 2 (SPRINT-001-R03, round 1, attempt 2): fail-first fail-first 5"
        ),
        "the stderr tail of each failed run is shown: {log}"
    );
    assert!(log.contains("--run SPRINT-001-R02 --stderr"), "{log}");
    // One run's capture, whole and raw.
    for run in ["SPRINT-001-R02", "R02", "2"] {
        let stderr = files.hanarang(&["sprint", "log", "1", "--run", run, "--stderr"]);
        assert_eq!(
            text(&stderr.stdout),
            "narang run 1 (SPRINT-001-R02, round 1, attempt 1): fail-first fail-first 5\nsimulated failure 1\n",
            "{run}"
        );
    }
    let stdout = files.hanarang(&["sprint", "log", "1", "--run", "R01", "--stdout"]);
    assert!(text(&stdout.stdout).contains("\"PLAN_READY\""));
    let missing = files.hanarang(&["sprint", "log", "1", "--run", "R99"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("SPRINT-001 has no run SPRINT-001-R99"));
    let json = files.hanarang(&["sprint", "log", "1", "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        log["runs"][1]["stderr_tail"],
        "narang run 1 (SPRINT-001-R02, round 1, attempt 1): fail-first fail-first 5\nsimulated failure 1\n"
    );
    assert_eq!(log["runs"][1]["stdout_tail"], "");
}

#[test]
fn status_columns_line_up_and_show_a_waiting_retry() {
    let files = Files::new(&Setup {
        narang: "fail-first 1",
        extra: "",
        ..Setup::default()
    });
    // A long backoff, so the retry is still waiting when the status is read.
    let config = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace(
            r#"backoff = { initial = "10ms", factor = 2.0, max = "50ms" }"#,
            r#"backoff = { initial = "1h", factor = 2.0, max = "2h" }"#,
        );
    std::fs::write(&files.config_path, config).unwrap();
    let mut serve = spawn_serve(&files);
    files.hanarang(&["sprint", "start", "Add a login page"]);
    files.hanarang(&["sprint", "start", "Second"]);
    wait_until(|| {
        let out = files.hanarang(&["sprint", "status", "1", "--json"]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .is_ok_and(|s| s["state"] == "implementing" && s["next_run_at"].is_i64())
    });
    stop(&mut serve);
    let out = text(&files.hanarang(&["sprint", "status"]).stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("ID "), "a header: {out}");
    let column = |line: &str, word: &str| line.find(word).map(|i| line[..i].chars().count());
    for (heading, row, cell) in [
        ("STATE", 1, "implementing"),
        ("STATE", 2, "queued"),
        ("GOAL", 1, "Add a login page"),
        ("GOAL", 2, "Second"),
    ] {
        assert_eq!(column(lines[0], heading), column(lines[row], cell), "{out}");
    }
    assert!(lines[1].contains("(in 59m"), "the retry's due time: {out}");
}

#[test]
fn english_lines_name_the_user_in_english_and_count_right() {
    let files = Files::new(&Setup {
        narang: "fail-first 5",
        max_attempts: 1,
        ..Setup::default()
    });
    let config = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace("[pipeline]\n", "[pipeline]\nlocale = \"en\"\n");
    std::fs::write(&files.config_path, config).unwrap();
    let run = files.hanarang(&["run", "Add a login page", "--auto-approve"]);
    let out = text(&run.stdout);
    assert_eq!(run.status.code(), Some(3), "{out}");
    assert!(
        out.contains("🚨 SPRINT-001: implementing failed once (last: exit_nonzero"),
        "{out}"
    );
    assert!(out.contains("darling, please take a look"), "{out}");
    assert!(!out.contains("자기야"), "{out}");
}

/// A child process, killed when the test ends without having waited for it (a failed
/// assert must not leave a `serve` or a `run` behind).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn spawn_serve(files: &Files) -> Reaped {
    Reaped(
        hanarang()
            .arg("--config")
            .arg(&files.config_path)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start serve"),
    )
}

fn stop(child: &mut Reaped) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.0.wait();
}

fn wait_until(mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + support::pipeline::PATIENCE;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "gave up waiting");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `hanarang run` as a child whose stdout is read line by line.
struct Foreground {
    /// Kept open when asked for: a terminal nobody has answered yet.
    _stdin: Option<std::process::ChildStdin>,
    child: Reaped,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Foreground {
    fn start(files: &Files, args: &[&str]) -> Foreground {
        Foreground::start_with(files, args, false)
    }

    fn start_with(files: &Files, args: &[&str], open_stdin: bool) -> Foreground {
        let mut child = hanarang()
            .arg("--config")
            .arg(&files.config_path)
            .arg("run")
            .args(args)
            .stdin(if open_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start run");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Foreground {
            _stdin: child.stdin.take(),
            child: Reaped(child),
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `text`; returns it.
    fn expect(&mut self, text: &str) -> String {
        loop {
            match self.lines.recv_timeout(support::pipeline::PATIENCE) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {text:?}; saw {:#?}", self.seen),
            }
        }
    }

    /// Ctrl-C, as a terminal sends it.
    fn interrupt(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.0.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .expect("signal run");
    }

    fn exit_code(&mut self) -> Option<i32> {
        let status = self.child.0.wait().expect("run ends");
        // Whatever is left, for the caller's asserts.
        self.seen.extend(self.lines.try_iter());
        status.code()
    }
}

#[test]
fn run_says_which_sprint_it_waits_for_and_applies_its_commands() {
    let files = Files::new(&Setup::default());
    // The first sprint is left waiting in `done` ("later").
    let first = files.hanarang(&["run", "First"]);
    assert_eq!(first.status.code(), Some(1));
    assert!(
        text(&first.stdout).contains("SPRINT-001 waits in done for deploy approval. Next: `hanarang sprint approve SPRINT-001`"),
        "{}",
        text(&first.stdout)
    );
    let mut second = Foreground::start(&files, &["Second", "--auto-approve"]);
    let waiting = second.expect("SPRINT-002 waits");
    assert!(
        waiting.contains("SPRINT-001 (done) holds project app's pipeline lock")
            && waiting.contains("`hanarang sprint approve SPRINT-001`"),
        "{waiting}"
    );
    // A sprint behind it is not this run's to steer: said at once.
    let third = files.hanarang(&["sprint", "start", "Third"]);
    assert_eq!(text(&third.stdout).trim(), "SPRINT-003");
    let abort = files.hanarang(&["sprint", "abort", "3"]);
    assert_eq!(abort.status.code(), Some(4), "{}", text(&abort.stderr));
    assert!(
        text(&abort.stderr).contains("SPRINT-003 is not driven by this `hanarang run`"),
        "{}",
        text(&abort.stderr)
    );
    // Another terminal approves the first sprint: the running `run` applies it.
    let approve = files.hanarang(&["sprint", "approve", "1"]);
    assert_eq!(approve.status.code(), Some(0), "{}", text(&approve.stderr));
    assert!(text(&approve.stdout).contains("SPRINT-001: done → deploying"));
    second.expect("🦊 하랑이가 SPRINT-002 기획 시작");
    second.expect("🎉 SPRINT-002 배포 완료");
    assert_eq!(second.exit_code(), Some(0));
    let first = files.hanarang(&["sprint", "status", "1", "--json"]);
    let first: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(first["state"], "deployed");
}

#[test]
fn ctrl_c_stops_run_and_says_what_comes_next() {
    let files = Files::new(&Setup {
        narang: "hang",
        ..Setup::default()
    });
    let mut run = Foreground::start(&files, &["Add a login page", "--auto-approve"]);
    run.expect("⚙️ 나랑이가 구현 시작");
    wait_until(|| files.state_dir.join("narang.hanging").exists());
    run.interrupt();
    let stopped = run.expect("SPRINT-001 stopped");
    assert!(
        stopped.contains("it is implementing (round 1, attempt 2)")
            && stopped.contains("`hanarang serve` carries it on"),
        "{stopped}"
    );
    assert_eq!(run.exit_code(), Some(1));
}

#[test]
fn on_a_terminal_run_shows_the_running_sister() {
    let gate = TempDir::new("gate");
    let go = gate.path().join("go");
    // The implementer works until the test has seen its status line.
    let narang: &'static str = Box::leak(format!("wait-for {}", go.display()).into_boxed_str());
    let files = Files::new(&Setup {
        narang,
        ..Setup::default()
    });
    // `script` gives the command a pseudo-terminal and copies what it printed.
    let command = format!(
        "{} --config {} run 'Add a login page' --auto-approve",
        env!("CARGO_BIN_EXE_hanarang"),
        files.config_path.display()
    );
    let mut child = Reaped(
        Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("`script` (util-linux) runs the command on a pseudo-terminal"),
    );
    let mut stdout = child.0.stdout.take().expect("stdout");
    let (tx, chunks) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut screen = Vec::new();
    let status_line = "\r\x1b[K⚙️ 나랑이 구현 중 · 라운드 1 · 시도 1/3 · ";
    while !text(&screen).contains(status_line) {
        match chunks.recv_timeout(support::pipeline::PATIENCE) {
            Ok(chunk) => screen.extend(chunk),
            Err(_) => panic!("no status line: {:?}", text(&screen)),
        }
    }
    std::fs::write(&go, "").unwrap();
    let status = child.0.wait().expect("script ends");
    screen.extend(chunks.iter().flatten());
    let screen = text(&screen);
    assert_eq!(status.code(), Some(0), "{screen}");
    assert!(screen.contains("🎉 SPRINT-001 배포 완료"), "{screen}");
    // Not on a pipe: the lines alone.
    let piped = files.hanarang(&["run", "Another", "--auto-approve"]);
    assert!(
        !text(&piped.stdout).contains('\x1b'),
        "{}",
        text(&piped.stdout)
    );
}

#[test]
fn many_runs_in_a_row_never_hang_after_done() {
    // The race this guards against hit about one run in 40.
    let files = Files::new(&Setup::default());
    for n in 1..=60 {
        let mut run = Foreground::start(&files, &[&format!("goal {n}"), "--auto-approve"]);
        run.expect(&format!("🎉 SPRINT-{n:03} 배포 완료"));
        assert_eq!(run.exit_code(), Some(0), "run {n}");
    }
}

#[test]
fn a_database_where_earlier_versions_looked_is_not_silently_replaced() {
    // An upgrade: the unit's working folder holds the database the relative URL used to
    // name; the config lives elsewhere.
    let (_dir, config) = operator_folder("strict_paths.sh", "[]", "");
    let working = TempDir::new("working");
    let setup = run_in(working.path(), &config, &["sprint", "start", "x"]);
    assert!(setup.status.success(), "{}", text(&setup.stderr));
    let old = working.path().join("hanarang.db");
    std::fs::rename(config.with_file_name("hanarang.db"), &old).unwrap();
    let out = run_in(working.path(), &config, &["serve"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("but the database is at {}", old.display()))
            && stderr.contains(&format!("set url = \"sqlite://{}\"", old.display())),
        "{stderr}"
    );
    assert!(!config.with_file_name("hanarang.db").exists());
}

#[test]
fn ctrl_c_at_the_deploy_question_stops_run_and_says_what_comes_next() {
    let files = Files::new(&Setup::default());
    // Nobody answers the question: stdin stays open.
    let mut run = Foreground::start_with(&files, &["Add a login page"], true);
    run.expect("✅ SPRINT-001 완료");
    run.interrupt();
    let stopped = run.expect("SPRINT-001 stopped");
    assert!(
        stopped.contains("it is done") && stopped.contains("`hanarang sprint approve SPRINT-001`"),
        "{stopped}"
    );
    assert_eq!(run.exit_code(), Some(1));
}

#[test]
fn the_budget_counts_what_the_cli_reported_not_what_the_model_claimed() {
    let (dir, config) = operator_folder(
        "claude_envelope.sh",
        r#"["structured"]"#,
        "output_pointer = \"/structured_output\"\nfallback_pointer = \"/result\"\nusage = { input_tokens = \"/usage/input_tokens\", output_tokens = \"/usage/output_tokens\", cost_usd = \"/total_cost_usd\" }",
    );
    let run = run_in(dir.path(), &config, &["run", "goal", "--auto-approve"]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    let status = run_in(dir.path(), &config, &["sprint", "status", "1", "--json"]);
    let sprint: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    // Four runs at 0.42 as the CLI counted them (each message claimed 9.99).
    let cost = sprint["usage"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 1.68).abs() < 1e-9, "{sprint}");
    assert_eq!(sprint["usage"]["input_tokens"], 4 * 1234);
}
