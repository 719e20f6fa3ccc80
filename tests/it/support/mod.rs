//! Shared fixtures for the integration tests: temporary folders, the fixture sisters, and
//! run requests built the way the orchestrator builds them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hanarang::config::{AgentConfig, SisterSpec};
use hanarang::handoff::HandoffDocument;
use hanarang::handoff::message::Actor;
use hanarang::handoff::schema::{self, Dialect};
use hanarang::pipeline::{Event, Facts, Policy, Transition, apply};
use hanarang::sister::{ContractFile, RunRequest};
use hanarang::store::{Commit, NewRun, RunEnd, Sprint, Store, StoreError, TransitionRecord};

// The fakes stand in for whole services: they record every field a request carried (shown
// when a test fails) and offer scenarios that no test drives at the moment.
pub mod db;
#[allow(dead_code)]
pub mod fake_discord;
#[allow(dead_code)]
pub mod fake_forge;
#[allow(dead_code)]
pub mod fake_model;
pub mod hosts;
pub mod http;
pub mod pipeline;
pub mod small_disk;

/// A fresh folder, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Under the system temp dir.
    pub fn new(label: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), label)
    }

    /// Under `root` (the benchmarks put some on tmpfs).
    pub fn new_in(root: &Path, label: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = root.join(format!(
            "hanarang-test-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `hanarang serve` on `config`, started as an operator starts it: nothing on stdin or
/// stdout; the caller says where its log (stderr) goes. `hanarang` is the binary, the
/// tests' build or the benchmarks' release one.
pub fn serve(hanarang: &Path, config: &Path) -> Command {
    let mut command = Command::new(hanarang);
    command
        .arg("--config")
        .arg(config)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    command
}

/// An `[agent]` table that selects a preset, as config.toml.example shows it.
pub fn preset(name: &str) -> String {
    format!("[agent]\npreset = \"{name}\"\n")
}

/// A fixture sister script in `tests/fixtures/sisters/`.
pub fn sister_script(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sisters")
        .join(name);
    assert!(path.exists(), "no fixture sister {name}");
    path.display().to_string()
}

/// A sister spec that runs `program` with `args`, short timeouts for tests.
pub fn spec(actor: Actor, program: &str, args: &[&str]) -> SisterSpec {
    let mut spec = AgentConfig::default().spec(actor);
    spec.program = program.to_string();
    spec.args = args.iter().map(|a| a.to_string()).collect();
    spec.timeout = Duration::from_secs(60);
    spec.kill_grace = Duration::from_millis(300);
    spec.env = BTreeMap::new();
    spec
}

/// A run request for a fixture sister, in a fresh workdir.
pub struct Fixture {
    pub dir: TempDir,
    pub request: RunRequest,
}

impl Fixture {
    pub fn new(actor: Actor, script: &str) -> Fixture {
        let dir = TempDir::new("sister");
        let workdir = dir.path().join("work");
        std::fs::create_dir_all(&workdir).expect("create workdir");
        let request = RunRequest {
            spec: spec(actor, &sister_script(script), &[]),
            contract: contract(actor, &workdir),
            contract_path: dir.path().join("runs/R1.contract.json"),
            repo: hanarang::git::Repo::new(&workdir, &Default::default()),
            workdir,
            token_env: "DISCORD_TOKEN".into(),
            role_text: None,
            check: None,
            base_check: None,
            fence: None,
            // As the orchestrator gives one where the host has cgroup v2.
            containers: hanarang::sister::container::Containers::open(&dir.path().join("runs"))
                .ok(),
            git_identity: None,
        };
        Fixture { dir, request }
    }

    pub fn env(mut self, key: &str, value: impl Into<String>) -> Fixture {
        self.request.spec.env.insert(key.into(), value.into());
        self
    }
}

pub fn contract(actor: Actor, workdir: &Path) -> ContractFile {
    ContractFile {
        sprint_id: "SPRINT-001".into(),
        goal: "Add a login page".into(),
        project: "app".into(),
        role: actor,
        round: 1,
        attempt: 1,
        branch: "feature/sprint-001".into(),
        contract_id: "C-SPRINT-001".into(),
        run_id: "R1".into(),
        workdir: workdir.display().to_string(),
        previous_message: None,
        review_issues: Vec::new(),
        handoff: HandoffDocument {
            goal: "Add a login page".into(),
            next_steps: vec!["write the plan".into()],
            ..HandoffDocument::default()
        },
        handoff_synthesized: true,
        focus: None,
        request: None,
        notes: Vec::new(),
        previous_rejection: None,
        schema: schema::schema(Some(actor), Dialect::Draft07).unwrap_or_default(),
        goal_by: None,
        focus_by: None,
        review_issues_by: Vec::new(),
        handoff_by: None,
        plan_dir: workdir.join(".plans/sprint-001").display().to_string(),
        plan_in_tree: true,
        base_branch: None,
        base_commit: None,
        head: None,
        artifact_dir: std::env::temp_dir().display().to_string(),
        checklist: Vec::new(),
        checklist_by: Vec::new(),
        check: Vec::new(),
        instructions: None,
        deploy: None,
        reviewer: None,
        check_result: None,
        base_check: None,
        forge_checks: Vec::new(),
        merged: None,
        forge: None,
    }
}

/// Live (non-zombie) processes whose pid is listed.
pub fn alive(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rfind(')').map(|i| s[i + 1..].trim_start().to_string()))
                .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
        })
        .collect()
}

/// How the CLI names its author on `host` (`[host] name`): `cli:<user>@<host>`, the user
/// this process runs as.
pub fn cli_author(host: &str) -> String {
    let user = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .expect("this process's user");
    format!("cli:{user}@{host}")
}

/// Runs git in `dir` with a fixed identity; panics when it fails. Its stdout, trimmed.
pub fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
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
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Commits `event` on `before` the way the orchestrator does: the rules' transition,
/// written with `run`'s end (and `start` recorded). Returns the sprint as the database
/// then holds it, and the log entry.
pub async fn commit_event(
    store: &Store,
    before: &Sprint,
    event: &Event,
    run: Option<&RunEnd>,
    start: Option<NewRun<'_>>,
    at: i64,
) -> Result<(Sprint, TransitionRecord), StoreError> {
    let (mut after, t) = transition_of(before, event);
    let record = store
        .commit(Commit {
            before,
            after: &after,
            transition: &t,
            event,
            run,
            command: None,
            at,
            start,
        })
        .await?;
    after.last_seq = record.seq;
    after.updated_at = at;
    Ok((after, record))
}

/// The rules' transition for `event` on `before`, and the sprint it leaves (before its
/// commit sets `last_seq`).
pub fn transition_of(before: &Sprint, event: &Event) -> (Sprint, Transition) {
    let facts = Facts::of(&before.id, false);
    let t = apply(before.position(), event, facts, &Policy::default())
        .expect("the rules accept the test's event");
    let mut after = before.clone();
    after.state = t.to.state;
    after.round = t.to.round;
    after.attempt = t.to.attempt;
    (after, t)
}

/// A sprint's first run, its planner's, as the orchestrator records it.
pub fn planner_run<'a>(sprint_id: &'a str, handoff: &'a HandoffDocument) -> NewRun<'a> {
    NewRun {
        sprint_id,
        number: 1,
        actor: Actor::Harang,
        round: 0,
        attempt: 1,
        parent_run_id: None,
        handoff,
        synthesized: true,
        focus: None,
        git_head: None,
        started_at: 3,
        reviewer: None,
        resumes: None,
        notes_upto: None,
        agent: None,
    }
}

/// Records a sprint's first run, its planner's, as the orchestrator does before a spawn.
pub async fn record_planner_run(store: &Store, sprint_id: &str) -> String {
    let handoff = HandoffDocument::default();
    store
        .start_run(planner_run(sprint_id, &handoff), 0)
        .await
        .expect("record the run")
}
