//! Loading the config: every problem named by its key, defaults as the spec sets them, and
//! `hanarang config check` as an operator runs it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hanarang::config::{Config, ConfigProblem, Locale, ParseError};
use hanarang::handoff::message::Actor;

use crate::support::TempDir;

fn problems(text: &str) -> Vec<ConfigProblem> {
    match Config::parse(text, Path::new(".")) {
        Err(ParseError::Invalid(p)) => p,
        other => panic!("expected problems, got {other:?}"),
    }
}

fn problem_keys(text: &str) -> Vec<String> {
    problems(text).into_iter().map(|p| p.key).collect()
}

fn problem_for<'a>(all: &'a [ConfigProblem], key: &str) -> &'a ConfigProblem {
    all.iter()
        .find(|p| p.key == key)
        .unwrap_or_else(|| panic!("no problem for {key} in {all:?}"))
}

fn project(dir: &Path) -> String {
    format!(
        "[projects.app]\nworkdir = {:?}\n",
        dir.display().to_string()
    )
}

#[test]
fn an_empty_config_takes_the_specs_defaults() {
    let c = Config::parse("", Path::new("/etc/hanarang")).unwrap();
    // The default database sits beside the config file, wherever a command is started.
    assert_eq!(c.database.url, "sqlite:///etc/hanarang/hanarang.db");
    assert_eq!(c.pipeline.max_attempts, 3);
    assert_eq!(c.pipeline.max_review_rounds, 3);
    assert_eq!(c.pipeline.backoff.initial.0, Duration::from_secs(5));
    assert_eq!(c.pipeline.backoff.factor, 2.0);
    assert_eq!(c.pipeline.backoff.max.0, Duration::from_secs(300));
    assert_eq!(c.pipeline.branch_template, "feature/{sprint_lower}");
    assert_eq!(c.pipeline.locale, Locale::Ko);
    assert_eq!(c.agent.program, "openclaw");
    assert_eq!(
        c.agent.args.join(" "),
        "spawn --role {role} --contract {contract} --workdir {workdir} --output structured-json"
    );
    assert_eq!(c.agent.max_output_bytes, 1024 * 1024);
    assert_eq!(c.agent.kill_grace.0, Duration::from_secs(10));
    let timeouts: Vec<u64> = Actor::ALL
        .iter()
        .map(|a| c.agent.spec(*a).timeout.as_secs() / 60)
        .collect();
    assert_eq!(
        timeouts,
        vec![30, 120, 30, 30],
        "minutes for harang, narang, darang, erang"
    );
    assert!(c.discord.is_none());
}

/// A sister's config table is `[agent.NAME]`, NAME its row's in `Actor::info`: the
/// table's timeout is its own, and no other sister's.
#[test]
fn each_sisters_table_is_named_as_the_sister() {
    for actor in Actor::ALL {
        let text = format!("[agent.{}]\ntimeout = \"7m\"\n", actor.info().name);
        let c = Config::parse(&text, Path::new(".")).unwrap();
        for other in Actor::ALL {
            let expected = if other == actor {
                Duration::from_secs(7 * 60)
            } else {
                other.info().timeout
            };
            assert_eq!(c.agent.spec(other).timeout, expected, "{text}: {other}");
        }
    }
}

#[test]
fn a_sisters_table_overrides_agent_and_merges_env() {
    let c = Config::parse(
        r#"
        [agent]
        program = "claude"
        env = { A = "1", B = "2" }
        [agent.narang]
        program = "codex"
        timeout = "3h"
        env = { B = "narang" }
        stall_timeout = "5m"
        "#,
        Path::new("."),
    )
    .unwrap();
    let narang = c.agent.spec(Actor::Narang);
    assert_eq!(narang.program, "codex");
    assert_eq!(narang.timeout, Duration::from_secs(3 * 3600));
    assert_eq!(narang.stall_timeout, Some(Duration::from_secs(300)));
    assert_eq!(narang.env.get("A").map(String::as_str), Some("1"));
    assert_eq!(narang.env.get("B").map(String::as_str), Some("narang"));
    let darang = c.agent.spec(Actor::Darang);
    assert_eq!(darang.program, "claude");
    assert_eq!(darang.env.get("B").map(String::as_str), Some("2"));
    assert_eq!(darang.stall_timeout, None);
}

#[test]
fn darangs_reviewers_each_layer_over_darang_and_bad_ones_are_named() {
    let c = Config::parse(
        r#"
        [agent]
        program = "claude"
        env = { A = "1" }
        [agent.darang]
        timeout = "20m"
        env = { B = "darang" }
        [agent.darang.reviewers.static]
        args = ["--static", "{reviewer}"]
        [agent.darang.reviewers.runtime]
        program = "codex"
        env = { B = "runtime" }
        "#,
        Path::new("."),
    )
    .unwrap();
    assert_eq!(c.agent.reviewers(), ["runtime", "static"]);
    let runtime = c.agent.reviewer_spec("runtime").unwrap();
    assert_eq!(runtime.program, "codex");
    assert_eq!(
        runtime.timeout,
        Duration::from_secs(20 * 60),
        "darang's timeout"
    );
    assert_eq!(runtime.env.get("A").map(String::as_str), Some("1"));
    assert_eq!(runtime.env.get("B").map(String::as_str), Some("runtime"));
    assert_eq!(runtime.reviewer.as_deref(), Some("runtime"));
    let static_ = c.agent.reviewer_spec("static").unwrap();
    assert_eq!(static_.program, "claude");
    assert_eq!(static_.args, ["--static", "{reviewer}"]);
    assert_eq!(static_.env.get("B").map(String::as_str), Some("darang"));
    assert!(c.agent.reviewer_spec("lint").is_none());

    let all = problem_keys(
        r#"
        [agent.harang.reviewers.x]
        program = "claude"
        [agent.darang.reviewers."Static Review"]
        program = "claude"
        [agent.darang.reviewers.ok]
        args = ["{reviewr}"]
        [agent.darang.reviewers.ok.reviewers.deeper]
        program = "claude"
        "#,
    );
    for key in [
        "agent.harang.reviewers",
        "agent.darang.reviewers.Static Review",
        "agent.darang.reviewers.ok.args[0]",
        "agent.darang.reviewers.ok.reviewers",
    ] {
        assert!(all.iter().any(|k| k == key), "{key} in {all:?}");
    }
}

#[test]
fn every_problem_is_reported_at_once_with_its_key() {
    let dir = TempDir::new("config");
    let text = format!(
        r#"
        [database]
        url = "sqlite://x.db"
        bogus = 1
        [pipeline]
        max_attempts = "three"
        locale = "fr"
        backoff = {{ factor = 0.5 }}
        [agent]
        args = ["--role", "{{rol}}"]
        output_pointer = "structured_output"
        [agent.narang]
        timeout = "2 hourz"
        [projects.gone]
        workdir = "/definitely/not/here"
        {}
        [discord]
        guild_id = 1
        user_id = "abc"
        "#,
        project(dir.path())
    );
    let all = problems(&text);
    let keys: Vec<&str> = all.iter().map(|p| p.key.as_str()).collect();
    for key in [
        "database.bogus",
        "pipeline.max_attempts",
        "pipeline.locale",
        "pipeline.backoff.factor",
        "agent.args[1]",
        "agent.output_pointer",
        "agent.narang.timeout",
        "projects.gone.workdir",
        "discord.user_id",
        "discord.forum_channel_id",
    ] {
        assert!(keys.contains(&key), "{key} missing from {keys:?}");
    }
    assert!(
        !keys.iter().any(|k| k.starts_with("projects.app")),
        "{keys:?}"
    );
    assert!(
        problem_for(&all, "agent.narang.timeout")
            .message
            .starts_with("invalid duration \"2 hourz\"")
    );
    assert!(
        problem_for(&all, "agent.args[1]")
            .message
            .contains("unknown placeholder {rol}")
    );
    assert!(
        problem_for(&all, "database.bogus")
            .message
            .starts_with("unknown key")
    );
    assert!(
        problem_for(&all, "discord.forum_channel_id")
            .message
            .contains("required when [discord] is set")
    );
    assert!(
        problem_for(&all, "projects.gone.workdir")
            .message
            .contains("/definitely/not/here does not exist")
    );
}

#[test]
fn unknown_keys_in_every_table_are_refused() {
    assert_eq!(problem_keys("colour = 1"), vec!["colour"]);
    assert_eq!(
        problem_keys("[agent.narang]\ntimeot = \"1h\""),
        vec!["agent.narang.timeot"]
    );
    assert_eq!(
        problem_keys("[agent.sister5]\ntimeout = \"1h\""),
        vec!["agent.sister5"]
    );
    assert_eq!(
        problem_keys("[pipeline.backoff]\nmaximum = \"1m\""),
        vec!["pipeline.backoff.maximum"]
    );
}

#[test]
fn the_discord_token_never_goes_to_a_sister() {
    let all = problems(
        r#"
        [agent]
        env = { DISCORD_TOKEN = "x", HANARANG_ROLE = "y" }
        [agent.erang]
        env = { MY_BOT = "z" }
        [discord]
        token_env = "MY_BOT"
        guild_id = 1
        forum_channel_id = 2
        user_id = 3
        "#,
    );
    let keys: Vec<&str> = all.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        vec!["agent.env.HANARANG_ROLE", "agent.erang.env.MY_BOT"]
    );
    // Without [discord], the default token variable is protected all the same.
    assert_eq!(
        problem_keys("[agent]\nenv = { DISCORD_TOKEN = \"x\" }"),
        vec!["agent.env.DISCORD_TOKEN"]
    );
}

#[test]
fn placeholders_and_pointers_are_checked_per_sister() {
    let all = problems(
        r#"
        pipeline.branch_template = "feat/{sprint_id}"
        [agent.darang]
        args = ["--schema", "{\"type\":\"object\"}", "{contract_path}"]
        output_pointer = "final"
        "#,
    );
    let keys: Vec<&str> = all.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "pipeline.branch_template",
            "agent.darang.args[2]",
            "agent.darang.output_pointer"
        ],
        "inline JSON in an arg is not a placeholder: {all:?}"
    );
}

#[test]
fn syntax_errors_name_the_line() {
    match Config::parse("[pipeline\nmax_attempts = 3", Path::new(".")) {
        Err(ParseError::Syntax(message)) => assert!(message.contains("line 1"), "{message}"),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn relative_workdirs_start_at_the_config_files_folder() {
    let dir = TempDir::new("config");
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    let c = Config::parse("[projects.app]\nworkdir = \"repo\"", dir.path()).unwrap();
    assert_eq!(
        c.projects["app"].workdir,
        std::fs::canonicalize(dir.path().join("repo")).unwrap()
    );
}

#[test]
fn the_example_config_is_valid_once_its_workdir_exists() {
    let dir = TempDir::new("config");
    std::fs::write(
        dir.path().join("AGENTS.md"),
        "Run the tests before you commit.",
    )
    .unwrap();
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config.toml.example"))
            .unwrap()
            .replace("/srv/repos/my-app", &dir.path().display().to_string());
    let example = Config::parse(&example, Path::new(".")).unwrap();
    let defaults = Config::parse("", Path::new(".")).unwrap();
    assert_eq!(
        example.database, defaults.database,
        "the example shows the defaults"
    );
    assert_eq!(
        example.pipeline, defaults.pipeline,
        "the example shows the defaults"
    );
    // It selects Claude Code's preset in one line, with the design's timeouts.
    let claude = Config::parse(&crate::support::preset("claude-code"), Path::new(".")).unwrap();
    for actor in Actor::ALL {
        let (got, preset) = (example.agent.spec(actor), claude.agent.spec(actor));
        assert_eq!(
            (
                &got.program,
                &got.args,
                &got.output_pointer,
                &got.resume_args
            ),
            (
                &preset.program,
                &preset.args,
                &preset.output_pointer,
                &preset.resume_args
            ),
            "{actor}"
        );
        assert_eq!(got.timeout, defaults.agent.spec(actor).timeout, "{actor}");
    }
    assert_eq!(example.projects.len(), 1);
    let recipe = &example.projects["my-app"];
    assert_eq!(recipe.base_branch.as_deref(), Some("main"));
    assert_eq!(recipe.check, ["cargo", "test"]);
    assert!(recipe.deploy.is_some() && recipe.instructions.is_some());
}

// ---------------------------------------------------------------------------------------
// Through the binary.

fn hanarang(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .args(args)
        .current_dir(dir)
        .env_remove("HANARANG_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn config_check_prints_the_resolved_config_or_every_problem_and_exits_2() {
    let dir = TempDir::new("config");
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    std::fs::write(
        dir.path().join("config.toml"),
        "[projects.app]\nworkdir = \"repo\"\n[discord]\nguild_id = 1\nforum_channel_id = 2\nuser_id = 3\n",
    )
    .unwrap();
    let ok = hanarang(dir.path(), &["config", "check"]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("max_attempts = 3"), "{stdout}");
    assert!(stdout.contains("token_env = \"DISCORD_TOKEN\""), "{stdout}");
    assert!(stdout.contains("narang: openclaw spawn"), "{stdout}");

    std::fs::write(
        dir.path().join("bad.toml"),
        "[agent.narang]\ntimeout = \"2 hourz\"\n[projects.x]\nworkdir = \"nope\"\n",
    )
    .unwrap();
    let bad = hanarang(dir.path(), &["--config", "bad.toml", "config", "check"]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.toml: invalid config (2 problems)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("agent.narang.timeout: invalid duration \"2 hourz\""),
        "{stderr}"
    );
    assert!(stderr.contains("projects.x.workdir:"), "{stderr}");
    assert!(bad.stdout.is_empty());
}

#[test]
fn config_check_shows_each_of_darangs_reviewers() {
    let dir = TempDir::new("config");
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    std::fs::write(
        dir.path().join("config.toml"),
        "[projects.app]\nworkdir = \"repo\"\n[agent.darang.reviewers.static]\nargs = [\"--static\"]\n[agent.darang.reviewers.runtime]\nprogram = \"codex\"\n",
    )
    .unwrap();
    let out = hanarang(dir.path(), &["config", "check"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("#   darang reviewer runtime: codex "),
        "{stdout}"
    );
    assert!(
        stdout.contains("#   darang reviewer static: openclaw --static"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# darang reviews with 2 reviewers in parallel: runtime, static"),
        "{stdout}"
    );
}

#[test]
fn config_check_without_a_config_says_where_it_looked() {
    let dir = TempDir::new("config");
    let out = hanarang(dir.path(), &["config", "check"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("no config file") && stderr.contains("HANARANG_CONFIG"),
        "{stderr}"
    );
}

#[test]
fn the_token_is_never_printed() {
    let dir = TempDir::new("config");
    std::fs::write(
        dir.path().join("config.toml"),
        "[discord]\ntoken_env = \"HANARANG_TEST_TOKEN\"\nguild_id = 1\nforum_channel_id = 2\nuser_id = 3\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .args(["config", "check"])
        .current_dir(dir.path())
        .env("HANARANG_TEST_TOKEN", "secret-token-value-123")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("secret-token-value-123"));
    assert!(all.contains("HANARANG_TEST_TOKEN"));
}

#[test]
fn config_check_and_doctor_say_who_may_start_and_who_may_approve() {
    let dir = TempDir::new("config");
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    std::fs::write(
        dir.path().join("config.toml"),
        "[projects.app]\nworkdir = \"repo\"\n[discord]\ntoken_env = \"HANARANG_TEST_NO_SUCH_TOKEN\"\nguild_id = 1\nforum_channel_id = 2\nuser_id = 3\napprover_user_ids = [4]\napprover_role_ids = [5]\nstarter_user_ids = [6]\nstarter_role_ids = [7]\napproval = \"not-starter\"\n",
    )
    .unwrap();
    let out = hanarang(dir.path(), &["config", "check"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("start sprints: user 3, approver_user_ids [4], approver_role_ids [5], starter_user_ids [6], starter_role_ids [7]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("steer and approve: user 3, approver_user_ids [4], approver_role_ids [5] (approval = \"not-starter\""),
        "{stdout}"
    );
    let doctor = hanarang(dir.path(), &["doctor"]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        said.contains("discord start: start sprints: user 3")
            && said.contains("discord approve: steer and approve: user 3"),
        "{said}"
    );

    let problems = problems(
        "[discord]\nguild_id = 1\nforum_channel_id = 2\nuser_id = 3\napproval = \"nobody\"\n",
    );
    let approval = problem_for(&problems, "discord.approval");
    assert!(
        approval.message.contains("not-starter"),
        "the allowed values are named: {approval:?}"
    );
}

#[test]
fn a_preset_fills_what_its_table_leaves_unset_and_sister_tables_keep_their_own() {
    // The Codex preset over a config that already has per-sister tables (the example's
    // timeouts): no duplicate key, narang gets the preset and keeps its timeout.
    let c = Config::parse(
        "[agent]\npreset = \"codex\"\n[agent.narang]\ntimeout = \"3h\"\n[agent.erang]\nargs = [\"exec\", \"-\"]\n[agent.darang]\npreset = \"claude-code\"\noutput_pointer = \"/result\"\n",
        Path::new("."),
    )
    .unwrap();
    let narang = c.agent.spec(Actor::Narang);
    assert_eq!(narang.program, "codex");
    assert!(
        narang.args.join(" ").contains("--output-schema"),
        "{:?}",
        narang.args
    );
    assert_eq!(narang.timeout, Duration::from_secs(3 * 3600));
    // A key set beside the preset wins over it.
    assert_eq!(c.agent.spec(Actor::Erang).args, ["exec", "-"]);
    // A sister may name its own preset; its own keys still win.
    let darang = c.agent.spec(Actor::Darang);
    assert_eq!(darang.program, "claude");
    assert_eq!(darang.output_pointer, "/result");
    assert_eq!(darang.session_pointer.as_deref(), Some("/session_id"));
    assert!(
        c.agent.spec(Actor::Harang).resume_args.is_none(),
        "codex resumes nothing"
    );
    let origins = c.origins(Actor::Narang, None);
    let origin = |key: &str| {
        origins
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, o)| o.clone())
    };
    assert_eq!(origin("args").as_deref(), Some("preset codex ([agent])"));
    assert_eq!(
        c.origins(Actor::Erang, None)[1],
        ("args", "[agent.erang]".to_string())
    );
    let darang = c.origins(Actor::Darang, None);
    assert_eq!(
        darang[0],
        ("program", "preset claude-code ([agent.darang])".to_string())
    );
    assert_eq!(darang[2], ("output_pointer", "[agent.darang]".to_string()));
}

#[test]
fn an_unknown_preset_is_named_with_its_key_and_the_choices() {
    let all = problems("[agent.narang]\npreset = \"claude\"\n");
    let p = problem_for(&all, "agent.narang.preset");
    assert!(
        p.message.contains("\"claude\"") && p.message.contains("claude-code, codex, openclaw"),
        "{p}"
    );
}

#[test]
fn config_check_says_where_each_value_came_from() {
    let dir = TempDir::new("config-check");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[agent]\npreset = \"openclaw\"\n[agent.darang]\nprogram = \"/opt/openclaw\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .args(["config", "check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("#   narang: openclaw agent exec --json --cwd {workdir} --message-file -"),
        "{text}"
    );
    assert!(text.contains("preset openclaw)"), "{text}");
    assert!(
        text.contains("#     program          from [agent.darang]"),
        "{text}"
    );
    assert!(
        text.contains("#     args             from preset openclaw ([agent])"),
        "{text}"
    );
    assert!(
        text.contains("#     env              from preset openclaw ([agent])"),
        "{text}"
    );
}

#[test]
fn resume_args_must_name_the_session_and_only_they_may() {
    let all = problems(
        "[agent]\nresume_args = [\"--resume\"]\nsession_pointer = \"session_id\"\n[agent.narang]\nargs = [\"--resume\", \"{session}\"]\n",
    );
    assert!(
        problem_for(&all, "agent.resume_args")
            .message
            .contains("{session}")
    );
    assert!(
        problem_for(&all, "agent.session_pointer")
            .message
            .contains("is not a JSON Pointer")
    );
    assert!(
        problem_for(&all, "agent.narang.args[1]")
            .message
            .contains("unknown placeholder {session}")
    );
}
