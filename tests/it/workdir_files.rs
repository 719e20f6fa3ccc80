//! Files hanarang reads from the workdir, as a hostile sister leaves them: harang swaps
//! the project's `instructions` file for a link out of the workdir (to the config with an
//! API key in it, to `/proc/self/environ`, to a device) or for a FIFO. The next run is
//! refused as `spawn_failed`, naming the key and the target; nothing of the target
//! reaches a prompt, a contract file or the database, and nothing hangs. A link that
//! stays in the workdir still works.

use hanarang::pipeline::State;
use hanarang::sister::RunOutcome;
use hanarang::store::{Run, Store, TransitionRecord};

use crate::support::pipeline::{Files, Pipeline, Setup, wait_for, workdir};

const INSTRUCTIONS: &str = "Keep every public function documented.";

/// An agent's API key in the config (`[agent] env`): what a link to the config would leak.
const API_KEY: &str = "sk-ant-hanarang-test-4f9c2a7e1b";

/// `harang_links_instructions_to` this pipeline's own config file.
const THE_CONFIG: &str = "<the config>";

/// A pipeline's files where the project has `instructions = "AGENTS.md"` and harang,
/// once it has planned, replaces that file with a link to `target` ("fifo": a FIFO). One
/// attempt per stage: a refused run escalates the sprint.
fn harang_links_instructions_to(target: &str) -> Files {
    let files = Files::new(&Setup {
        harang: "link-instructions",
        max_attempts: 1,
        ..Setup::default()
    });
    std::fs::write(workdir(&files, "app").join("AGENTS.md"), INSTRUCTIONS).expect("instructions");
    harang_links(
        &files,
        "instructions = \"AGENTS.md\"\n",
        "AGENTS.md",
        target,
    );
    files
}

/// To `files`' project, `recipe` (its keys); to harang, the file of the workdir it
/// replaces with a link to `target`; to the agents, an API key.
fn harang_links(files: &Files, recipe: &str, name: &str, target: &str) {
    let target = match target {
        THE_CONFIG => files.config_path.display().to_string(),
        other => other.to_string(),
    };
    files.append_config(&format!(
        "{recipe}[agent.harang.env]\nLINK_NAME = {name:?}\nLINK_TARGET = {target:?}\n"
    ));
    let config = std::fs::read_to_string(&files.config_path).expect("read config");
    let config = config.replacen(
        "env = { STATE_DIR",
        &format!("env = {{ ANTHROPIC_API_KEY = \"{API_KEY}\", STATE_DIR"),
        1,
    );
    std::fs::write(&files.config_path, config).expect("write config");
}

/// narang's one run: refused before it started, its detail.
fn refused_narang(runs: &[Run]) -> String {
    let narang: Vec<&Run> = runs
        .iter()
        .filter(|r| r.actor.as_str() == "narang")
        .collect();
    assert_eq!(narang.len(), 1, "{runs:#?}");
    assert_eq!(
        narang[0].outcome,
        Some(RunOutcome::SpawnFailed),
        "{runs:#?}"
    );
    narang[0].detail.clone().unwrap_or_default()
}

/// None of `secrets` is in what any sister was given (its stdin and contract file, as
/// the scripted sister keeps them), nor in the runs and the transitions log.
fn assert_nowhere(files: &Files, runs: &[Run], log: &[TransitionRecord], secrets: &[&str]) {
    let given: Vec<(String, String)> = std::fs::read_dir(&files.state_dir)
        .expect("the sisters' state")
        .flatten()
        .map(|e| {
            let text = std::fs::read(e.path()).unwrap_or_default();
            (
                e.file_name().to_string_lossy().into_owned(),
                String::from_utf8_lossy(&text).into_owned(),
            )
        })
        .collect();
    assert!(
        given.iter().any(|(name, _)| name.ends_with(".stdin")),
        "harang's prompt was kept"
    );
    let records = format!("{runs:?}\n{log:?}");
    for secret in secrets {
        for (name, text) in &given {
            assert!(!text.contains(secret), "{secret:?} reached {name}");
        }
        assert!(
            !records.contains(secret),
            "{secret:?} is in the database: {records}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn instructions_linked_to_the_config_are_refused_and_the_key_goes_nowhere() {
    let files = harang_links_instructions_to(THE_CONFIG);
    let config = std::fs::canonicalize(&files.config_path).expect("config");
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;

    let runs = p.runs(&s.id).await;
    let detail = refused_narang(&runs);
    assert_eq!(
        detail,
        format!(
            "projects.app.instructions: AGENTS.md links out of the workdir (to {}); hanarang reads files inside it only",
            config.display()
        )
    );
    assert_nowhere(&p.files, &runs, &p.transitions(&s.id).await, &[API_KEY]);

    // `config check` (and so every command, `serve` at its next start) says the same.
    let check = p.files.hanarang(&["config", "check"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(check.status.code(), Some(2), "{said}");
    assert!(
        said.contains("projects.app.instructions: AGENTS.md links out of the workdir (to "),
        "{said}"
    );
    assert!(!said.contains(API_KEY), "{said}");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn instructions_linked_to_proc_self_environ_never_reach_a_prompt() {
    const SECRET: &str = "an-operators-secret-9d41e0";
    const TOKEN: &str = "a-discord-token-77c1f3";
    let files = harang_links_instructions_to("/proc/self/environ");
    // `hanarang run` reads the link as itself: /proc/self is its own process.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .arg("--config")
        .arg(&files.config_path)
        .args(["run", "Add a login page", "--auto-approve"])
        .env("HANARANG_TEST_OPERATOR_SECRET", SECRET)
        .env("DISCORD_TOKEN", TOKEN)
        .output()
        .expect("run hanarang");
    let console = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "escalated: {console}");
    for secret in [SECRET, TOKEN] {
        assert!(!console.contains(secret), "{secret:?} printed: {console}");
    }
    // Not `files.config()`: with AGENTS.md linked out, the config no longer loads.
    let url = format!(
        "sqlite://{}",
        files.dir.path().join("hanarang.db").display()
    );
    let store = Store::open_existing(&url)
        .await
        .expect("the run's database");
    let runs = store.runs("SPRINT-001").await.expect("runs");
    let detail = refused_narang(&runs);
    assert!(
        detail.starts_with(
            "projects.app.instructions: AGENTS.md links out of the workdir (to /proc/"
        ),
        "{detail}"
    );
    let log = store.transitions("SPRINT-001").await.expect("log");
    assert_nowhere(&files, &runs, &log, &[SECRET, TOKEN]);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_device_or_a_fifo_for_instructions_holds_nothing_up() {
    for (target, refusal) in [
        (
            "/dev/zero",
            "projects.app.instructions: AGENTS.md links out of the workdir (to /dev/zero)",
        ),
        (
            "fifo",
            "projects.app.instructions: AGENTS.md is a FIFO, not a file; hanarang reads only regular files inside the workdir",
        ),
    ] {
        let p = Pipeline::start_with(harang_links_instructions_to(target)).await;
        let s = p.start_sprint("app", "Add a login page", None).await;
        // Within PATIENCE: an open or a read that blocked would never get here.
        p.wait_for(&s.id, State::Escalated).await;
        let detail = refused_narang(&p.runs(&s.id).await);
        assert!(detail.starts_with(refusal), "{target}: {detail}");
        p.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn instructions_linked_within_the_workdir_are_read() {
    const MOVED: &str = "The instructions, moved to docs/ by harang.";
    let files = harang_links_instructions_to("docs/AGENTS.md");
    let docs = workdir(&files, "app").join("docs");
    std::fs::create_dir_all(&docs).expect("docs");
    std::fs::write(docs.join("AGENTS.md"), MOVED).expect("moved instructions");
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let runs = p.runs(&s.id).await;
    for run in runs.iter().filter(|r| r.actor.as_str() != "harang") {
        let prompt = p.files.stdin_of(&run.run_id);
        assert!(
            prompt.contains(MOVED),
            "{}: no instructions in\n{prompt}",
            run.actor
        );
    }
    p.stop().await;
}

#[test]
fn a_projects_prompt_in_the_workdir_linked_out_is_refused() {
    let files = Files::new(&Setup::default());
    let prompts = workdir(&files, "app").join("prompts");
    std::fs::create_dir_all(&prompts).expect("prompts");
    std::os::unix::fs::symlink(&files.config_path, prompts.join("narang.md")).expect("link");
    files.append_config(&format!("prompts = {:?}\n", prompts.display().to_string()));
    let check = files.hanarang(&["config", "check"]);
    let said = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(2), "{said}");
    let config = std::fs::canonicalize(&files.config_path).expect("config");
    assert!(
        said.contains(&format!(
            "projects.app.prompts: prompts/narang.md links out of the workdir (to {})",
            config.display()
        )),
        "{said}"
    );
}

/// The prompts folder is in the workdir but spelled from the config's folder through `..`
/// (`operator/../app/prompts`), so it does not begin with the workdir's path: harang
/// replaces `prompts/narang.md` with a link to the config. narang's run is refused naming
/// `projects.app.prompts`, and nothing of the config reaches a prompt.
#[tokio::test(flavor = "multi_thread")]
async fn a_prompts_folder_spelled_into_the_workdir_is_read_as_the_workdirs() {
    /// A line of the config that is in no prompt otherwise.
    const CONFIG_LINE: &str = "kill_grace = \"300ms\"";
    let files = Files::new(&Setup {
        harang: "link-instructions",
        max_attempts: 1,
        ..Setup::default()
    });
    std::fs::create_dir_all(files.dir.path().join("operator")).expect("operator");
    let prompts = workdir(&files, "app").join("prompts");
    std::fs::create_dir_all(&prompts).expect("prompts");
    std::fs::write(prompts.join("narang.md"), "Build what the plan says.").expect("prompt");
    harang_links(
        &files,
        "prompts = \"operator/../app/prompts\"\n",
        "prompts/narang.md",
        THE_CONFIG,
    );
    let config = std::fs::canonicalize(&files.config_path).expect("config");
    assert!(
        std::fs::read_to_string(&config)
            .expect("config")
            .contains(CONFIG_LINE)
    );
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    // At rest either way, so a leak fails below as the leak it is.
    let ended = wait_for(
        &p.store,
        &s.id,
        |s| matches!(s.state, State::Escalated | State::Done),
        "escalated or done",
    )
    .await;

    let runs = p.runs(&s.id).await;
    assert_nowhere(
        &p.files,
        &runs,
        &p.transitions(&s.id).await,
        &[API_KEY, CONFIG_LINE],
    );
    assert_eq!(ended.state, State::Escalated);
    assert_eq!(
        refused_narang(&runs),
        format!(
            "projects.app.prompts: prompts/narang.md links out of the workdir (to {}); hanarang reads files inside it only",
            config.display()
        )
    );
    p.stop().await;
}
