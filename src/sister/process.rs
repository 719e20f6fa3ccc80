//! The process side of a run: bounded capture of stdout and stderr, and killing a
//! sister's whole process group (SIGTERM, then SIGKILL after the grace period).
//!
//! Memory stays bounded whatever the child prints: stdout is kept up to its cap (past it
//! the run is stopped), stderr keeps only its last bytes, and both are drained to the end
//! so the child never blocks on a full pipe.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::container::Container;
use super::events::{Progress, StreamOutput, StreamReader};

const CHUNK: usize = 64 * 1024;

/// What was read from one pipe so far. Shared with the run so a pipe held open by an
/// escaped daemon cannot keep the result hostage.
#[derive(Debug, Default)]
pub struct Capture {
    /// stdout: the first bytes up to the cap; stderr: the last bytes.
    pub bytes: VecDeque<u8>,
    /// Everything the child wrote, counted.
    pub total: u64,
    /// stdout only: the child wrote more than the cap.
    pub over_cap: bool,
}

pub type SharedCapture = Arc<Mutex<Capture>>;

/// The last time the sister wrote anything, in milliseconds since its run started.
#[derive(Debug)]
pub struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// How long the sister has been silent.
    pub fn silent_for(&self) -> Duration {
        self.start
            .elapsed()
            .saturating_sub(Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

fn lock(capture: &SharedCapture) -> std::sync::MutexGuard<'_, Capture> {
    capture
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Takes what was captured so far, as bytes, plus the total written.
pub fn take(capture: &SharedCapture) -> (Vec<u8>, u64, bool) {
    let c = std::mem::take(&mut *lock(capture));
    (Vec::from(c.bytes), c.total, c.over_cap)
}

/// Drains a pipe to its end, handing each chunk to `keep` along with the capture.
async fn drain(
    mut pipe: impl AsyncRead + Unpin,
    into: &SharedCapture,
    activity: &Activity,
    mut keep: impl FnMut(&mut Capture, &[u8]),
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        activity.touch();
        let mut out = lock(into);
        out.total += n as u64;
        keep(&mut out, &buf[..n]);
    }
}

/// Reads stdout: keeps at most `cap` bytes, and wakes `over` the moment the child writes
/// more. Keeps draining after that so the writer never blocks.
pub async fn read_head(
    pipe: impl AsyncRead + Unpin,
    cap: usize,
    into: SharedCapture,
    over: Arc<Notify>,
    activity: Arc<Activity>,
) {
    drain(pipe, &into, &activity, |out, chunk| {
        let room = cap.saturating_sub(out.bytes.len());
        out.bytes.extend(&chunk[..chunk.len().min(room)]);
        if chunk.len() > room && !out.over_cap {
            out.over_cap = true;
            over.notify_one();
        }
    })
    .await;
}

/// Reads an event stream on stdout to its end: each chunk goes through `reader`, and a
/// changed step is sent on `progress` (latest wins; nobody is waited for).
pub async fn read_stream(
    mut pipe: impl AsyncRead + Unpin,
    reader: Arc<Mutex<StreamReader>>,
    activity: Arc<Activity>,
    progress: Option<tokio::sync::watch::Sender<Progress>>,
) {
    let mut buf = vec![0u8; CHUNK];
    let send = |reader: &StreamReader| {
        if let Some(progress) = &progress {
            progress.send_replace(reader.progress().clone());
        }
    };
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        activity.touch();
        let mut r = lock_reader(&reader);
        if r.feed(&buf[..n], crate::clock::now_ms()) {
            send(&r);
        }
    }
    let mut r = lock_reader(&reader);
    if r.finish(crate::clock::now_ms()) {
        send(&r);
    }
}

pub fn lock_reader(reader: &Mutex<StreamReader>) -> std::sync::MutexGuard<'_, StreamReader> {
    reader
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Puts what an event stream left for the run's classification in the place of stdout's
/// capture.
pub fn fill(capture: &SharedCapture, out: StreamOutput) {
    *lock(capture) = Capture {
        bytes: VecDeque::from(out.bytes),
        total: out.total,
        over_cap: out.over_cap,
    };
}

/// Reads stderr: keeps only the last `keep` bytes.
pub async fn read_tail(
    pipe: impl AsyncRead + Unpin,
    keep: usize,
    into: SharedCapture,
    activity: Arc<Activity>,
) {
    drain(pipe, &into, &activity, |out, chunk| {
        out.bytes.extend(chunk);
        if out.bytes.len() > keep {
            let cut = out.bytes.len() - keep;
            out.bytes.drain(..cut);
        }
    })
    .await;
}

/// Whether any live (non-zombie) process is in the group. Zombies are ignored: a
/// grandchild orphaned to an init that does not reap is dead for every purpose here.
pub fn group_alive(pgid: u32) -> bool {
    // The kernel's answer is cheap and final when the group is empty; when it says
    // "alive", the members may all be zombies, which only /proc can tell.
    if killpg(Pid::from_raw(pgid as i32), None).is_err() {
        return false;
    }
    live_members(pgid).is_none_or(|members| !members.is_empty())
}

/// The live members of a process group, read from /proc; `None` where there is no /proc.
pub fn live_members(pgid: u32) -> Option<Vec<u32>> {
    Some(
        live_processes()?
            .into_iter()
            .filter(|&(_, pgrp)| pgrp == pgid)
            .map(|(pid, _)| pid)
            .collect(),
    )
}

/// Every live (not zombie) process /proc shows, with its process group. `None` where
/// there is no /proc.
fn live_processes() -> Option<Vec<(u32, u32)>> {
    let pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .collect();
    let mut live = Vec::new();
    for pid in pids {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|s| s.parse::<u32>().ok());
        if let Some(pgrp) = pgrp
            && state != Some("Z")
            && state != Some("X")
        {
            live.push((pid, pgrp));
        }
    }
    Some(live)
}

/// Whether a process's environment holds `marker` (`NAME=value`) exactly. A process of
/// another user, or one already gone, does not.
fn environ_has(pid: u32, marker: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == marker.as_bytes()))
}

/// What to signal of a run's leftovers: a whole process group (every live member carries
/// the run's markers), or one process (its group holds others too, or is hanarang's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Group(u32),
    Process(u32),
}

impl Target {
    fn alive(self) -> bool {
        match self {
            Target::Group(g) => group_alive(g),
            Target::Process(p) => live_processes()
                .unwrap_or_default()
                .iter()
                .any(|&(pid, _)| pid == p),
        }
    }

    fn signal(self, signal: Signal) {
        let _ = match self {
            Target::Group(g) => killpg(Pid::from_raw(g as i32), signal),
            Target::Process(p) => nix::sys::signal::kill(Pid::from_raw(p as i32), signal),
        };
    }
}

/// Every live process whose environment holds all of `markers`, as what to signal: its
/// group when the whole group is the run's, else the process alone. Never hanarang's own
/// group, nor init's.
fn carrying(markers: &[String]) -> Vec<Target> {
    if markers.is_empty() {
        // No marker would match every process on the machine.
        return Vec::new();
    }
    let ours = u32::try_from(nix::unistd::getpgrp().as_raw()).unwrap_or(0);
    let live = live_processes().unwrap_or_default();
    let marked: Vec<(u32, u32)> = live
        .iter()
        .copied()
        .filter(|&(pid, _)| markers.iter().all(|m| environ_has(pid, m)))
        .collect();
    let mut targets = Vec::new();
    for &(pid, pgrp) in &marked {
        let whole_group = pgrp > 1
            && pgrp != ours
            && live
                .iter()
                .filter(|&&(_, g)| g == pgrp)
                .all(|&(member, _)| marked.iter().any(|&(m, _)| m == member));
        let target = if whole_group {
            Target::Group(pgrp)
        } else {
            Target::Process(pid)
        };
        if !targets.contains(&target) {
            targets.push(target);
        }
    }
    targets
}

/// The environment every process of a run carries, by which recovery finds what a crash
/// left on a host with no containers: the run's id, and its contract file, which names
/// this database's runs folder (the same run id under another database is another run).
pub fn run_markers(run_id: &str, contract_file: &std::path::Path) -> [String; 2] {
    [
        format!("HANARANG_RUN_ID={run_id}"),
        format!("HANARANG_CONTRACT_FILE={}", contract_file.display()),
    ]
}

/// Ends everything of one part of a run (the sister, or the check): its container when
/// the host gives one — every process it started, wherever it moved and whatever it
/// became — else its process group: SIGTERM, the grace period, then SIGKILL.
pub async fn end_all(pgid: u32, container: Option<&Container>, grace: Duration) {
    match container {
        Some(container) => container.stop(grace).await,
        None => kill_targets(vec![Target::Group(pgid)], &[], grace).await,
    }
}

/// Stops whatever carries a run's `markers` after a crash, on a host that gives no
/// container: the one way left to find a run's processes there (a process that left its
/// group and cleared its environment is not found). Scans every process once per grace
/// step, so only recovery uses it, never a run's end.
pub async fn stop_marked(markers: &[String], grace: Duration) {
    kill_targets(Vec::new(), markers, grace).await;
}

/// SIGTERM to `targets` and to whatever carries `markers`, the grace period while any
/// lives (looking for marked ones again meanwhile), then SIGKILL.
async fn kill_targets(mut targets: Vec<Target>, markers: &[String], grace: Duration) {
    let look = |targets: &mut Vec<Target>, signal: Signal| {
        for target in carrying(markers) {
            if !targets.contains(&target) {
                tracing::warn!(?target, "killing a process the run left behind");
                target.signal(signal);
                if signal == Signal::SIGTERM {
                    target.signal(Signal::SIGCONT);
                }
                targets.push(target);
            }
        }
    };
    targets.retain(|t| t.alive());
    for &target in &targets {
        target.signal(Signal::SIGTERM);
        // A stopped process cannot act on SIGTERM until it is continued.
        target.signal(Signal::SIGCONT);
    }
    look(&mut targets, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    loop {
        targets.retain(|t| t.alive());
        if targets.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        look(&mut targets, Signal::SIGTERM);
    }
    for &target in &targets {
        target.signal(Signal::SIGKILL);
    }
    look(&mut targets, Signal::SIGKILL);
    // SIGKILL cannot be ignored; give the kernel a moment to tear the processes down.
    for _ in 0..50 {
        targets.retain(|t| t.alive());
        if targets.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tracing::warn!(?targets, "processes of a sister survived SIGKILL");
}

/// A signal's name for the user ("SIGKILL"), or its number.
pub fn signal_name(signal: i32) -> String {
    Signal::try_from(signal).map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_string())
}
