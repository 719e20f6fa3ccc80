//! A pipeline under test: a config written as an operator would write it, with the
//! scripted sister (`tests/fixtures/sisters/scripted.sh`) playing each role, a real SQLite
//! database, and either an in-process orchestrator or the real `hanarang` binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use hanarang::clock::now_ms;
use hanarang::config::Config;
use hanarang::handoff::message::Actor;
use hanarang::orchestrator::client::{self, Answer};
use hanarang::orchestrator::{Driver, Handle, Orchestrator};
use hanarang::pipeline::{Policy, State};
use hanarang::store::{CommandKind, Run, Sprint, Store, TransitionRecord};
use tokio::sync::oneshot;

use super::db::{Engine, TestDb};
use super::{TempDir, sister_script};

/// An upper bound for waits, so a broken pipeline fails the test instead of hanging it.
/// Nothing is asserted about how long anything takes.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// How each sister behaves (a `scripted.sh` mode) and the pipeline's limits.
pub struct Setup {
    pub harang: &'static str,
    pub narang: &'static str,
    pub darang: &'static str,
    pub erang: &'static str,
    pub projects: &'static [&'static str],
    pub max_attempts: u32,
    pub max_review_rounds: u32,
    pub max_cost_usd: Option<f64>,
    pub extra: &'static str,
    /// The database's engine (a fresh PostgreSQL database per pipeline).
    pub engine: Engine,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            harang: "ok",
            narang: "ok",
            darang: "ok",
            erang: "ok",
            projects: &["app"],
            max_attempts: 3,
            max_review_rounds: 3,
            max_cost_usd: None,
            extra: "",
            engine: Engine::Sqlite,
        }
    }
}

/// The states of a sprint whose reviewer asked for changes once, up to `done`.
pub const TWO_ROUNDS: [&str; 7] = [
    "queued",
    "planning",
    "implementing",
    "reviewing",
    "implementing",
    "reviewing",
    "done",
];

/// The files of a pipeline: config, database, project workdirs, the sisters' state.
pub struct Files {
    pub dir: TempDir,
    pub config_path: PathBuf,
    pub state_dir: PathBuf,
    /// The PostgreSQL database, dropped with the files; `None` for SQLite's file in `dir`.
    _db: Option<TestDb>,
}

impl Files {
    pub fn new(setup: &Setup) -> Files {
        let dir = TempDir::new("pipeline");
        let state_dir = dir.path().join("sisters");
        std::fs::create_dir_all(&state_dir).expect("state dir");
        let script = sister_script("scripted.sh");
        let args = |mode: &str| {
            let words: Vec<String> = mode.split(' ').map(|w| format!("{w:?}")).collect();
            format!("[{}]", words.join(", "))
        };
        let db = (setup.engine == Engine::Postgres)
            .then(|| TestDb::new_blocking(Engine::Postgres, "pipeline"));
        let url = match &db {
            Some(db) => db.url.clone(),
            None => format!("sqlite://{}", dir.path().join("hanarang.db").display()),
        };
        let mut toml = format!(
            r#"
[database]
url = "{db}"

[pipeline]
max_attempts = {max_attempts}
max_review_rounds = {max_review_rounds}
{budget}
backoff = {{ initial = "10ms", factor = 2.0, max = "50ms" }}

[agent]
program = "{script}"
kill_grace = "300ms"
env = {{ STATE_DIR = "{state}" }}

[agent.harang]
args = {harang}
[agent.narang]
args = {narang}
[agent.darang]
args = {darang}
[agent.erang]
args = {erang}
{extra}
"#,
            db = url,
            max_attempts = setup.max_attempts,
            max_review_rounds = setup.max_review_rounds,
            budget = setup
                .max_cost_usd
                .map(|c| format!("max_cost_usd = {c}"))
                .unwrap_or_default(),
            state = state_dir.display(),
            harang = args(setup.harang),
            narang = args(setup.narang),
            darang = args(setup.darang),
            erang = args(setup.erang),
            extra = setup.extra,
        );
        for project in setup.projects {
            let workdir = dir.path().join(project);
            std::fs::create_dir_all(&workdir).expect("workdir");
            toml.push_str(&format!(
                "\n[projects.{project}]\nworkdir = \"{}\"\n",
                workdir.display()
            ));
        }
        let config_path = dir.path().join("config.toml");
        std::fs::write(&config_path, toml).expect("write config");
        Files {
            dir,
            config_path,
            state_dir,
            _db: db,
        }
    }

    /// Adds TOML to the config file (a `[discord]` table, say).
    pub fn append_config(&self, text: &str) {
        let mut config = std::fs::read_to_string(&self.config_path).expect("read config");
        config.push('\n');
        config.push_str(text);
        std::fs::write(&self.config_path, config).expect("write config");
    }

    pub fn config(&self) -> Config {
        Config::load(&self.config_path).expect("the test config is valid")
    }

    /// What a run was given on stdin.
    pub fn stdin_of(&self, run_id: &str) -> String {
        std::fs::read_to_string(self.state_dir.join(format!("{run_id}.stdin"))).unwrap_or_default()
    }

    /// The contract file a run was given.
    pub fn contract_of(&self, run_id: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.state_dir.join(format!("{run_id}.contract.json")))
            .unwrap_or_default();
        serde_json::from_str(&text).unwrap_or_default()
    }

    /// Waits until the sister of `actor` hangs (in `scripted.sh`'s hang modes); its pid.
    pub async fn wait_hanging(&self, actor: Actor) -> u32 {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(pid) = self.hanging_pid(actor) {
                return pid;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{actor} never started hanging"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The pid of a sister hanging in `scripted.sh`'s hang modes.
    pub fn hanging_pid(&self, actor: Actor) -> Option<u32> {
        std::fs::read_to_string(self.state_dir.join(format!("{actor}.hanging")))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// `hanarang serve` on this pipeline's config, as [`super::serve`] starts it.
    pub fn serve(&self) -> Command {
        super::serve(Path::new(env!("CARGO_BIN_EXE_hanarang")), &self.config_path)
    }

    /// Runs the real binary with this pipeline's config.
    pub fn hanarang(&self, args: &[&str]) -> std::process::Output {
        self.command(args).output().expect("run hanarang")
    }

    /// The real binary with this pipeline's config and `args`, to be run.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hanarang"));
        command.arg("--config").arg(&self.config_path).args(args);
        command
    }
}

/// An orchestrator running in this test process.
pub struct Pipeline {
    pub files: Files,
    pub config: Arc<Config>,
    pub store: Store,
    pub handle: Handle,
    stop: Option<oneshot::Sender<()>>,
    task: Option<Driver>,
}

impl Pipeline {
    pub async fn start(setup: Setup) -> Pipeline {
        Pipeline::start_with(Files::new(&setup)).await
    }

    pub async fn start_with(files: Files) -> Pipeline {
        let config = Arc::new(files.config());
        let store = Store::open(&config.database.url)
            .await
            .expect("open the database");
        let orchestrator = Orchestrator::start(config.clone(), store.clone())
            .await
            .expect("the orchestrator starts");
        let handle = orchestrator.handle();
        let (stop, stopped) = oneshot::channel::<()>();
        // As `serve` runs it: on a thread of its own.
        let task = orchestrator.run_on_own_thread(async move {
            let _ = stopped.await;
        });
        Pipeline {
            files,
            config,
            store,
            handle,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the orchestrator (running sisters are recorded as interrupted) and returns
    /// the files, so a test can start another orchestrator on them.
    pub async fn stop(mut self) -> Files {
        self.shutdown().await;
        self.files
    }

    async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(PATIENCE, task)
                .await
                .expect("the orchestrator stops within PATIENCE")
                .expect("the orchestrator stops cleanly");
        }
    }

    pub async fn start_sprint(&self, project: &str, goal: &str, focus: Option<&str>) -> Sprint {
        let sprint = self
            .store
            .create_sprint(
                project,
                goal,
                focus,
                "cli:tester@test",
                &self.config.pipeline.branch_template,
                now_ms(),
            )
            .await
            .expect("create a sprint");
        self.handle.wake();
        sprint
    }

    pub async fn command(&self, id: &str, kind: CommandKind, text: Option<&str>) -> Answer {
        let policy = Policy::from(&self.config.pipeline);
        let request = client::Request {
            sprint_id: id,
            kind,
            text,
            by: "cli",
            seq: None,
        };
        client::submit(&self.store, &policy, request, Some(&self.handle), PATIENCE)
            .await
            .expect("the command is recorded")
    }

    pub async fn wait_for(&self, id: &str, state: State) -> Sprint {
        wait_for(&self.store, id, |s| s.state == state, &format!("{state}")).await
    }

    pub async fn transitions(&self, id: &str) -> Vec<TransitionRecord> {
        self.store.transitions(id).await.expect("read transitions")
    }

    pub async fn runs(&self, id: &str) -> Vec<Run> {
        self.store.runs(id).await.expect("read runs")
    }
}

/// Polls the database until the sprint matches; panics with its log after `PATIENCE`.
pub async fn wait_for(
    store: &Store,
    id: &str,
    done: impl Fn(&Sprint) -> bool,
    what: &str,
) -> Sprint {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Ok(Some(sprint)) = store.sprint(id).await
            && done(&sprint)
        {
            return sprint;
        }
        if tokio::time::Instant::now() > deadline {
            let sprint = store.sprint(id).await.ok().flatten();
            let log = store.transitions(id).await.unwrap_or_default();
            let runs = store.runs(id).await.unwrap_or_default();
            panic!(
                "{id} never reached {what}; it is {:?}\ntransitions: {:#?}\nruns: {:#?}",
                sprint.map(|s| s.state),
                log.iter()
                    .map(|t| format!("{} {}→{} {}", t.seq, t.from, t.to, t.event))
                    .collect::<Vec<_>>(),
                runs.iter()
                    .map(|r| format!("{} {} {:?} {:?}", r.run_id, r.actor, r.outcome, r.detail))
                    .collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The states a sprint went through, from its log.
pub fn path(log: &[TransitionRecord]) -> Vec<String> {
    let mut states: Vec<String> = log
        .first()
        .map(|t| vec![t.from.to_string()])
        .unwrap_or_default();
    states.extend(log.iter().map(|t| t.to.to_string()));
    states
}

/// The log has contiguous seqs from 1, each entry starting where the last ended.
pub fn assert_log_is_whole(log: &[TransitionRecord]) {
    for (i, t) in log.iter().enumerate() {
        assert_eq!(t.seq, i as i64 + 1, "seq gap or duplicate at {i}: {log:#?}");
        if i > 0 {
            assert_eq!(
                t.from,
                log[i - 1].to,
                "entry {} does not start where {} ended",
                t.seq,
                t.seq - 1
            );
        }
    }
}

pub fn workdir(files: &Files, project: &str) -> PathBuf {
    files.dir.path().join(project)
}
