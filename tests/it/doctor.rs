//! `hanarang doctor` as an operator runs it before the first start: a plain line per
//! check, the fix for each failure, exit 0 only when all pass. Discord is the fake.

use std::process::Command;

use crate::support;
use crate::support::fake_discord::{FakeConfig, FakeDiscord};
use crate::support::pipeline::{Files, Setup};

fn doctor(files: &Files, token: Option<&str>) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hanarang"));
    cmd.arg("--config").arg(&files.config_path).arg("doctor");
    cmd.env_remove("HANARANG_TEST_DISCORD_TOKEN");
    if let Some(t) = token {
        cmd.env("HANARANG_TEST_DISCORD_TOKEN", t);
    }
    let out = cmd.output().expect("run doctor");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn discord(fake: &FakeDiscord, forum: u64) -> String {
    format!(
        "[discord]\ntoken_env = \"HANARANG_TEST_DISCORD_TOKEN\"\nguild_id = {}\nforum_channel_id = {forum}\nuser_id = 5\nhttp_proxy = \"{}\"\n",
        fake.config().guild_id,
        fake.base_url()
    )
}

/// The token in a file beside the config, named by `token_file`; its path.
fn token_file(files: &Files) -> std::path::PathBuf {
    let path = files.dir.path().join("discord-token");
    std::fs::write(&path, format!("{}\n", support::fake_discord::FAKE_TOKEN)).expect("token");
    files.append_config("token_file = \"discord-token\"\n");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sound_deployment_passes_every_check() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup::default());
    files.append_config(&discord(&fake, fake.config().forum_channel_id));
    let token = token_file(&files);
    let (code, out) = tokio::task::spawn_blocking(move || {
        let r = doctor(&files, None);
        drop(files);
        r
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}");
    let from_file = format!(
        "ok   discord token: from discord.token_file {}",
        token.display()
    );
    for line in [
        "ok   config: ",
        "ok   database: ",
        "will be created at the first start",
        "ok   agent narang: ",
        "scripted.sh →",
        "ok   project app: ",
        "not a git repository",
        from_file.as_str(),
        "ok   discord login: Discord accepted the token",
        "ok   discord message content: the bot may read replies in sprint threads",
        "ok   discord guild: ",
        "ok   discord forum: ",
        "is a forum channel",
        "ok   discord permissions: the bot may view, post and reply",
        "ok   discord start: start sprints: user ",
        "ok   discord approve: steer and approve: user ",
        "confinement: sisters and checks run fenced with Landlock",
        "all 17 checks passed",
    ] {
        assert!(out.contains(line), "{line:?} missing from\n{out}");
    }
    assert!(
        !out.contains(support::fake_discord::FAKE_TOKEN),
        "the token is never printed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bot_without_the_message_content_intent_is_told_how_to_turn_it_on() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    fake.set_app_flags(0);
    let files = Files::new(&Setup::default());
    files.append_config(&discord(&fake, fake.config().forum_channel_id));
    token_file(&files);
    let (code, out) = tokio::task::spawn_blocking(move || doctor(&files, None))
        .await
        .unwrap();
    assert_eq!(
        code, 0,
        "replies are optional: a warning, not a failure: {out}"
    );
    assert!(
        out.contains("warn discord message content: the bot has no Message Content intent: replies in sprint threads are not read as notes\n     fix: turn on Message Content Intent in the developer portal (Bot, Privileged Gateway Intents), then restart serve"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_in_the_environment_is_a_warning_that_recommends_a_file() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup::default());
    files.append_config(&discord(&fake, fake.config().forum_channel_id));
    let (code, out) = tokio::task::spawn_blocking(move || {
        doctor(&files, Some(support::fake_discord::FAKE_TOKEN))
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "a warning does not fail doctor: {out}");
    assert!(
        out.contains("warn discord token: from $HANARANG_TEST_DISCORD_TOKEN (wiped from hanarang's environment at start)\n     fix: better: a file only the service reads, discord.token_file or systemd's LoadCredential=discord-token:/etc/hanarang/discord-token"),
        "{out}"
    );
    assert!(
        out.contains("ok   discord login: Discord accepted the token"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn each_failure_names_its_fix_and_the_exit_code_is_1() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup::default());
    // A program that is not installed, and a "forum" that is some other channel.
    let config = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace(
            "[agent.erang]\nargs",
            "[agent.erang]\nprogram = \"hanarang-no-such-deployer\"\nargs",
        );
    std::fs::write(&files.config_path, config).unwrap();
    files.append_config(&discord(&fake, 424242));
    // One of darang's reviewers is checked as a sister of its own.
    files.append_config(
        "[agent.darang.reviewers.runtime]\nprogram = \"hanarang-no-such-reviewer\"\n",
    );
    let (code, out) = tokio::task::spawn_blocking(move || {
        doctor(&files, Some(support::fake_discord::FAKE_TOKEN))
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL agent erang: hanarang-no-such-deployer is not on PATH\n     fix: install it, or set agent.program / agent.erang.program to its full path"),
        "{out}"
    );
    assert!(
        out.contains("FAIL agent darang reviewer runtime: hanarang-no-such-reviewer is not on PATH\n     fix: install it, or set agent.program / agent.darang.reviewers.runtime.program to its full path"),
        "{out}"
    );
    assert!(out.contains("FAIL discord forum: "), "{out}");
    assert!(out.contains("not a forum of guild"), "{out}");
    assert!(
        out.contains("fix: set discord.forum_channel_id to a forum channel of the guild"),
        "{out}"
    );
    assert!(out.contains("checks failed"), "{out}");
}

#[test]
fn a_missing_token_variable_is_a_failed_check() {
    let files = Files::new(&Setup::default());
    files.append_config(
        "[discord]\ntoken_env = \"HANARANG_TEST_DISCORD_TOKEN\"\nguild_id = 1\nforum_channel_id = 2\nuser_id = 3\n",
    );
    let (code, out) = doctor(&files, None);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL discord token: discord.token_env: the environment variable HANARANG_TEST_DISCORD_TOKEN is not set"),
        "{out}"
    );
    assert!(
        out.contains("fix: put the bot token in a file the service reads (discord.token_file, or systemd's LoadCredential=discord-token:PATH), or export HANARANG_TEST_DISCORD_TOKEN=<the bot token>"),
        "{out}"
    );
}

#[test]
fn without_a_config_file_doctor_says_how_to_make_one() {
    let empty = support::TempDir::new("no-config");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .current_dir(empty.path())
        .env_remove("HANARANG_CONFIG")
        .arg("doctor")
        .output()
        .expect("run doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL config: no config file"), "{text}");
    assert!(
        text.contains("fix: copy config.toml.example to ./config.toml and edit it"),
        "{text}"
    );
}

#[test]
fn doctor_warns_when_the_claude_preset_would_run_as_root() {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let files = Files::new(&Setup::default());
    let bin = files.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::copy(support::sister_script("say.sh"), &claude).unwrap();
    let config = std::fs::read_to_string(&files.config_path).unwrap().replace(
        "[agent.narang]\nargs = [\"ok\"]",
        &format!(
            "[agent.narang]\nprogram = \"{}\"\nargs = [\"-p\", \"--permission-mode\", \"bypassPermissions\"]",
            claude.display()
        ),
    );
    assert!(config.contains("bypassPermissions"), "{config}");
    std::fs::write(&files.config_path, config).unwrap();
    let doctor = |sandbox: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hanarang"));
        cmd.arg("--config").arg(&files.config_path).arg("doctor");
        match sandbox {
            Some(v) => cmd.env("IS_SANDBOX", v),
            None => cmd.env_remove("IS_SANDBOX"),
        };
        String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned()
    };
    let plain = doctor(None);
    assert_eq!(
        plain.contains("FAIL agent narang")
            && plain.contains("cannot be used with root/sudo privileges"),
        root,
        "{plain}"
    );
    let sandboxed = doctor(Some("1"));
    assert!(!sandboxed.contains("FAIL agent narang"), "{sandboxed}");
}

#[test]
fn doctor_says_when_openclaw_would_meet_a_node_too_old_for_it() {
    let files = Files::new(&Setup::default());
    let bin = files.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let openclaw = bin.join("openclaw");
    std::fs::copy(support::sister_script("say.sh"), &openclaw).unwrap();
    let config = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace(
            "[agent.darang]\nargs = [\"ok\"]",
            &format!(
                "[agent.darang]\nprogram = \"{}\"\nargs = []",
                openclaw.display()
            ),
        );
    std::fs::write(&files.config_path, config).unwrap();
    let with_node = |version: &str| {
        let fake = support::TempDir::new("node");
        let node = fake.path().join("node");
        std::fs::write(&node, format!("#!/bin/sh\necho {version}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}",
            fake.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new(env!("CARGO_BIN_EXE_hanarang"))
            .arg("--config")
            .arg(&files.config_path)
            .arg("doctor")
            .env("PATH", path)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let old = with_node("v20.20.2");
    assert!(
        old.contains("FAIL agent darang")
            && old.contains("needs Node 24.16 or newer, and the `node` first on PATH is v20.20.2"),
        "{old}"
    );
    let new = with_node("v24.16.0");
    assert!(!new.contains("FAIL agent darang"), "{new}");
}

/// A PostgreSQL database: doctor connects, names the server's version and the migrations,
/// and changes nothing; an unreachable server is a failed check that names the fix, and
/// a password in the URL is never printed.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn a_postgres_database_is_checked_without_being_set_up() {
    let files = Files::new(&Setup {
        engine: support::db::Engine::Postgres,
        ..Setup::default()
    });
    let url = files.config().database.url;
    let run = |files: Files| {
        tokio::task::spawn_blocking(move || {
            let r = doctor(&files, None);
            (r, files)
        })
    };
    let ((code, out), files) = run(files).await.unwrap();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok   database: "), "{out}");
    assert!(out.contains("(PostgreSQL 1"), "{out}");
    assert!(
        out.contains("its tables are created at the first start"),
        "{out}"
    );
    assert_eq!(
        hanarang::store::Store::migration_status(&url)
            .await
            .unwrap(),
        hanarang::store::MigrationStatus::NotCreated,
        "doctor set nothing up"
    );
    hanarang::store::Store::open(&url)
        .await
        .unwrap()
        .close()
        .await;
    let ((code, out), files) = run(files).await.unwrap();
    assert_eq!(code, 0, "{out}");
    let applied = support::db::Engine::Postgres.migrations().len();
    assert!(
        out.contains(&format!("{applied} migrations applied")),
        "{out}"
    );

    // A server that does not answer, with a password in the URL.
    let config = std::fs::read_to_string(&files.config_path).unwrap();
    let unreachable = format!(
        "postgres://hanarang:s3cret@127.0.0.1:{}/hanarang",
        support::fake_discord::FakeDiscord::unused_port()
    );
    std::fs::write(
        &files.config_path,
        config.replace(url.as_str(), &unreachable),
    )
    .unwrap();
    let ((code, out), _files) = run(files).await.unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL database"), "{out}");
    assert!(out.contains("that the PostgreSQL server runs"), "{out}");
    assert!(out.contains("postgres://hanarang:***@127.0.0.1"), "{out}");
    assert!(
        !out.contains("s3cret"),
        "the password is never printed: {out}"
    );
}

#[test]
fn doctor_runs_the_presets_cli_and_warns_outside_its_tested_versions() {
    let files = Files::new(&Setup::default());
    let bin = files.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    let config = std::fs::read_to_string(&files.config_path).unwrap().replace(
        "[agent.narang]\nargs = [\"ok\"]",
        &format!(
            "[agent.narang]\npreset = \"claude-code\"\nprogram = \"{}\"\nenv = {{ IS_SANDBOX = \"1\" }}",
            claude.display()
        ),
    );
    assert!(config.contains("preset = \"claude-code\""), "{config}");
    std::fs::write(&files.config_path, config).unwrap();
    let with_version = |version: &str| {
        std::fs::write(
            &claude,
            format!("#!/bin/sh\necho '{version} (Claude Code)'\n"),
        )
        .unwrap();
        let mut perms = std::fs::metadata(&claude).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&claude, perms).unwrap();
        let (_, out) = doctor(&files, None);
        out.lines()
            .filter(|l| l.contains("agent narang") || l.trim_start().starts_with("fix:"))
            .skip_while(|l| !l.contains("agent narang"))
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let tested = with_version("2.1.332");
    assert!(
        tested.starts_with("ok   agent narang:")
            && tested.contains("(2.1.332 (Claude Code); preset claude-code was tested with it)"),
        "{tested}"
    );
    let newer = with_version("2.1.400");
    assert!(
        newer.starts_with("warn agent narang:")
            && newer.contains("is 2.1.400 (Claude Code), not a version preset claude-code was tested with (2.1.332)"),
        "{newer}"
    );
}

/// With neither `preset` nor `program`, the sisters would run the design's `openclaw spawn
/// …`, which no installed CLI answers: `config check` (still valid) and `doctor` say so,
/// naming both keys; one line choosing a preset silences them.
#[test]
fn no_preset_and_no_program_is_said_with_both_keys() {
    let dir = support::TempDir::new("design-default");
    std::fs::create_dir_all(dir.path().join("work")).unwrap();
    let config = dir.path().join("config.toml");
    let base = "[database]\nurl = \"sqlite://h.db\"\n[projects.app]\nworkdir = \"work\"\n";
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hanarang"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .expect("run hanarang")
    };
    std::fs::write(&config, base).unwrap();
    let check = run(&["config", "check"]);
    let said = String::from_utf8_lossy(&check.stderr).into_owned();
    assert_eq!(check.status.code(), Some(0), "{said}");
    let warning = "sisters run the design's `openclaw spawn …` (the default while neither agent.preset nor agent.program is set)";
    assert!(said.contains(&format!("warning: {warning}")), "{said}");
    let doctor = String::from_utf8_lossy(&run(&["doctor"]).stdout).into_owned();
    assert_eq!(doctor.matches(warning).count(), 1, "said once: {doctor}");
    assert!(
        doctor.contains(&format!("warn agent command: {warning}"))
            && doctor.contains("fix: set agent.preset = "),
        "{doctor}"
    );
    // The program checks still say what they find of `openclaw` itself.
    assert!(doctor.contains("agent harang: "), "{doctor}");

    std::fs::write(&config, format!("{base}[agent]\npreset = \"codex\"\n")).unwrap();
    let check = run(&["config", "check"]);
    let said = String::from_utf8_lossy(&check.stderr).into_owned();
    assert_eq!(check.status.code(), Some(0), "{said}");
    assert!(!said.contains("agent.preset"), "{said}");
    let doctor = String::from_utf8_lossy(&run(&["doctor"]).stdout).into_owned();
    assert!(!doctor.contains("agent command"), "{doctor}");
}
