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

/// A change to a workflow is held in the thread: the files named, their diff attached,
/// and a button that only an approver's click turns into the push.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_ci_file_change_is_shown_and_pushed_on_an_approvers_click() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (files, forge, repo) = delivering(Engine::Sqlite, Kind::GitHub, "ci-file", "");
    files.append_config(&discord_table(&fake));
    let p = Pipeline::start_with(files).await;
    let _bot = Bot::start(&p, &fake).await;
    let sprint = p.start_sprint("app", "Add a login page", None).await;
    let card = decision(&fake).await;
    assert!(
        card.custom_ids()
            .first()
            .is_some_and(|id| id.starts_with("hanarang:push-ci:")),
        "{:?}",
        card.custom_ids()
    );
    assert!(card.components.to_string().contains("푸시하고 CI 실행"));
    let shown = fake
        .post_lines()
        .into_iter()
        .find(|m| {
            m.files
                .iter()
                .any(|f| f.filename.ends_with("-ci-files.patch"))
        })
        .expect("the held change's message, its diff attached");
    assert!(
        shown.content.contains(".github/workflows/ci.yml"),
        "{}",
        shown.content
    );
    let patch = shown
        .files
        .iter()
        .find(|f| f.filename.ends_with("-ci-files.patch"))
        .expect("the CI files' diff");
    let patch = String::from_utf8_lossy(&patch.data);
    assert!(
        patch.contains("secrets.DEPLOY_KEY") && !patch.contains("work-"),
        "the CI files' diff alone: {patch}"
    );
    assert!(forge.prs().is_empty(), "nothing pushed yet");
    // The board says what it waits for.
    let board_id = fake.threads()[0].id;
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .message(board_id)
            .is_some_and(|m| m.content.contains("CI 파일이 사람의 결정을 기다림")))
            .await,
        "{:?}",
        fake.message(board_id).map(|m| m.content)
    );

    // Someone who may not steer: refused, nothing pushed.
    let stranger = click_approve(&fake, 999, &card, 1).await;
    assert!(
        stranger
            .iter()
            .any(|r| r.body.to_string().contains("승인자만")),
        "{stranger:?}"
    );
    assert!(forge.prs().is_empty(), "a stranger's click pushes nothing");
    let slash = fake.slash(999, &[], &["sprint", "approve-ci"], json!({"id": "1"}));
    let refused = fake.wait_for_responses(slash.id, 2, PATIENCE).await;
    assert!(
        refused
            .iter()
            .any(|r| r.body.to_string().contains("승인자만")),
        "{refused:?}"
    );
    assert!(forge.prs().is_empty(), "nor does their /sprint approve-ci");
    let answers = click_approve(&fake, USER, &card, 2).await;
    assert!(!answers.is_empty());
    wait_until("the held head was pushed", || !forge.prs().is_empty());
    let head = support::git(&repo, &["rev-parse", "feature/sprint-001"]);
    assert_eq!(forge.branch("feature/sprint-001"), Some(head));
    assert_eq!(
        p.runs(&sprint.id).await.len(),
        3,
        "no run more: it only pushed"
    );
}
