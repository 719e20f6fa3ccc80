//! Starting one of a run's processes (a sister, the check) or git's — a spawn of our own.
//!
//! A run's child must be in its container and behind its fence before it runs one
//! instruction of its program. std (and tokio over it) can do that only with a `pre_exec`
//! hook, and with any hook it forks, copying the whole orchestrator's page tables. Here the child shares the parent's memory
//! until it execs (`clone(CLONE_VM | CLONE_VFORK)`, as `posix_spawn` does) and takes its
//! steps with system calls only: into its cgroup first, its own process group, its
//! descriptors, its folder, default signals, the fence, then `execve`.
//!
//! The child is waited for through a pidfd (a thread's blocking `waitid` where the kernel
//! has none), and killed when dropped unreaped, as tokio's `kill_on_drop` does.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString, c_char, c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;
use tokio::sync::oneshot;

use super::container::Container;

/// The child's stack until it execs. Its steps are a few system calls.
const STACK: usize = 64 * 1024;

/// What runs a file that has no `#!` line, as execvp has it run.
const SHELL: &std::ffi::CStr = c"/bin/sh";

/// What one of the child's standard descriptors is.
#[derive(Debug)]
pub enum Io {
    /// A pipe to the parent: its end is on the `Child`.
    Piped,
    /// `/dev/null`.
    Null,
    /// This descriptor (the child gets a copy; this one is closed once it has).
    Fd(OwnedFd),
}

/// A process to start: its program, arguments, folder, environment, descriptors, and the
/// fence it runs behind.
pub struct Launch {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    /// Changes to the orchestrator's environment (to none, when `clear`): `None` removes
    /// the variable.
    env: BTreeMap<OsString, Option<OsString>>,
    clear: bool,
    stdio: [Io; 3],
    /// The fence's Landlock ruleset, entered after no-new-privileges.
    landlock: Option<OwnedFd>,
    /// Every capability given up before the exec (`fence::renounce`).
    renounce: bool,
}

impl std::fmt::Debug for Launch {
    // The environment's values may hold secrets: only its keys are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("stdio", &self.stdio)
            .field("fenced", &self.landlock.is_some())
            .field("renounce", &self.renounce)
            .finish()
    }
}

impl Launch {
    /// `program` is searched in the child's `PATH` when it has no `/`, as `execvp` does.
    pub fn new(program: impl AsRef<OsStr>) -> Launch {
        Launch {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            env: BTreeMap::new(),
            clear: false,
            stdio: [Io::Null, Io::Null, Io::Null],
            landlock: None,
            renounce: false,
        }
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Launch
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Launch {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Launch {
        self.env
            .insert(key.as_ref().to_owned(), Some(value.as_ref().to_owned()));
        self
    }

    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Launch
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    /// Starts from an empty environment instead of the orchestrator's.
    pub fn env_clear(&mut self) -> &mut Launch {
        self.env.clear();
        self.clear = true;
        self
    }

    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Launch {
        self.env.insert(key.as_ref().to_owned(), None);
        self
    }

    pub fn stdin(&mut self, io: Io) -> &mut Launch {
        self.stdio[0] = io;
        self
    }

    pub fn stdout(&mut self, io: Io) -> &mut Launch {
        self.stdio[1] = io;
        self
    }

    pub fn stderr(&mut self, io: Io) -> &mut Launch {
        self.stdio[2] = io;
        self
    }

    /// Runs the program behind this Landlock ruleset (`fence::enter`).
    pub fn fence(&mut self, ruleset: OwnedFd) -> &mut Launch {
        self.landlock = Some(ruleset);
        self
    }

    /// Has the child give up every capability (and gain none) before it execs.
    pub fn renounce_privileges(&mut self) -> &mut Launch {
        self.renounce = true;
        self
    }

    /// Starts it, in `container` where there is one, as the leader of a process group of
    /// its own. The error is the first step that failed in the child (a missing program is
    /// `NotFound`, a file that is not executable `PermissionDenied`).
    pub fn spawn(self, container: Option<&Container>) -> std::io::Result<Child> {
        let envp = self.environment()?;
        let argv = std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| cstring(a.as_bytes()))
            .collect::<std::io::Result<Vec<_>>>()?;
        let candidates = self.candidates(&envp)?;
        let cwd = self
            .cwd
            .as_ref()
            .map(|d| cstring(d.as_os_str().as_bytes()))
            .transpose()?;

        let mut parent_ends: [Option<OwnedFd>; 3] = [None, None, None];
        let mut child_ends: Vec<OwnedFd> = Vec::with_capacity(3);
        for (i, io) in self.stdio.into_iter().enumerate() {
            let end = match io {
                Io::Piped => {
                    let (reader, writer) = std::io::pipe()?;
                    let (mine, theirs) = if i == 0 {
                        (OwnedFd::from(writer), OwnedFd::from(reader))
                    } else {
                        (OwnedFd::from(reader), OwnedFd::from(writer))
                    };
                    parent_ends[i] = Some(mine);
                    theirs
                }
                Io::Null => OwnedFd::from(
                    std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open("/dev/null")?,
                ),
                Io::Fd(fd) => fd,
            };
            // Above 2, so that putting one in place never overwrites another.
            child_ends.push(above_stdio(end)?);
        }

        let pointers = |v: &[CString]| -> Vec<*const c_char> {
            v.iter()
                .map(|c| c.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let (argv_p, envp_p, candidates_p) =
            (pointers(&argv), pointers(&envp), pointers(&candidates));
        // For a file with no `#!` line (ENOEXEC), run by the shell as execvp does: its
        // second slot is the candidate, set in the child.
        let mut script_p: Vec<*const c_char> = [SHELL.as_ptr(), std::ptr::null()]
            .into_iter()
            .chain(argv_p.iter().skip(1).copied())
            .collect();
        let mut plan = Steps {
            procs: container.map_or(-1, Container::procs),
            stdio: [
                child_ends[0].as_raw_fd(),
                child_ends[1].as_raw_fd(),
                child_ends[2].as_raw_fd(),
            ],
            cwd: cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            landlock: self.landlock.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            renounce: self.renounce,
            candidates: candidates_p.as_ptr(),
            argv: argv_p.as_ptr(),
            script: script_p.as_mut_ptr(),
            envp: envp_p.as_ptr(),
            failed: None,
        };
        let pid = clone_child(&mut plan)?;
        // The child has exec'd or given up: the plan is ours again.
        // SAFETY: the child wrote it through the pointer it was given and is gone from
        // this memory (CLONE_VFORK returns once it execs or exits).
        let failed = unsafe { std::ptr::read_volatile(&raw const plan.failed) };
        drop(child_ends);
        if let Some(Failure { step, errno }) = failed {
            reap(pid);
            let e = std::io::Error::from_raw_os_error(errno);
            return Err(match step.said() {
                None => e,
                Some(said) => {
                    std::io::Error::new(e.kind(), format!("{said} before its program ran: {e}"))
                }
            });
        }
        let mut child = Child {
            pid,
            stdin: None,
            stdout: None,
            stderr: None,
            exit: Exit::watch(pid),
            status: None,
        };
        // From here on an error drops the child: killed and reaped.
        let [stdin, stdout, stderr] = parent_ends;
        child.stdin = stdin.map(pipe::Sender::from_owned_fd).transpose()?;
        child.stdout = stdout.map(pipe::Receiver::from_owned_fd).transpose()?;
        child.stderr = stderr.map(pipe::Receiver::from_owned_fd).transpose()?;
        Ok(child)
    }

    /// The child's environment: the orchestrator's with the changes.
    fn environment(&self) -> std::io::Result<Vec<CString>> {
        let pair = |k: &OsStr, v: &OsStr| {
            let mut kv = Vec::with_capacity(k.len() + v.len() + 1);
            kv.extend_from_slice(k.as_bytes());
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            cstring(&kv)
        };
        let mut vars = Vec::new();
        if !self.clear {
            for (k, v) in std::env::vars_os() {
                if !self.env.contains_key(&k) {
                    vars.push(pair(&k, &v)?);
                }
            }
        }
        for (k, v) in &self.env {
            if let Some(v) = v {
                vars.push(pair(k, v)?);
            }
        }
        Ok(vars)
    }

    /// The paths the child tries in turn: the program itself where it names a path,
    /// else each folder of the child's `PATH` (glibc's default where it has none).
    fn candidates(&self, envp: &[CString]) -> std::io::Result<Vec<CString>> {
        let program = self.program.as_bytes();
        if program.is_empty() {
            return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        }
        if program.contains(&b'/') {
            return Ok(vec![cstring(program)?]);
        }
        let path = envp
            .iter()
            .find_map(|kv| kv.as_bytes().strip_prefix(b"PATH="))
            .unwrap_or(b"/bin:/usr/bin");
        path.split(|b| *b == b':')
            .map(|dir| {
                let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
                let mut full = dir.to_vec();
                full.push(b'/');
                full.extend_from_slice(program);
                cstring(&full)
            })
            .collect()
    }
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "a NUL byte in {:?}",
                String::from_utf8_lossy(bytes.split(|b| *b == 0).next().unwrap_or_default())
            ),
        )
    })
}

/// A copy of `fd` numbered 3 or above (close-on-exec, as every descriptor here is).
fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new one or -1.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if copy < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `copy` was just made and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// What the child does, prepared by the parent: only raw values, read with no
/// allocation.
struct Steps {
    /// The container's `cgroup.procs`, or -1.
    procs: RawFd,
    stdio: [RawFd; 3],
    cwd: *const c_char,
    landlock: RawFd,
    renounce: bool,
    candidates: *const *const c_char,
    argv: *const *const c_char,
    /// `/bin/sh`, a slot for the candidate, then `argv` past its first.
    script: *mut *const c_char,
    envp: *const *const c_char,
    /// Written by the child when a step fails.
    failed: Option<Failure>,
}

/// A step of the child's that failed, and its errno.
#[derive(Clone, Copy)]
struct Failure {
    step: Step,
    errno: c_int,
}

/// The child's steps, in order.
#[derive(Clone, Copy)]
enum Step {
    Container,
    Group,
    Descriptors,
    Folder,
    Signals,
    Fence,
    Privileges,
    Exec,
}

impl Step {
    /// What failed, said of the child; `None` for the exec, whose error says it all.
    fn said(self) -> Option<&'static str> {
        Some(match self {
            Step::Container => "it could not enter its run's cgroup",
            Step::Group => "it could not lead a process group of its own",
            Step::Descriptors => "its standard descriptors could not be set",
            Step::Folder => "it could not enter its working folder",
            Step::Signals => "its signals could not be reset",
            Step::Fence => "it could not enter its fence",
            Step::Privileges => "it could not give up its privileges",
            Step::Exec => return None,
        })
    }
}

/// Clones the child onto a stack of its own, every signal blocked around it so that none
/// runs a handler of ours in the child; returns once the child has exec'd or exited.
fn clone_child(plan: &mut Steps) -> std::io::Result<libc::pid_t> {
    let mut stack = vec![0u8; STACK];
    // The stack grows down: the child starts at its (16-byte aligned) top.
    let top = stack.as_mut_ptr().wrapping_add(STACK);
    let top = top.wrapping_sub(top as usize % 16);
    // SAFETY: sigset_t is plain data, filled by sigfillset before use; pthread_sigmask
    // only reads `all` and writes `old`.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut old);
        // SAFETY: `child` runs on `stack`, which outlives it (CLONE_VFORK: this thread
        // waits until the child execs or exits), and touches only `plan` and the
        // buffers its pointers name, all alive until this returns.
        let pid = libc::clone(
            child,
            top.cast::<c_void>(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::from_mut(plan).cast::<c_void>(),
        );
        let e = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const old, std::ptr::null_mut());
        if pid < 0 {
            return Err(e);
        }
        pid
    };
    drop(stack);
    Ok(pid)
}

/// The child, between clone and exec: system calls only, on its own stack, in memory
/// it shares with the parent. A failed step is written to `plan.failed`, then it exits.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Steps` the parent passed, alive while this runs; every
    // pointer in it names a NUL-terminated string or a null-terminated array the parent
    // keeps until the clone returns.
    unsafe {
        let plan = &mut *arg.cast::<Steps>();
        let fail = |plan: &mut Steps, step: Step| -> c_int {
            plan.failed = Some(Failure {
                step,
                errno: *libc::__errno_location(),
            });
            libc::_exit(127)
        };
        // First into its container: whatever it does next, it is there.
        if plan.procs >= 0 && libc::write(plan.procs, b"0".as_ptr().cast(), 1) != 1 {
            return fail(plan, Step::Container);
        }
        if libc::setpgid(0, 0) != 0 {
            return fail(plan, Step::Group);
        }
        for (target, &fd) in plan.stdio.iter().enumerate() {
            if libc::dup2(fd, target as c_int) < 0 {
                return fail(plan, Step::Descriptors);
            }
        }
        if !plan.cwd.is_null() && libc::chdir(plan.cwd) != 0 {
            return fail(plan, Step::Folder);
        }
        // The program starts with every signal at its default (the orchestrator ignores
        // SIGPIPE; its handlers must not run here) and none blocked.
        let mut action: libc::sigaction = std::mem::zeroed();
        for signal in 1..=libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            if libc::sigaction(signal, std::ptr::null(), &raw mut action) != 0 {
                continue;
            }
            if action.sa_sigaction != libc::SIG_DFL
                && (action.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE)
            {
                action.sa_sigaction = libc::SIG_DFL;
                action.sa_flags = 0;
                if libc::sigaction(signal, &raw const action, std::ptr::null_mut()) != 0 {
                    return fail(plan, Step::Signals);
                }
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut none);
        if libc::sigprocmask(libc::SIG_SETMASK, &raw const none, std::ptr::null_mut()) != 0 {
            return fail(plan, Step::Signals);
        }
        // (errno is still the failed call's: `enter` only reads it.)
        if plan.landlock >= 0 && crate::fence::enter(BorrowedFd::borrow_raw(plan.landlock)).is_err()
        {
            return fail(plan, Step::Fence);
        }
        if plan.renounce && crate::fence::renounce().is_err() {
            return fail(plan, Step::Privileges);
        }
        // As execvp: a file with no `#!` line run by the shell; the next candidate where
        // one is missing or not to be run; a missing program said as missing unless some
        // candidate was there but not executable.
        let mut errno = libc::ENOENT;
        let mut candidate = plan.candidates;
        while !(*candidate).is_null() {
            libc::execve(*candidate, plan.argv, plan.envp);
            if *libc::__errno_location() == libc::ENOEXEC {
                *plan.script.add(1) = *candidate;
                libc::execve(SHELL.as_ptr(), plan.script.cast_const(), plan.envp);
            }
            match *libc::__errno_location() {
                libc::EACCES => errno = libc::EACCES,
                libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => break,
            }
            candidate = candidate.add(1);
        }
        if (*candidate).is_null() {
            *libc::__errno_location() = errno;
        }
        fail(plan, Step::Exec)
    }
}

/// Waits for `pid` (a child of ours that exited or is about to).
fn reap(pid: libc::pid_t) -> Option<ExitStatus> {
    let mut status: c_int = 0;
    loop {
        // SAFETY: waitpid writes the status into a local.
        let r = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if r == pid {
            return Some(ExitStatus::from_raw(status));
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
}

/// How its exit is learned.
enum Exit {
    /// The pidfd, readable once it has exited.
    Pidfd(AsyncFd<OwnedFd>),
    /// A thread blocked in `waitid` (a kernel with no pidfd). It reaps under `reaped`'s
    /// lock, so that a kill under the same lock never reaches another process that got
    /// the pid since.
    Thread {
        exited: oneshot::Receiver<Option<ExitStatus>>,
        reaped: Arc<Mutex<bool>>,
    },
}

impl Exit {
    fn watch(pid: libc::pid_t) -> Exit {
        // SAFETY: pidfd_open takes a pid and flags, returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if let Ok(fd) = RawFd::try_from(fd)
            && fd >= 0
        {
            // SAFETY: the descriptor was just made and nothing else owns it.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: an OwnedFd names the same open descriptor until it is dropped.
            let registered =
                unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
            if let Ok(fd) = registered {
                return Exit::Pidfd(fd);
            }
        }
        let (tx, exited) = oneshot::channel();
        let reaped = Arc::new(Mutex::new(false));
        let mine = reaped.clone();
        std::thread::spawn(move || {
            // Waits for the exit without reaping, then reaps under the lock.
            // SAFETY: siginfo_t is plain data the kernel fills.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            loop {
                // SAFETY: waitid writes into `info`.
                let r = unsafe {
                    libc::waitid(
                        libc::P_PID,
                        pid.unsigned_abs(),
                        &raw mut info,
                        libc::WEXITED | libc::WNOWAIT,
                    )
                };
                if r == 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    break;
                }
            }
            let mut reaped = mine
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let status = reap(pid);
            *reaped = true;
            let _ = tx.send(status);
        });
        Exit::Thread { exited, reaped }
    }
}

/// A started process: its pipes, and its exit.
pub struct Child {
    pid: libc::pid_t,
    pub stdin: Option<pipe::Sender>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
    exit: Exit,
    status: Option<ExitStatus>,
}

impl Child {
    /// Its pid, which is also its process group's id.
    pub fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Waits until it has exited: how it did. Cancel-safe.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = match &mut self.exit {
            Exit::Pidfd(fd) => loop {
                let mut ready = fd.readable().await?;
                let mut raw: c_int = 0;
                // SAFETY: waitpid writes the status into a local.
                let r = unsafe { libc::waitpid(self.pid, &raw mut raw, libc::WNOHANG) };
                if r == self.pid {
                    break ExitStatus::from_raw(raw);
                }
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                ready.clear_ready();
            },
            Exit::Thread { exited, .. } => match exited.await {
                Ok(Some(status)) => status,
                _ => {
                    return Err(std::io::Error::other(
                        "its exit could not be learned (waitpid failed)",
                    ));
                }
            },
        };
        self.status = Some(status);
        Ok(status)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // Dropped running (its run's task dropped): killed, and reaped out of the way.
        // SAFETY: kill takes a pid and a signal; the pid is ours until reaped, which only
        // `wait` does (pidfd) or the thread under the lock held here.
        let kill = |pid| unsafe {
            libc::kill(pid, libc::SIGKILL);
        };
        match &self.exit {
            Exit::Pidfd(_) => {
                kill(self.pid);
                let pid = self.pid;
                std::thread::spawn(move || reap(pid));
            }
            Exit::Thread { reaped, .. } => {
                let reaped = reaped
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if !*reaped {
                    kill(self.pid);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    async fn output(mut launch: Launch) -> (String, ExitStatus) {
        launch.stdout(Io::Piped);
        let mut child = launch.spawn(None).unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        let status = child.wait().await.unwrap();
        (out, status)
    }

    fn status_line<'a>(status: &'a str, key: &str) -> &'a str {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap()
            .trim()
    }

    #[tokio::test]
    async fn the_program_starts_with_default_signals_none_blocked_in_its_own_group() {
        // The orchestrator ignores SIGPIPE and blocks signals around the clone: neither
        // reaches the program.
        let mut launch = Launch::new("cat");
        launch.args(["/proc/self/status"]);
        let (status, exit) = output(launch).await;
        assert!(exit.success());
        assert_eq!(status_line(&status, "SigBlk:"), "0000000000000000");
        let ignored = u64::from_str_radix(status_line(&status, "SigIgn:"), 16).unwrap();
        assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE ignored");
        let mut launch = Launch::new("cat");
        launch.args(["/proc/self/stat"]);
        let (stat, _) = output(launch).await;
        let fields: Vec<&str> = stat.split(' ').collect();
        assert_eq!(fields[0], fields[4], "its process group is its own: {stat}");
    }

    /// Run by root, a child that renounces keeps no capability in any set and can gain
    /// none; without renouncing it would have them all.
    #[tokio::test]
    async fn a_renouncing_child_keeps_no_capability() {
        let mut launch = Launch::new("cat");
        launch.args(["/proc/self/status"]).renounce_privileges();
        let (status, exit) = output(launch).await;
        assert!(exit.success());
        for set in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
            assert_eq!(status_line(&status, set), "0000000000000000", "{set}");
        }
        assert_eq!(status_line(&status, "NoNewPrivs:"), "1");
        // SAFETY: geteuid only returns a number.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(status_line(&status, "CapBnd:"), "0000000000000000");
            let mut launch = Launch::new("cat");
            launch.args(["/proc/self/status"]);
            let (status, _) = output(launch).await;
            assert_ne!(
                status_line(&status, "CapEff:"),
                "0000000000000000",
                "root's child keeps its capabilities unless it renounces"
            );
        }
    }

    #[tokio::test]
    async fn its_environment_is_the_orchestrators_with_the_changes() {
        let mut launch = Launch::new("sh");
        launch
            .args(["-c", "echo \"$A|${B-unset}|${HOME:+home}\""])
            .env("A", "one")
            .env("B", "two")
            .env_remove("B");
        assert_eq!(output(launch).await.0, "one|unset|home\n");
        let mut cleared = Launch::new("/bin/sh");
        cleared
            .args(["-c", "echo \"$A|${HOME-no home}\""])
            .env("A", "kept")
            .env_clear()
            .env("A", "set after");
        assert_eq!(output(cleared).await.0, "set after|no home\n");
    }

    #[tokio::test]
    async fn a_bare_name_is_looked_up_in_the_childs_path() {
        let dir = std::env::temp_dir().join(format!("hanarang-launch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tool = dir.join("hanarang-launch-tool");
        std::fs::write(&tool, "#!/bin/sh\necho found in \"$0\"\n").unwrap();
        let not_executable = dir.join("hanarang-launch-plain");
        std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:{}", dir.display());

        let mut launch = Launch::new("hanarang-launch-tool");
        launch.env("PATH", &path).current_dir("/");
        let (out, exit) = output(launch).await;
        assert!(exit.success());
        assert_eq!(out, format!("found in {}\n", tool.display()));

        let mut missing = Launch::new("hanarang-launch-missing");
        missing.env("PATH", &path);
        let e = missing.spawn(None).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        let mut plain = Launch::new("hanarang-launch-plain");
        plain.env("PATH", &path);
        let e = plain.spawn(None).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_script_with_no_interpreter_line_is_run_by_the_shell() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("hanarang-script-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("run-tests");
        std::fs::write(&script, "echo \"ran with $1\"\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut launch = Launch::new("./run-tests");
        launch.args(["one"]).current_dir(&dir);
        let (out, exit) = output(launch).await;
        assert!(exit.success());
        assert_eq!(out, "ran with one\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_step_that_fails_before_the_program_is_named() {
        let mut launch = Launch::new("true");
        launch.current_dir("/nonexistent/hanarang-launch");
        let e = launch.spawn(None).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(
            e.to_string().contains("could not enter its working folder"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_child_that_cannot_enter_its_cgroup_never_runs_its_program() {
        use super::super::container::Containers;
        let runs = std::env::temp_dir().join(format!("hanarang-gone-{}", std::process::id()));
        std::fs::create_dir_all(&runs).unwrap();
        let Ok(containers) = Containers::open(&runs) else {
            return; // no cgroup v2 to be had here: doctor's and containment's tests say so
        };
        let grace = std::time::Duration::from_secs(1);
        let container = containers.make("R-gone", grace).await.unwrap();
        std::fs::remove_dir(containers.path_of("R-gone")).unwrap();
        let ran = runs.join("ran");
        let mut launch = Launch::new("touch");
        launch.args([&ran]);
        let e = launch.spawn(Some(&container)).err().unwrap();
        assert!(
            e.to_string().contains("could not enter its run's cgroup"),
            "{e}"
        );
        assert!(!ran.exists(), "the program ran outside its cgroup");
        std::fs::remove_dir_all(&runs).unwrap();
    }

    #[tokio::test]
    async fn a_child_dropped_running_is_killed_and_reaped() {
        let mut launch = Launch::new("sleep");
        launch.args(["600"]);
        let child = launch.spawn(None).unwrap();
        let pid = child.id();
        drop(child);
        for _ in 0..500 {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the dropped child {pid} is still there (alive or unreaped)");
    }

    #[tokio::test]
    async fn the_exit_is_learned_and_kept() {
        let mut launch = Launch::new("sh");
        launch.args(["-c", "exit 7"]);
        let mut child = launch.spawn(None).unwrap();
        assert_eq!(child.wait().await.unwrap().code(), Some(7));
        assert_eq!(child.wait().await.unwrap().code(), Some(7));
    }
}
