//! A usage limit is not a stop, as the sprint's thread tells it: the real bot posts which
//! agent is at its limit until when, and which one takes the stage over.

use hanarang::pipeline::State;
use hanarang::store::CommandKind;

use super::{Bot, is_line, no_mentions, pipeline};
use crate::fallback::{erang_chain, leak};
use crate::support::fake_discord::{FakeConfig, FakeDiscord};
use crate::support::pipeline::{PATIENCE, Setup};

#[tokio::test(flavor = "multi_thread")]
async fn the_thread_says_which_agent_took_over_at_a_usage_limit() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let reset = hanarang::clock::now_ms() / 1000 + 3 * 3600;
    let p = pipeline(
        Setup {
            erang: leak(format!("limit-first 1 {reset}")),
            extra: erang_chain(r#"["ok"]"#),
            ..Setup::default()
        },
        &fake,
    )
    .await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    p.command(&s.id, CommandKind::Approve, None).await;
    p.wait_for(&s.id, State::Deployed).await;
    let when = hanarang::notify::messages::clock_time(reset * 1000);
    let expected = format!("⏭️ 이랑이: scripted.sh 사용량 한도 ({when}까지), backup(으)로 계속");
    let posted = |f: &FakeDiscord| {
        f.post_lines()
            .into_iter()
            .filter(is_line)
            .find(|m| m.content == expected)
    };
    assert!(
        fake.wait_until(PATIENCE, |f| posted(f).is_some()).await,
        "{expected:?} in {:#?}",
        fake.post_lines()
            .iter()
            .map(|m| &m.content)
            .collect::<Vec<_>>()
    );
    let line = posted(&fake).expect("the line");
    assert_eq!(line.allowed_mentions, no_mentions(), "nothing pinged");
    bot.stop().await;
    p.stop().await;
}
