//! Sisters fenced from the orchestrator, with Linux Landlock: a sister (and
//! the project's check) may read everything but hanarang's database, its config file and
//! the runs folder (its own contract and schema files excepted), and may write only in
//! the project's workdir, its own artifact folder, the system's temporary folder and
//! `[agent] writable` — in each of these, again, nothing of hanarang's.
//!
//! Landlock only grants: "everything but these" is granted as the entries beside each
//! protected path, level by level down from the root (a file made later beside the
//! database is not granted). The ruleset is built in the parent; the child only enters
//! it, between fork and exec.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

/// The newest Landlock ABI the rules are written for; an older kernel enforces what it
/// knows (files from ABI 1, TCP ports from 4, abstract sockets and signals from 6).
const TARGET: ABI = ABI::V6;

/// The devices a run may write (and `/dev/shm`): no other device, nothing of `/proc` or
/// `/sys` — Landlock is what refuses a root sister `kernel.core_pattern`, whose owner and
/// mode the kernel checks, not capabilities. A run is given pipes, not a pty: a CLI that
/// wants one opens `/dev/ptmx` and takes its peer by descriptor.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/shm",
];

/// What a run may and may not touch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Neither read nor written: the database files, the config file, the runs folder.
    pub protected: Vec<PathBuf>,
    /// Read though under a protected path: the run's contract and schema files.
    pub readable: Vec<PathBuf>,
    /// Written (and read): the workdir, the run's artifact folder, the temporary folder,
    /// `[agent] writable`.
    pub writable: Vec<PathBuf>,
    /// Where TCP connections may go.
    pub tcp: Tcp,
    /// `Some`: the only programs that may be executed (and the folders whose programs
    /// may), every other file readable and writable but not executable; `None`: any.
    pub exec: Option<Vec<PathBuf>>,
}

/// Where a fenced process may connect over TCP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Tcp {
    /// Anywhere.
    #[default]
    Open,
    /// Anywhere but this port: the PostgreSQL server's.
    ClosedPort(u16),
    /// Nowhere (git on a workdir needs no network).
    Closed,
}

/// What of hanarang's no agent may reach, from its config: the database's files (with
/// PostgreSQL its password file, port and the variables that carry its URL or password),
/// the config file, the runs folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Own {
    pub files: Vec<PathBuf>,
    /// The runs folder: where hanarang keeps what no agent may touch during a run.
    pub runs: Option<PathBuf>,
    /// The PostgreSQL server's TCP port.
    pub db_port: Option<u16>,
    /// `[agent] confine = "required"`.
    pub required: bool,
    /// The database's URL and its password, with PostgreSQL.
    db_secrets: Option<(String, Option<String>)>,
}

impl Own {
    /// Nothing of hanarang's but its runs folder (a tool's or a test's git).
    pub fn runs_only(runs: PathBuf) -> Own {
        Own {
            files: vec![runs.clone()],
            runs: Some(runs),
            ..Own::default()
        }
    }

    /// hanarang's own files under every name they go by, and its database's secrets.
    pub fn of(config: &crate::config::Config, runs_dir: &Path) -> Own {
        let mut named: Vec<PathBuf> = Vec::new();
        if let Some(db) = crate::store::database_path(&config.database.url) {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut name = db.clone().into_os_string();
                name.push(suffix);
                named.push(name.into());
            }
        }
        named.extend(config.source.clone());
        named.push(runs_dir.to_path_buf());
        named.extend(crate::config::secret_files(config));
        let url = &config.database.url;
        let postgres = crate::config::postgres_reach(url);
        if let Some(reach) = &postgres {
            named.extend(reach.passfile.clone());
        }
        // Each by the path it is named with and by where that leads: a config that is a
        // link (a versioned deploy folder), a database under a linked folder. The fence
        // grants by what it walks, and does not follow links.
        let mut files = Vec::new();
        for path in named {
            for each in [std::path::absolute(&path).ok(), resolved(&path)]
                .into_iter()
                .flatten()
            {
                if !files.contains(&each) {
                    files.push(each);
                }
            }
        }
        Own {
            files,
            runs: Some(runs_dir.to_path_buf()),
            db_port: postgres.as_ref().and_then(|r| r.tcp_port),
            required: config.agent.confine == crate::config::Confine::Required,
            db_secrets: postgres.map(|r| (url.to_string(), r.password)),
        }
    }

    /// The variables a run may not be given: those of hanarang's environment and of the
    /// sister's `env` that carry the database's URL or password.
    pub fn hidden_env(&self, env: &std::collections::BTreeMap<String, String>) -> Vec<String> {
        let Some((url, password)) = &self.db_secrets else {
            return Vec::new();
        };
        let carries = |value: &str| {
            value.contains(url.as_str())
                || password
                    .as_deref()
                    .is_some_and(|p| value == p || (p.len() >= 6 && value.contains(p)))
        };
        let own = std::env::vars_os().filter_map(|(k, v)| {
            let name = k.into_string().ok()?;
            let value = v.to_string_lossy();
            (name.starts_with("PGPASS") || carries(&value)).then_some(name)
        });
        let given = env
            .iter()
            .filter(|(_, v)| carries(v))
            .map(|(k, _)| k.clone());
        own.chain(given).collect()
    }
}

/// Where `path` leads once every link on the way is followed: the path itself when it
/// exists, else its folder's resolved path with its name (a `-wal` not made yet).
fn resolved(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok().or_else(|| {
        let folder = std::fs::canonicalize(path.parent()?).ok()?;
        Some(folder.join(path.file_name()?))
    })
}

/// A run's fence: its plan, and whether it may run without one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fence {
    pub plan: Plan,
    /// `[agent] confine = "required"`: no start without Landlock.
    pub required: bool,
    /// Variables taken out of the run's environment, with or without Landlock: those
    /// that carry the database's password or URL.
    pub hidden_env: Vec<String>,
}

impl Fence {
    /// Readies `command` to enter the fence before it runs its program, with `more`
    /// readable files (the contract's). `Err`: it may not start (confinement is required
    /// and not to be had); unconfined where Landlock is missing and it is not required.
    pub fn apply(
        &self,
        command: &mut crate::sister::launch::Launch,
        more: &[PathBuf],
        run_id: &str,
    ) -> Result<(), String> {
        for name in &self.hidden_env {
            command.env_remove(name);
        }
        // Fenced or not, a run started by a root hanarang keeps none of root's powers.
        command.renounce_privileges();
        let mut plan = self.plan.clone();
        plan.readable.extend(more.iter().cloned());
        // Where a temporary folder holds hanarang's files (its database under /tmp or
        // /var/tmp), only what is beside them is granted and no new file can go in it:
        // the run gets a folder of its own in the system's, made before the rules are, as
        // its TMPDIR (which SQLite, too, takes before /var/tmp).
        let temps = [std::env::temp_dir(), PathBuf::from("/var/tmp")];
        let tmp = private_tmp(run_id);
        if self.plan.writable.contains(&temps[0])
            && self
                .plan
                .protected
                .iter()
                .any(|p| temps.iter().any(|t| p.starts_with(t)))
            && std::fs::create_dir_all(&tmp).is_ok()
        {
            command
                .env("TMPDIR", &tmp)
                .env("TMP", &tmp)
                .env("TEMP", &tmp);
            plan.writable.push(tmp);
        }
        let rules = match available().and_then(|_| ruleset(&plan)) {
            Ok(rules) => rules,
            Err(why) if self.required => {
                return Err(format!(
                    "confinement is required ([agent] confine = \"required\") and cannot be had: {why}"
                ));
            }
            Err(_) => return Ok(()),
        };
        command.fence(rules);
        Ok(())
    }
}

/// Whether sisters will run fenced, as `serve`, `run` and `doctor` tell it.
pub enum Confinement {
    /// Fenced, with this Landlock ABI.
    Fenced(i32),
    /// Unconfined, as `confine = "auto"` allows: the warning.
    Unconfined(String),
    /// Unconfined, which `confine = "required"` forbids: nothing starts.
    Refused(String),
}

/// What the fence will be for sisters, `required` or not.
pub fn confinement(required: bool) -> Confinement {
    match available() {
        Ok(abi) => Confinement::Fenced(abi),
        Err(why) if required => Confinement::Refused(format!(
            "agent.confine = \"required\", and sisters cannot be confined here: {why}"
        )),
        Err(why) if nix::unistd::geteuid().is_root() => Confinement::Unconfined(format!(
            "sisters and checks run unconfined, and as root: they can read and write hanarang's database and config and every file of the machine (they keep no capability, but root owns the files; {why})"
        )),
        Err(why) => Confinement::Unconfined(format!(
            "sisters and checks run unconfined: they can read and write hanarang's database and config ({why})"
        )),
    }
}

/// A run's own temporary folder (`TMPDIR`), removed when the run is over. Named for
/// this process too: another hanarang on its own database has run ids of its own.
pub fn private_tmp(run_id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hanarang-{}-{run_id}.tmp", std::process::id()))
}

/// Set to `off`, hanarang behaves as on a kernel without Landlock: to try what a
/// deployment does there (`confine = "required"`, the warnings) before it meets one.
pub const LANDLOCK_ENV: &str = "HANARANG_LANDLOCK";

/// The kernel's Landlock ABI version, or why there is none.
pub fn available() -> Result<i32, String> {
    if std::env::var(LANDLOCK_ENV).is_ok_and(|v| v == "off") {
        return Err(format!(
            "{LANDLOCK_ENV}=off: treated as a kernel without Landlock"
        ));
    }
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
    // SAFETY: the documented version query: no attribute, no size, a flag; no memory is
    // touched.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v >= 1 {
        return Ok(i32::try_from(v).unwrap_or(i32::MAX));
    }
    Err(match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOSYS) => "this kernel has no Landlock (not built in)".into(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built into this kernel but not enabled (the `lsm=` boot parameter)".into()
        }
        _ => format!(
            "Landlock could not be queried: {}",
            std::io::Error::last_os_error()
        ),
    })
}

/// The rules of `plan`, as a Landlock ruleset the child enters (`enter`).
pub fn ruleset(plan: &Plan) -> Result<OwnedFd, String> {
    let all = AccessFs::from_all(TARGET);
    let (read, write) = match plan.exec {
        Some(_) => (
            AccessFs::from_read(TARGET) & !AccessFs::Execute,
            all & !AccessFs::Execute,
        ),
        None => (AccessFs::from_read(TARGET), all),
    };
    let mut grants = Vec::new();
    grant_except(Path::new("/"), read, &plan.protected, &mut grants);
    for root in &plan.writable {
        grant_except(root, write, &plan.protected, &mut grants);
    }
    for file in &plan.readable {
        if file.exists() {
            grants.push((file.clone(), read));
        }
    }
    for program in plan.exec.iter().flatten() {
        if program.exists() {
            grants.push((program.clone(), AccessFs::from_read(TARGET)));
        }
    }
    let failed = |e: &dyn std::fmt::Display| format!("the Landlock ruleset: {e}");
    // Scoped: no signal to, and no abstract socket of (the wake-up's), a process outside
    // the fence. A closed port: every other TCP port is granted.
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(|e| failed(&e))?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(|e| failed(&e))?;
    if plan.tcp != Tcp::Open {
        ruleset = ruleset
            .handle_access(AccessNet::ConnectTcp)
            .map_err(|e| failed(&e))?;
    }
    let mut rules = ruleset.create().map_err(|e| failed(&e))?;
    if let Tcp::ClosedPort(closed) = plan.tcp {
        let open = (0..=u16::MAX)
            .filter(|port| *port != closed)
            .map(|port| Ok::<_, landlock::RulesetError>(NetPort::new(port, AccessNet::ConnectTcp)));
        rules = rules.add_rules(open).map_err(|e| failed(&e))?;
    }
    for (path, access) in grants {
        // A path gone meanwhile is simply not granted.
        let Ok(fd) = PathFd::new(&path) else { continue };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(TARGET)
        };
        rules = rules
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("the Landlock rule for {}: {e}", path.display()))?;
    }
    Option::<OwnedFd>::from(rules).ok_or_else(|| "this kernel has no Landlock".to_string())
}

/// Grants `access` on `root` and everything under it, except the protected paths: where
/// a protected path lies beneath, each entry beside it is granted instead (symbolic links
/// are not followed; what they point to has rules of its own).
fn grant_except(
    root: &Path,
    access: BitFlags<AccessFs>,
    protected: &[PathBuf],
    grants: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
) {
    if protected.iter().any(|p| p == root) {
        return;
    }
    if !protected.iter().any(|p| p.starts_with(root)) {
        if root.exists() {
            grants.push((root.to_path_buf(), access));
        }
        return;
    }
    // A folder on the way to a protected path: it may be listed, and what is beside the
    // way is granted.
    grants.push((root.to_path_buf(), access & AccessFs::ReadDir));
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        grant_except(&entry.path(), access, protected, grants);
    }
}

/// In the child, before it execs: no new privileges, then the ruleset. Only system calls:
/// nothing here allocates (`sister::launch` calls it in memory shared with the parent).
pub fn enter(ruleset: BorrowedFd<'_>) -> std::io::Result<()> {
    // SAFETY: prctl and landlock_restrict_self take plain integers.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// In the child, before it execs: every capability given up — ambient, bounding (where
/// this process may drop them: a process without `CAP_SETPCAP` has none to keep after an
/// exec under `no_new_privs`), permitted, effective and inheritable. Only system calls.
pub fn renounce() -> std::io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    struct Sets {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let failed = || Err(std::io::Error::last_os_error());
    // SAFETY: prctl takes plain integers; capset reads the header and two sets, all on
    // this stack.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return failed();
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
            && *libc::__errno_location() != libc::EINVAL
        {
            return failed();
        }
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                match *libc::__errno_location() {
                    // Past the kernel's last capability.
                    libc::EINVAL => break,
                    // No CAP_SETPCAP: nothing to keep across the exec anyway.
                    libc::EPERM if cap == 0 => break,
                    _ => return failed(),
                }
            }
        }
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let none = [
            Sets {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
            Sets {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        if libc::syscall(libc::SYS_capset, &raw const header, none.as_ptr()) != 0 {
            return failed();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn what_is_beside_a_protected_path_is_granted_and_it_is_not() {
        let dir = std::env::temp_dir().join(format!("hanarang-fence-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("runs/R01")).unwrap();
        std::fs::write(dir.join("hanarang.db"), "db").unwrap();
        std::fs::write(dir.join("notes.md"), "notes").unwrap();
        let protected = vec![dir.join("hanarang.db"), dir.join("runs")];
        let mut grants = Vec::new();
        grant_except(&dir, AccessFs::from_all(TARGET), &protected, &mut grants);
        let paths: Vec<&Path> = grants.iter().map(|(p, _)| p.as_path()).collect();
        assert!(paths.contains(&dir.join("notes.md").as_path()));
        assert!(!paths.iter().any(|p| p.starts_with(dir.join("runs"))));
        assert!(!paths.contains(&dir.join("hanarang.db").as_path()));
        let (_, on_dir) = grants.iter().find(|(p, _)| *p == dir).unwrap();
        assert_eq!(
            *on_dir,
            BitFlags::from(AccessFs::ReadDir),
            "the folder is only listed"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// With a list of programs, only those run: a shell the list does not name cannot
    /// start, whatever asks for it.
    #[test]
    fn only_the_listed_programs_run() {
        if available().is_err() {
            return;
        }
        let bash = std::fs::canonicalize("/bin/bash").unwrap();
        let loader = crate::git::elf_interpreter(&bash)
            .and_then(|l| std::fs::canonicalize(l).ok())
            .unwrap();
        let plan = Plan {
            writable: vec![PathBuf::from("/dev/null")],
            exec: Some(vec![bash.clone(), loader]),
            ..Plan::default()
        };
        let rules = ruleset(&plan).unwrap();
        let runs = |script: &str| {
            let mut command = std::process::Command::new(&bash);
            command.args(["-c", script]);
            let fd = rules.try_clone().unwrap();
            // SAFETY: `enter` makes two system calls and allocates nothing.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                    enter(fd.as_fd())
                });
            }
            command.status().unwrap().success()
        };
        assert!(runs("true"), "the listed program runs");
        assert!(!runs("/usr/bin/env true"), "another does not");
    }

    /// A fenced process cannot reach the closed port (the database server's) and can
    /// reach any other.
    #[test]
    fn the_closed_port_is_closed_and_the_others_are_open() {
        if available().is_err() {
            return;
        }
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = |l: &std::net::TcpListener| l.local_addr().unwrap().port();
        let plan = Plan {
            writable: vec![PathBuf::from("/")],
            tcp: Tcp::ClosedPort(port(&closed)),
            ..Plan::default()
        };
        let rules = ruleset(&plan).unwrap();
        let reach = |p: u16| {
            let mut command = std::process::Command::new("bash");
            command.args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{p}")]);
            let fd = rules.try_clone().unwrap();
            // SAFETY: `enter` makes two system calls and allocates nothing.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                    enter(fd.as_fd())
                });
            }
            command.status().unwrap().success()
        };
        assert!(!reach(port(&closed)), "the database's port is closed");
        assert!(reach(port(&open)), "another port is open");
    }
}
