//! A run's container: a cgroup v2 of its own that every process of the run (the sister,
//! the check, whatever they start) is put in by the kernel at spawn, and that hanarang
//! empties and removes when the run ends. Found by where the kernel put a process, not by
//! a marker a process could shed: double forks, `setsid`, a new environment or name change
//! nothing.
//!
//! A run's cgroup is made beside hanarang in its own cgroup, named for the database's runs
//! folder and the run (`hanarang-<id>.SPRINT-001-R03`), so nothing outlives a run but what a
//! crash left; the cgroup folders used are listed in the runs folder, out of the agents'
//! reach, so recovery finds a crashed process's leftovers wherever it ran. A fenced sister
//! cannot leave its cgroup: Landlock refuses it the cgroup files.

use std::io::Write as _;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::time::Instant;

/// Set to `off`, hanarang behaves as on a host that gives no cgroup v2: to try what a
/// deployment does there (`confine = "required"`, the warnings) before it meets one.
pub const CGROUP_ENV: &str = "HANARANG_CGROUP";

/// The list, in the runs folder, of the cgroup folders this database's runs were put in.
const LIST: &str = "containers";

/// Where a database's runs get their containers.
#[derive(Debug, Clone)]
pub struct Containers {
    home: Arc<Home>,
}

#[derive(Debug)]
struct Home {
    /// hanarang's own cgroup folder, where runs' cgroups are made.
    dir: PathBuf,
    /// `hanarang-<id>`: the runs folder's, begins each of its runs' cgroup names.
    prefix: String,
    /// The runs folder, where the folders used before are listed.
    runs_dir: PathBuf,
}

impl Containers {
    /// Where `runs_dir`'s runs get their containers, listed in it now; the error says
    /// what the host lacks.
    pub fn open(runs_dir: &Path) -> Result<Containers, String> {
        let dir = own_cgroup()?;
        let prefix = format!("hanarang-{}", folder_id(runs_dir));
        probe(&dir, &prefix)?;
        remember(runs_dir, &dir);
        Ok(Containers {
            home: Arc::new(Home {
                dir,
                prefix,
                runs_dir: runs_dir.to_path_buf(),
            }),
        })
    }

    /// Where `run_id`'s container is (or would be) made.
    pub fn path_of(&self, run_id: &str) -> PathBuf {
        self.home.dir.join(self.name(run_id))
    }

    fn name(&self, run_id: &str) -> String {
        format!("{}.{}", self.home.prefix, name(run_id))
    }

    /// A new, empty container for `run_id`. One left by a crash under the same name is
    /// emptied first.
    pub async fn make(&self, run_id: &str, grace: Duration) -> std::io::Result<Container> {
        let dir = self.path_of(run_id);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Container::open(dir.clone())?.stop(grace).await;
                std::fs::create_dir(&dir)?;
            }
            Err(e) => return Err(e),
        }
        Container::open(dir)
    }

    /// Stops and removes whatever is left of `run_id`'s processes in any cgroup folder
    /// this database's runs were given (after a crash, or a host's takeover). Nothing left:
    /// nothing done.
    pub async fn stop_leftovers(&self, run_id: &str, grace: Duration) {
        let mut homes = listed(&self.home.runs_dir);
        if !homes.contains(&self.home.dir) {
            homes.push(self.home.dir.clone());
        }
        for home in homes {
            if let Ok(container) = Container::open(home.join(self.name(run_id))) {
                tracing::warn!(run = %run_id, container = %container.dir.display(), "stopping what is left of a run in flight");
                container.close(grace).await;
            }
        }
    }

    /// The cgroup folder the containers are made in.
    pub fn home(&self) -> &Path {
        &self.home.dir
    }
}

/// One run's cgroup. Dropped with processes still in it (a run's task dropped on
/// shutdown), they are killed.
#[derive(Debug)]
pub struct Container {
    dir: PathBuf,
    /// `cgroup.procs`, open for writing: the child writes itself into it between clone
    /// and exec.
    procs: std::fs::File,
    removed: bool,
}

impl Container {
    fn open(dir: PathBuf) -> std::io::Result<Container> {
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))?;
        Ok(Container {
            dir,
            procs,
            removed: false,
        })
    }

    /// Its `cgroup.procs`, open for writing, which a run's child writes itself into
    /// before it execs (`launch`), so that everything it ever starts is in it too.
    pub(crate) fn procs(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// Whether any process is still in it.
    pub fn populated(&self) -> bool {
        // Unreadable: its folder is gone, and with it every process.
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|l| l == "populated 1"))
    }

    /// The processes in it now.
    pub fn members(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Ends every process in it: SIGTERM (and SIGCONT, so a stopped one can act on it),
    /// the grace period while any is left, then the kernel's kill of the whole container.
    /// Returns once it is empty (or the kernel could not empty it: logged).
    pub async fn stop(&self, grace: Duration) {
        if !self.populated() {
            return;
        }
        let mut told: Vec<u32> = Vec::new();
        let deadline = Instant::now() + grace;
        loop {
            for pid in self.members() {
                if !told.contains(&pid) {
                    signal(pid, Signal::SIGTERM);
                    signal(pid, Signal::SIGCONT);
                    told.push(pid);
                }
            }
            if !self.populated() {
                return;
            }
            if Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill();
        for _ in 0..200 {
            if !self.populated() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tracing::warn!(container = %self.dir.display(), members = ?self.members(), "processes of a run survived the kill of their cgroup");
    }

    /// SIGKILL to everything in it at once (`cgroup.kill`); where the kernel has no
    /// `cgroup.kill` (before Linux 5.14), frozen, then each process killed.
    fn kill(&self) {
        let all = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"));
        if all.is_ok() {
            return;
        }
        let freeze = |v: &[u8]| {
            let _ = std::fs::write(self.dir.join("cgroup.freeze"), v);
        };
        freeze(b"1");
        for pid in self.members() {
            signal(pid, Signal::SIGKILL);
        }
        freeze(b"0");
    }

    /// Stops what is left (see `stop`) and removes the container.
    pub async fn close(mut self, grace: Duration) {
        // Mostly empty already (a run's end empties it): then removed at once, since the
        // kernel refuses to remove a cgroup with a process in it.
        self.removed = std::fs::remove_dir(&self.dir).is_ok();
        if !self.removed {
            self.stop(grace).await;
            self.removed = std::fs::remove_dir(&self.dir).is_ok();
        }
        if !self.removed {
            tracing::warn!(container = %self.dir.display(), "a run's cgroup could not be removed");
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        if self.populated() {
            self.kill();
            for _ in 0..100 {
                if !self.populated() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn signal(pid: u32, signal: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// A run id as a cgroup's name (`SPRINT-001/R03` → `SPRINT-001.R03`).
fn name(run_id: &str) -> String {
    run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '.'
            }
        })
        .collect()
}

/// A short id of the runs folder: two databases' runs never share a home.
fn folder_id(runs_dir: &Path) -> String {
    use sha2::Digest;
    let path = std::path::absolute(runs_dir).unwrap_or_else(|_| runs_dir.to_path_buf());
    let digest = sha2::Sha256::digest(path.as_os_str().as_encoded_bytes());
    digest.iter().take(8).fold(String::new(), |mut s, b| {
        s.push_str(&format!("{b:02x}"));
        s
    })
}

/// hanarang's own cgroup v2 folder: the v2 mount (from `/proc/self/mountinfo`) joined with
/// the path `/proc/self/cgroup` gives for the unified hierarchy.
fn own_cgroup() -> Result<PathBuf, String> {
    if std::env::var(CGROUP_ENV).is_ok_and(|v| v == "off") {
        return Err(format!(
            "{CGROUP_ENV}=off: treated as a host without cgroup v2"
        ));
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mount = mountinfo
        .lines()
        .find_map(|line| {
            // "id parent major:minor root mount-point options ... - fstype source ..."
            let (left, right) = line.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .ok_or("no cgroup v2 hierarchy is mounted (cgroup2 is not in /proc/self/mountinfo)")?;
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let own = cgroups
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or("this process is in no cgroup v2 (no `0::` line in /proc/self/cgroup)")?;
    Ok(mount.join(own.trim_start_matches('/')))
}

/// Whether processes may be moved into cgroups made in `dir`: a probe named after
/// `prefix` is made and removed.
fn probe(dir: &Path, prefix: &str) -> Result<(), String> {
    let probe = dir.join(format!("{prefix}.probe-{}", std::process::id()));
    std::fs::create_dir(&probe).map_err(|e| cannot_make(dir, &e))?;
    let writable = std::fs::OpenOptions::new()
        .write(true)
        .open(probe.join("cgroup.procs"));
    let _ = std::fs::remove_dir(&probe);
    writable.map(|_| ()).map_err(|e| {
        format!(
            "cannot move processes into cgroups under {}: {e} (hanarang's own cgroup is not delegated to it: run it as a systemd service with Delegate=yes)",
            dir.display()
        )
    })
}

fn cannot_make(dir: &Path, e: &std::io::Error) -> String {
    format!(
        "cannot make a cgroup at {}: {e} (run hanarang as a systemd service with Delegate=yes, which gives it its own cgroup to manage)",
        dir.display()
    )
}

/// Adds `home` to the runs folder's list of cgroup folders, once.
fn remember(runs_dir: &Path, home: &Path) {
    if listed(runs_dir).iter().any(|h| h == home) {
        return;
    }
    let _ = std::fs::create_dir_all(runs_dir);
    let line = format!("{}\n", home.display());
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(runs_dir.join(LIST))
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = appended {
        tracing::warn!(error = %e, "cannot list the runs' cgroup folder in the runs folder: a crash's leftovers may not be found from another cgroup");
    }
}

/// The cgroup folders this database's runs were given, from the runs folder's list: only
/// folders of a cgroup hierarchy.
fn listed(runs_dir: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string(runs_dir.join(LIST))
        .unwrap_or_default()
        .lines()
        .map(PathBuf::from)
        .filter(|home| home.is_absolute() && home.join("cgroup.procs").exists())
        .collect()
}

/// Whether runs get containers here, or why not: what `doctor` and `serve` tell.
pub fn available() -> Result<PathBuf, String> {
    let own = own_cgroup()?;
    probe(&own, "hanarang").map(|()| own)
}

/// Whether runs will be contained, as `serve`, `run` and `doctor` tell it.
pub enum Containment {
    /// Each run in a cgroup of its own, under this folder.
    Contained(PathBuf),
    /// Not contained, as `confine = "auto"` allows: the warning.
    Uncontained(String),
    /// Not contained, which `confine = "required"` forbids: nothing starts.
    Refused(String),
}

pub fn containment(required: bool) -> Containment {
    match available() {
        Ok(dir) => Containment::Contained(dir),
        Err(why) if required => Containment::Refused(format!(
            "agent.confine = \"required\", and a run's processes cannot be contained here: {why}"
        )),
        Err(why) => Containment::Uncontained(format!(
            "a run's processes are stopped by their process group only, so a daemon a sister starts (setsid) can outlive its run: {why}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::name;

    #[test]
    fn a_run_id_is_one_folder_name() {
        assert_eq!(name("SPRINT-001/R03"), "SPRINT-001.R03");
        assert_eq!(name("../x"), "...x");
    }
}
