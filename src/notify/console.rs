//! The console notifier for `hanarang run` and `demo`: follows one sprint's transitions
//! log and prints each line once, in order, whatever the broadcast channel dropped.

use std::io::Write;

use tokio::sync::broadcast;

use super::messages::{Context, render};
use crate::config::Config;
use crate::store::{Sprint, Store, StoreError, TransitionRecord};

pub struct Console {
    sprint_id: String,
    printed: i64,
}

impl Console {
    pub fn new(sprint_id: &str) -> Console {
        Console {
            sprint_id: sprint_id.to_string(),
            printed: 0,
        }
    }

    /// Waits for the next transition of the sprint and prints every line not printed yet.
    /// Returns the sprint as it is after them.
    pub async fn next(
        &mut self,
        store: &Store,
        events: &mut broadcast::Receiver<TransitionRecord>,
        config: &Config,
    ) -> Result<Sprint, StoreError> {
        loop {
            let sprint = store
                .sprint(&self.sprint_id)
                .await?
                .ok_or_else(|| StoreError::NoSprint(self.sprint_id.clone()))?;
            if sprint.last_seq > self.printed {
                for record in store.transitions(&self.sprint_id).await? {
                    if record.seq > self.printed {
                        print_line(&record, &sprint, config);
                        self.printed = record.seq;
                    }
                }
                return Ok(sprint);
            }
            // The broadcast only wakes us; the log is the record (a lagged receiver just
            // reads it again).
            match events.recv().await {
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return Ok(sprint),
            }
        }
    }
}

fn print_line(record: &TransitionRecord, sprint: &Sprint, config: &Config) {
    let line = render(record, &Context::new(config, sprint));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", line.text);
    let _ = out.flush();
}
