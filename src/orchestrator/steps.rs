//! A running sister's steps, as its event stream tells them, kept on its run and told to
//! whoever shows them (the Discord board, `run`'s status line): at most once per
//! `INTERVAL` per run, the latest step winning. Nothing runs while no sister does.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use crate::sister::Progress;
use crate::store::{RunLive, Store};

/// At most one write (and one word to the shows) per run this often.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// How long a run's end waits for its last step to be written (a step is worth less than
/// the end: a locked database must not hold the end up).
pub const LAST_STEP_WAIT: Duration = Duration::from_secs(2);

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

/// Records a run's progress through `store` (the loop's own: a stuck caller's runtime
/// cannot hold it up) until its sister is done (the sender dropped): each change
/// written and told, then a pause of `INTERVAL` in which changes only replace each other.
/// The sister's end cuts the pause short, and its last progress is written before this
/// returns (and so before the run's end is: a run that ended keeps what it has).
pub(super) async fn record(
    store: Store,
    tell: broadcast::Sender<Arc<LiveStep>>,
    sprint_id: String,
    run_id: String,
    mut progress: watch::Receiver<Progress>,
) {
    // A sister that tells nothing (a CLI without an event stream) costs no write.
    let mut written = live_of(&Progress::default());
    let mut open = true;
    while open {
        open = progress.changed().await.is_ok();
        // What is there now is written, then a pause; what changed meanwhile is written
        // right after it.
        loop {
            let live = live_of(&progress.borrow_and_update());
            if live == written {
                break;
            }
            if let Err(e) = store.set_run_live(&run_id, &live).await {
                tracing::debug!(run = %run_id, error = %e, "a run's step was not recorded");
            }
            let _ = tell.send(Arc::new(LiveStep {
                sprint_id: sprint_id.clone(),
                run_id: run_id.clone(),
                live: live.clone(),
            }));
            written = live;
            if open {
                open = tokio::select! {
                    () = tokio::time::sleep(INTERVAL) => true,
                    () = until_closed(&mut progress) => false,
                };
            }
        }
    }
}

/// Waits for the sister's end; the changes meanwhile are read later, as one.
async fn until_closed(progress: &mut watch::Receiver<Progress>) {
    while progress.changed().await.is_ok() {}
}
