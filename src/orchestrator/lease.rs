//! One orchestrator per database. The holder writes a heartbeat; a second `serve` or
//! `run` is refused with the holder's pid and host. A holder that died (its pid is gone on
//! this host, or, from another host, its heartbeat is older than `STALE_AFTER`) does not
//! block a restart.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::kill;
use nix::unistd::Pid;

use super::now_ms;
use crate::store::{Lease, Store, StoreError};

/// How often the holder renews its lease.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A lease of another host not renewed for this long is taken over.
pub const STALE_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error(
        "another orchestrator already runs on this database: pid {} on host {}, started {}s ago, last heartbeat {}s ago. Stop it first (hanarang serve and hanarang run share one database)",
        .0.pid, .0.host, secs_since(.0.started_at), secs_since(.0.heartbeat_at)
    )]
    Held(Lease),
    #[error(
        "another orchestrator already runs as host {name:?} on this database: pid {} on machine {}, started {}s ago. Stop it, or give this one another [host] name",
        .holder.pid, .holder.host, secs_since(.holder.started_at)
    )]
    HostHeld { name: String, holder: Lease },
    #[error("this orchestrator lost its lease on the database to another one; it stops here")]
    Lost,
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn secs_since(at: i64) -> i64 {
    (now_ms() - at).max(0) / 1000
}

/// The lease this process holds.
#[derive(Debug)]
pub struct LeaseGuard {
    token: String,
}

fn hostname() -> String {
    crate::config::default_host_name()
}

/// Whether the holder of a lease is still there. From another host only the heartbeat can
/// tell. On this host its process tells: alive and not a zombie; with a stale heartbeat
/// (a holder waiting for a database another process locks cannot renew, and is not gone)
/// it must also be a process of this program's name, not a recycled pid.
pub fn holder_alive(lease: &Lease) -> bool {
    let stale = i64::try_from(STALE_AFTER.as_millis()).unwrap_or(i64::MAX);
    let fresh = now_ms() - lease.heartbeat_at <= stale;
    if lease.host != hostname() {
        return fresh;
    }
    i32::try_from(lease.pid).is_ok_and(|pid| {
        pid > 0
            && kill(Pid::from_raw(pid), None).is_ok()
            && !is_zombie(pid)
            && (fresh || comm(pid) == comm(std::process::id().cast_signed()))
    })
}

/// A process's name as the kernel keeps it (`/proc/PID/comm`).
fn comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim().to_string())
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| s[i + 1..].trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

impl LeaseGuard {
    pub async fn acquire(store: &Store) -> Result<LeaseGuard, LeaseError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let now = now_ms();
        let me = Lease {
            token: format!(
                "{}-{now}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
            pid: i64::from(std::process::id()),
            host: hostname(),
            started_at: now,
            heartbeat_at: now,
        };
        match store
            .acquire_lease(&me, &|holder| !holder_alive(holder))
            .await?
        {
            Ok(()) => Ok(LeaseGuard { token: me.token }),
            Err(holder) => Err(match store.scope() {
                Some(scope) => LeaseError::HostHeld {
                    name: scope.name.clone(),
                    holder,
                },
                None => LeaseError::Held(holder),
            }),
        }
    }

    pub async fn renew(&self, store: &Store) -> Result<(), LeaseError> {
        if store.heartbeat(&self.token, now_ms()).await? {
            Ok(())
        } else {
            Err(LeaseError::Lost)
        }
    }

    pub async fn release(&self, store: &Store) {
        if let Err(e) = store.release_lease(&self.token).await {
            tracing::warn!(error = %e, "could not release the database lease");
        }
    }
}
