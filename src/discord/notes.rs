//! Replies in a sprint's thread. A message from someone who may steer the
//! sprint (or who started it) is a note for its next sister run: recorded as a signed
//! command, acknowledged with 📝 once it is durable, and marked 📨 by the forum bridge once
//! a run was given it. While a sister runs, the answer offers a handoff (a fresh session
//! that reads the note at once); at `done`, a note never decides anything: the answer
//! offers the decision's buttons, the request-changes form filled with the note. Anyone
//! else's messages get nothing, and never reach an agent.

use std::sync::atomic::{AtomicBool, Ordering};

use poise::serenity_prelude as serenity;
use serenity::{CreateAllowedMentions, CreateMessage, MessageType, ReactionType};

use super::buttons::{decision_buttons, handoff_button, resume_button};
use super::render::{MAX_CONTENT, cut};
use super::{Data, Error};
use crate::config::may_note;
use crate::orchestrator::client::{Note, submit_note};
use crate::pipeline::State;
use crate::say;

/// The reaction that says a note is recorded.
pub const NOTED: &str = "📝";
/// The reaction that says a run was given the note.
pub const GIVEN: &str = "📨";

/// Whether the missing Message Content intent was already logged.
static WARNED_NO_CONTENT: AtomicBool = AtomicBool::new(false);

/// A message in any channel the bot sees.
pub async fn on_message(
    ctx: &serenity::Context,
    data: &Data,
    msg: &serenity::Message,
) -> Result<(), Error> {
    if msg.author.bot
        || msg.guild_id.is_none()
        || !matches!(msg.kind, MessageType::Regular | MessageType::InlineReply)
    {
        return Ok(());
    }
    let store = &data.handle.store;
    let Ok(thread) = i64::try_from(msg.channel_id.get()) else {
        return Ok(());
    };
    let Some(post) = store.forum_post_of_thread(thread).await? else {
        return Ok(()); // not a sprint's thread
    };
    let Some(sprint) = store.sprint(&post.sprint_id).await? else {
        return Ok(());
    };
    let user = msg.author.id.get();
    let roles: Vec<u64> = msg
        .member
        .as_ref()
        .map(|m| m.roles.iter().map(|r| r.get()).collect())
        .unwrap_or_default();
    if !may_note(&data.discord, user, &roles, sprint.started_by.as_deref()) {
        return Ok(());
    }
    let span = tracing::info_span!("note", sprint = %sprint.id, message = %msg.id);
    let _entered = span.enter();
    if msg.content.trim().is_empty() {
        // Discord sends no text without the Message Content intent (or the message is an
        // attachment alone): nothing to note.
        if msg.attachments.is_empty()
            && msg.sticker_items.is_empty()
            && !WARNED_NO_CONTENT.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                "a reply in a sprint's thread came without its text: turn on the bot's Message Content intent (docs/discord.md, Replies in the thread); replies are not noted until then"
            );
        }
        return Ok(());
    }
    let by = format!("discord:{user}");
    let message = format!("{}/{}", msg.channel_id, msg.id);
    let note = Note {
        text: &msg.content,
        by: &by,
        seq: sprint.last_seq,
        message: Some(&message),
    };
    let locale = data.config.pipeline.locale;
    let id = match submit_note(store, &sprint, note, Some(&data.handle)).await {
        Ok(Ok(id)) => id,
        Ok(Err(reason)) => {
            let text =
                say!(locale, ko: "메모로 남기지 않았어요: {reason}", en: "Not noted: {reason}");
            return answer(ctx, msg, &text, Vec::new()).await;
        }
        Err(e) => {
            tracing::error!(error = %e, "a note from Discord could not be recorded");
            let text = say!(locale,
                ko: "메모를 저장하지 못했어요. 오케스트레이터 로그를 확인하세요",
                en: "The note could not be recorded; see the orchestrator's log");
            return answer(ctx, msg, &text, Vec::new()).await;
        }
    };
    tracing::info!(note = id, by = %by, "note recorded");
    data.notes.notify_one();
    msg.react(ctx, ReactionType::Unicode(NOTED.to_string()))
        .await?;
    let sprint_id = &sprint.id;
    if sprint.state == State::Done {
        let text = say!(locale,
            ko: "📝 메모를 남겼어요. {sprint_id}는 결정을 기다려요: 이 메모로 변경을 요청하거나 배포를 승인하세요",
            en: "📝 Noted. {sprint_id} waits for your decision: request changes with this note, or approve the deploy");
        let merges = data.config.merges(&sprint.project);
        let buttons = decision_buttons(&sprint.id, sprint.last_seq, Some(id), merges, locale);
        return answer(ctx, msg, &text, buttons).await;
    }
    // Whichever host runs it: the sprint's own runs, not this host's in flight.
    let running = store
        .runs(&sprint.id)
        .await?
        .into_iter()
        .find(|r| r.outcome.is_none());
    if let Some(run) = running {
        // The sister as the lines name it (`나랑이`, `Narang`).
        let who = locale.pick(run.actor.info().names);
        let text = say!(locale,
            ko: "📝 메모를 남겼어요. 지금 일하는 {who}의 실행이 끝나면 다음 실행이 이 메모를 받아요. 지금 바로 전하려면 새 세션으로 핸드오프하세요",
            en: "📝 Noted. {who} is working now; the next run is given this note when this one ends. To give it now, hand off to a fresh session");
        let button = handoff_button(&sprint.id, sprint.last_seq, locale);
        return answer(ctx, msg, &text, button).await;
    }
    // Waiting for a person, or for an agent's reset: the note goes with the next run,
    // and the answer offers to go on now.
    let waits_until = sprint
        .next_run_at
        .filter(|&at| at > crate::clock::now_ms() && sprint.state.stage().is_some());
    if sprint.state == State::Escalated || waits_until.is_some() {
        let text = if sprint.state == State::Escalated {
            say!(locale,
                ko: "📝 메모를 남겼어요. {sprint_id}는 확인을 기다려요: 재개하면 다음 실행이 이 메모를 받아요",
                en: "📝 Noted. {sprint_id} waits for a person: resume it, and its next run is given this note")
        } else {
            say!(locale,
                ko: "📝 메모를 남겼어요. {sprint_id}의 다음 실행은 기다리는 중이에요: 지금 재개하면 이 메모를 받아요",
                en: "📝 Noted. {sprint_id}'s next run is waiting; resume now, and it is given this note")
        };
        let button = resume_button(&sprint.id, sprint.last_seq, locale);
        return answer(ctx, msg, &text, button).await;
    }
    Ok(())
}

/// A reply to the person's message that can ping nobody.
async fn answer(
    ctx: &serenity::Context,
    msg: &serenity::Message,
    text: &str,
    components: Vec<serenity::CreateActionRow>,
) -> Result<(), Error> {
    let mut reply = CreateMessage::new()
        .content(cut(text, MAX_CONTENT))
        .reference_message(msg)
        .allowed_mentions(CreateAllowedMentions::new());
    if !components.is_empty() {
        reply = reply.components(components);
    }
    msg.channel_id.send_message(ctx, reply).await?;
    Ok(())
}
