//! Giving a command to the orchestrator from another place (the CLI, the Discord bridge):
//! it is checked against the rules, written to the database, and answered by the
//! orchestrator there. With no orchestrator running it waits in the database and is
//! applied when one starts.

use std::time::Duration;

use super::lease::holder_alive;
use super::{Handle, now_ms};
use crate::pipeline::rules::{ended_for_notes, stale_command};
use crate::pipeline::{Facts, Policy, apply};
use crate::store::{CommandKind, CommandStatus, Store, StoreError};

/// What became of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The orchestrator applied it: what changed.
    Applied(String),
    /// Refused, with the reason; nothing changed.
    Refused(String),
    /// Written, but no orchestrator is running: it is applied when one starts.
    Queued(i64),
    /// Written, and an orchestrator runs, but it has not answered in time.
    Unanswered(i64),
}

/// A command to give.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub sprint_id: &'a str,
    pub kind: CommandKind,
    /// The note, focus or reason.
    pub text: Option<&'a str>,
    /// Who gives it: `cli`, `discord:<user id>`.
    pub by: &'a str,
    /// The sprint's transition the person answered (a card's), when not its latest:
    /// the command is bound to the state they saw.
    pub seq: Option<i64>,
}

/// Checks a command against the sprint's current state, writes it, and waits up to
/// `wait` for the orchestrator's answer. An in-process caller passes the orchestrator's
/// `Handle` so it wakes at once instead of at its next poll.
pub async fn submit(
    store: &Store,
    policy: &Policy,
    request: Request<'_>,
    wake: Option<&Handle>,
    wait: Duration,
) -> Result<Answer, StoreError> {
    let Request {
        sprint_id,
        kind,
        text,
        by,
        seq,
    } = request;
    let Some(sprint) = store.sprint(sprint_id).await? else {
        return Ok(Answer::Refused(format!("no sprint {sprint_id}")));
    };
    // Bound to what the person saw: a card's transition, else the state read just now.
    let seq = seq.unwrap_or(sprint.last_seq);
    let Some(event) = kind.event(by, text) else {
        let note = Note {
            text: text.unwrap_or_default(),
            by,
            seq,
            message: None,
        };
        return Ok(match submit_note(store, &sprint, note, wake).await? {
            Ok(_) => Answer::Applied(super::commands::noted(&sprint.id)),
            Err(reason) => Answer::Refused(reason),
        });
    };
    if let Some(reason) = stale_command(
        &sprint.id,
        Some(seq),
        sprint.last_seq,
        sprint.position(),
        &event,
    ) {
        return Ok(Answer::Refused(reason));
    }
    // Refuse at once what the rules refuse now; the orchestrator checks again when it
    // applies the command, so a race (two approvals) still yields one transition.
    let running = store
        .runs_in_flight()
        .await?
        .iter()
        .any(|r| r.sprint_id == sprint.id);
    let log = match sprint.state {
        crate::pipeline::State::Verifying => store.transitions(&sprint.id).await?,
        _ => Vec::new(),
    };
    let facts = Facts {
        ci_files_held: crate::store::ci_files_held(&log),
        ..Facts::of(&sprint.id, running)
    };
    if let Err(refusal) = apply(sprint.position(), &event, facts, policy) {
        return Ok(Answer::Refused(refusal.reason));
    }
    let id = store
        .submit_command(sprint_id, kind, text, by, Some(seq), now_ms())
        .await?;
    if let Some(handle) = wake {
        handle.wake();
    }
    let orchestrator_alive = match store.live_hosts_for(&sprint).await? {
        // Several hosts on one PostgreSQL database: the owner, or one serving its project.
        Some(hosts) => !hosts.is_empty(),
        None => store.lease().await?.as_ref().is_some_and(holder_alive),
    };
    if !orchestrator_alive {
        return Ok(Answer::Queued(id));
    }
    let deadline = tokio::time::Instant::now() + wait;
    // The orchestrator answers within milliseconds when it is awake: look soon, then
    // less and less often.
    let mut every = Duration::from_millis(1);
    loop {
        if let Some(c) = store.command(id).await? {
            match c.status {
                CommandStatus::Applied => {
                    return Ok(Answer::Applied(c.result.unwrap_or_default()));
                }
                CommandStatus::Refused => {
                    return Ok(Answer::Refused(c.result.unwrap_or_default()));
                }
                CommandStatus::Pending => {}
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Answer::Unanswered(id));
        }
        tokio::time::sleep(every).await;
        every = (every * 2).min(Duration::from_millis(50));
    }
}

/// The longest note taken, in characters: what a Discord message holds at most.
pub const MAX_NOTE_CHARS: usize = 4000;

/// Why a note's text cannot be taken, if it cannot: empty, or longer than a message.
pub fn bad_note(text: &str) -> Option<String> {
    let chars = text.chars().count();
    if text.trim().is_empty() {
        Some("a note must say something: its text is empty".into())
    } else if chars > MAX_NOTE_CHARS {
        Some(format!(
            "a note holds at most {MAX_NOTE_CHARS} characters; this one has {chars}"
        ))
    } else {
        None
    }
}

/// A note to record.
#[derive(Debug, Clone, Copy)]
pub struct Note<'a> {
    pub text: &'a str,
    pub by: &'a str,
    /// The sprint's transition when it was given.
    pub seq: i64,
    /// Where it was written on Discord (`<channel id>/<message id>`).
    pub message: Option<&'a str>,
}

/// A note: recorded for the sprint's next sister run. It changes no
/// state, so it is answered once it is durable (its command id), or refused (why); the
/// orchestrator marks it applied (or, should the sprint have ended meanwhile, refused)
/// when it next looks.
pub async fn submit_note(
    store: &Store,
    sprint: &crate::store::Sprint,
    note: Note<'_>,
    wake: Option<&Handle>,
) -> Result<Result<i64, String>, StoreError> {
    if let Some(reason) = bad_note(note.text).or_else(|| ended_for_notes(&sprint.id, sprint.state))
    {
        return Ok(Err(reason));
    }
    let id = store
        .submit_note(
            &sprint.id,
            note.text,
            note.by,
            note.seq,
            now_ms(),
            note.message,
        )
        .await?;
    if let Some(handle) = wake {
        handle.wake();
    }
    Ok(Ok(id))
}
