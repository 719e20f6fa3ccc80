//! A run's processes end with it: whatever a sister or the project's check starts (a
//! daemon with a double fork, `setsid`, its descriptors closed, an empty environment and
//! another name) is in the run's cgroup, and gone before the sprint moves on. Under a real
//! `serve` with `confine = "required"`, such a daemon from the implementer, the reviewer
//! and the check is dead at `done` and never commits what it waited to commit; the deploy
//! ships the reviewed commit. Where the host gives no cgroup v2 (`HANARANG_CGROUP=off`),
//! `doctor` says so, and `confine = "required"` starts nothing.

use std::path::Path;

use crate::branch::{ON_THE_BRANCH, a_repository_on_main};
use crate::crash::{Serve, cli};
use crate::fence::require_confinement;
use crate::planted_git_programs::{runs_folder, wait_for_state};
use crate::support::db::on_each_engine;
use crate::support::pipeline::{Files, Setup};
use crate::support::{alive, git};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The check fixture, run as `check.sh daemon DIR`.
fn daemon_check(files: &Files) -> std::path::PathBuf {
    let dir = files.state_dir.join("check");
    std::fs::create_dir_all(&dir).expect("the check's folder");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checks/check.sh");
    files.append_config(&format!(
        "check = [{:?}, \"daemon\", {:?}]\n",
        script.display().to_string(),
        dir.display().to_string()
    ));
    dir
}

fn pid(file: &Path) -> u32 {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .trim()
        .parse()
        .expect("a pid")
}

fn contained_here() -> bool {
    hanarang::fence::available().is_ok() && hanarang::sister::container::available().is_ok()
}

on_each_engine! {
    async fn a_daemon_of_the_implementer_the_reviewer_or_the_check_ends_with_its_run(engine) {
        if !contained_here() {
            eprintln!("no Landlock or no cgroup v2 here: nothing to test");
            return;
        }
        let files = Files::new(&Setup {
            narang: "daemon",
            darang: "daemon",
            extra: ON_THE_BRANCH,
            engine,
            ..Setup::default()
        });
        let (repo, _) = a_repository_on_main(&files);
        let check_dir = daemon_check(&files);
        require_confinement(&files);
        let _serve = Serve::start(&files, "serve.log");
        let id = cli(&files, &["sprint", "start", "Add a login page"]);
        wait_for_state(&files, &id, "done");

        // Each daemon was started, and is gone now that the sprint moved past its run.
        let daemons = [
            files.state_dir.join("daemon-narang.pid"),
            files.state_dir.join("daemon-darang.pid"),
            check_dir.join("daemon-check.pid"),
        ];
        let pids: Vec<u32> = daemons.iter().map(|f| pid(f)).collect();
        assert_eq!(alive(&pids), Vec::<u32>::new(), "daemons outlived their runs");

        // What they waited for comes; none is left to act on it.
        let head = git(&repo, &["rev-parse", "feature/sprint-001"]);
        std::fs::write(files.state_dir.join("act"), "").expect("act");
        std::fs::write(check_dir.join("act"), "").expect("act");
        std::thread::sleep(std::time::Duration::from_millis(500));
        let acted: Vec<String> = [&files.state_dir, &check_dir]
            .iter()
            .flat_map(|d| std::fs::read_dir(d).expect("a folder").flatten())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("acted-"))
            .collect();
        assert!(acted.is_empty(), "daemons acted after their runs: {acted:?}");
        assert_eq!(git(&repo, &["rev-parse", "feature/sprint-001"]), head);

        cli(&files, &["sprint", "approve", &id]);
        wait_for_state(&files, &id, "deployed");
        let tree = git(&repo, &["ls-tree", "-r", "--name-only", "feature/sprint-001"]);
        assert!(!tree.contains("BACKDOOR"), "{tree}");
        // No run's cgroup is left behind.
        let containers = hanarang::sister::container::Containers::open(&runs_folder(&files))
            .expect("cgroups here");
        let log = files.hanarang(&["sprint", "log", &id, "--json"]);
        let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log JSON");
        let left: Vec<std::path::PathBuf> = log["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["run_id"].as_str())
            .map(|run| containers.path_of(run))
            .filter(|path| path.exists())
            .collect();
        assert!(left.is_empty(), "runs' cgroups left: {left:?}");
    }
}

const NO_CGROUP: (&str, &str) = ("HANARANG_CGROUP", "off");

fn hanarang(files: &Files, args: &[&str]) -> std::process::Output {
    files
        .command(args)
        .env(NO_CGROUP.0, NO_CGROUP.1)
        .output()
        .expect("run hanarang")
}

#[test]
fn doctor_says_when_runs_cannot_be_contained_and_required_refuses_to_start() {
    let files = Files::new(&Setup::default());
    let out = hanarang(&files, &["doctor"]);
    let said = text(&out.stdout);
    assert!(
        said.contains(
            "warn containment: a run's processes are stopped by their process group only"
        ) && said.contains("Delegate=yes"),
        "{said}"
    );

    require_confinement(&files);
    let out = hanarang(&files, &["doctor"]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("FAIL containment: agent.confine = \"required\""),
        "{said}"
    );
    let out = hanarang(&files, &["run", "Add a login page", "--auto-approve"]);
    let said = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("a run's processes cannot be contained here"),
        "{said}"
    );
    let counted = std::fs::read_dir(&files.state_dir)
        .expect("the sisters' state")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".count"))
        .count();
    assert_eq!(counted, 0, "a sister ran");
}
