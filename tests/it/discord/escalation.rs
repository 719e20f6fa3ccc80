//! What an escalation offers in the thread, with the real bot against the fake Discord:
//! under the escalation line and its digest, the buttons to resume with a note that
//! settles the cause, to resume as it is, or to abort; the note goes to the next run as
//! the person's request and joins the contract.

use hanarang::pipeline::State;

use super::{Bot, USER, pipeline};
use crate::support::fake_discord::{FakeConfig, FakeDiscord, FakeMessage, ResponseKind};
use crate::support::pipeline::{PATIENCE, Setup};

/// The message that carries an escalation's buttons.
async fn offer(fake: &FakeDiscord) -> FakeMessage {
    let settles = |m: &FakeMessage| {
        m.custom_ids()
            .iter()
            .any(|id| id.starts_with("hanarang:settle:"))
    };
    assert!(
        fake.wait_until(PATIENCE, |f| f.post_lines().iter().any(settles))
            .await,
        "no escalation buttons: {:#?}",
        fake.post_lines()
    );
    fake.post_lines()
        .into_iter()
        .find(settles)
        .expect("found above")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_escalation_offers_to_resume_with_a_note_that_settles_it_in_one_tap() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = pipeline(
        Setup {
            narang: "fail-first 3",
            ..Setup::default()
        },
        &fake,
    )
    .await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;

    // The buttons come after what the escalation says: its line and the attempts' digest.
    let card = offer(&fake).await;
    let seq = p
        .transitions(&s.id)
        .await
        .last()
        .map(|t| t.seq)
        .expect("the escalation");
    assert_eq!(
        card.custom_ids(),
        [
            format!("hanarang:settle:SPRINT-001:{seq}"),
            format!("hanarang:resume:SPRINT-001:{seq}"),
            format!("hanarang:abort:SPRINT-001:{seq}"),
        ]
    );
    let lines = fake.post_lines();
    let at = |pred: &dyn Fn(&FakeMessage) -> bool| lines.iter().position(pred);
    let escalated = at(&|m| m.content.contains("🚨")).expect("the escalation line");
    let digest = at(&|m| m.content.contains("attempt 3")).expect("the digest");
    let buttons = at(&|m| m.id == card.id).expect("the card");
    assert!(escalated < digest && digest < buttons, "{lines:#?}");
    // The resume goes back to the implementer: the note would join the contract.
    assert!(
        card.content.starts_with("👆") && card.content.ends_with("계약에 추가됩니다"),
        "{}",
        card.content
    );

    // One tap opens the form; its note resumes the sprint and reaches the implementer.
    let click = fake.button(USER, &[], &card.custom_ids()[0], card.id, card.channel_id);
    let modal = fake.wait_for_responses(click.id, 1, PATIENCE).await;
    assert_eq!(
        modal[0].kind,
        ResponseKind::Callback(9),
        "a form asks for the note"
    );
    let form = modal[0].data()["custom_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let note = "The scope item is superseded: add the README example";
    let submit = fake.modal_submit(USER, &[], &form, &[("note", note)]);
    fake.wait_for_responses(submit.id, 2, PATIENCE).await;
    p.wait_for(&s.id, State::Done).await;
    let runs = p.runs(&s.id).await;
    let resumed = runs
        .iter()
        .rev()
        .find(|r| r.actor.as_str() == "narang")
        .expect("the resumed implementer");
    let prompt = p.files.stdin_of(&resumed.run_id);
    assert!(
        prompt.contains(&format!(
            "is for what a person asked: <request from=\"discord:{USER}\">{note}</request>"
        )),
        "{prompt}"
    );
    assert!(
        prompt.contains(&format!("- request-r1: {note}\n</checklist>")),
        "the note joined the contract: {prompt}"
    );
    bot.stop().await;
    p.stop().await;
}
