//! `/sprint …` slash commands and the buttons/modal of the `done` line. Every interaction
//! is acknowledged first (deferred, or refused at once), then answered from the database:
//! Discord's 3-second deadline holds even when the database is busy. Steering needs an
//! approver, starting a sprint an approver or a starter; anyone in the guild may look.

use std::time::Duration;

use poise::CreateReply;
use poise::serenity_prelude as serenity;
use serenity::{
    ActionRowComponent, ComponentInteraction, CreateActionRow, CreateAllowedMentions,
    CreateInputText, CreateInteractionResponse, CreateInteractionResponseFollowup,
    CreateInteractionResponseMessage, CreateModal, InputTextStyle, ModalInteraction,
};

use super::buttons::{Action, ButtonId};
use super::render::{MAX_EPHEMERAL, cut};
use super::{Context, Data, Error};
use crate::clock::now_ms;
use crate::config::Locale;
use crate::config::{may_approve, may_start, may_steer};
use crate::domain::parse_sprint_id;
use crate::orchestrator::client::{self, Answer, Request};
use crate::say;
use crate::store::CommandKind;

/// How long an interaction waits for the orchestrator's answer before saying so.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// The slash commands, for poise.
pub fn all() -> Vec<poise::Command<Data, Error>> {
    vec![sprint()]
}

/// Start, inspect and steer sprints
#[poise::command(
    slash_command,
    guild_only,
    subcommands(
        "start",
        "status",
        "log",
        "approve",
        "approve_ci",
        "request_changes",
        "resume",
        "abort",
        "handoff"
    ),
    subcommand_required
)]
pub async fn sprint(_ctx: Context<'_>) -> Result<(), Error> {
    Ok(())
}

/// Queue a new sprint
#[poise::command(slash_command, guild_only)]
async fn start(
    ctx: Context<'_>,
    #[description = "What the sprint should achieve"] goal: String,
    #[description = "The configured project (optional with one project)"] project: Option<String>,
    #[description = "Extra instructions for the first sister"] focus: Option<String>,
) -> Result<(), Error> {
    ctx.defer_ephemeral().await?;
    let data = ctx.data();
    let (user, roles) = author_of(ctx).await;
    if !may_start(&data.discord, user, &roles) {
        return reply(ctx, &not_a_starter(data.config.pipeline.locale)).await;
    }
    let project = match data.config.project(project.as_deref()) {
        Ok((name, _)) => name.to_string(),
        Err(e) => return reply(ctx, &e).await,
    };
    if goal.trim().is_empty() {
        return reply(ctx, "the goal must not be empty").await;
    }
    let by = format!("discord:{user}");
    let queued = data
        .handle
        .store
        .create_sprint(
            &project,
            goal.trim(),
            focus.as_deref(),
            &by,
            &data.config.pipeline.branch_template,
            now_ms(),
        )
        .await;
    let sprint = match queued {
        Ok(sprint) => sprint,
        Err(e) => {
            tracing::error!(error = %e, "a sprint from Discord could not be queued");
            return reply(ctx, &format!("Nothing was queued: {e}")).await;
        }
    };
    data.handle.wake();
    let (id, goal) = (&sprint.id, &sprint.goal);
    let text = say!(data.config.pipeline.locale,
        ko: "{id} 대기열에 추가: {goal}",
        en: "{id} queued: {goal}");
    reply(ctx, &text).await
}

/// Show a sprint, or every sprint that is not finished
#[poise::command(slash_command, guild_only)]
async fn status(
    ctx: Context<'_>,
    #[description = "Sprint id, e.g. SPRINT-001"] id: Option<String>,
) -> Result<(), Error> {
    ctx.defer_ephemeral().await?;
    let store = &ctx.data().handle.store;
    let sprints = match id {
        Some(id) => store
            .sprint(&parse_sprint_id(&id))
            .await?
            .into_iter()
            .collect(),
        None => store
            .sprints()
            .await?
            .into_iter()
            .filter(|s| !s.state.is_terminal())
            .collect::<Vec<_>>(),
    };
    let text = if sprints.is_empty() {
        "no such sprint".to_string()
    } else {
        sprints
            .iter()
            .map(|s| {
                format!(
                    "`{}` **{}** round {} attempt {} — {}",
                    s.id, s.state, s.round, s.attempt, s.goal
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    reply(ctx, &text).await
}

/// The transitions of a sprint
#[poise::command(slash_command, guild_only)]
async fn log(
    ctx: Context<'_>,
    #[description = "Sprint id, e.g. SPRINT-001"] id: String,
) -> Result<(), Error> {
    ctx.defer_ephemeral().await?;
    let data = ctx.data();
    let id = parse_sprint_id(&id);
    let Some(sprint) = data.handle.store.sprint(&id).await? else {
        return reply(ctx, &format!("no sprint {id}")).await;
    };
    let cx = super::render::line_context(&data.config, &sprint);
    let lines: Vec<String> = data
        .handle
        .store
        .transitions(&id)
        .await?
        .iter()
        .map(|t| format!("`#{}` {}", t.seq, crate::notify::render(t, &cx).text))
        .collect();
    // The newest lines matter most when the log is longer than a message.
    let mut text = String::new();
    for line in lines.iter().rev() {
        if text.len() + line.len() + 1 > MAX_EPHEMERAL - 50 {
            text.insert_str(0, "…\n");
            break;
        }
        text.insert_str(0, &format!("{line}\n"));
    }
    reply(ctx, &format!("**{} · {}**\n{text}", sprint.id, sprint.goal)).await
}

/// Approve the deploy of a sprint waiting in done
#[poise::command(slash_command, guild_only)]
async fn approve(
    ctx: Context<'_>,
    #[description = "Sprint id, e.g. SPRINT-001"] id: String,
) -> Result<(), Error> {
    steer(ctx, &id, CommandKind::Approve, None).await
}

/// Let a sprint's CI files run: push the head held for them
#[poise::command(slash_command, guild_only, rename = "approve-ci")]
async fn approve_ci(
    ctx: Context<'_>,
    #[description = "Sprint id, e.g. SPRINT-001"] id: String,
) -> Result<(), Error> {
    steer(ctx, &id, CommandKind::ApproveCi, None).await
}

/// Send a sprint in done back to the implementer
#[poise::command(slash_command, guild_only, rename = "request-changes")]
async fn request_changes(
    ctx: Context<'_>,
    #[description = "Sprint id, e.g. SPRINT-001"] id: String,
    #[description = "What should change"] note: String,
) -> Result<(), Error> {
    steer(ctx, &id, CommandKind::RequestChanges, Some(note)).await
}

/// Resume an escalated sprint
#[poise::command(slash_command, guild_only)]
async fn resume(
    ctx: Context<'_>,
    #[description = "Sprint id, e.g. SPRINT-001"] id: String,
    #[description = "Instructions for the sister that resumes"] focus: Option<String>,
) -> Result<(), Error> {
    steer(ctx, &id, CommandKind::Resume, focus).await
}

/// Stop a sprint for good
#[poise::command(slash_command, guild_only)]
async fn abort(
    ctx: Context<'_>,
    #[description = "Sprint id, e.g. SPRINT-001"] id: String,
    #[description = "Why"] reason: Option<String>,
) -> Result<(), Error> {
    steer(ctx, &id, CommandKind::Abort, reason).await
}

/// Restart the running sister as a fresh session seeded with a handoff document
#[poise::command(slash_command, guild_only)]
async fn handoff(
    ctx: Context<'_>,
    #[description = "Sprint id, e.g. SPRINT-001"] id: String,
    #[description = "Instructions for the fresh session"] focus: Option<String>,
) -> Result<(), Error> {
    steer(ctx, &id, CommandKind::Handoff, focus).await
}

async fn steer(
    ctx: Context<'_>,
    id: &str,
    kind: CommandKind,
    text: Option<String>,
) -> Result<(), Error> {
    ctx.defer_ephemeral().await?;
    let data = ctx.data();
    let (user, roles) = author_of(ctx).await;
    let sprint_id = parse_sprint_id(id);
    if let Some(refusal) = data.refusal(&sprint_id, kind, user, &roles).await {
        return reply(ctx, &refusal).await;
    }
    let answer = data
        .give(&sprint_id, kind, text.as_deref(), user, None)
        .await;
    reply(ctx, &answer).await
}

/// The author of a slash command: their id and roles in the guild.
async fn author_of(ctx: Context<'_>) -> (u64, Vec<u64>) {
    let roles = ctx
        .author_member()
        .await
        .map(|m| m.roles.iter().map(|r| r.get()).collect())
        .unwrap_or_default();
    (ctx.author().id.get(), roles)
}

/// An ephemeral reply that can ping nobody.
async fn reply(ctx: Context<'_>, text: &str) -> Result<(), Error> {
    ctx.send(
        CreateReply::default()
            .content(cut(text, MAX_EPHEMERAL))
            .ephemeral(true)
            .allowed_mentions(CreateAllowedMentions::new()),
    )
    .await?;
    Ok(())
}

fn not_a_starter(locale: Locale) -> String {
    say!(locale,
        ko: "권한이 없어요: 스프린트는 설정된 사용자, 승인자(approver_user_ids, approver_role_ids)와 시작 권한자(starter_user_ids, starter_role_ids)만 시작할 수 있어요. 아무것도 대기열에 추가되지 않았어요.",
        en: "Not allowed: only the configured user, approvers (approver_user_ids, approver_role_ids) and starters (starter_user_ids, starter_role_ids) may start sprints. Nothing was queued.")
}

fn not_allowed(locale: Locale) -> String {
    say!(locale,
        ko: "권한이 없어요: 승인자만 할 수 있어요. 아무것도 바뀌지 않았어요.",
        en: "Not allowed: only approvers can do this. Nothing changed.")
}

impl Data {
    /// Why this member may not give this command for this sprint, if they may not: only
    /// approvers steer, and under `approval = "not-starter"` a sprint's starter does not
    /// approve its deploy. `None`: they may.
    pub(super) async fn refusal(
        &self,
        sprint_id: &str,
        kind: CommandKind,
        user: u64,
        roles: &[u64],
    ) -> Option<String> {
        let locale = self.config.pipeline.locale;
        if !may_steer(&self.discord, user, roles) {
            return Some(not_allowed(locale));
        }
        // Letting an agent's CI files run with the repository's secrets is an approval too.
        if !matches!(kind, CommandKind::Approve | CommandKind::ApproveCi) {
            return None;
        }
        let started_by = match self.handle.store.sprint(sprint_id).await {
            Ok(sprint) => sprint.and_then(|s| s.started_by),
            // The command's own answer says what is wrong with the database.
            Err(_) => None,
        };
        if may_approve(&self.discord, user, started_by.as_deref()) {
            return None;
        }
        Some(say!(locale,
            ko: "거절됨: approval = \"not-starter\" 규칙에 따라 {sprint_id}를 시작한 사람은 배포를 혼자 승인할 수 없어요. 다른 승인자가 승인해야 해요. 아무것도 바뀌지 않았어요.",
            en: "Refused: approval = \"not-starter\": the person who started {sprint_id} cannot approve its deploy alone; another approver must. Nothing changed."))
    }

    /// Gives a command as a Discord user and words the answer.
    pub(super) async fn give(
        &self,
        sprint_id: &str,
        kind: CommandKind,
        text: Option<&str>,
        user: u64,
        seq: Option<i64>,
    ) -> String {
        let by = format!("discord:{user}");
        let request = Request {
            sprint_id,
            kind,
            text,
            by: &by,
            seq,
        };
        let locale = self.config.pipeline.locale;
        match client::submit(
            &self.handle.store,
            &self.policy,
            request,
            Some(&self.handle),
            ANSWER_WAIT,
        )
        .await
        {
            Ok(Answer::Applied(what)) => self.as_line(sprint_id, what).await,
            Ok(Answer::Refused(why)) => {
                // A card's button refused: point to the card that stands now, if any.
                let current = match seq {
                    Some(_) => self.current_card(sprint_id).await,
                    None => None,
                };
                let current = current.map_or(String::new(), |link| {
                    say!(locale, ko: "\n지금 카드: {link}", en: "\nThe current card: {link}")
                });
                say!(locale, ko: "거절됨: {why}{current}", en: "Refused: {why}{current}")
            }
            Ok(Answer::Queued(n) | Answer::Unanswered(n)) => say!(locale,
                ko: "명령 #{n} 기록됨: 오케스트레이터가 곧 적용해요",
                en: "Recorded as command #{n}: the orchestrator applies it shortly"),
            Err(e) => {
                tracing::error!(error = %e, sprint = sprint_id, "a Discord command failed");
                "the database could not take the command; see the orchestrator's log".into()
            }
        }
    }
}

impl Data {
    /// An applied command's answer as the thread's line for its transition reads it (the
    /// bare result when it made none, or the log cannot be read).
    async fn as_line(&self, sprint_id: &str, what: String) -> String {
        if !what.contains(" → ") {
            return what;
        }
        let store = &self.handle.store;
        let (Ok(Some(sprint)), Ok(log)) = (
            store.sprint(sprint_id).await,
            store.transitions(sprint_id).await,
        ) else {
            return what;
        };
        match log.last() {
            Some(last) => {
                crate::notify::messages::render(
                    last,
                    &super::render::line_context(&self.config, &sprint),
                )
                .text
            }
            None => what,
        }
    }

    /// The text of a note of this sprint, to fill a form with.
    async fn note_text(&self, sprint_id: &str, note: Option<i64>) -> Option<String> {
        let command = self.handle.store.command(note?).await.ok()??;
        (command.kind == CommandKind::Note && command.sprint_id == sprint_id)
            .then_some(command.text)
            .flatten()
    }

    /// A link to the sprint's `done` card that stands now (its buttons answer for the
    /// state it is in), when it waits in `done`.
    async fn current_card(&self, sprint_id: &str) -> Option<String> {
        let store = &self.handle.store;
        let sprint = store.sprint(sprint_id).await.ok()??;
        if sprint.state != crate::pipeline::State::Done {
            return None;
        }
        let post = store.forum_post(sprint_id).await.ok()??;
        let card = post.done_message_id?;
        Some(format!(
            "https://discord.com/channels/{}/{}/{card}",
            self.discord.guild_id.0, post.thread_id
        ))
    }
}

// --- the buttons ----------------------------------------------------------------------

/// The longest text a request-changes form takes (Discord's limit for a text input).
const FORM_MAX: u16 = 4000;

fn member_of(member: Option<&serenity::Member>, user: &serenity::User) -> (u64, Vec<u64>) {
    let roles = member
        .map(|m| m.roles.iter().map(|r| r.get()).collect())
        .unwrap_or_default();
    (user.id.get(), roles)
}

fn ephemeral(text: &str) -> CreateInteractionResponse {
    CreateInteractionResponse::Message(
        CreateInteractionResponseMessage::new()
            .content(cut(text, MAX_EPHEMERAL))
            .ephemeral(true)
            .allowed_mentions(CreateAllowedMentions::new()),
    )
}

/// A click on one of the bot's buttons.
pub async fn on_button(
    ctx: &serenity::Context,
    data: &Data,
    click: &ComponentInteraction,
) -> Result<(), Error> {
    let Some(id) = ButtonId::parse(&click.data.custom_id) else {
        return Ok(()); // not ours
    };
    let (sprint_id, seq) = (id.sprint.as_str(), id.seq);
    let locale = data.config.pipeline.locale;
    let (user, roles) = member_of(click.member.as_ref(), &click.user);
    if let Some(refusal) = data
        .refusal(sprint_id, id.action.kind(), user, &roles)
        .await
    {
        click.create_response(ctx, ephemeral(&refusal)).await?;
        return Ok(());
    }
    if id.action.asks_for_a_note() {
        // The note is asked for in a modal; the command is given when it is submitted.
        let (title, label) = match id.action {
            Action::Changes => (
                say!(locale, ko: "{sprint_id} 변경 요청", en: "Changes to {sprint_id}"),
                say!(locale, ko: "무엇을 바꿀까요?", en: "What should change?"),
            ),
            _ => (
                say!(locale, ko: "{sprint_id} 재개", en: "Resume {sprint_id}"),
                say!(locale,
                    ko: "어떻게 풀까요? (다음 실행에 전달)",
                    en: "What settles it? (goes to the next run)"),
            ),
        };
        let form = ButtonId {
            note: None,
            ..id.clone()
        };
        let mut input = CreateInputText::new(InputTextStyle::Paragraph, label, "note")
            .required(true)
            .max_length(FORM_MAX);
        if let Some(text) = data.note_text(sprint_id, id.note).await {
            input = input.value(text.chars().take(usize::from(FORM_MAX)).collect::<String>());
        }
        let modal = CreateModal::new(form.to_string(), title)
            .components(vec![CreateActionRow::InputText(input)]);
        click
            .create_response(ctx, CreateInteractionResponse::Modal(modal))
            .await?;
        return Ok(());
    }
    let kind = id.action.kind();
    click.defer_ephemeral(ctx).await?;
    let answer = data.give(sprint_id, kind, None, user, seq).await;
    click
        .create_followup(
            ctx,
            CreateInteractionResponseFollowup::new()
                .content(cut(&answer, MAX_EPHEMERAL))
                .ephemeral(true)
                .allowed_mentions(CreateAllowedMentions::new()),
        )
        .await?;
    Ok(())
}

/// A note's modal (request changes, resume with a note), submitted.
pub async fn on_modal(
    ctx: &serenity::Context,
    data: &Data,
    submit: &ModalInteraction,
) -> Result<(), Error> {
    let Some(id) = ButtonId::parse(&submit.data.custom_id).filter(|id| id.action.asks_for_a_note())
    else {
        return Ok(());
    };
    let (sprint_id, seq) = (id.sprint.as_str(), id.seq);
    let (user, roles) = member_of(submit.member.as_ref(), &submit.user);
    if !may_steer(&data.discord, user, &roles) {
        submit
            .create_response(ctx, ephemeral(&not_allowed(data.config.pipeline.locale)))
            .await?;
        return Ok(());
    }
    let note = submit
        .data
        .components
        .iter()
        .flat_map(|row| row.components.iter())
        .find_map(|c| match c {
            ActionRowComponent::InputText(input) if input.custom_id == "note" => {
                input.value.clone()
            }
            _ => None,
        })
        .unwrap_or_default();
    submit.defer_ephemeral(ctx).await?;
    let answer = data
        .give(sprint_id, id.action.kind(), Some(&note), user, seq)
        .await;
    submit
        .create_followup(
            ctx,
            CreateInteractionResponseFollowup::new()
                .content(cut(&answer, MAX_EPHEMERAL))
                .ephemeral(true)
                .allowed_mentions(CreateAllowedMentions::new()),
        )
        .await?;
    Ok(())
}
