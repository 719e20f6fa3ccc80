//! The fake Discord in `support::fake_discord` works with the real serenity client
//! and a real poise framework: handshake, command registration, interactions and the REST
//! calls the bridge makes.

use std::sync::Arc;
use std::time::Duration;

use poise::serenity_prelude as serenity;
use serde_json::json;

use crate::support::fake_discord::{FakeConfig, FakeDiscord, ResponseKind};

const WAIT: Duration = Duration::from_secs(30);
const USER: u64 = 200_000_000_000_000_001;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Ctx<'a> = poise::Context<'a, Data, Error>;

struct Data;

/// Sprint commands (a minimal stand-in for the real bridge).
#[poise::command(slash_command, subcommands("ping", "status"), subcommand_required)]
async fn sprint(_ctx: Ctx<'_>) -> Result<(), Error> {
    Ok(())
}

/// Replies ephemerally.
#[poise::command(slash_command)]
async fn ping(
    ctx: Ctx<'_>,
    #[description = "Something to echo"] goal: Option<String>,
) -> Result<(), Error> {
    let reply = poise::CreateReply::default()
        .content(format!("pong {}", goal.unwrap_or_default()))
        .ephemeral(true);
    ctx.send(reply).await?;
    Ok(())
}

/// Defers, then answers twice.
#[poise::command(slash_command)]
async fn status(
    ctx: Ctx<'_>,
    #[description = "Sprint id"] id: String,
    #[description = "Round"] round: Option<u32>,
) -> Result<(), Error> {
    ctx.defer_ephemeral().await?;
    ctx.say(format!("status of {id} round {}", round.unwrap_or(0)))
        .await?;
    ctx.say("second line").await?;
    Ok(())
}

async fn on_event(
    framework: poise::FrameworkContext<'_, Data, Error>,
    event: &serenity::FullEvent,
) -> Result<(), Error> {
    let http = &framework.serenity_context.http;
    if let serenity::FullEvent::InteractionCreate { interaction } = event {
        match interaction {
            serenity::Interaction::Component(click)
                if click.data.custom_id.starts_with("abort:") =>
            {
                let update = serenity::CreateInteractionResponseMessage::new()
                    .content("aborted")
                    .components(Vec::new());
                click
                    .create_response(
                        http,
                        serenity::CreateInteractionResponse::UpdateMessage(update),
                    )
                    .await?;
            }
            serenity::Interaction::Component(click) => {
                let message = serenity::CreateInteractionResponseMessage::new()
                    .content(format!("clicked {}", click.data.custom_id))
                    .ephemeral(true);
                click
                    .create_response(http, serenity::CreateInteractionResponse::Message(message))
                    .await?;
            }
            serenity::Interaction::Modal(submit) => {
                let values: Vec<String> = submit
                    .data
                    .components
                    .iter()
                    .flat_map(|row| &row.components)
                    .filter_map(|c| match c {
                        serenity::ActionRowComponent::InputText(input) => Some(format!(
                            "{}={}",
                            input.custom_id,
                            input.value.clone().unwrap_or_default()
                        )),
                        _ => None,
                    })
                    .collect();
                let message = serenity::CreateInteractionResponseMessage::new()
                    .content(format!("{} {}", submit.data.custom_id, values.join(",")))
                    .ephemeral(true);
                submit
                    .create_response(http, serenity::CreateInteractionResponse::Message(message))
                    .await?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn http_for(fake: &FakeDiscord, token: &str) -> serenity::Http {
    serenity::HttpBuilder::new(token)
        .proxy(fake.base_url())
        .ratelimiter_disabled(true)
        .build()
}

struct Bot {
    http: Arc<serenity::Http>,
    cache: Arc<serenity::Cache>,
    shards: Arc<serenity::ShardManager>,
    task: tokio::task::JoinHandle<()>,
}

impl Bot {
    async fn stop(self) {
        self.shards.shutdown_all().await;
        self.task.abort();
    }
}

/// Starts a poise bot against the fake and waits until it registered its commands.
async fn start_bot(fake: &FakeDiscord) -> Bot {
    let guild = serenity::GuildId::new(fake.config().guild_id);
    let framework = poise::Framework::builder()
        .options(poise::FrameworkOptions {
            commands: vec![sprint()],
            event_handler: |framework, event| Box::pin(on_event(framework, event)),
            ..Default::default()
        })
        .setup(move |ctx, _ready, framework| {
            Box::pin(async move {
                poise::builtins::register_in_guild(ctx, &framework.options().commands, guild)
                    .await?;
                Ok(Data)
            })
        })
        .build();
    let mut client = serenity::ClientBuilder::new_with_http(
        http_for(fake, fake.token()),
        serenity::GatewayIntents::non_privileged(),
    )
    .framework(framework)
    .await
    .expect("build the serenity client");
    let http = Arc::clone(&client.http);
    let shards = Arc::clone(&client.shard_manager);
    let cache = Arc::clone(&client.cache);
    let task = tokio::spawn(async move {
        if let Err(e) = client.start().await {
            eprintln!("client stopped: {e}");
        }
    });
    fake.wait_ready().await;
    assert!(
        fake.wait_until(WAIT, |f| !f.commands().is_empty()).await,
        "commands never registered; requests: {:#?}",
        fake.requests()
    );
    Bot {
        http,
        cache,
        shards,
        task,
    }
}

fn http_status(error: &serenity::Error) -> Option<u16> {
    match error {
        serenity::Error::Http(serenity::HttpError::UnsuccessfulRequest(response)) => {
            Some(response.status_code.as_u16())
        }
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_ready_and_guild_command_registration() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let bot = start_bot(&fake).await;
    let config = fake.config();

    assert_eq!(fake.ready_count(), 1);
    let identify = fake.identify_payload().expect("IDENTIFY received");
    assert_eq!(
        identify["token"]
            .as_str()
            .map(|t| t.trim_start_matches("Bot ")),
        Some(fake.token())
    );

    let commands = fake.commands();
    assert_eq!(commands.len(), 1);
    assert_eq!(commands[0]["name"], "sprint");
    assert_eq!(
        commands[0]["application_id"],
        config.application_id.to_string()
    );
    let subcommands: Vec<&str> = commands[0]["options"]
        .as_array()
        .expect("subcommands")
        .iter()
        .filter_map(|o| o["name"].as_str())
        .collect();
    assert_eq!(subcommands, ["ping", "status"]);

    let requests = fake.requests();
    let put = requests
        .iter()
        .find(|r| r.is("PUT", "/applications/*/guilds/*/commands"))
        .expect("PUT guild commands");
    assert_eq!(
        put.route(),
        format!(
            "/applications/{}/guilds/{}/commands",
            config.application_id, config.guild_id
        )
    );
    assert!(requests.iter().any(|r| r.is("GET", "/gateway")));
    assert!(
        requests
            .iter()
            .any(|r| r.is("GET", "/oauth2/applications/@me"))
    );
    assert!(requests.iter().all(|r| r.succeeded()), "{requests:#?}");
    assert!(
        fake.unknown_requests().is_empty(),
        "{:#?}",
        fake.unknown_requests()
    );

    // The cache got GUILD_CREATE: the bot knows the guild and its forum channel.
    let guild = serenity::GuildId::new(config.guild_id);
    let forum = serenity::ChannelId::new(config.forum_channel_id);
    let deadline = tokio::time::Instant::now() + WAIT;
    while bot.cache.guild(guild).is_none() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cached = bot
        .cache
        .guild(guild)
        .map(|g| g.channels.get(&forum).map(|c| c.kind));
    assert_eq!(cached, Some(Some(serenity::ChannelType::Forum)));
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_get_callbacks_and_follow_ups() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let bot = start_bot(&fake).await;

    let ping = fake.slash(USER, &[], &["sprint", "ping"], json!({ "goal": "hello" }));
    let responses = fake.wait_for_responses(ping.id, 1, WAIT).await;
    assert_eq!(responses[0].kind, ResponseKind::Callback(4));
    assert_eq!(responses[0].content(), Some("pong hello"));
    assert!(responses[0].is_ephemeral());
    assert_eq!(
        responses[0].data()["allowed_mentions"]["parse"],
        json!(["users"])
    );

    let status = fake.slash(
        USER,
        &[1],
        &["sprint", "status"],
        json!({ "id": "SPRINT-001", "round": 2 }),
    );
    let responses = fake.wait_for_responses(status.id, 3, WAIT).await;
    assert_eq!(responses[0].kind, ResponseKind::Callback(5));
    assert!(responses[0].is_ephemeral());
    let texts: Vec<&str> = responses[1..].iter().filter_map(|r| r.content()).collect();
    assert_eq!(
        texts,
        ["status of SPRINT-001 round 2", "second line"],
        "{responses:#?}"
    );

    // A second callback for the same interaction is refused, as Discord does.
    let again = bot
        .http
        .create_interaction_response(
            serenity::InteractionId::new(ping.id),
            &ping.token,
            &serenity::CreateInteractionResponse::Acknowledge,
            Vec::new(),
        )
        .await
        .expect_err("second ack refused");
    assert_eq!(http_status(&again), Some(400));
    assert!(
        fake.unknown_requests().is_empty(),
        "{:#?}",
        fake.unknown_requests()
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buttons_and_modals_get_callbacks() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let bot = start_bot(&fake).await;
    let forum = serenity::ChannelId::new(fake.config().forum_channel_id);

    let post = forum
        .create_forum_post(
            &bot.http,
            serenity::CreateForumPost::new(
                "SPRINT-001 · buttons",
                serenity::CreateMessage::new().content("board"),
            ),
        )
        .await
        .expect("forum post");
    let buttons = serenity::CreateActionRow::Buttons(vec![
        serenity::CreateButton::new("approve:SPRINT-001")
            .label("Approve deploy")
            .style(serenity::ButtonStyle::Success),
        serenity::CreateButton::new("abort:SPRINT-001")
            .label("Abort")
            .style(serenity::ButtonStyle::Danger),
    ]);
    let done = post
        .id
        .send_message(
            &bot.http,
            serenity::CreateMessage::new()
                .content("done")
                .components(vec![buttons]),
        )
        .await
        .expect("message with buttons");
    assert_eq!(done.components.len(), 1, "serenity reads the buttons back");
    let stored = fake.message(done.id.get()).expect("stored");
    assert_eq!(
        stored.custom_ids(),
        ["approve:SPRINT-001", "abort:SPRINT-001"]
    );

    let click = fake.button(
        USER,
        &[],
        "approve:SPRINT-001",
        done.id.get(),
        post.id.get(),
    );
    let responses = fake.wait_for_responses(click.id, 1, WAIT).await;
    assert_eq!(responses[0].kind, ResponseKind::Callback(4));
    assert_eq!(responses[0].content(), Some("clicked approve:SPRINT-001"));

    // An "update message" answer edits the message the button is on.
    let abort = fake.button(USER, &[], "abort:SPRINT-001", done.id.get(), post.id.get());
    let responses = fake.wait_for_responses(abort.id, 1, WAIT).await;
    assert_eq!(responses[0].kind, ResponseKind::Callback(7));
    assert_eq!(responses[0].message_id, Some(done.id.get()));
    let updated = fake.message(done.id.get()).expect("the done message");
    assert_eq!(updated.content, "aborted");
    assert!(updated.custom_ids().is_empty());
    assert_eq!(updated.history[0]["content"], "done");

    let submit = fake.modal_submit(
        USER,
        &[],
        "changes:SPRINT-001",
        &[("note", "fix the tests")],
    );
    let responses = fake.wait_for_responses(submit.id, 1, WAIT).await;
    assert_eq!(
        responses[0].content(),
        Some("changes:SPRINT-001 note=fix the tests")
    );
    assert!(
        fake.unknown_requests().is_empty(),
        "{:#?}",
        fake.unknown_requests()
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forum_posts_messages_and_edits_are_recorded() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let http = http_for(&fake, fake.token());
    let config = fake.config();
    let forum = serenity::ChannelId::new(config.forum_channel_id);
    let only_user = serenity::CreateAllowedMentions::new().users([serenity::UserId::new(USER)]);

    let post = forum
        .create_forum_post(
            &http,
            serenity::CreateForumPost::new(
                "SPRINT-001 · Add a login page",
                serenity::CreateMessage::new()
                    .content("stage: planning")
                    .allowed_mentions(only_user.clone()),
            ),
        )
        .await
        .expect("forum post");
    assert_eq!(post.kind, serenity::ChannelType::PublicThread);
    assert_eq!(post.parent_id, Some(forum));
    assert_eq!(post.name, "SPRINT-001 · Add a login page");

    let threads = fake.threads();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].id, post.id.get());
    assert_eq!(threads[0].parent_id, config.forum_channel_id);
    let starter = threads[0].starter.clone().expect("starter message");
    assert_eq!(
        starter.id,
        post.id.get(),
        "the starter message has the thread's id"
    );
    assert_eq!(starter.content, "stage: planning");
    assert_eq!(
        starter.allowed_mentions,
        json!({ "parse": [], "users": [USER.to_string()], "roles": [] })
    );

    let line = post
        .id
        .send_message(
            &http,
            serenity::CreateMessage::new()
                .content(format!("<@{USER}> 확인 필요"))
                .allowed_mentions(only_user.clone()),
        )
        .await
        .expect("thread message");
    post.id
        .edit_message(
            &http,
            post.id.get(),
            serenity::EditMessage::new().content("stage: implementing"),
        )
        .await
        .expect("edit the board");
    post.id
        .edit_thread(
            &http,
            serenity::EditThread::new().archived(true).locked(true),
        )
        .await
        .expect("archive");

    let messages = fake.messages(post.id.get());
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].id, post.id.get());
    assert_eq!(messages[0].content, "stage: implementing");
    assert_eq!(messages[0].edits, 1);
    assert_eq!(messages[0].history.len(), 2);
    assert_eq!(messages[0].history[0]["content"], "stage: planning");
    assert_eq!(messages[1].id, line.id.get());
    assert_eq!(messages[1].content, format!("<@{USER}> 확인 필요"));
    assert_eq!(
        messages[1].allowed_mentions["users"],
        json!([USER.to_string()])
    );
    let thread = &fake.threads()[0];
    assert!(thread.archived && thread.locked);

    // Doctor-style reads.
    let channel = http.get_channel(forum).await.expect("forum channel");
    assert_eq!(
        channel.guild().map(|c| c.kind),
        Some(serenity::ChannelType::Forum)
    );
    let guild = http
        .get_guild(serenity::GuildId::new(config.guild_id))
        .await
        .expect("guild");
    assert_eq!(guild.id.get(), config.guild_id);
    let member = http
        .get_member(
            serenity::GuildId::new(config.guild_id),
            serenity::UserId::new(config.bot_user_id),
        )
        .await
        .expect("bot member");
    assert!(member.user.bot);
    let roles = http
        .get_guild_roles(serenity::GuildId::new(config.guild_id))
        .await
        .expect("roles");
    assert_eq!(roles.len(), 1);
    let me = http.get_current_user().await.expect("current user");
    assert_eq!(me.id.get(), config.bot_user_id);

    // Discord's limits are enforced: serenity's builder refuses 2001 characters itself,
    // the raw route gets Discord's 400.
    let builder = post
        .id
        .send_message(
            &http,
            serenity::CreateMessage::new().content("x".repeat(2001)),
        )
        .await
        .expect_err("2001 characters refused by serenity");
    assert!(matches!(builder, serenity::Error::Model(_)), "{builder:?}");
    let raw = http
        .send_message(post.id, Vec::new(), &json!({ "content": "x".repeat(2001) }))
        .await
        .expect_err("2001 characters refused by the fake");
    assert_eq!(http_status(&raw), Some(400));
    assert!(
        fake.unknown_requests().is_empty(),
        "{:#?}",
        fake.unknown_requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let wrong = http_for(&fake, "not-the-token");
    let error = wrong
        .get_current_user()
        .await
        .expect_err("wrong token refused");
    assert_eq!(http_status(&error), Some(401));
    let error = serenity::ChannelId::new(fake.config().forum_channel_id)
        .create_forum_post(
            &wrong,
            serenity::CreateForumPost::new("x", serenity::CreateMessage::new().content("y")),
        )
        .await
        .expect_err("wrong token refused");
    assert_eq!(http_status(&error), Some(401));
    assert!(fake.threads().is_empty());

    let right = http_for(&fake, fake.token());
    right
        .get_current_user()
        .await
        .expect("the fake token works");
    let statuses: Vec<u16> = fake.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [401, 401, 200]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_failures_are_errors_and_not_delivered() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let http = http_for(&fake, fake.token());
    let forum = serenity::ChannelId::new(fake.config().forum_channel_id);
    let post = forum
        .create_forum_post(
            &http,
            serenity::CreateForumPost::new(
                "SPRINT-002 · x",
                serenity::CreateMessage::new().content("board"),
            ),
        )
        .await
        .expect("forum post");

    fake.fail_next(2, 500);
    for _ in 0..2 {
        let error = post
            .id
            .send_message(&http, serenity::CreateMessage::new().content("lost"))
            .await
            .expect_err("injected 500");
        assert_eq!(http_status(&error), Some(500));
    }
    post.id
        .send_message(&http, serenity::CreateMessage::new().content("delivered"))
        .await
        .expect("failures used up");

    fake.set_failing(true, 503);
    let error = post
        .id
        .edit_message(
            &http,
            post.id.get(),
            serenity::EditMessage::new().content("lost edit"),
        )
        .await
        .expect_err("injected 503");
    assert_eq!(http_status(&error), Some(503));
    fake.set_failing(false, 503);

    let contents: Vec<String> = fake
        .messages(post.id.get())
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(contents, ["board", "delivered"]);
    let injected = fake
        .requests()
        .iter()
        .filter(|r| r.injected_failure)
        .count();
    assert_eq!(injected, 3);

    // Reads are never failed.
    fake.set_failing(true, 500);
    http.get_channel(post.id).await.expect("GET is not failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_gateway_is_resumed() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let bot = start_bot(&fake).await;

    fake.close_gateway(4000);
    let resumed = fake
        .wait_until(WAIT, |f| {
            f.gateway_connected() && f.gateway_received().iter().any(|p| p["op"] == 6)
        })
        .await;
    assert!(resumed, "{:#?}", fake.gateway_received());
    assert_eq!(fake.ready_count(), 1, "resumed, not re-identified");

    let ping = fake.slash(USER, &[], &["sprint", "ping"], json!({}));
    let responses = fake.wait_for_responses(ping.id, 1, WAIT).await;
    assert_eq!(responses[0].content(), Some("pong "));
    bot.stop().await;
}
