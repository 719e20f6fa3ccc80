//! `hanarang serve` processes as hosts sharing one PostgreSQL database, for the
//! multi-host test and the hosts benchmark: each with its config (its name, the projects it
//! serves, its lease), the timed fixture sister, and its log in a file.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::sister_script;

/// One host's config.
pub struct HostSetup<'a> {
    pub name: &'a str,
    pub projects: &'a [String],
    pub lease_ttl: &'a str,
    pub max_sisters: Option<u32>,
    /// How long each run of the timed sister takes.
    pub sister_seconds: &'a str,
    /// `RUST_LOG` for the host.
    pub log_level: &'a str,
    /// More TOML for its config (a `[discord]` table, whose token is the fake's).
    pub extra: &'a str,
}

pub struct Host {
    pub name: String,
    child: Child,
    log: PathBuf,
}

impl Host {
    /// Starts `hanarang serve` (`bin`) with a config written into `dir`, where the
    /// projects' workdirs and the sisters' folder (`sisters/`) are.
    pub fn start(bin: &Path, dir: &Path, url: &str, setup: &HostSetup<'_>) -> Host {
        let mut toml = format!(
            r#"
[database]
url = "{url}"

[host]
name = "{name}"
lease_ttl = "{ttl}"
{cap}

[pipeline]
backoff = {{ initial = "10ms", factor = 2.0, max = "50ms" }}

[agent]
program = "{program}"
args = []
kill_grace = "500ms"
env = {{ STATE_DIR = "{state}", SISTER_SECONDS = "{seconds}" }}
{extra}
"#,
            name = setup.name,
            ttl = setup.lease_ttl,
            cap = setup
                .max_sisters
                .map(|n| format!("max_sisters = {n}"))
                .unwrap_or_default(),
            program = sister_script("timed.sh"),
            state = dir.join("sisters").display(),
            seconds = setup.sister_seconds,
            extra = setup.extra,
        );
        for project in setup.projects {
            std::fs::create_dir_all(dir.join(project)).expect("a workdir");
            toml.push_str(&format!(
                "\n[projects.{project}]\nworkdir = \"{}\"\n",
                dir.join(project).display()
            ));
        }
        std::fs::create_dir_all(dir.join("sisters")).expect("the sisters' folder");
        let config = dir.join(format!("{}.toml", setup.name));
        std::fs::write(&config, toml).expect("write a host's config");
        let log = dir.join(format!("{}.log", setup.name));
        let child = Command::new(bin)
            .arg("--config")
            .arg(&config)
            .arg("serve")
            .env("RUST_LOG", setup.log_level)
            .env(
                "HANARANG_TEST_DISCORD_TOKEN",
                super::fake_discord::FAKE_TOKEN,
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a host's log"))
            .spawn()
            .expect("start hanarang serve");
        Host {
            name: setup.name.to_string(),
            child,
            log,
        }
    }

    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal a host");
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("a pid"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // A frozen host would not see its SIGTERM.
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = kill(self.pid(), Signal::SIGTERM);
        let _ = self.child.wait();
    }
}
