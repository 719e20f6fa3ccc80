//! A running sister's steps, as its event stream tells them, kept on its run and told to
//! whoever shows them (the Discord board, `run`'s status line): at most once per
//! `INTERVAL` per run, the latest step winning. Nothing runs while no sister does.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Handle;
use crate::sister::Progress;
use crate::store::RunLive;

/// At most one write (and one word to the shows) per run this often.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// A run's latest step, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveStep {
    pub sprint_id: String,
    pub run_id: String,
    pub live: RunLive,
}

/// What the run keeps of its progress.
fn live_of(p: &Progress) -> RunLive {
    RunLive {
        step: p.step.clone(),
        step_at: p.step_at_ms,
        input_tokens: i64::try_from(p.input_tokens).unwrap_or(i64::MAX),
        output_tokens: i64::try_from(p.output_tokens).unwrap_or(i64::MAX),
        cost_usd: p.cost_usd,
    }
}

/// Records a run's progress until its sister is done (the sender dropped): each change
/// written and told, then a pause of `INTERVAL` in which changes only replace each other.
/// The sister's end cuts the pause short, and its last progress is written before this
/// returns (and so before the run's end is: a run that ended keeps what it has).
pub(super) async fn record(
    handle: Handle,
    sprint_id: String,
    run_id: String,
    mut progress: watch::Receiver<Progress>,
) {
    let mut written: Option<RunLive> = None;
    let mut open = true;
    while open {
        open = progress.changed().await.is_ok();
        let live = live_of(&progress.borrow_and_update());
        if written.as_ref() == Some(&live) {
            continue;
        }
        if let Err(e) = handle.store.set_run_live(&run_id, &live).await {
            tracing::debug!(run = %run_id, error = %e, "a run's step was not recorded");
        }
        let _ = handle.live.send(Arc::new(LiveStep {
            sprint_id: sprint_id.clone(),
            run_id: run_id.clone(),
            live: live.clone(),
        }));
        written = Some(live);
        if open {
            tokio::select! {
                () = tokio::time::sleep(INTERVAL) => {}
                () = until_closed(&mut progress) => {}
            }
        }
    }
}

/// Waits for the sister's end; the changes meanwhile are read later, as one.
async fn until_closed(progress: &mut watch::Receiver<Progress>) {
    while progress.changed().await.is_ok() {}
}
