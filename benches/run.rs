//! What one `hanarang run --auto-approve` costs against the physical floor of the same work
//! (issue 18, item 3): `cargo bench --bench run`. docs/benchmarks/run.md says what is
//! measured and records the numbers (its later rounds on the pages after it). It only
//! reports: nothing here asserts.
//!
//! - **run**: the real binary, `hanarang --config X run GOAL --auto-approve`, as a child
//!   process with its output to /dev/null, timed from spawn to exit. Its sisters are
//!   instant (`/bin/sh` printing its role's message), the reviewer approves at once, so a
//!   sprint is four runs; the database is SQLite on the disk the config names.
//! - **floor**: the same work with nothing around it: a process is started (this
//!   executable, re-run as `--floor-child`) that opens one SQLite connection with the
//!   store's settings (WAL, `synchronous = FULL`), spawns the same sister four times with
//!   the same environment and a prompt of the same size on stdin, reads each answer, and
//!   makes the sprint's seven fsync'd commits (`BEGIN IMMEDIATE`, one row, `COMMIT`):
//!   created, lock taken, three verdicts, approved, deployed.
//!
//! The two alternate (A B, B A, …) in one run, after a warm-up; the ratio is the median of
//! the run over the median of the floor. Target: ≤ 2.

#[allow(dead_code)] // what every benchmark prints about the machine
#[path = "common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hanarang::store::testing::Floor;

const WARMUP: usize = 5;
const ITERATIONS: usize = 40;
const TARGET: f64 = 2.0;
const FLOOR_CHILD: &str = "--floor-child";
/// The prompt the floor writes to each sister: about the size the runner renders.
const PROMPT_BYTES: usize = 4096;

/// The instant sister: prints its role's message (dash's own `printf`). The first kind
/// reads its prompt first (`cat`, a second process), the second never reads it.
const READS_PROMPT: &str = "cat >/dev/null\n";
const ANSWERS: &str = r#"s=$HANARANG_SPRINT_ID
case "$HANARANG_ROLE" in
harang) printf '{"actor":"harang","verdict":"PLAN_READY","payload":{"planDir":"plans/%s","sprintId":"%s","contractId":"C-%s"}}\n' "$s" "$s" "$s" ;;
narang) printf '{"actor":"narang","verdict":"IMPL_DONE","payload":{"branch":"feature/x","commits":[],"workdir":"."}}\n' ;;
darang) printf '{"actor":"darang","verdict":"APPROVE","payload":{"checklistResults":[{"id":"tests","passed":true}],"issues":[],"artifactPath":"review.md"}}\n' ;;
erang) printf '{"actor":"erang","verdict":"DEPLOY_DONE","payload":{"deployArtifactPath":"dist/app","projectType":"rust"}}\n' ;;
esac"#;

const ROLES: [&str; 4] = ["harang", "narang", "darang", "erang"];

/// The sister's script: `reads` its prompt or not.
fn sister(reads: bool) -> String {
    format!("{}{ANSWERS}", if reads { READS_PROMPT } else { "" })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == FLOOR_CHILD) {
        let db = PathBuf::from(&args[i + 1]);
        let workdir = PathBuf::from(&args[i + 2]);
        let sprint = &args[i + 3];
        let reads = args[i + 4] == "reads";
        floor_child(&db, &workdir, sprint, &sister(reads));
        return;
    }
    println!("{}", common::machine());
    for (reads, name) in [(true, "reads its prompt"), (false, "ignores its prompt")] {
        println!("\nsister: {name}");
        compare(reads);
    }
}

/// The run against its floor, with one kind of sister.
fn compare(reads: bool) {
    let script = sister(reads);
    let dir =
        std::env::temp_dir().join(format!("hanarang-bench-run-{}-{reads}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let workdir = dir.join("app");
    std::fs::create_dir_all(&workdir).expect("the bench's folders");
    let config = dir.join("config.toml");
    let db = dir.join("hanarang.db");
    let floor_db = dir.join("floor.db");
    std::fs::write(
        &config,
        format!(
            r#"[database]
url = "sqlite://{db}"

[agent]
program = "/bin/sh"
args = ["-c", {script}]

[projects.app]
workdir = "{workdir}"
"#,
            db = db.display(),
            script = toml_string(&script),
            workdir = workdir.display(),
        ),
    )
    .expect("write the config");
    prepare_floor(&floor_db);
    let bin = common::hanarang_binary();
    let me = std::env::current_exe().expect("this benchmark's executable");
    println!(
        "database and workdir under {} ({})",
        dir.display(),
        common::fs_type(&dir).unwrap_or_default()
    );

    let run = |n: usize| {
        let mut command = Command::new(&bin);
        command.arg("--config").arg(&config).args([
            "run",
            &format!("bench sprint {n}"),
            "--auto-approve",
        ]);
        timed(command, "hanarang run")
    };
    let floor = |n: usize| {
        let mut command = Command::new(&me);
        command
            .arg(FLOOR_CHILD)
            .arg(&floor_db)
            .arg(&workdir)
            .arg(format!("SPRINT-{n:03}"))
            .arg(if reads { "reads" } else { "ignores" });
        timed(command, "the floor's process")
    };
    let version = || {
        let mut command = Command::new(&bin);
        command.arg("--version");
        timed(command, "hanarang --version")
    };

    for n in 0..WARMUP {
        run(n);
        floor(n);
    }
    let (mut runs, mut floors, mut versions) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..ITERATIONS {
        let n = WARMUP + i;
        if i % 2 == 0 {
            runs.push(run(n));
            floors.push(floor(n));
        } else {
            floors.push(floor(n));
            runs.push(run(n));
        }
        versions.push(version());
    }
    let (run_med, floor_med) = (common::median(&runs), common::median(&floors));
    let ratio = run_med.as_secs_f64() / floor_med.as_secs_f64();
    let mut per_pair: Vec<f64> = runs
        .iter()
        .zip(&floors)
        .map(|(r, f)| r.as_secs_f64() / f.as_secs_f64())
        .collect();
    per_pair.sort_by(f64::total_cmp);
    println!(
        "{:<44}{:>12}{:>12}{:>12}",
        "per sprint (median of 40)", "median", "p10", "p90"
    );
    for (name, samples) in [
        ("hanarang run --auto-approve", &runs),
        ("floor (process, 4 spawns, 7 commits)", &floors),
        ("for reference: hanarang --version", &versions),
    ] {
        println!(
            "{name:<44}{:>12}{:>12}{:>12}",
            ms(common::median(samples)),
            ms(percentile(samples, 0.1)),
            ms(percentile(samples, 0.9)),
        );
    }
    println!(
        "ratio of medians {ratio:.2} (pairs {:.2}–{:.2})  target ≤ {TARGET}  {}",
        per_pair.first().copied().unwrap_or(0.0),
        per_pair.last().copied().unwrap_or(0.0),
        if ratio <= TARGET { "PASS" } else { "FAIL" }
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// How long `command` takes from spawn to exit, its output thrown away; it must succeed.
fn timed(mut command: Command, what: &str) -> Duration {
    let started = Instant::now();
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let took = started.elapsed();
    assert!(status.success(), "{what} failed: {status}");
    took
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string")
}

fn prepare_floor(db: &Path) {
    let rt = runtime();
    rt.block_on(async {
        let floor = Floor::open(db, false).await.expect("the floor's database");
        floor.create_log().await.expect("the floor's table");
        floor.close().await;
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The floor's process: one connection, the four spawns and the seven commits, in the
/// order the pipeline makes them.
fn floor_child(db: &Path, workdir: &Path, sprint: &str, script: &str) {
    let rt = runtime();
    rt.block_on(async {
        let floor = Floor::open(db, false).await.expect("the floor's database");
        let prompt = "p".repeat(PROMPT_BYTES);
        let mut seq = 0;
        let mut commit = async |step: &str| {
            seq += 1;
            floor.append(1, seq, step, sprint, 0).await.expect("commit");
        };
        commit("created").await;
        commit("lock_acquired").await;
        for role in ROLES {
            if role == "erang" {
                commit("approve").await;
            }
            let mut child = Command::new("/bin/sh")
                .args(["-c", script])
                .current_dir(workdir)
                .env("HANARANG_ROLE", role)
                .env("HANARANG_SPRINT_ID", sprint)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn the sister");
            let mut stdin = child.stdin.take().expect("its stdin");
            let _ = stdin.write_all(prompt.as_bytes());
            drop(stdin);
            let mut out = String::new();
            let _ = child
                .stdout
                .take()
                .expect("its stdout")
                .read_to_string(&mut out);
            assert!(child.wait().expect("wait").success());
            assert!(out.contains(&format!("\"actor\":\"{role}\"")), "{out}");
            commit(role).await;
        }
        floor.close().await;
    });
}
