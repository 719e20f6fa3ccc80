//! The storage under the database. A disk that fills: a command prints a
//! sprint id only for a sprint the disk kept, says the disk is full otherwise, and `serve`
//! stops with the cause, leaving no sister behind and losing no transition; once there is
//! room again, everything acknowledged is there and the sprint goes on. A database that
//! cannot be reached or opened is named by its key, its password hidden.

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::Duration;

use hanarang::handoff::message::Actor;
use serde_json::Value;

use crate::reviewers::two_reviewers;
use crate::support::pipeline::{Files, PATIENCE, Setup};
use crate::support::small_disk::SmallDisk;
use crate::support::{TempDir, alive};

fn hanarang(config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("run hanarang")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}

#[test]
fn sprint_start_prints_an_id_only_for_a_sprint_the_disk_kept() {
    let Some(disk) = SmallDisk::mount("full-start", 1024) else {
        return;
    };
    let dir = TempDir::new("full-start");
    let workdir = dir.path().join("app");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let db = disk.path().join("hanarang.db");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\nurl = \"sqlite://{}\"\n[agent]\nprogram = \"/bin/true\"\n[projects.app]\nworkdir = \"{}\"\n",
            db.display(),
            workdir.display()
        ),
    )
    .expect("write the config");

    let filler = "x".repeat(30 * 1024);
    let mut printed: Vec<(String, String)> = Vec::new();
    let mut refused = 0;
    for n in 1..=30 {
        let goal = format!("filler {n} {filler}");
        let out = hanarang(&config, &["sprint", "start", &goal]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        if out.status.success() {
            assert!(
                printed.iter().all(|(id, _)| *id != stdout),
                "{stdout} was printed twice: only the first one was a sprint"
            );
            printed.push((stdout, goal));
        } else {
            assert_eq!(out.status.code(), Some(1), "start {n}: {stderr}");
            assert!(stdout.is_empty(), "a start that failed printed {stdout:?}");
            assert!(
                stderr.contains("disk full") && stderr.contains(&db.display().to_string()),
                "the failure names the database and the cause: {stderr}"
            );
            refused += 1;
        }
    }
    assert!(
        !printed.is_empty() && refused > 0,
        "the disk filled part-way ({} kept, {refused} refused)",
        printed.len()
    );

    disk.grow(16 * 1024);
    let out = hanarang(&config, &["sprint", "status", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).expect("status JSON");
    for (id, goal) in &printed {
        let sprint = listed
            .iter()
            .find(|s| s["id"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} was printed but is not in the database"));
        assert_eq!(sprint["goal"], goal.as_str());
    }
    assert_eq!(listed.len(), printed.len(), "no sprint nobody was told of");
    // With room again, the next start takes the next number.
    let out = hanarang(
        &config,
        &["sprint", "start", "after the disk had room again"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let next = format!("SPRINT-{:03}", printed.len() + 1);
    assert_eq!(text(&out.stdout), next);
}

/// Waits for `serve` to exit by itself; its exit code.
async fn exit_of(serve: &mut Child) -> Option<i32> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(status) = serve.try_wait().expect("wait for serve") {
            return status.code();
        }
        if tokio::time::Instant::now() > deadline {
            let _ = serve.kill();
            panic!("serve went on with a full disk");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn state_of(files: &Files, id: &str) -> String {
    let out = files.hanarang(&["sprint", "status", id, "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    json["state"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn serve_on_a_full_disk_stops_its_sisters_and_loses_no_transition() {
    let Some(disk) = SmallDisk::mount("full-serve", 2048) else {
        return;
    };
    // Two reviewers: one answers once `go` exists (beside the workdir), the other hangs on
    // its first run. The first's verdict is what the full disk cannot take.
    let files = Files::new(&Setup {
        extra: two_reviewers("wait-for ../go", "hang-first 1"),
        ..Setup::default()
    });
    let db = disk.path().join("hanarang.db");
    let config = std::fs::read_to_string(&files.config_path).expect("config");
    let config = config.replace(
        &format!(
            "sqlite://{}",
            files.dir.path().join("hanarang.db").display()
        ),
        &format!("sqlite://{}", db.display()),
    );
    std::fs::write(&files.config_path, config).expect("config");
    let log = files.dir.path().join("serve.log");
    let stderr = || std::fs::File::create(&log).expect("serve's log");

    let mut serve = files.serve().stderr(stderr()).spawn().expect("start serve");
    let out = files.hanarang(&["sprint", "start", "survive a full disk"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let hanging = files.wait_hanging(Actor::Darang).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !files.state_dir.join("darang-static.count").exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the static reviewer never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = files.hanarang(&["sprint", "log", "1", "--json"]);
    let before: Value = serde_json::from_slice(&before.stdout).expect("log JSON");
    let committed = before["transitions"].as_array().map_or(0, Vec::len);

    let filler = disk.fill();
    std::fs::write(files.dir.path().join("go"), "").expect("go");
    assert_eq!(
        exit_of(&mut serve).await,
        Some(1),
        "serve exits 1 on a full disk"
    );
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        said.contains("disk full") && said.contains(&db.display().to_string()),
        "serve names the database and the cause: {said}"
    );
    assert!(
        alive(&[hanging]).is_empty(),
        "the hanging reviewer was left running"
    );

    // Room again: the next start finds every transition, records the reviewers' runs as
    // interrupted, and the sprint goes on to done.
    std::fs::remove_file(&filler).expect("remove the filler");
    disk.grow(16 * 1024);
    let mut serve = files.serve().stderr(stderr()).spawn().expect("start serve");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while state_of(&files, "1") != "done" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sprint never reached done: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = nix_kill(&serve);
    let _ = serve.wait();

    let after = files.hanarang(&["sprint", "log", "1", "--json"]);
    let after: Value = serde_json::from_slice(&after.stdout).expect("log JSON");
    let transitions = after["transitions"].as_array().cloned().unwrap_or_default();
    let seqs: Vec<i64> = transitions
        .iter()
        .filter_map(|t| t["seq"].as_i64())
        .collect();
    let whole: Vec<i64> = (1..=i64::try_from(seqs.len()).unwrap_or(0)).collect();
    assert_eq!(seqs, whole, "the log is whole");
    assert!(
        seqs.len() > committed,
        "the sprint went on from where it was"
    );
    assert_eq!(
        before["transitions"]
            .as_array()
            .cloned()
            .unwrap_or_default()[..],
        transitions[..committed],
        "every transition from before the full disk is still there, unchanged"
    );
    let interrupted = after["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["actor"] == "darang" && r["outcome"] == "interrupted")
        .count();
    assert_eq!(
        interrupted, 2,
        "both reviewers' runs were cut short: {after:#}"
    );
}

/// Stops `serve` as an operator would (SIGTERM).
fn nix_kill(child: &Child) -> std::io::Result<Output> {
    Command::new("kill").arg(child.id().to_string()).output()
}

/// A config whose `database.url` is `url`, in a folder of its own.
fn config_with_database(dir: &TempDir, url: &str) -> std::path::PathBuf {
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\nurl = \"{url}\"\n[agent]\nprogram = \"/bin/true\"\n[projects.app]\nworkdir = \"{}\"\n",
            dir.path().display()
        ),
    )
    .expect("write the config");
    config
}

#[test]
fn a_database_nobody_answers_at_is_named_by_its_key_without_its_password() {
    let dir = TempDir::new("unreachable");
    // Port 1 on loopback: nothing listens there.
    let config = config_with_database(&dir, "postgres://bob:s3cret@127.0.0.1:1/hanarang");
    for args in [&["sprint", "start", "goal"][..], &["sprint", "status"][..]] {
        let out = hanarang(&config, args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "{args:?} printed {:?}",
            text(&out.stdout)
        );
        assert!(
            stderr.contains(
                "database.url: cannot connect to postgres://bob:***@127.0.0.1:1/hanarang"
            ) && stderr.contains("refused"),
            "{args:?}: the key, the URL and the cause: {stderr}"
        );
        assert!(!stderr.contains("s3cret"), "the password leaked: {stderr}");
    }
}

#[test]
fn a_database_file_that_cannot_be_created_is_named_by_its_key() {
    let dir = TempDir::new("unopenable");
    let url = format!("sqlite://{}/no/such/folder/h.db", dir.path().display());
    let config = config_with_database(&dir, &url);
    let out = hanarang(&config, &["sprint", "start", "goal"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains(&format!("database.url: cannot open {url}")),
        "{stderr}"
    );
}
