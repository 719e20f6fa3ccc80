//! The Discord bridge end to end: the real serenity + poise client against a fake Discord
//! on loopback (REST through serenity's proxy setting, a real gateway WebSocket), a real
//! orchestrator and database, and scripted sisters.

use std::time::Duration;

use hanarang::discord::{self, StartError, Token};
use hanarang::pipeline::State;
use hanarang::store::CommandKind;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::support;
use crate::support::fake_discord::{
    FakeConfig, FakeDiscord, FakeMessage, InteractionResponse, ResponseKind,
};
use crate::support::pipeline::{Files, PATIENCE, Pipeline, Setup};

const USER: u64 = 500;
const APPROVER: u64 = 501;
const APPROVER_ROLE: u64 = 900;
const STRANGER: u64 = 777;
const STARTER: u64 = 600;

fn discord_table(fake: &FakeDiscord) -> String {
    let c = fake.config();
    format!(
        r#"
[discord]
token_env = "HANARANG_TEST_DISCORD_TOKEN"
guild_id = {}
forum_channel_id = {}
user_id = {USER}
approver_user_ids = [{APPROVER}]
approver_role_ids = [{APPROVER_ROLE}]
starter_user_ids = [{STARTER}]
http_proxy = "{}"
"#,
        c.guild_id,
        c.forum_channel_id,
        fake.base_url()
    )
}

async fn pipeline(setup: Setup, fake: &FakeDiscord) -> Pipeline {
    let files = Files::new(&setup);
    files.append_config(&discord_table(fake));
    Pipeline::start_with(files).await
}

/// A bot as a process would run it, on a runtime of its own. When it stops, its runtime
/// goes with it, while the fake Discord still runs: serenity 0.12 leaves the shard runner
/// behind when `discord::run` returns, and a runner whose connection then ends busy-loops
/// until its next heartbeat (41 s), which held the test's runtime up at its end.
struct Bot {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), StartError>>,
    /// Always `Some` until dropped (a runtime must not be dropped in async code).
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Bot {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Bot {
    async fn start(p: &Pipeline, fake: &FakeDiscord) -> Bot {
        let config = p.config.discord.clone().expect("a [discord] table");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the bot's runtime");
        let http = discord::http(&config, &Token::new(fake.token()));
        // Counted before the bot starts: a fast READY must not be counted in `ready`.
        let ready = fake.ready_count();
        let (stop, stopped) = oneshot::channel::<()>();
        let (app, handle) = (p.config.clone(), p.handle.clone());
        let token = Token::new(fake.token());
        let task = runtime.spawn(async move {
            discord::check_token(&config, &http, Duration::from_secs(20))
                .await
                .expect("the fake accepts its token");
            discord::run(app, config, handle, token, async {
                let _ = stopped.await;
            })
            .await
        });
        assert!(
            fake.wait_until(PATIENCE, |f| f.ready_count() > ready
                && !f.commands().is_empty())
                .await,
            "the bot connected and registered its commands"
        );
        Bot {
            stop,
            task,
            runtime: Some(runtime),
        }
    }

    async fn stop(mut self) {
        let (stop, _) = oneshot::channel();
        let _ = std::mem::replace(&mut self.stop, stop).send(());
        (&mut self.task)
            .await
            .expect("bot task")
            .expect("the bot stops cleanly");
    }
}

/// `hanarang serve` on the files' config, with the fake's token, its log on a pipe.
fn spawn_serve(files: &Files) -> std::process::Child {
    files
        .serve()
        .env(
            "HANARANG_TEST_DISCORD_TOKEN",
            support::fake_discord::FAKE_TOKEN,
        )
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start serve")
}

/// A bot on a pipeline whose first sprint waits in `done`, its four lines posted.
async fn waiting_in_done(fake: &FakeDiscord) -> (Pipeline, Bot, hanarang::store::Sprint) {
    let p = pipeline(Setup::default(), fake).await;
    let bot = Bot::start(&p, fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    wait_for_lines(fake, 4).await;
    (p, bot, s)
}

/// A transition's line, not a message that follows one (the summary at `done`, the
/// digest of an escalation: their nonces carry the part, `hanarang-<seq>-p<n>`).
fn is_line(m: &FakeMessage) -> bool {
    !m.history[0]["nonce"]
        .as_str()
        .is_some_and(|n| n.contains("-p"))
}

/// The first forum post's lines (not its board, not the messages that follow a line).
fn line_messages(fake: &FakeDiscord) -> Vec<FakeMessage> {
    fake.post_lines().into_iter().filter(is_line).collect()
}

/// The message with the decision's buttons, which follows the summary it decides on.
async fn decision(fake: &FakeDiscord) -> FakeMessage {
    let has_buttons = |m: &FakeMessage| !m.custom_ids().is_empty();
    assert!(
        fake.wait_until(PATIENCE, |f| f.post_lines().iter().any(has_buttons))
            .await,
        "no message with the decision's buttons: {:#?}",
        fake.post_lines()
    );
    fake.post_lines()
        .into_iter()
        .rev()
        .find(has_buttons)
        .expect("the decision")
}

/// The messages that carried (or carry) a decision's buttons, once there are `n`: one per
/// time the sprint entered `done`.
async fn decisions(fake: &FakeDiscord, n: usize) -> Vec<FakeMessage> {
    let all = |f: &FakeDiscord| {
        f.post_lines()
            .into_iter()
            .filter(|m| {
                m.history[0]["nonce"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-decide"))
            })
            .collect::<Vec<_>>()
    };
    assert!(
        fake.wait_until(PATIENCE, |f| all(f).len() >= n).await,
        "expected {n} decisions: {:#?}",
        fake.post_lines()
    );
    all(fake)
}

/// The card of the sprint's latest `done`, once there are `n` and the bridge has recorded
/// it as the one that stands (a refusal links to it from then on).
async fn standing_card(p: &Pipeline, fake: &FakeDiscord, sprint: &str, n: usize) -> FakeMessage {
    let card = decisions(fake, n).await.pop().expect("a card");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let post = p.store.forum_post(sprint).await.ok().flatten();
        if post.and_then(|post| post.done_message_id) == i64::try_from(card.id).ok() {
            return card;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the card {} was never recorded as the one that stands",
            card.id
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The texts of the sprint's forum post lines (not its status board), in order.
fn texts(fake: &FakeDiscord) -> Vec<String> {
    line_messages(fake).into_iter().map(|m| m.content).collect()
}

async fn wait_for_lines(fake: &FakeDiscord, n: usize) -> Vec<String> {
    assert!(
        fake.wait_until(PATIENCE, |f| texts(f).len() >= n).await,
        "expected {n} lines, got {:#?}",
        texts(fake)
    );
    texts(fake)
}

/// `who` clicks the approve button of the `done` line; its first `answers` responses.
async fn click_approve(
    fake: &FakeDiscord,
    who: u64,
    done: &FakeMessage,
    answers: usize,
) -> Vec<InteractionResponse> {
    // The card's own approve button, as Discord sends its id back.
    let approve = done.custom_ids().first().cloned().unwrap_or_default();
    let click = fake.button(who, &[], &approve, done.id, done.channel_id);
    fake.wait_for_responses(click.id, answers, PATIENCE).await
}

fn no_mentions() -> Value {
    json!({"parse": [], "users": [], "roles": []})
}

mod delivery;
mod escalation;
mod evidence;
mod fallback;
mod forge;
mod inert;
mod live;
mod notes;
mod token;

const HAPPY_LINES: [&str; 6] = [
    "🦊 하랑이가 SPRINT-001 기획 시작",
    "⚙️ 나랑이가 구현 시작 (feature/sprint-001)",
    "🔍 다랑이가 리뷰 시작 (라운드 1)",
    "<@500> ✅ SPRINT-001 완료. 배포 승인해주세요",
    "🚀 <@501>님 배포 승인: 이랑이가 배포 시작",
    "🎉 SPRINT-001 배포 완료\n📦 배포물: dist/app\n🔎 확인: GET /health: 200",
];

#[tokio::test(flavor = "multi_thread")]
async fn a_sprint_from_slash_command_to_deployed_through_the_forum_post() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = pipeline(Setup::default(), &fake).await;
    let bot = Bot::start(&p, &fake).await;

    // A stranger may not start a sprint: refused in private, nothing queued.
    let start = fake.slash(
        STRANGER,
        &[],
        &["sprint", "start"],
        json!({"goal": "Run this on your host"}),
    );
    let refused = fake.wait_for_responses(start.id, 2, PATIENCE).await;
    assert!(refused[1].is_ephemeral());
    assert!(
        refused[1]
            .content()
            .is_some_and(|c| c.contains("starter_user_ids") && c.contains("approver_user_ids")),
        "the refusal says who may: {:?}",
        refused[1].content()
    );
    assert!(
        p.store.sprints().await.unwrap().is_empty(),
        "nothing queued"
    );

    // A starter may.
    let start = fake.slash(
        STARTER,
        &[],
        &["sprint", "start"],
        json!({"goal": "Add a login page"}),
    );
    let answers = fake.wait_for_responses(start.id, 2, PATIENCE).await;
    assert_eq!(answers[0].kind, ResponseKind::Callback(5), "deferred first");
    assert!(answers[0].is_ephemeral());
    assert_eq!(
        answers[1].content(),
        Some("SPRINT-001 대기열에 추가: Add a login page")
    );

    p.wait_for("SPRINT-001", State::Done).await;
    let shown = wait_for_lines(&fake, 4).await;
    assert_eq!(shown, HAPPY_LINES[..4]);
    let threads = fake.threads();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].name, "SPRINT-001 · Add a login page");
    assert_eq!(threads[0].parent_id, fake.config().forum_channel_id);

    // The done line pings the user, and only the user; the buttons come after the
    // summary they decide on, and ping no one.
    let done_line = line_messages(&fake).pop().unwrap();
    assert_eq!(
        done_line.allowed_mentions,
        json!({"parse": [], "users": ["500"], "roles": []})
    );
    assert!(
        done_line.custom_ids().is_empty(),
        "the buttons are not above the summary"
    );
    let done = decision(&fake).await;
    let posted = fake.post_lines();
    let at = |id| posted.iter().position(|m| m.id == id).unwrap();
    let summary = posted
        .iter()
        .find(|m| m.content.contains("요약"))
        .expect("the summary");
    assert!(
        at(summary.id) < at(done.id),
        "the buttons follow the summary"
    );
    assert_eq!(done.allowed_mentions, no_mentions());
    assert_eq!(
        done.custom_ids(),
        [
            "hanarang:approve:SPRINT-001:4",
            "hanarang:changes:SPRINT-001:4",
            "hanarang:abort:SPRINT-001:4"
        ]
    );

    // A stranger's click, and the starter's (who may start but not steer), are refused
    // in private and change nothing.
    for who in [STRANGER, STARTER] {
        let refused = click_approve(&fake, who, &done, 1).await;
        assert_eq!(refused[0].kind, ResponseKind::Callback(4));
        assert!(refused[0].is_ephemeral());
        assert!(
            refused[0].content().unwrap().contains("권한이 없어요"),
            "{:?}",
            refused[0].content()
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        p.store.sprint("SPRINT-001").await.unwrap().unwrap().state,
        State::Done
    );

    // An approver's click deploys.
    let approved = click_approve(&fake, APPROVER, &done, 2).await;
    assert_eq!(approved[0].kind, ResponseKind::Callback(5));
    assert_eq!(
        approved[1].content(),
        Some("🚀 <@501>님 배포 승인: 이랑이가 배포 시작")
    );
    p.wait_for("SPRINT-001", State::Deployed).await;
    assert_eq!(wait_for_lines(&fake, 6).await, HAPPY_LINES);

    // Only the done line mentions anyone; its buttons are gone once the sprint left done.
    for line in line_messages(&fake) {
        if line.id != done_line.id {
            assert_eq!(line.allowed_mentions, no_mentions(), "{}", line.content);
        }
    }
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .message(done.id)
            .is_some_and(|m| m.custom_ids().is_empty()))
            .await,
        "the buttons were removed"
    );
    // The status board (the post's first message) is edited in place up to `deployed`,
    // and names who started the sprint and who approved its deploy.
    let board_id = threads[0].id;
    assert!(
        fake.wait_until(PATIENCE, |f| f.message(board_id).is_some_and(|m| m
            .content
            .contains("(deployed)")
            && m.content.contains(&format!(
                "사람: 시작 <@{STARTER}> · 배포 승인 <@{APPROVER}>"
            ))))
        .await,
        "the board shows deployed and who started and approved: {:?}",
        fake.message(board_id).map(|m| m.content)
    );
    let log = p.files.hanarang(&["sprint", "log", "1", "--json"]);
    let log: Value = serde_json::from_slice(&log.stdout).unwrap();
    assert_eq!(log["started_by"], format!("discord:{STARTER}"));
    assert_eq!(log["commands"][0]["by"], format!("discord:{APPROVER}"));
    assert!(
        fake.unknown_requests().is_empty(),
        "{:#?}",
        fake.unknown_requests()
    );
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn request_changes_opens_a_form_and_sends_the_note_to_the_implementer() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, bot, s) = waiting_in_done(&fake).await;
    let done = decision(&fake).await;

    // An approver by role.
    let changes = done.custom_ids()[1].clone();
    assert_eq!(changes, "hanarang:changes:SPRINT-001:4");
    let click = fake.button(
        STRANGER,
        &[APPROVER_ROLE],
        &changes,
        done.id,
        done.channel_id,
    );
    let modal = fake.wait_for_responses(click.id, 1, PATIENCE).await;
    assert_eq!(
        modal[0].kind,
        ResponseKind::Callback(9),
        "a modal asks for the note"
    );
    let custom_id = modal[0].data()["custom_id"].as_str().unwrap().to_string();
    let submit = fake.modal_submit(
        STRANGER,
        &[APPROVER_ROLE],
        &custom_id,
        &[("note", "rename the button")],
    );
    let answer = fake.wait_for_responses(submit.id, 2, PATIENCE).await;
    // It reads as the line in the thread does, not as a bare `done → implementing`.
    assert_eq!(
        answer[1].content(),
        Some("🔁 <@777> 변경 요청 (라운드 2): rename the button")
    );

    let again = p.wait_for(&s.id, State::Done).await;
    assert_eq!(again.round, 2);
    // Round 1's card, clicked now (a stale card whose edit failed): it approves nothing,
    // and the refusal points to round 2's card.
    let current = standing_card(&p, &fake, &s.id, 2).await;
    let stale = click_approve(&fake, APPROVER, &done, 2).await;
    let said = stale[1].content().unwrap_or_default().to_string();
    assert!(stale[1].is_ephemeral());
    assert!(
        said.contains("SPRINT-001 moved on since: it is now in round 2's done"),
        "{said}"
    );
    let link = format!(
        "지금 카드: https://discord.com/channels/{}/{}/{}",
        fake.config().guild_id,
        current.channel_id,
        current.id
    );
    assert!(said.contains(&link), "{said}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = p.store.sprint(&s.id).await.unwrap().unwrap();
    assert_eq!((still.state, still.round), (State::Done, 2));
    let runs = p.runs(&s.id).await;
    let fix = runs
        .iter()
        .rev()
        .find(|r| r.actor == hanarang::handoff::message::Actor::Narang)
        .unwrap();
    let stdin = p.files.stdin_of(&fix.run_id);
    // Quoted as the approver's, who wrote it, once, where the round's job begins.
    assert!(
        stdin.contains(&format!(
            "This round (2) is for what a person asked: <request from=\"discord:{STRANGER}\">rename the button</request>\n"
        )),
        "{stdin}"
    );
    assert!(!stdin.contains("Additional focus"), "{stdin}");
    // Round 2's summary quotes the request beside its verdict.
    let quoted = format!("라운드 2 · discord:{STRANGER}의 요청: rename the button");
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .post_lines()
            .iter()
            .any(|m| m.content.contains(&quoted)))
            .await,
        "{:#?}",
        fake.post_lines()
            .iter()
            .map(|m| &m.content)
            .collect::<Vec<_>>()
    );
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn text_a_sister_wrote_pings_no_one() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = pipeline(
        Setup {
            harang: "abort",
            extra: "[agent.harang.env]\nABORT_REASON = \"@everyone @here <@&900> <@777> the plan is impossible\"\n",
            ..Setup::default()
        },
        &fake,
    )
    .await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Aborted).await;
    let shown = wait_for_lines(&fake, 2).await;
    assert!(
        shown[1].contains("@\u{200B}everyone @\u{200B}here \\<@\u{200B}&900> \\<@\u{200B}777>"),
        "{shown:?}"
    );
    for line in line_messages(&fake) {
        assert_eq!(line.allowed_mentions, no_mentions(), "{}", line.content);
    }
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_refuses_a_missing_or_wrong_token_with_exit_2() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup::default());
    files.append_config(&discord_table(&fake));
    let serve = |token: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hanarang"));
        cmd.arg("--config").arg(&files.config_path).arg("serve");
        cmd.env_remove("HANARANG_TEST_DISCORD_TOKEN");
        if let Some(t) = token {
            cmd.env("HANARANG_TEST_DISCORD_TOKEN", t);
        }
        cmd.output().expect("run serve")
    };
    let missing = serve(None);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "discord.token_env: the environment variable HANARANG_TEST_DISCORD_TOKEN is not set"
        ),
        "{stderr}"
    );
    let wrong = serve(Some("not-the-token"));
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("Discord refused the token in HANARANG_TEST_DISCORD_TOKEN"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("not-the-token"),
        "the token is never printed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_refused_while_serve_runs_stops_it_with_exit_2() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup::default());
    files.append_config(&discord_table(&fake));
    let mut serve = spawn_serve(&files);
    assert!(
        files
            .hanarang(&["sprint", "start", "Add a login page"])
            .status
            .success()
    );
    wait_for_lines(&fake, 4).await;
    // The token is reset in the developer portal: Discord now refuses it.
    fake.set_failing(true, 401);
    assert!(files.hanarang(&["sprint", "approve", "1"]).status.success());
    let out = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + PATIENCE;
        while serve.try_wait().ok().flatten().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = serve.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        serve.wait_with_output().expect("serve ends")
    })
    .await
    .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{log}");
    assert!(
        log.contains("Discord refused the token in HANARANG_TEST_DISCORD_TOKEN"),
        "{log}"
    );
    assert!(
        !log.contains(support::fake_discord::FAKE_TOKEN),
        "the token is never printed"
    );
}

/// Two reviewers of one round: a line for each one's verdict and one for the merge, the
/// board showing each, and still one ping (done).
#[tokio::test(flavor = "multi_thread")]
async fn a_two_reviewer_round_posts_each_verdict_and_the_merge() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = pipeline(
        Setup {
            harang: "plan-checklist tests",
            extra: crate::reviewers::two_reviewers("meet 2 changes-until 2", "meet 2 ok"),
            ..Setup::default()
        },
        &fake,
    )
    .await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let mut lines = wait_for_lines(&fake, 10).await;
    // The two reviewers of a round answer in either order.
    lines[3..5].sort();
    lines[7..9].sort();
    assert_eq!(
        lines,
        [
            "🦊 하랑이가 SPRINT-001 기획 시작",
            "⚙️ 나랑이가 구현 시작 (feature/sprint-001)",
            "🔍 다랑이가 리뷰 시작 (라운드 1)",
            "🔍 다랑이 리뷰어 runtime 판정: APPROVE (라운드 1)",
            "🔍 다랑이 리뷰어 static 판정: REQUEST_CHANGES (라운드 1)",
            "🔁 리뷰 종합: 변경 요청 (static) — 나랑이가 라운드 2 구현",
            "🔍 다랑이가 리뷰 시작 (라운드 2)",
            "🔍 다랑이 리뷰어 runtime 판정: APPROVE (라운드 2)",
            "🔍 다랑이 리뷰어 static 판정: APPROVE (라운드 2)",
            "<@500> ✅ SPRINT-001 완료. 배포 승인해주세요",
        ]
    );
    let posted = line_messages(&fake);
    for line in &posted[..9] {
        assert_eq!(line.allowed_mentions, no_mentions(), "{}", line.content);
    }
    let thread = fake.threads()[0].id;
    assert!(
        fake.wait_until(PATIENCE, |f| f.message(thread).is_some_and(|m| m
            .content
            .contains("리뷰어: runtime ✔️ APPROVE · static ✔️ APPROVE")))
            .await,
        "the board shows each reviewer: {:?}",
        fake.message(thread).map(|m| m.content)
    );
    // The summary gives each reviewer's word on each contract item.
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .messages(thread)
            .iter()
            .any(|m| m.content.contains("✅ **tests**")
                && m.content.contains(" — runtime ✅ · static ✅")))
            .await,
        "{:#?}",
        fake.messages(thread)
            .iter()
            .map(|m| &m.content)
            .collect::<Vec<_>>()
    );
    bot.stop().await;
    p.stop().await;
}

/// A plan's checklist is the sprint's contract: the board lists its items, each with the
/// latest review's mark once reviewed.
#[tokio::test(flavor = "multi_thread")]
async fn the_board_shows_the_contract_with_the_reviews_marks() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = pipeline(
        Setup {
            harang: "plan-checklist login-form,tests",
            darang: "omit-first 0 login-form,tests",
            ..Setup::default()
        },
        &fake,
    )
    .await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    assert!(fake.wait_until(PATIENCE, |f| !f.threads().is_empty()).await);
    let thread = fake.threads()[0].id;
    assert!(
        fake.wait_until(PATIENCE, |f| f.message(thread).is_some_and(|m| m
            .content
            .contains("계약 (2): ✅ login-form · ✅ tests")))
            .await,
        "the board shows the contract: {:?}",
        fake.message(thread).map(|m| m.content)
    );
    bot.stop().await;
    p.stop().await;
}

/// With `approval = "not-starter"` the approver who started a sprint cannot approve its
/// deploy alone (button and slash command), and another approver can.
#[tokio::test(flavor = "multi_thread")]
async fn with_not_starter_the_starter_cannot_approve_their_own_sprint() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup::default());
    files.append_config(
        &discord_table(&fake).replace("http_proxy", "approval = \"not-starter\"\nhttp_proxy"),
    );
    let p = Pipeline::start_with(files).await;
    let bot = Bot::start(&p, &fake).await;
    let start = fake.slash(
        APPROVER,
        &[],
        &["sprint", "start"],
        json!({"goal": "Add a login page"}),
    );
    fake.wait_for_responses(start.id, 2, PATIENCE).await;
    p.wait_for("SPRINT-001", State::Done).await;
    wait_for_lines(&fake, 4).await;
    let done = decision(&fake).await;

    let refused = click_approve(&fake, APPROVER, &done, 1).await;
    assert!(refused[0].is_ephemeral());
    let text = refused[0].content().unwrap_or_default().to_string();
    assert!(
        text.contains("not-starter") && text.contains("SPRINT-001"),
        "the refusal names the rule: {text}"
    );
    let slash = fake.slash(APPROVER, &[], &["sprint", "approve"], json!({"id": "1"}));
    let refused = fake.wait_for_responses(slash.id, 2, PATIENCE).await;
    assert!(
        refused[1]
            .content()
            .is_some_and(|c| c.contains("not-starter")),
        "{:?}",
        refused[1].content()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        p.store.sprint("SPRINT-001").await.unwrap().unwrap().state,
        State::Done
    );
    assert!(
        p.store.commands_of("SPRINT-001").await.unwrap().is_empty(),
        "no command was recorded"
    );

    // Another approver (here the configured user) may.
    let approved = click_approve(&fake, USER, &done, 2).await;
    assert_eq!(
        approved[1].content(),
        Some("🚀 <@500>님 배포 승인: 이랑이가 배포 시작")
    );
    p.wait_for("SPRINT-001", State::Deployed).await;
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blank_goal_from_discord_is_refused_and_starts_nothing() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = pipeline(Setup::default(), &fake).await;
    let bot = Bot::start(&p, &fake).await;
    let start = fake.slash(STARTER, &[], &["sprint", "start"], json!({"goal": "  \t "}));
    let answers = fake.wait_for_responses(start.id, 2, PATIENCE).await;
    assert!(
        answers[1]
            .content()
            .is_some_and(|c| c.contains("the goal must not be empty")),
        "{:?}",
        answers[1].content()
    );
    assert!(
        p.store.sprints().await.unwrap().is_empty(),
        "no sprint was made"
    );
    bot.stop().await;
    p.stop().await;
}

/// Several hosts on one PostgreSQL database run one bot between them: a standby host's
/// bot takes over when the host running it dies, and the forum post goes on from the
/// shared cursor, with no line lost or posted twice.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn with_several_hosts_one_bot_runs_and_a_standby_takes_it_over() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup {
        engine: support::db::Engine::Postgres,
        ..Setup::default()
    });
    files.append_config(&discord_table(&fake));
    let shared = std::fs::read_to_string(&files.config_path).unwrap();
    let host = |name: &str| {
        let path = files.dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &path,
            format!("{shared}\n[host]\nname = \"{name}\"\nlease_ttl = \"2s\"\n"),
        )
        .unwrap();
        let log = files.dir.path().join(format!("{name}.log"));
        let child = support::serve(std::path::Path::new(env!("CARGO_BIN_EXE_hanarang")), &path)
            .env(
                "HANARANG_TEST_DISCORD_TOKEN",
                support::fake_discord::FAKE_TOKEN,
            )
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start serve");
        (child, log)
    };
    let (mut a, a_log) = host("a");
    assert!(
        fake.wait_until(PATIENCE, |f| f.ready_count() == 1).await,
        "a's bot connects"
    );
    let (mut b, b_log) = host("b");
    let store = loop {
        if let Ok(store) = hanarang::store::Store::open_existing(&files.config().database.url).await
        {
            break store;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        std::fs::read_to_string(&a_log)
            .unwrap()
            .contains("this host runs the Discord bot"),
        "a runs the bot"
    );
    let start = files.hanarang(&["sprint", "start", "Add a login page"]);
    assert_eq!(String::from_utf8_lossy(&start.stdout).trim(), "SPRINT-001");
    support::pipeline::wait_for(&store, "SPRINT-001", |s| s.state == State::Done, "done").await;
    assert_eq!(wait_for_lines(&fake, 4).await, HAPPY_LINES[..4]);
    assert_eq!(fake.ready_count(), 1, "b stands by: one bot");

    // The host running the bot dies; b's bot takes over once a's lease has run out.
    a.kill().unwrap();
    a.wait().unwrap();
    assert!(
        fake.wait_until(PATIENCE, |f| f.ready_count() == 2).await,
        "b's bot connects: {}",
        std::fs::read_to_string(&b_log).unwrap()
    );
    let approve = files.hanarang(&["sprint", "approve", "1"]);
    assert_eq!(
        approve.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&approve.stderr)
    );
    support::pipeline::wait_for(
        &store,
        "SPRINT-001",
        |s| s.state == State::Deployed,
        "deployed",
    )
    .await;
    let lines = wait_for_lines(&fake, 6).await;
    assert_eq!(lines[..4], HAPPY_LINES[..4]);
    assert_eq!(
        lines[4],
        format!(
            "🚀 {}님 배포 승인: 이랑이가 배포 시작",
            support::cli_author(&files.config().host.name)
        )
    );
    assert_eq!(lines[5], HAPPY_LINES[5]);
    assert_eq!(lines.len(), 6, "no line posted twice: {lines:#?}");
    assert_eq!(fake.threads().len(), 1, "the same forum post");

    // b is frozen past its lease: c's bot takes over, and b, resumed, loses the bot but
    // goes on as a host (its bot's database connections were its bot's own).
    let (mut c, c_log) = host("c");
    let signal = |child: &std::process::Child, sig| {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
    };
    signal(&b, nix::sys::signal::Signal::SIGSTOP);
    assert!(
        fake.wait_until(PATIENCE, |f| f.ready_count() == 3).await,
        "c's bot connects: {}",
        std::fs::read_to_string(&c_log).unwrap()
    );
    signal(&b, nix::sys::signal::Signal::SIGCONT);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !std::fs::read_to_string(&b_log)
        .unwrap()
        .contains("lost the Discord bot's lease")
    {
        assert!(tokio::time::Instant::now() < deadline, "b never noticed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let start = files.hanarang(&["sprint", "start", "After the freeze"]);
    assert_eq!(String::from_utf8_lossy(&start.stdout).trim(), "SPRINT-002");
    support::pipeline::wait_for(&store, "SPRINT-002", |s| s.state == State::Done, "done").await;
    assert!(
        b.try_wait().unwrap().is_none(),
        "b still runs after losing the bot: {}",
        std::fs::read_to_string(&b_log).unwrap()
    );
    for child in [&mut b, &mut c] {
        signal(child, nix::sys::signal::Signal::SIGTERM);
        assert_eq!(child.wait().unwrap().code(), Some(0));
    }
}
