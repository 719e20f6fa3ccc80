//! The merge of an approved pull request, made after the approval is committed
//! (`done → merging`): a visit of its own whose answer is an event. Each visit asks the
//! forge first whether the pull request is merged already (a crash after the merge call,
//! a person's merge), so a merge is never made twice and never made unrecorded.

use crate::forge::{ForgeError, MergeMessage, PrState, words};
use crate::pipeline::forge::{AfterFault, after_fault};
use crate::pipeline::{Event, State};
use crate::store::{Sprint, Store, TransitionRecord};

use super::forge::{ProjectForge, RETRY, Visit, published, until_reset};

/// What a merge visit asks of the forge: pull request `number`, merged only at `head`,
/// its commit written as `message`.
pub(super) struct MergeAsk {
    number: u64,
    head: String,
    message: MergeMessage,
}

/// The merge `sprint` (in `merging`) waits for, from its log: the pull request it
/// published, the head the person approved and who did. `Err`: why there is none to ask
/// (the event that escalates it).
pub(super) async fn ask(
    store: &Store,
    config: &crate::config::Config,
    sprint: &Sprint,
    log: &[TransitionRecord],
) -> Result<MergeAsk, Event> {
    let refused = |reason: &str| Event::MergeRefused {
        reason: reason.to_string(),
    };
    let Some((number, _, _, _)) = published(log) else {
        return Err(refused("no pull request was opened for this sprint"));
    };
    let approval = log
        .iter()
        .rev()
        .find(|t| t.to == State::Merging && t.from != State::Merging)
        .ok_or_else(|| refused("no approval is recorded for this merge"))?;
    let Some(crate::pipeline::fsm::Note::Approved { head }) = &approval.note else {
        return Err(refused("the approval names no reviewed commit"));
    };
    let thread = match (&config.discord, store.forum_post(&sprint.id).await) {
        (Some(discord), Ok(Some(post))) => Some(crate::notify::thread_url(
            discord.guild_id.0,
            post.thread_id,
        )),
        _ => None,
    };
    let approved_by = approval.by.as_deref().unwrap_or("a person");
    Ok(MergeAsk {
        number,
        head: head.clone(),
        message: MergeMessage {
            title: format!("{} (#{number})", words::title(&sprint.goal)),
            body: words::merge_body(&sprint.id, thread.as_deref(), head, approved_by),
        },
    })
}

/// One try at the merge: what the forge says of the pull request first, then the merge
/// call when it is still open. `Err`: the forge could not answer (down, rate-limited,
/// an answer this client cannot read) — tried again later, the approval standing.
pub(super) async fn visit(forge: &ProjectForge, ask: &MergeAsk) -> Result<Event, ForgeError> {
    // What the forge refused is a person's to settle; anything else is asked again.
    let refused = |e: ForgeError| match after_fault(e.fault()) {
        AfterFault::Escalate => Ok(Event::MergeRefused {
            reason: match e {
                ForgeError::Refused { message, .. } => message,
                ForgeError::NotFound(what) => format!(
                    "pull request #{} is gone from the forge ({what})",
                    ask.number
                ),
                other => other.to_string(),
            },
        }),
        AfterFault::AfterReset | AfterFault::Later => Err(e),
    };
    match forge.api().pull_request(ask.number).await {
        Ok(pull) => match pull.state {
            PrState::Merged { by, commit } => return Ok(Event::ForgeMerged { by, commit }),
            PrState::Closed { by } => return Ok(Event::ForgeClosed { by }),
            PrState::Open => {}
        },
        Err(e) => return refused(e),
    }
    match forge
        .api()
        .merge(ask.number, &ask.head, forge.config.merge, &ask.message)
        .await
    {
        Ok(commit) => Ok(Event::Merged {
            head: ask.head.clone(),
            commit,
        }),
        Err(e) => refused(e),
    }
}

/// Whether the log's last word is already that the merge waits for the forge: the
/// thread is told once, not at every try.
pub(super) fn delay_told(log: &[TransitionRecord]) -> bool {
    log.last()
        .is_some_and(|t| matches!(t.detail, Event::MergeDelayed { .. }))
}

/// A merge visit to a sprint in `merging` (`failures`: the visits before that the forge
/// did not answer): its answer as an event; a forge that cannot answer is tried again,
/// backing off, and the thread told once.
pub(super) async fn merge_visit(
    forge: &ProjectForge,
    ask: Result<MergeAsk, Event>,
    sprint: &Sprint,
    log: &[TransitionRecord],
    failures: u32,
) -> Visit {
    let interval = forge.config.poll_interval.0;
    let mut out = Visit::of(sprint, interval);
    let answer = match ask {
        Ok(ask) => visit(forge, &ask).await,
        Err(event) => Ok(event),
    };
    match answer {
        Ok(event) => out.events = vec![event],
        Err(e) => {
            tracing::warn!(error = %e, "the forge could not be asked to merge; asking again later");
            out.merge_unanswered = true;
            out.next = until_reset(&e).max(
                interval
                    .saturating_mul(2u32.saturating_pow(failures.min(16)))
                    .min(RETRY),
            );
            if !delay_told(log) {
                out.events = vec![Event::MergeDelayed {
                    reason: e.to_string(),
                }];
            }
        }
    }
    out
}
