//! A sprint delivered through the forge, followed from its forum post: the pull request's
//! line, its CI's result heading the done line, a card that says the approval merges the
//! pull request at the reviewed head, and the person's click merging it.

use super::*;
use crate::fake_forge::TOKEN;
use crate::forge_delivery::{delivering, wait_until};
use crate::support::db::Engine;
use crate::support::fake_forge::Kind;

#[tokio::test(flavor = "multi_thread")]
async fn from_the_forum_post_to_a_merged_pull_request_whose_ci_passed() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (files, forge, repo) = delivering(Engine::Sqlite, Kind::GitHub, "commits 1", "");
    files.append_config(&discord_table(&fake));
    let p = Pipeline::start_with(files).await;
    let _bot = Bot::start(&p, &fake).await;
    let sprint = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&sprint.id, State::Verifying).await;
    wait_until("a pull request was opened", || !forge.prs().is_empty());
    let pr = forge.prs()[0].clone();
    let head = support::git(&repo, &["rev-parse", "feature/sprint-001"]);
    forge.set_check(&head, "test", "completed", Some("success"), None);
    p.wait_for(&sprint.id, State::Done).await;

    let lines = wait_for_lines(&fake, 6).await;
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("🔗 PR #{} ", pr.number)) && l.contains("/pull/")),
        "{lines:#?}"
    );
    let done = line_messages(&fake).pop().unwrap();
    assert!(
        done.content.contains("🟢 CI 통과: test")
            && done
                .content
                .contains(&format!("{}을 main에 병합하도록 승인해주세요", &head[..7])),
        "{}",
        done.content
    );
    assert!(
        fake.wait_until(PATIENCE, |f| evidence::parts(f).iter().any(|m| m
            .content
            .contains(&format!(
                "PR #{}을 리뷰된 커밋 `{}`에서 병합",
                pr.number,
                &head[..7]
            ))))
        .await,
        "the card says what an approval does: {:#?}",
        evidence::parts(&fake)
    );

    let card = decision(&fake).await;
    // Approving here merges, and the button says so.
    assert!(
        card.components.to_string().contains("병합 승인")
            && !card.components.to_string().contains("배포 승인"),
        "{}",
        card.components
    );
    assert!(
        card.custom_ids()
            .first()
            .is_some_and(|id| id.starts_with("hanarang:merge:")),
        "{:?}",
        card.custom_ids()
    );
    let answers = click_approve(&fake, USER, &card, 2).await;
    assert!(!answers.is_empty());
    p.wait_for(&sprint.id, State::Deployed).await;
    let merges = forge.merges();
    assert_eq!(merges.len(), 1);
    assert_eq!(merges[0].expected_head.as_deref(), Some(head.as_str()));
    let merged = forge.branch("main").expect("main");
    assert!(
        fake.wait_until(PATIENCE, |f| texts(f)
            .last()
            .is_some_and(|l| l.contains(&format!("병합됨: {}", &merged[..7]))))
            .await,
        "{:#?}",
        texts(&fake)
    );
    let _ = TOKEN;
}
