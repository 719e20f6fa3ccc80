//! The console notifier for `hanarang run` and `demo`: follows one sprint's transitions
//! log and prints each line once, in order, whatever the broadcast channel dropped. On a
//! terminal it also keeps one status line, redrawn in place, under the last line printed.

use std::io::Write;

use tokio::sync::broadcast;

use crate::config::Config;
use crate::notify::messages::{Context, render};
use crate::orchestrator::Committed;
use crate::output::escape_controls;
use crate::store::{Sprint, Store, StoreError, TransitionRecord};

pub struct Console {
    sprint_id: String,
    printed: i64,
    /// stdout is a terminal: the status line may be drawn.
    terminal: bool,
    /// A status line is drawn now (and must be cleared before the next line).
    live: bool,
    /// The log was read after the broadcast's receiver was made and nothing new has come
    /// on it since: the next line comes with an event, and only then is the log read.
    caught_up: bool,
}

/// What `Console::next` saw.
#[derive(Debug)]
pub enum Progress {
    /// The followed sprint moved (its new lines are printed): it is as returned.
    Moved(Box<Sprint>),
    /// Another sprint moved (one the followed sprint may be waiting for).
    Elsewhere,
}

impl Console {
    /// Follows a sprint this process has just queued, subscribed to its loop's broadcast
    /// before the loop started: until then nothing can move the sprint (the loop's lease
    /// says so), so its log is empty and every line of it comes with an event.
    pub fn for_new(sprint: &Sprint, terminal: bool) -> Console {
        Console {
            sprint_id: sprint.id.clone(),
            printed: sprint.last_seq,
            terminal,
            live: false,
            caught_up: true,
        }
    }

    /// Waits for the next transition of the sprint and prints every line not printed yet.
    /// Returns the sprint as it is after them, or `Elsewhere` when another sprint's
    /// transition came first.
    pub async fn next(
        &mut self,
        store: &Store,
        events: &mut broadcast::Receiver<std::sync::Arc<Committed>>,
        config: &Config,
    ) -> Result<Progress, StoreError> {
        loop {
            if !self.caught_up {
                let before = self.printed;
                let sprint = self.read(store, config).await?;
                // Every transition committed after this read is broadcast after it.
                self.caught_up = true;
                if sprint.last_seq > before {
                    return Ok(Progress::Moved(Box::new(sprint)));
                }
            }
            // The log is the record: a lagged receiver, or one that missed a line, reads it
            // again.
            match events.recv().await {
                Ok(c) if c.record.sprint_id != self.sprint_id => {
                    return Ok(Progress::Elsewhere);
                }
                // Committed before the last read: printed with it.
                Ok(c) if c.record.seq <= self.printed => {}
                // The next line, with the sprint as it now is: nothing to read.
                Ok(c) if c.record.seq == self.printed + 1 => {
                    self.print(std::slice::from_ref(&c.record), &c.sprint, config);
                    return Ok(Progress::Moved(Box::new(c.sprint.clone())));
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => self.caught_up = false,
                Err(broadcast::error::RecvError::Closed) => {
                    let sprint = self.read(store, config).await?;
                    return Ok(Progress::Moved(Box::new(sprint)));
                }
            }
        }
    }

    /// Reads the sprint and the log lines after the last one printed, and prints them.
    /// One snapshot: the lines printed are exactly those up to the state returned, so a
    /// transition that commits meanwhile is never printed while the state returned is
    /// still the one before it (the caller would wait for it forever).
    async fn read(&mut self, store: &Store, config: &Config) -> Result<Sprint, StoreError> {
        let (sprint, records) = store
            .sprint_since(&self.sprint_id, self.printed)
            .await?
            .ok_or_else(|| StoreError::NoSprint(self.sprint_id.clone()))?;
        self.print(&records, &sprint, config);
        Ok(sprint)
    }

    /// Prints the sprint's log lines `records`, which end where `sprint` stands.
    fn print(&mut self, records: &[TransitionRecord], sprint: &Sprint, config: &Config) {
        for record in records {
            let line = render(record, &Context::new(config, sprint));
            self.say(&escape_controls(&line.text));
            self.printed = record.seq;
        }
    }

    /// Prints one line (under a status line, which it replaces).
    pub fn say(&mut self, text: &str) {
        self.clear_status();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// Draws the status line in place, on a terminal only (a pipe or a file gets the
    /// lines alone).
    pub fn status(&mut self, text: &str) {
        if !self.terminal {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\r\x1b[K{text}");
        let _ = out.flush();
        self.live = true;
    }

    /// Removes the status line, if one is drawn.
    pub fn clear_status(&mut self) {
        if self.live {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b"\r\x1b[K");
            let _ = out.flush();
            self.live = false;
        }
    }
}
