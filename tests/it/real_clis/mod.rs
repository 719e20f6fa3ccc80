//! The presets of `config.toml.example` with the real agent CLIs: `@anthropic-ai/claude-code`,
//! `@openai/codex` and `openclaw` (on the Node 24 it needs), pinned and installed from the
//! npm registry by `scripts/agent-clis.sh` (under `target/agent-clis/`), each driving a
//! whole sprint through `hanarang run` against the fake model API of `support::fake_model`. The preset
//! is taken from the example file as it ships; only the environment points the CLI at
//! the loopback model, as an operator's would point it at the real one.
//!
//! Without Node.js and npm these tests fail, naming what to install.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::support::fake_model::{
    Answer, FakeModel, INPUT_TOKENS, OUTPUT_TOKENS, implemented_file,
};
use crate::support::{TempDir, git, preset};

/// A whole sprint with a real CLI takes seconds; this only keeps a broken one from
/// hanging the suite.
mod fallback;
mod notes;
mod sessions;

const PATIENCE: Duration = Duration::from_secs(480);

const KEY: &str = "sk-fake-model-key";

/// Where the project's script installed each CLI: (name, the folders to put first on
/// PATH, `:`-separated).
fn installed_clis() -> &'static [(String, String)] {
    static CLIS: OnceLock<Result<Vec<(String, String)>, String>> = OnceLock::new();
    let clis = CLIS.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/agent-clis.sh");
        let out = std::process::Command::new("bash")
            .arg(script)
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("could not run {script}: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(name, dirs)| (name.to_string(), dirs.to_string()))
            .collect())
    });
    match clis {
        Ok(clis) => clis,
        Err(why) => panic!("the real agent CLIs could not be installed:\n{why}"),
    }
}

fn cli_path(name: &str) -> String {
    installed_clis()
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, dirs)| dirs.clone())
        .unwrap_or_else(|| panic!("scripts/agent-clis.sh installs no {name}"))
}

/// Codex's own config in `codex_home` (a provider at the fake model), and the
/// environment that points Codex there.
fn codex_env(codex_home: &std::path::Path, model: &FakeModel) -> Vec<(String, String)> {
    std::fs::create_dir_all(codex_home).expect("codex home");
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_MODEL_KEY\"\n",
            model.base_url()
        ),
    )
    .expect("codex config");
    vec![
        ("CODEX_HOME".to_string(), codex_home.display().to_string()),
        ("FAKE_MODEL_KEY".to_string(), KEY.to_string()),
    ]
}

fn running_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A config with one preset, a git repository to work in, and the environment that
/// points the preset's CLI at the fake model.
struct Bench {
    dir: TempDir,
    config: PathBuf,
    workdir: PathBuf,
    env: Vec<(String, String)>,
}

impl Bench {
    fn new(preset_name: &str, cli: &str, model: &FakeModel) -> Bench {
        Bench::with(preset_name, "", cli, model)
    }

    /// A bench whose `[agent]` table has `extra` keys beside its preset.
    fn with(preset_name: &str, extra: &str, cli: &str, model: &FakeModel) -> Bench {
        // Out of the system's temporary folder, as a deployment keeps its database: where
        // /tmp holds hanarang's files, no sister may make files in /tmp itself, and
        // OpenClaw insists on its lock folder there (README "Security").
        let var_tmp = std::path::Path::new("/var/tmp");
        let root = if var_tmp.is_dir() {
            var_tmp
        } else {
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        };
        let dir = TempDir::new_in(root, &format!("real-{cli}"));
        let workdir = dir.path().join("app");
        std::fs::create_dir_all(&workdir).expect("workdir");
        git(&workdir, &["init", "-q", "-b", "main"]);
        git(&workdir, &["config", "user.name", "hanarang test"]);
        git(&workdir, &["config", "user.email", "test@example.invalid"]);
        std::fs::write(workdir.join("README.md"), "# app\n").expect("a file");
        git(&workdir, &["add", "-A"]);
        git(&workdir, &["commit", "-q", "-m", "initial"]);

        let config = dir.path().join("config.toml");
        // Codex keeps its state where CODEX_HOME says (below): the fence lets it write there.
        let extra = match cli {
            "codex" => format!(
                "{extra}writable = [{:?}]\n",
                dir.path().join("codex-home").display().to_string()
            ),
            _ => extra.to_string(),
        };
        let toml = format!(
            "[database]\nurl = \"sqlite://hanarang.db\"\n\n[pipeline]\nlocale = \"en\"\n\n{}{extra}\n\n[projects.app]\nworkdir = \"app\"\n",
            preset(preset_name)
        );
        std::fs::write(&config, toml).expect("write the config");

        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        let path = format!(
            "{}:{}",
            cli_path(cli),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut env = vec![
            ("PATH".to_string(), path),
            // The CLIs keep their state under HOME; a fresh one per test.
            ("HOME".to_string(), home.display().to_string()),
        ];
        match cli {
            "claude" => {
                env.extend(
                    [
                        ("ANTHROPIC_BASE_URL", model.base_url()),
                        ("ANTHROPIC_API_KEY", KEY.to_string()),
                        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
                        ("DISABLE_AUTOUPDATER", "1".to_string()),
                    ]
                    .map(|(k, v)| (k.to_string(), v)),
                );
                if running_as_root() {
                    // As the preset says: only inside a container, and this is one.
                    env.push(("IS_SANDBOX".to_string(), "1".to_string()));
                }
            }
            "openclaw" => {
                // The operator's own OpenClaw config: an OpenAI-compatible provider as
                // the default model, its key read from the environment.
                let dir = home.join(".openclaw");
                std::fs::create_dir_all(&dir).expect("openclaw config dir");
                std::fs::write(
                    dir.join("openclaw.json"),
                    serde_json::json!({
                        "agents": { "defaults": { "model": { "primary": "fake/fake-model" } } },
                        "models": { "mode": "merge", "providers": { "fake": {
                            "baseUrl": format!("{}/v1", model.base_url()),
                            "apiKey": "${FAKE_MODEL_KEY}",
                            "api": "openai-completions",
                            "models": [{ "id": "fake-model", "name": "Fake", "reasoning": false,
                                         "input": ["text"], "contextWindow": 128000,
                                         "maxTokens": 4096 }],
                        } } },
                    })
                    .to_string(),
                )
                .expect("openclaw config");
                env.push(("FAKE_MODEL_KEY".to_string(), KEY.to_string()));
            }
            _ => env.extend(codex_env(&dir.path().join("codex-home"), model)),
        }
        Bench {
            dir,
            config,
            workdir,
            env,
        }
    }

    /// Codex too, for a chain that falls back to it: on PATH, pointed at the fake model,
    /// its state in `~/.codex` as its preset expects.
    fn with_codex(mut self, model: &FakeModel) -> Bench {
        let home = self.dir.path().join("home");
        for (key, value) in &mut self.env {
            if key == "PATH" {
                *value = format!("{}:{value}", cli_path("codex"));
            }
        }
        self.env.extend(codex_env(&home.join(".codex"), model));
        self
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hanarang"));
        command
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .current_dir(self.dir.path())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    async fn hanarang(&self, args: &[&str]) -> std::process::Output {
        tokio::time::timeout(PATIENCE, self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("hanarang {args:?} did not finish"))
            .expect("run hanarang")
    }

    async fn json(&self, args: &[&str]) -> Value {
        let out = self.hanarang(args).await;
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "hanarang {args:?} printed no JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    async fn log(&self, sprint: &str) -> Value {
        self.json(&["sprint", "log", sprint, "--json"]).await
    }

    /// The sprint's log, or `None` while `run` has not queued it yet.
    async fn log_once_queued(&self, sprint: &str) -> Option<Value> {
        let out = self.hanarang(&["sprint", "log", sprint, "--json"]).await;
        serde_json::from_slice(&out.stdout).ok()
    }

    /// The sprint went through every stage with the real CLI, and the implementer's
    /// commit, made by the CLI's own shell tool, is on the sprint's branch.
    async fn assert_delivered(&self, sprint: &str, model: &FakeModel) -> Value {
        let log = self.log(sprint).await;
        assert_eq!(log["state"], "deployed", "{sprint}: {log:#}");
        let runs = log["runs"].as_array().expect("runs");
        for actor in hanarang::domain::Actor::ALL.map(|a| a.as_str()) {
            assert!(
                runs.iter()
                    .any(|r| r["actor"] == actor && r["outcome"] == "handoff"),
                "{actor} handed off: {log:#}"
            );
        }
        let branch = log["branch"].as_str().expect("a branch").to_string();
        let commit = runs
            .iter()
            .find(|r| r["actor"] == "narang" && r["outcome"] == "handoff")
            .and_then(|r| r["message"]["payload"]["commits"][0].as_str())
            .expect("narang named its commit")
            .to_string();
        assert_eq!(git(&self.workdir, &["rev-parse", &branch]), commit);
        let files = git(
            &self.workdir,
            &["show", "--name-only", "--format=%s", &commit],
        );
        assert!(
            files.contains(&format!("{sprint}: implement"))
                && files.contains(&implemented_file(sprint)),
            "the commit the shell tool made: {files}"
        );

        let requests = model.requests();
        let narang: Vec<Answer> = requests
            .iter()
            .filter(|r| r.actor.as_deref() == Some("narang"))
            .map(|r| r.answer)
            .collect();
        let shell = narang.iter().position(|a| *a == Answer::Shell);
        let message = narang.iter().rposition(|a| *a == Answer::Message);
        assert!(
            matches!((shell, message), (Some(s), Some(m)) if s < m),
            "the implementer used the shell tool, then answered: {narang:?}"
        );
        assert!(
            requests
                .iter()
                .filter(|r| r.actor.is_some())
                .all(|r| r.key.as_deref() == Some(KEY)),
            "every request carried the key from the environment"
        );
        log
    }
}

fn run_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "hanarang run: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `hanarang run --auto-approve` of one sprint with the preset; the model and the log.
async fn deliver(preset_name: &str, cli: &str) -> (FakeModel, Value) {
    let model = FakeModel::start().await;
    let bench = Bench::new(preset_name, cli, &model);
    let out = bench
        .hanarang(&["run", "add a greeting file", "--auto-approve"])
        .await;
    run_ok(&out);
    let log = bench.assert_delivered("SPRINT-001", &model).await;
    (model, log)
}

/// The implementer's run kept its last step from the CLI's event stream: the shell
/// command it ran, with the tokens counted so far.
fn assert_step_recorded(log: &Value) {
    let narang = log["runs"]
        .as_array()
        .and_then(|runs| {
            runs.iter()
                .find(|r| r["actor"] == "narang" && r["outcome"] == "handoff")
        })
        .expect("narang's run");
    let live = &narang["live"];
    let step = live["step"].as_str().unwrap_or_default();
    assert!(
        step.starts_with("▶️ ") || step.starts_with("🔧 ") || step.starts_with("💬 "),
        "a step from the event stream: {narang:#}"
    );
    assert!(live["step_at"].is_i64(), "{narang:#}");
    assert!(
        live["input_tokens"].as_i64().is_some_and(|n| n > 0),
        "{narang:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent CLIs from npm: scripts/test runs it (cargo test -- --include-ignored)"]
async fn claude_code_preset_delivers_a_sprint_and_counts_what_the_cli_reported() {
    let (model, log) = deliver("claude-code", "claude").await;
    assert_step_recorded(&log);

    // The budget counts Claude Code's envelope (`usage`, `total_cost_usd`), not what the
    // model wrote in its message (1 token each way).
    let requests = model.requests();
    for run in log["runs"].as_array().expect("runs") {
        let actor = run["actor"].as_str().unwrap_or_default();
        let asked = requests
            .iter()
            .filter(|r| r.actor.as_deref() == Some(actor))
            .count() as u64;
        assert_eq!(
            run["input_tokens"].as_u64(),
            Some(asked * INPUT_TOKENS),
            "{actor}: {run:#}"
        );
        assert_eq!(run["output_tokens"].as_u64(), Some(asked * OUTPUT_TOKENS));
        assert!(run["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{run:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent CLIs from npm: scripts/test runs it (cargo test -- --include-ignored)"]
async fn codex_preset_delivers_a_sprint_with_strict_answers() {
    let (model, log) = deliver("codex", "codex").await;
    assert_step_recorded(&log);

    // Codex sent each sister's strict schema, and the model's answers, with a `null` in
    // every optional field they left out, were taken.
    let strict: Vec<Value> = model
        .requests()
        .iter()
        .filter(|r| r.actor.is_some())
        .map(|r| r.body["text"]["format"]["strict"].clone())
        .collect();
    assert!(strict.iter().all(|s| *s == Value::Bool(true)), "{strict:?}");
    let planner = log["runs"]
        .as_array()
        .and_then(|runs| runs.iter().find(|r| r["actor"] == "harang"))
        .expect("the planner's run");
    assert!(
        planner["stdout_tail"]
            .as_str()
            .is_some_and(|s| s.contains("\"abortReason\":null")),
        "the planner's strict answer: {planner:#}"
    );
}

/// A usage limit pauses the implementer's stage without using an attempt; `sprint
/// resume` starts it at once and the sprint goes on.
async fn usage_limit_pauses_until_resumed(preset_name: &str, cli: &str) {
    let model = FakeModel::start().await;
    model.limit("narang", 1);
    let bench = Bench::new(preset_name, cli, &model);
    let run = bench
        .command(&["run", "add a greeting file", "--auto-approve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hanarang run");

    let deadline = tokio::time::Instant::now() + PATIENCE;
    let paused = loop {
        let log = bench
            .log_once_queued("SPRINT-001")
            .await
            .unwrap_or_default();
        let paused = log["runs"]
            .as_array()
            .and_then(|runs| runs.iter().find(|r| r["outcome"] == "paused").cloned());
        if let Some(paused) = paused {
            break (paused, log);
        }
        let over =
            ["deployed", "escalated", "aborted"].contains(&log["state"].as_str().unwrap_or(""));
        assert!(
            tokio::time::Instant::now() < deadline && !over,
            "the implementer never paused: {log:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (paused_run, log) = paused;
    assert_eq!(paused_run["actor"], "narang", "{log:#}");
    assert_eq!(log["state"], "implementing", "{log:#}");
    let status = bench
        .json(&["sprint", "status", "SPRINT-001", "--json"])
        .await;
    let due = status["next_run_at"].as_i64().expect("a resume time");
    let started = paused_run["ended_at"].as_i64().expect("the pause's time");
    assert!(
        due - started >= 29 * 60 * 1000,
        "the CLI names no parseable reset, so pause_default (30m) applies: {log:#}"
    );

    let resume = bench.hanarang(&["sprint", "resume", "SPRINT-001"]).await;
    assert!(
        resume.status.success(),
        "resume: {}{}",
        String::from_utf8_lossy(&resume.stdout),
        String::from_utf8_lossy(&resume.stderr)
    );
    let out = tokio::time::timeout(PATIENCE, run.wait_with_output())
        .await
        .expect("run finished after the resume")
        .expect("run's output");
    run_ok(&out);
    let log = bench.assert_delivered("SPRINT-001", &model).await;
    let narang: Vec<(&Value, &Value)> = log["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["actor"] == "narang")
        .map(|r| (&r["outcome"], &r["attempt"]))
        .collect();
    assert_eq!(
        narang,
        [
            (&Value::from("paused"), &Value::from(1)),
            (&Value::from("handoff"), &Value::from(1))
        ],
        "the pause used no attempt: {log:#}"
    );
    let console = String::from_utf8_lossy(&out.stdout);
    assert!(
        console.contains("hit its usage limit: resumes at"),
        "run said so: {console}"
    );
    // Sessions: the paused run's session is continued where the CLI can do so
    // (Claude Code); the others start afresh.
    let runs: Vec<&Value> = log["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["actor"] == "narang")
        .collect();
    let retried = runs[1];
    let first = model
        .requests()
        .into_iter()
        .find(|r| r.actor.as_deref() == Some("narang") && r.answer != Answer::UsageLimit)
        .expect("the retry reached the model");
    let mut said = String::new();
    for message in first.body["messages"].as_array().into_iter().flatten() {
        said.push_str(&message.to_string());
    }
    let prompts = said.matches("(narang), the").count();
    if cli == "claude" {
        assert!(
            runs[0]["session_id"].is_string(),
            "the paused run's session is recorded: {log:#}"
        );
        assert_eq!(retried["resumes"], runs[0]["run_id"], "{log:#}");
        assert_eq!(
            prompts, 2,
            "the model sees the paused run's conversation again: {said}"
        );
        let text = bench.hanarang(&["sprint", "log", "SPRINT-001"]).await;
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(
            text.contains(&format!(
                "resumes {}'s session",
                runs[0]["run_id"].as_str().unwrap_or("?")
            )),
            "{text}"
        );
    } else {
        assert!(retried["resumes"].is_null(), "{log:#}");
        assert!(prompts <= 1, "a fresh session: {said}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent CLIs from npm: scripts/test runs it (cargo test -- --include-ignored)"]
async fn claude_code_usage_limit_pauses_the_stage_until_resumed() {
    usage_limit_pauses_until_resumed("claude-code", "claude").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent CLIs from npm: scripts/test runs it (cargo test -- --include-ignored)"]
async fn codex_usage_limit_pauses_the_stage_until_resumed() {
    usage_limit_pauses_until_resumed("codex", "codex").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent CLIs from npm: scripts/test runs it (cargo test -- --include-ignored)"]
async fn openclaw_preset_delivers_a_sprint_from_its_final_text() {
    let (model, _) = deliver("openclaw", "openclaw").await;
    // OpenClaw takes no schema: the message came as the final text of a Chat Completions
    // stream, and /final was parsed.
    assert!(
        model
            .requests()
            .iter()
            .filter(|r| r.actor.is_some())
            .all(|r| r.path.ends_with("/chat/completions")),
        "OpenClaw spoke Chat Completions"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent CLIs from npm: scripts/test runs it (cargo test -- --include-ignored)"]
async fn openclaw_usage_limit_pauses_the_stage_until_resumed() {
    usage_limit_pauses_until_resumed("openclaw", "openclaw").await;
}
