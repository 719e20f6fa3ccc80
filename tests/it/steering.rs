//! Steering long-running sisters, as the people in the forum thread and at the terminal
//! see it: handoff on demand from Discord, stall detection, and the escalation digest.

use hanarang::discord::{self, Token};
use hanarang::handoff::message::Actor;
use hanarang::pipeline::State;
use hanarang::sister::RunOutcome;
use serde_json::json;
use tokio::sync::oneshot;

use crate::support::fake_discord::{FakeConfig, FakeDiscord, FakeMessage};
use crate::support::pipeline::{Files, PATIENCE, Pipeline, Setup};

const USER: u64 = 500;

/// A pipeline with the bot connected to the fake; `patch` edits the config text first.
async fn with_bot(
    setup: Setup,
    fake: &FakeDiscord,
    patch: impl Fn(String) -> String,
) -> (Pipeline, oneshot::Sender<()>) {
    let files = Files::new(&setup);
    let config = std::fs::read_to_string(&files.config_path).unwrap();
    std::fs::write(&files.config_path, patch(config)).unwrap();
    let c = fake.config();
    files.append_config(&format!(
        "[discord]\ntoken_env = \"UNUSED_IN_PROCESS\"\nguild_id = {}\nforum_channel_id = {}\nuser_id = {USER}\nhttp_proxy = \"{}\"\n",
        c.guild_id,
        c.forum_channel_id,
        fake.base_url()
    ));
    let p = Pipeline::start_with(files).await;
    let config = p.config.discord.clone().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(discord::run(
        p.config.clone(),
        config,
        p.handle.clone(),
        Token::new(fake.token()),
        async {
            let _ = stopped.await;
        },
    ));
    assert!(
        fake.wait_until(PATIENCE, |f| !f.commands().is_empty())
            .await
    );
    (p, stop)
}

async fn wait_for_line(fake: &FakeDiscord, needle: &str) -> FakeMessage {
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .post_lines()
            .iter()
            .any(|m| m.content.contains(needle)))
            .await,
        "no line with {needle:?} in {:#?}",
        fake.post_lines()
            .iter()
            .map(|m| &m.content)
            .collect::<Vec<_>>()
    );
    fake.post_lines()
        .into_iter()
        .find(|m| m.content.contains(needle))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handoff_from_discord_restarts_the_sister_and_the_thread_says_so() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, stop) = with_bot(
        Setup {
            narang: "hang-first 1",
            ..Setup::default()
        },
        &fake,
        |c| c,
    )
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.files.wait_hanging(Actor::Narang).await;
    // A stranger may not; the user may.
    let refused = fake.slash(777, &[], &["sprint", "handoff"], json!({"id": "1"}));
    let answer = fake.wait_for_responses(refused.id, 2, PATIENCE).await;
    assert!(answer[1].content().unwrap().contains("권한이 없어요"));
    let asked = fake.slash(
        USER,
        &[],
        &["sprint", "handoff"],
        json!({"id": "1", "focus": "keep it small"}),
    );
    let answer = fake.wait_for_responses(asked.id, 2, PATIENCE).await;
    assert_eq!(
        answer[1].content(),
        Some("🔄 나랑이 새 세션으로 교대 (요청: <@500>)")
    );

    let line = wait_for_line(&fake, "🔄").await;
    assert_eq!(line.content, "🔄 나랑이 새 세션으로 교대 (요청: <@500>)");
    assert_eq!(
        line.allowed_mentions,
        json!({"parse": [], "users": [], "roles": []})
    );
    p.wait_for(&s.id, State::Done).await;
    let runs = p.runs(&s.id).await;
    assert_eq!(runs[1].outcome, Some(RunOutcome::HandedOff));
    assert_eq!(
        runs[2].parent_run_id.as_deref(),
        Some(runs[1].run_id.as_str())
    );
    let stdin = p.files.stdin_of(&runs[2].run_id);
    assert!(
        stdin.contains(
            "is for what a person asked: <request from=\"discord:500\">keep it small</request>\n"
        ),
        "{stdin}"
    );
    let _ = stop.send(());
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_sister_is_retried_and_the_thread_and_log_say_stalled() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    // Only narang has a stall timeout; the first session goes silent.
    let (p, stop) = with_bot(
        Setup {
            narang: "hang-first 1",
            ..Setup::default()
        },
        &fake,
        |c| {
            c.replace(
                "[agent.narang]\n",
                "[agent.narang]\nstall_timeout = \"300ms\"\n",
            )
        },
    )
    .await;

    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let line = wait_for_line(&fake, "⚠️").await;
    // A failure's detail may quote the sister, so Discord shows it inert (`_` escaped).
    assert!(
        line.content
            .contains("timeout — stalled: nothing on stdout or stderr for 300ms (stall\\_timeout)"),
        "{}",
        line.content
    );
    let out = p.files.hanarang(&["sprint", "log", &s.id]);
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("stalled: nothing on stdout or stderr for 300ms"),
        "{log}"
    );
    let _ = stop.send(());
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_escalation_pings_once_and_posts_a_digest_of_every_attempt() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, stop) = with_bot(
        Setup {
            narang: "fail-first 3",
            ..Setup::default()
        },
        &fake,
        |c| c,
    )
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;
    let escalation = wait_for_line(&fake, "🚨").await;
    assert_eq!(
        escalation.content,
        "<@500> 🚨 SPRINT-001 구현 단계 3회 실패 (마지막: exit_nonzero — exited with code 1: simulated failure 3). 자기야 확인 필요"
    );
    assert_eq!(
        escalation.allowed_mentions,
        json!({"parse": [], "users": ["500"], "roles": []})
    );
    let digest = wait_for_line(&fake, "**SPRINT-001 · implementing**").await;
    for attempt in [
        "SPRINT-001-R02` attempt 1 — exit_nonzero",
        "SPRINT-001-R03` attempt 2 — exit_nonzero",
        "SPRINT-001-R04` attempt 3 — exit_nonzero",
    ] {
        assert!(
            digest.content.contains(attempt),
            "{attempt:?} missing from\n{}",
            digest.content
        );
    }
    assert!(
        digest.content.contains("exited with code 1"),
        "the reason of each attempt"
    );
    assert_eq!(
        digest.allowed_mentions,
        json!({"parse": [], "users": [], "roles": []}),
        "still one ping"
    );
    let picture: Vec<&str> = digest.files.iter().map(|f| f.filename.as_str()).collect();
    assert_eq!(
        picture,
        ["SPRINT-001.png"],
        "the digest carries the picture"
    );
    assert!(digest.files[0].data.starts_with(b"\x89PNG\r\n\x1a\n"));
    let pings = fake
        .post_lines()
        .iter()
        .filter(|m| {
            m.allowed_mentions["users"]
                .as_array()
                .is_some_and(|u| !u.is_empty())
        })
        .count();
    assert_eq!(pings, 1);
    // `sprint log` lists the same attempts.
    let out = p.files.hanarang(&["sprint", "log", &s.id]);
    let log = String::from_utf8_lossy(&out.stdout);
    let attempts = log
        .lines()
        .filter(|l| l.trim_start().starts_with("SPRINT-001-R0") && l.contains("narang"))
        .filter(|l| l.contains("exit_nonzero"))
        .count();
    assert_eq!(attempts, 3, "{log}");
    let _ = stop.send(());
    p.stop().await;
}

/// A note is given until a run acts on it: the planner's run that was given it fails, so
/// its retry is given it again; the implementer after a planner that answered is not.
#[tokio::test(flavor = "multi_thread")]
async fn a_note_given_to_a_run_that_failed_goes_to_its_retry() {
    let files = Files::new(&Setup {
        harang: "fail-first 1",
        ..Setup::default()
    });
    for args in [
        &["sprint", "start", "Add a login page"][..],
        &["sprint", "note", "1", "--text", "keep the form on one page"],
    ] {
        let out = files.hanarang(args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let p = Pipeline::start_with(files).await;
    p.wait_for("SPRINT-001", State::Done).await;
    let runs = p.runs("SPRINT-001").await;
    let given = |run: &hanarang::store::Run| {
        p.files.contract_of(&run.run_id)["notes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n["text"] == "keep the form on one page"))
    };
    assert_eq!(runs[0].outcome, Some(RunOutcome::ExitNonzero));
    assert_eq!(runs[1].actor, Actor::Harang);
    assert!(given(&runs[1]), "the retry is given the note again");
    assert!(
        !given(&runs[2]),
        "not the implementer after the planner answered"
    );
    let log = p.files.hanarang(&["sprint", "log", "1", "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).unwrap();
    assert_eq!(log["notes"][0]["delivered_run"], json!(runs[1].run_id));
    p.stop().await;
}
