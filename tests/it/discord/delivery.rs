//! Every line reaches its thread once and in order, whatever Discord does: an outage, a
//! bot restart, a thread that fails or is slow (holding back only its own sprint), a
//! deleted post, an answer lost on the way, a line refused for good, and a 429.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn after_an_outage_every_line_is_delivered_once_in_order() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = pipeline(Setup::default(), &fake).await;
    let bot = Bot::start(&p, &fake).await;
    fake.fail_next(4, 500);
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    p.command(&s.id, CommandKind::Approve, None).await;
    p.wait_for(&s.id, State::Deployed).await;
    let mut expected = HAPPY_LINES.map(String::from).to_vec();
    expected[4] = "🚀 cli님 배포 승인: 이랑이가 배포 시작".into();
    assert_eq!(wait_for_lines(&fake, 6).await, expected);
    assert!(
        fake.requests().iter().any(|r| r.injected_failure),
        "the outage happened"
    );
    assert_eq!(fake.threads().len(), 1, "one forum post");
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bot_restart_mid_sprint_leaves_no_gap_and_no_duplicate() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup {
        narang: "wait-for RELEASE",
        ..Setup::default()
    });
    let release = files.state_dir.join("release");
    let config = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace(
            "\"RELEASE\"",
            &format!("{:?}", release.display().to_string()),
        );
    std::fs::write(&files.config_path, config).unwrap();
    files.append_config(&discord_table(&fake));
    let p = Pipeline::start_with(files).await;

    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    assert_eq!(wait_for_lines(&fake, 2).await, HAPPY_LINES[..2]);
    bot.stop().await;

    // While the bot is down the sprint moves on.
    std::fs::write(&release, "").unwrap();
    p.wait_for(&s.id, State::Done).await;
    assert_eq!(texts(&fake).len(), 2);

    let bot = Bot::start(&p, &fake).await;
    assert_eq!(wait_for_lines(&fake, 4).await, HAPPY_LINES[..4]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(texts(&fake), HAPPY_LINES[..4], "nothing posted twice");
    assert_eq!(fake.threads().len(), 1, "the same forum post");
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_done_buttons_still_work_after_the_bot_restarts() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, bot, s) = waiting_in_done(&fake).await;
    let done = decision(&fake).await;
    bot.stop().await;

    // A new process's bot: the button's id carries the sprint, the state is in the database.
    let bot = Bot::start(&p, &fake).await;
    let answer = click_approve(&fake, USER, &done, 2).await;
    assert_eq!(
        answer[1].content(),
        Some("🚀 <@500>님 배포 승인: 이랑이가 배포 시작")
    );
    p.wait_for(&s.id, State::Deployed).await;
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_runs_the_pipeline_while_discord_is_down_and_catches_up_later() {
    // Discord is down: nothing answers where the bot must connect.
    let port = FakeDiscord::unused_port();
    let base = format!("http://127.0.0.1:{port}");
    let c = FakeConfig::default();
    let files = Files::new(&Setup::default());
    files.append_config(&format!(
        "[discord]\ntoken_env = \"HANARANG_TEST_DISCORD_TOKEN\"\nguild_id = {}\nforum_channel_id = {}\nuser_id = {USER}\nhttp_proxy = \"{base}\"\n",
        c.guild_id, c.forum_channel_id
    ));
    let mut serve = spawn_serve(&files);
    let start = files.hanarang(&["sprint", "start", "Add a login page"]);
    assert_eq!(String::from_utf8_lossy(&start.stdout).trim(), "SPRINT-001");
    // The sisters run all the same: the sprint reaches `done` with Discord still down.
    let store = hanarang::store::Store::open_existing(&files.config().database.url)
        .await
        .expect("serve created the database");
    support::pipeline::wait_for(&store, "SPRINT-001", |s| s.state == State::Done, "done").await;
    assert!(
        serve.try_wait().expect("serve").is_none(),
        "serve still runs"
    );
    // Discord comes back: the bot connects and the post catches up, in order.
    let fake = FakeDiscord::start_on(c, port).await;
    let lines = wait_for_lines(&fake, 4).await;
    assert_eq!(lines, HAPPY_LINES[..4]);
    assert!(
        fake.wait_until(PATIENCE, |f| f.ready_count() > 0
            && !f.commands().is_empty())
            .await,
        "the bot connected and registered its commands"
    );
    let approve = files.hanarang(&["sprint", "approve", "1"]);
    assert_eq!(approve.status.code(), Some(0));
    let lines = wait_for_lines(&fake, 6).await;
    assert_eq!(
        lines[4],
        format!(
            "🚀 {}님 배포 승인: 이랑이가 배포 시작",
            support::cli_author(&files.config().host.name)
        )
    );
    assert_eq!(lines[5], HAPPY_LINES[5]);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal serve");
    let out = serve.wait_with_output().expect("serve ends");
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(
        log.matches("Discord cannot be reached; the pipeline runs on")
            .count(),
        1,
        "each failure to connect is logged once a minute, not on every try: {log}"
    );
}

/// The lines of one thread (its board, the starter message, left out), in order.
fn thread_lines(fake: &FakeDiscord, thread: u64) -> Vec<String> {
    fake.messages(thread)
        .into_iter()
        .filter(|m| m.id != thread && is_line(m))
        .map(|m| m.content)
        .collect()
}

pub(super) fn thread_of(fake: &FakeDiscord, sprint: &str) -> Vec<u64> {
    fake.threads()
        .into_iter()
        .filter(|t| t.name.starts_with(sprint))
        .map(|t| t.id)
        .collect()
}

pub(super) async fn wait_for_thread_lines(
    fake: &FakeDiscord,
    thread: u64,
    n: usize,
) -> Vec<String> {
    assert!(
        fake.wait_until(PATIENCE, |f| thread_lines(f, thread).len() >= n)
            .await,
        "expected {n} lines in {thread}, got {:#?}",
        thread_lines(fake, thread)
    );
    thread_lines(fake, thread)
}

/// Two projects, so two sprints run side by side; SPRINT-001 waits in `done`, its four
/// lines posted.
async fn two_sprints_setup(fake: &FakeDiscord) -> (Pipeline, Bot, u64) {
    let p = pipeline(
        Setup {
            projects: &["app", "web"],
            ..Setup::default()
        },
        fake,
    )
    .await;
    let bot = Bot::start(&p, fake).await;
    let s = p.start_sprint("app", "First", None).await;
    p.wait_for(&s.id, State::Done).await;
    assert!(
        fake.wait_until(PATIENCE, |f| thread_of(f, "SPRINT-001").len() == 1)
            .await
    );
    let thread = thread_of(fake, "SPRINT-001")[0];
    wait_for_thread_lines(fake, thread, 4).await;
    (p, bot, thread)
}

/// SPRINT-002 (project `web`) runs to `done`, its four lines in its own thread.
async fn second_sprint_reaches_done(p: &Pipeline, fake: &FakeDiscord) {
    let s2 = p.start_sprint("web", "Second", None).await;
    p.wait_for(&s2.id, State::Done).await;
    assert!(
        fake.wait_until(PATIENCE, |f| thread_of(f, "SPRINT-002").len() == 1)
            .await
    );
    let second = thread_of(fake, "SPRINT-002")[0];
    let lines = wait_for_thread_lines(fake, second, 4).await;
    assert_eq!(
        lines[3], "<@500> ✅ SPRINT-002 완료. 배포 승인해주세요",
        "{lines:#?}"
    );
    // Its decision's buttons follow the summary: everything of `done` is posted.
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .messages(second)
            .iter()
            .any(|m| !m.custom_ids().is_empty()))
            .await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_failing_thread_never_holds_back_the_other_sprints() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, bot, first) = two_sprints_setup(&fake).await;
    // SPRINT-001's thread fails for now; its next lines wait.
    fake.fail_channel(first, Some(503));
    p.command("SPRINT-001", CommandKind::Approve, None).await;
    p.wait_for("SPRINT-001", State::Deployed).await;
    second_sprint_reaches_done(&p, &fake).await;
    assert_eq!(
        thread_lines(&fake, first).len(),
        4,
        "SPRINT-001's lines still wait"
    );
    // The thread works again: its lines arrive, once each, in order.
    fake.fail_channel(first, None);
    let lines = wait_for_thread_lines(&fake, first, 6).await;
    assert_eq!(lines, HAPPY_LINES.map(|l| l.replace("<@501>", "cli")));
    bot.stop().await;
    p.stop().await;
}

/// A thread Discord is slow to answer holds back only its own sprint: the other sprint's
/// lines arrive while its line waits for its answer, and that line, once answered, was
/// sent once, the sprint's lines in order. (The old bridge delivered one line at a time:
/// SPRINT-002 waited for the held call's 15 s timeout, and the held line was sent again.
/// This test so assumes SPRINT-002 gets to `done` within those 15 s.)
#[tokio::test(flavor = "multi_thread")]
async fn a_thread_discord_is_slow_to_answer_holds_back_only_its_own_sprint() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, bot, first) = two_sprints_setup(&fake).await;
    fake.hold_channel(first, true);
    p.command("SPRINT-001", CommandKind::Approve, None).await;
    p.wait_for("SPRINT-001", State::Deployed).await;
    assert!(
        fake.wait_until(PATIENCE, |f| f.held_requests() > 0).await,
        "SPRINT-001's next line is on its way"
    );
    second_sprint_reaches_done(&p, &fake).await;
    let posts = |f: &FakeDiscord| {
        f.requests()
            .iter()
            .filter(|r| r.is("POST", &format!("/channels/{first}/messages")))
            .count()
    };
    assert!(
        fake.held_requests() > 0,
        "SPRINT-001's line still waits for its answer"
    );
    assert_eq!(thread_lines(&fake, first).len(), 4);
    fake.hold_channel(first, false);
    let lines = wait_for_thread_lines(&fake, first, 6).await;
    assert_eq!(lines, HAPPY_LINES.map(|l| l.replace("<@501>", "cli")));
    assert_eq!(
        posts(&fake),
        8,
        "each of SPRINT-001's lines, its summary and its decision's buttons, was sent once"
    );
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_post_is_recreated_and_says_so() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, bot, first) = two_sprints_setup(&fake).await;
    fake.delete_channel(first);
    p.command("SPRINT-001", CommandKind::Approve, None).await;
    p.wait_for("SPRINT-001", State::Deployed).await;
    assert!(
        fake.wait_until(PATIENCE, |f| thread_of(f, "SPRINT-001").len() == 2)
            .await
    );
    let again = thread_of(&fake, "SPRINT-001")[1];
    let lines = wait_for_thread_lines(&fake, again, 3).await;
    assert_eq!(
        lines,
        [
            "ℹ️ SPRINT-001의 이전 포스트가 삭제되어 여기서 이어갑니다 (이전 기록: `hanarang sprint log SPRINT-001`)",
            "🚀 cli님 배포 승인: 이랑이가 배포 시작",
            "🎉 SPRINT-001 배포 완료\n📦 배포물: dist/app\n🔎 확인: GET /health: 200",
        ]
    );
    // And the next sprint is not held up by any of it.
    let s2 = p.start_sprint("web", "Second", None).await;
    p.wait_for(&s2.id, State::Done).await;
    assert!(
        fake.wait_until(PATIENCE, |f| thread_of(f, "SPRINT-002").len() == 1)
            .await
    );
    bot.stop().await;
    p.stop().await;
}

/// Discord made the sprint's post, but its answer never reached the bot (a timeout, a
/// dropped connection; or the bot stopped right then, and another took over): the bot
/// finds that post and continues it, rather than leaving it beside a second one with only
/// a board in it.
#[tokio::test(flavor = "multi_thread")]
async fn a_post_whose_answer_was_lost_is_continued_not_made_twice() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    fake.lose_next_post_answers(1, 503);
    let p = pipeline(Setup::default(), &fake).await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let lines_of = |f: &FakeDiscord| -> Vec<Vec<String>> {
        f.threads()
            .iter()
            .map(|t| {
                f.messages(t.id)
                    .into_iter()
                    .filter(|m| m.id != t.id)
                    .map(|m| m.content)
                    .collect()
            })
            .collect()
    };
    assert!(
        fake.wait_until(PATIENCE, |f| lines_of(f).iter().any(|l| l.len() >= 4))
            .await,
        "the sprint's lines were posted: {:#?}",
        lines_of(&fake)
    );
    assert_eq!(
        lines_of(&fake),
        [HAPPY_LINES[..4].to_vec()],
        "one post, with every line"
    );
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.is("GET", "/guilds/*/threads/active")),
        "the bot looked for the post it could not know it had made"
    );
    // Its board is the one edited as the sprint moves.
    let thread = &fake.threads()[0];
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .message(thread.id)
            .is_some_and(|m| m.content.contains("(done)")))
            .await,
        "the board of the post that was continued follows the sprint"
    );
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_line_discord_refuses_for_good_is_skipped_with_a_note_on_the_board() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, bot, first) = two_sprints_setup(&fake).await;
    // The bot lost access to SPRINT-001's thread: its lines are skipped, logged once.
    fake.deny_channel(first);
    p.command("SPRINT-001", CommandKind::Approve, None).await;
    p.wait_for("SPRINT-001", State::Deployed).await;
    let s2 = p.start_sprint("web", "Second", None).await;
    p.wait_for(&s2.id, State::Done).await;
    assert!(
        fake.wait_until(PATIENCE, |f| thread_of(f, "SPRINT-002").len() == 1)
            .await
    );
    let second = thread_of(&fake, "SPRINT-002")[0];
    wait_for_thread_lines(&fake, second, 4).await;
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .messages(second)
            .iter()
            .any(|m| !m.custom_ids().is_empty()))
            .await,
        "the summary and the decision's buttons follow the done line"
    );
    // A line Discord rejects (400) in a thread it can write to: skipped, and the board
    // says so.
    fake.fail_next_posts(1, 400);
    p.command(&s2.id, CommandKind::Approve, None).await;
    p.wait_for(&s2.id, State::Deployed).await;
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .message(second)
            .is_some_and(|board| board.content.contains("⚠️ 줄 1개를 올리지 못함")))
            .await,
        "the board notes the skipped line: {:?}",
        fake.message(second).map(|m| m.content)
    );
    let lines = thread_lines(&fake, second);
    assert_eq!(
        lines.last().map(String::as_str),
        Some("🎉 SPRINT-002 배포 완료\n📦 배포물: dist/app\n🔎 확인: GET /health: 200")
    );
    assert_eq!(lines.len(), 5, "one line skipped: {lines:#?}");
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_is_retried_only_after_its_retry_after_through_the_proxy() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    // `discord_table` sets `http_proxy`: serenity's own ratelimiter is off.
    let (p, bot, s) = waiting_in_done(&fake).await;
    // The next write is rate limited: "retry_after": 1.0.
    fake.fail_next(1, 429);
    p.command(&s.id, CommandKind::Approve, None).await;
    let lines = wait_for_lines(&fake, 6).await;
    assert_eq!(lines[4], "🚀 cli님 배포 승인: 이랑이가 배포 시작");
    assert_eq!(lines[5], HAPPY_LINES[5]);
    let requests = fake.requests();
    let limited = requests
        .iter()
        .find(|r| r.injected_failure && r.status == 429)
        .expect("a write was rate limited");
    let retry = requests
        .iter()
        .find(|r| r.index > limited.index && r.method == limited.method && r.path == limited.path)
        .expect("it was tried again");
    assert!(
        retry.at.duration_since(limited.at) >= Duration::from_secs(1),
        "tried again after {:?}, before the 1 s retry_after",
        retry.at.duration_since(limited.at)
    );
    bot.stop().await;
    p.stop().await;
}
