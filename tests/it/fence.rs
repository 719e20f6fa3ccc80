//! Sisters fenced from the orchestrator, as an operator meets it: `doctor`
//! says whether sisters run confined, `confine = "required"` starts nothing without
//! Landlock and otherwise `run` warns once; with PostgreSQL a sister gets neither the
//! database's URL nor its password, nor a connection to its server.
//!
//! A kernel without Landlock is had with `HANARANG_LANDLOCK=off`.

use std::process::{Command, Output};

use crate::support::db::Engine;
use crate::support::pipeline::{Files, Setup};

fn hanarang(files: &Files, envs: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .arg("--config")
        .arg(&files.config_path)
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .expect("run hanarang")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `[agent] confine = "required"` in the pipeline's config.
pub(crate) fn require_confinement(files: &Files) {
    let config = std::fs::read_to_string(&files.config_path).expect("read config");
    let config = config.replacen("[agent]\n", "[agent]\nconfine = \"required\"\n", 1);
    std::fs::write(&files.config_path, config).expect("write config");
}

/// The runs the scripted sisters counted.
fn sister_runs(files: &Files) -> usize {
    std::fs::read_dir(&files.state_dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".count"))
                .count()
        })
        .unwrap_or(0)
}

const NO_LANDLOCK: (&str, &str) = ("HANARANG_LANDLOCK", "off");

#[test]
fn doctor_warns_without_landlock_and_fails_when_it_is_required() {
    let files = Files::new(&Setup::default());
    let out = hanarang(&files, &[NO_LANDLOCK], &["doctor"]);
    let said = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning does not fail doctor: {said}"
    );
    assert!(
        said.contains("warn confinement: sisters and checks run unconfined")
            && said.contains("fix: run hanarang on a kernel with Landlock"),
        "{said}"
    );
    if nix::unistd::geteuid().is_root() {
        assert!(
            said.contains("run unconfined, and as root"),
            "a root hanarang says its sisters would be root unfenced: {said}"
        );
    }

    require_confinement(&files);
    let out = hanarang(&files, &[NO_LANDLOCK], &["doctor"]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("FAIL confinement: agent.confine = \"required\""),
        "{said}"
    );
}

#[test]
fn required_confinement_without_landlock_starts_no_sister() {
    let files = Files::new(&Setup::default());
    require_confinement(&files);
    let out = hanarang(
        &files,
        &[NO_LANDLOCK],
        &["run", "Add a login page", "--auto-approve"],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("agent.confine = \"required\", and sisters cannot be confined here"),
        "{err}"
    );
    assert_eq!(sister_runs(&files), 0, "no sister ran");
    let out = hanarang(&files, &[], &["sprint", "status", "--json"]);
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert!(
        listed.iter().all(|s| s["state"] == "queued"),
        "nothing moved: {listed:?}"
    );
}

#[test]
fn without_landlock_run_warns_once_and_the_sprint_goes_on() {
    let files = Files::new(&Setup::default());
    let out = hanarang(
        &files,
        &[NO_LANDLOCK],
        &["run", "Add a login page", "--auto-approve"],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        err.matches("sisters and checks run unconfined").count(),
        1,
        "said once, at start: {err}"
    );
    assert!(sister_runs(&files) >= 4, "every sister ran");
}

#[test]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
fn on_postgres_a_sister_gets_neither_the_url_nor_the_password_nor_the_server() {
    if hanarang::fence::available().is_err() {
        eprintln!("no Landlock on this kernel: nothing to test");
        return;
    }
    let files = Files::new(&Setup {
        darang: "attack",
        engine: Engine::Postgres,
        ..Setup::default()
    });
    let url = files.config().database.url;
    let port = url::Url::parse(&url)
        .ok()
        .and_then(|u| u.port())
        .unwrap_or(5432)
        .to_string();
    let password = "a-password-of-hanarang";
    files.append_config(&format!(
        "[agent.darang.env]\nATTACK_DB = \"\"\nATTACK_CONFIG = {:?}\nATTACK_BIN = {:?}\nATTACK_PORT = \"{port}\"\nLEAKED_URL = {url:?}\n",
        files.config_path.display().to_string(),
        env!("CARGO_BIN_EXE_hanarang"),
    ));
    let out = hanarang(
        &files,
        &[
            ("PGPASSWORD", password),
            ("DATABASE_URL", &url),
            ("APP_SECRET_COPY", &format!("pw={password}")),
        ],
        &["run", "Add a login page", "--auto-approve"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log =
        std::fs::read_to_string(files.state_dir.join("attack.log")).expect("the attack's log");
    for tried in [
        "read-config:denied",
        "approve:denied",
        "connect-db-port:denied",
    ] {
        assert!(
            log.lines().any(|l| l == tried),
            "{tried} missing from\n{log}"
        );
    }
    let env = std::fs::read_to_string(files.state_dir.join("attack.env")).expect("its environment");
    for secret in [url.as_str(), password] {
        assert!(
            !env.contains(secret),
            "{secret:?} reached the sister:\n{env}"
        );
    }
    for name in [
        "PGPASSWORD=",
        "DATABASE_URL=",
        "LEAKED_URL=",
        "APP_SECRET_COPY=",
    ] {
        assert!(
            !env.lines().any(|l| l.starts_with(name)),
            "{name} reached the sister"
        );
    }
    assert!(
        env.lines().any(|l| l.starts_with("HANARANG_SPRINT_ID=")),
        "the sister's own variables are there: {env}"
    );
    // Nor in hanarang's own environment, as /proc shows it. A sister of a root hanarang
    // has given up every capability, so the kernel does not let it read a process that
    // holds them; of a hanarang that is not root, it reads what is there, zeroed.
    let read = std::fs::read_to_string(files.state_dir.join("hanarang.environ"));
    if nix::unistd::geteuid().is_root() {
        assert!(
            read.as_deref().unwrap_or_default().is_empty(),
            "a sister without capabilities reads root's /proc environ: {read:?}"
        );
        return;
    }
    let hanarangs = read.expect("hanarang's environment, as /proc shows it");
    assert!(
        hanarangs
            .lines()
            .any(|l| l.starts_with("HANARANG_") || l.starts_with("PATH=")),
        "{hanarangs}"
    );
    for secret in [url.as_str(), password] {
        assert!(
            !hanarangs.contains(secret),
            "{secret:?} is in hanarang's /proc environ"
        );
    }
}

#[test]
fn a_sister_reads_neither_the_token_file_nor_systemds_credentials() {
    if hanarang::fence::available().is_err() {
        eprintln!("no Landlock on this kernel: nothing to test");
        return;
    }
    let files = Files::new(&Setup {
        harang: "read",
        ..Setup::default()
    });
    let token = files.dir.path().join("discord-token");
    std::fs::write(&token, "the-bot-token\n").expect("token file");
    let credentials = files.dir.path().join("credentials");
    std::fs::create_dir_all(&credentials).expect("credentials folder");
    let credential = credentials.join("database-password");
    std::fs::write(&credential, "a-password").expect("a credential");
    let readable = files.dir.path().join("app/README.md");
    std::fs::write(&readable, "the project's own file").expect("readme");
    files.append_config(&format!(
        "[agent.harang.env]\nREAD_FILES = \"{} {} {}\"\n[discord]\ntoken_file = \"discord-token\"\nguild_id = 1\nforum_channel_id = 2\nuser_id = 3\n",
        token.display(),
        credential.display(),
        readable.display()
    ));
    let out = hanarang(
        &files,
        &[(
            "CREDENTIALS_DIRECTORY",
            credentials.to_str().expect("UTF-8"),
        )],
        &["run", "Add a login page", "--auto-approve"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log = std::fs::read_to_string(files.state_dir.join("read.log")).expect("the reads' log");
    for (path, outcome) in [
        (&token, "denied"),
        (&credential, "denied"),
        (&readable, "ALLOWED"),
    ] {
        let line = format!("{}:{outcome}", path.display());
        assert!(log.lines().any(|l| l == line), "{line} missing from\n{log}");
    }
}

/// hanarang's files are out of reach by where they are, not only by the names the config
/// gives them: a config that is a link (a versioned deploy folder), a database in a
/// linked folder.
#[test]
fn a_linked_config_or_database_folder_is_still_out_of_reach() {
    if hanarang::fence::available().is_err() {
        eprintln!("no Landlock on this kernel: nothing to test");
        return;
    }
    let files = Files::new(&Setup {
        harang: "read",
        ..Setup::default()
    });
    let dir = files.dir.path();
    let release = dir.join("releases/7");
    std::fs::create_dir_all(&release).expect("a release folder");
    std::fs::create_dir_all(dir.join("data")).expect("a data folder");
    std::os::unix::fs::symlink(dir.join("data"), dir.join("current-data")).expect("link");
    let real_config = release.join("config.toml");
    let real_db = dir.join("data/hanarang.db");
    let config = std::fs::read_to_string(&files.config_path).expect("config");
    let url = files.config().database.url;
    let config = config.replace(
        url.as_str(),
        &format!(
            "sqlite://{}",
            dir.join("current-data/hanarang.db").display()
        ),
    );
    std::fs::write(&real_config, config).expect("the real config");
    std::fs::remove_file(&files.config_path).expect("the config's old place");
    std::os::unix::fs::symlink(&real_config, &files.config_path).expect("config link");
    files.append_config(&format!(
        "[agent.harang.env]\nREAD_FILES = \"{} {}\"\n",
        real_config.display(),
        real_db.display(),
    ));
    let out = hanarang(&files, &[], &["run", "Add a login page", "--auto-approve"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(real_db.exists(), "the database is in the linked folder");
    let log = std::fs::read_to_string(files.state_dir.join("read.log")).expect("the reads' log");
    for path in [&real_config, &real_db] {
        let line = format!("{}:denied", path.display());
        assert!(log.lines().any(|l| l == line), "{line} missing from\n{log}");
    }
}

/// A sister run as root gets no write to `/proc` or `/sys`, no device but the usual ones,
/// and no capability: it cannot set the kernel's core pattern (whose `|program` would run
/// as root outside every fence at the next crash), hanarang's OOM score, or leave its
/// cgroup, nor mount. Each write puts back the value it read: a failure changes nothing.
#[test]
fn a_root_sister_writes_nothing_of_the_kernels_and_keeps_no_capability() {
    if hanarang::fence::available().is_err() {
        eprintln!("no Landlock on this kernel: nothing to test");
        return;
    }
    let files = Files::new(&Setup {
        harang: "privileges",
        ..Setup::default()
    });
    let out = hanarang(&files, &[], &["run", "Add a login page", "--auto-approve"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log =
        std::fs::read_to_string(files.state_dir.join("privileges.log")).expect("the sister's log");
    let mut denied = vec![
        "core-pattern",
        "hanarang-oom-score-adj",
        "own-oom-score-adj",
        "dev-kmsg",
        "mount",
    ];
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    if mountinfo.contains(" - cgroup2 ") {
        denied.push("leave-cgroup");
    }
    for name in denied {
        let line = format!("{name}:denied");
        assert!(log.lines().any(|l| l == line), "{line} missing from\n{log}");
    }
    assert!(log.lines().any(|l| l == "dev-null:ALLOWED"), "{log}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd"] {
        let line = format!("{set}:\t0000000000000000");
        assert!(log.lines().any(|l| l == line), "{line} missing from\n{log}");
    }
    assert!(log.lines().any(|l| l == "NoNewPrivs:\t1"), "{log}");
}
