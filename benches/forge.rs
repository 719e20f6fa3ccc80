//! What an idle `serve` costs with open pull requests (issue 48), measured:
//! `cargo bench --bench forge`. `PROJECTS` projects deliver through one fake GitHub (the
//! tests' `support::fake_forge`: a real git remote and the REST subset, with ETags); a
//! sprint of each goes through the real `hanarang serve` to `done`, its pull request open
//! and waiting for a person. Then, for `IDLE_FOR`, serve's CPU from `/proc/<pid>/stat` as a
//! share of one core, and the requests it made of the forge: how many GitHub would count
//! against its 5,000 an hour (a 304 is not counted), extrapolated to an hour. Targets
//! (docs/benchmarks/forge.md): under 0.2% of a core; well inside the hourly budget.

#[allow(dead_code)] // what every benchmark prints about the machine
#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)] // the benchmark uses a part of the tests' support
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::fake_forge::{Forge, Kind};
use support::pipeline::{Files, Setup};

const PROJECTS: usize = 50;
const IDLE_FOR: Duration = Duration::from_secs(120);
const TOKEN: &str = "bench-forge-token";

fn git(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// CPU time (user + system) of a process so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn states(files: &Files) -> Vec<String> {
    let out = files.hanarang(&["sprint", "status", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    all.as_array()
        .into_iter()
        .flatten()
        .map(|s| s["state"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn main() {
    println!("{}", common::machine());
    let names: Vec<&'static str> = (1..=PROJECTS)
        .map(|n| &*Box::leak(format!("p{n:02}").into_boxed_str()))
        .collect();
    let files = Files::new(&Setup {
        narang: "commits 1",
        projects: Box::leak(names.clone().into_boxed_slice()),
        extra: "[agent.narang.env]\nSAY_BRANCH_FROM_CONTRACT = \"1\"\n",
        ..Setup::default()
    });
    let seed = files.dir.path().join("seed");
    std::fs::create_dir_all(&seed).expect("the seed");
    git(&seed, &["init", "-q", "-b", "main"]);
    std::fs::write(seed.join("README.md"), "app\n").expect("readme");
    git(&seed, &["add", "README.md"]);
    git(&seed, &["commit", "-q", "-m", "root"]);
    let forge = Forge::start(Kind::GitHub, "acme", "app", TOKEN, Some(&seed));
    let token = files.dir.path().join("forge-token");
    std::fs::write(&token, TOKEN).expect("the token");
    let mut config = std::fs::read_to_string(&files.config_path).expect("config");
    for name in &names {
        let workdir = files.dir.path().join(name);
        std::fs::remove_dir_all(&workdir).expect("the empty workdir");
        git(
            files.dir.path(),
            &["clone", "-q", &seed.display().to_string(), name],
        );
        config = config.replace(
            &format!("[projects.{name}]\n"),
            &format!(
                "[projects.{name}.forge]\nkind = \"github\"\nrepo = \"acme/app\"\napi_url = {:?}\nremote = {:?}\ntoken_file = {:?}\nci = \"none\"\n\n[projects.{name}]\nbase_branch = \"main\"\n",
                forge.api_url(),
                forge.remote_url(),
                token.display().to_string()
            ),
        );
    }
    std::fs::write(&files.config_path, config).expect("config");
    let bin = common::hanarang_binary();
    let mut serve = support::serve(&bin, &files.config_path)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start serve");
    let started = Instant::now();
    for name in &names {
        let out = files.hanarang(&["sprint", "start", "Add a login page", "--project", name]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    while states(&files).iter().filter(|s| *s == "done").count() < PROJECTS {
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "{:?}",
            states(&files)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    println!(
        "{PROJECTS} sprints in done with open pull requests after {:.0} s ({} pull requests on the forge)",
        started.elapsed().as_secs_f64(),
        forge.prs().len()
    );
    // Settled: every pull request was looked at once since it was opened (its first read
    // is a whole answer; later ones are conditional), each on its own schedule from here.
    std::thread::sleep(Duration::from_secs(150));
    let pid = serve.id();
    let before = cpu(pid);
    let (asked, counted) = (forge.api_requests().len(), forge.counted_requests());
    let idle_started = Instant::now();
    std::thread::sleep(IDLE_FOR);
    let used = cpu(pid).saturating_sub(before);
    let window = idle_started.elapsed();
    let asked = forge.api_requests().len() - asked;
    let counted = forge.counted_requests() - counted;
    let per_hour = |n: usize| n as f64 * 3600.0 / window.as_secs_f64();
    println!(
        "idle {} s: serve used {} ms of CPU = {:.3}% of a core; {asked} requests to the forge ({:.0} an hour), {counted} of them counted by GitHub ({:.0} an hour of its 5,000)",
        window.as_secs(),
        used.as_millis(),
        used.as_secs_f64() / window.as_secs_f64() * 100.0,
        per_hour(asked),
        per_hour(counted),
    );
    println!(
        "busiest second: {} requests",
        forge.busiest(Duration::from_secs(1))
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX)),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = serve.wait();
}
