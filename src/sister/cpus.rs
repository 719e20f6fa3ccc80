//! The CPUs a foreground `hanarang run` keeps its own threads on, and those its children
//! get.
//!
//! The loop hands every statement to sqlx's SQLite worker thread and waits for the rows
//! to come back, item by item: a sprint of four instant sisters is some 130 such wake-ups.
//! On two CPUs each one is a wake-up of the other CPU (on a virtual machine, an exit to
//! the hypervisor, and a wait for a virtual CPU the host may not be running); on one CPU it
//! is a plain switch. So `run` keeps its threads on the CPU it started on
//! (`keep_to_this_cpu`, before the database is opened, so the worker thread starts there
//! too), and every process it starts gets the CPUs the process had (`spawn_with_all`):
//! agents, git, whatever they start in turn. docs/benchmarks.md has the measurement.
//! `serve` is left to the scheduler: it runs a bot and several loops' worth of work.

use std::sync::OnceLock;

use nix::sched::{CpuSet, sched_getaffinity, sched_getcpu, sched_setaffinity};
use nix::unistd::Pid;

/// The process's CPUs as it started, and the one its threads were kept to.
struct Kept {
    all: CpuSet,
    one: CpuSet,
}

static KEPT: OnceLock<Kept> = OnceLock::new();

/// The calling thread (and every thread it starts from now on) stays on the CPU it runs
/// on. Nothing happens where the process may use one CPU only, or where any of it cannot
/// be read or set: the threads are then left to the scheduler, as before.
pub fn keep_to_this_cpu() {
    let this_thread = Pid::from_raw(0);
    let Ok(all) = sched_getaffinity(this_thread) else {
        return;
    };
    let allowed = (0..CpuSet::count())
        .filter(|&cpu| all.is_set(cpu).unwrap_or(false))
        .count();
    if allowed < 2 {
        return;
    }
    let Ok(cpu) = sched_getcpu() else {
        return;
    };
    let mut one = CpuSet::new();
    if one.set(cpu).is_err() || sched_setaffinity(this_thread, &one).is_err() {
        return;
    }
    // Called once, by `run`, before it starts anything.
    let _ = KEPT.set(Kept { all, one });
}

/// Runs `spawn` (which starts a process) with the calling thread on all the process's
/// CPUs, so that the child starts with them, then puts the thread back on its one CPU. A
/// no-op unless `keep_to_this_cpu` kept the threads to one.
pub fn spawn_with_all<T>(spawn: impl FnOnce() -> T) -> T {
    let Some(kept) = KEPT.get() else {
        return spawn();
    };
    let this_thread = Pid::from_raw(0);
    let _ = sched_setaffinity(this_thread, &kept.all);
    let spawned = spawn();
    let _ = sched_setaffinity(this_thread, &kept.one);
    spawned
}
