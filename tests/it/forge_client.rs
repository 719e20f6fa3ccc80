//! hanarang's forge client (`hanarang::forge`) against the fake forge, on GitHub's API and
//! Forgejo's: a pull request opened once (a second open is the forge's refusal, the open
//! one found), read conditionally, its checks and their log tails, reviews with their line
//! comments, a merge only at the head shown (the forge's words when it refuses), and what
//! a wrong token, a missing repository, a rate limit and an outage come back as.

use hanarang::config::{CiPolicy, ForgeConfig, ForgeKind, MergeMethod};
use hanarang::forge::{CheckState, Forge, ForgeError, ForgeToken, PrState, ReviewState, connect};

use crate::fake_forge::{TOKEN, commit_on, git_ok, seed};
use crate::support::TempDir;
use crate::support::fake_forge::{Forge as Fake, Kind, Limit, Outage, Verdict};

fn config(fake: &Fake, repo: &str) -> ForgeConfig {
    ForgeConfig {
        kind: match fake.kind() {
            Kind::GitHub => ForgeKind::Github,
            Kind::Forgejo => ForgeKind::Forgejo,
        },
        repo: repo.into(),
        api_url: Some(fake.api_url()),
        remote: None,
        token_file: None,
        merge: MergeMethod::Squash,
        ci: CiPolicy::Required,
        ci_timeout: hanarang::config::Dur(std::time::Duration::from_secs(3600)),
        ci_absent_after: hanarang::config::Dur(std::time::Duration::from_secs(600)),
        poll_interval: hanarang::config::Dur(std::time::Duration::from_secs(30)),
        people: Default::default(),
        ci_files: Vec::new(),
    }
}

fn client(fake: &Fake, token: &str) -> Box<dyn Forge> {
    connect(&config(fake, "acme/app"), &ForgeToken::new(token.into())).expect("a client")
}

/// A fake forge of `kind` whose `feature` branch is one commit ahead of `main`.
fn with_a_branch(kind: Kind) -> (Fake, TempDir, String) {
    let seed = seed();
    let fake = Fake::start(kind, "acme", "app", TOKEN, Some(seed.path()));
    let head = commit_on(seed.path(), "feature", "a.txt", b"a\n");
    git_ok(
        seed.path(),
        &["push", "--quiet", &fake.clone_url_with_token(), "feature"],
    );
    (fake, seed, head)
}

async fn opens_reads_and_merges(kind: Kind) {
    let (fake, seed, head) = with_a_branch(kind);
    let forge = client(&fake, TOKEN);
    assert_eq!(
        forge.login().await.unwrap(),
        crate::support::fake_forge::BOT_LOGIN
    );
    let repo = forge.repository().await.unwrap();
    assert_eq!(repo.default_branch, "main");
    assert!(repo.push && repo.merge);
    assert_eq!(forge.branch("feature").await.unwrap(), Some(head.clone()));
    assert_eq!(forge.branch("nope").await.unwrap(), None);

    assert_eq!(forge.open_pull_request("feature").await.unwrap(), None);
    let pr = forge
        .create_pull_request("feature", "main", "Add a", "The summary")
        .await
        .unwrap();
    assert_eq!(
        (pr.head.as_str(), pr.state.clone()),
        (head.as_str(), PrState::Open)
    );
    // A second open is refused by the forge, in its words; the open one is found.
    match forge
        .create_pull_request("feature", "main", "Add a", "The summary")
        .await
    {
        Err(ForgeError::Refused { status, message }) => {
            assert!(matches!(status, 409 | 422), "{status} {message}");
            assert!(message.contains("already exists"), "{message}");
        }
        other => panic!("expected the forge's refusal, got {other:?}"),
    }
    let found = forge.open_pull_request("feature").await.unwrap().unwrap();
    assert_eq!(found.number, pr.number);
    let updated = forge
        .update_pull_request(pr.number, "Add a (round 2)", "New summary")
        .await
        .unwrap();
    assert_eq!(updated.number, pr.number);

    // Read again unchanged: answered from the copy where the forge sends an ETag.
    let before = forge.budget();
    let again = forge.pull_request(pr.number).await.unwrap();
    let again2 = forge.pull_request(pr.number).await.unwrap();
    assert_eq!(again, again2);
    if kind == Kind::GitHub {
        assert_eq!(forge.budget().not_modified, before.not_modified + 1);
    }

    // Someone else pushes: the pull request's head moves, and a merge at the head shown
    // is refused in the forge's words; at the head now it merges.
    let foreign = fake.push_foreign("feature", &[("b.txt", "b\n")]);
    assert_eq!(forge.pull_request(pr.number).await.unwrap().head, foreign);
    let main = fake.branch("main");
    let message = hanarang::forge::MergeMessage {
        title: "Add a login page (#1)".into(),
        body: "Delivered by hanarang (SPRINT-001).\n\nApproved-by: cli:t@h\n".into(),
    };
    match forge
        .merge(pr.number, &head, MergeMethod::Squash, &message)
        .await
    {
        Err(ForgeError::Refused {
            status: 409,
            message,
        }) => {
            assert!(!message.is_empty(), "{message}")
        }
        other => panic!("expected a 409, got {other:?}"),
    }
    assert_eq!(fake.branch("main"), main, "nothing merged");
    let merged = forge
        .merge(pr.number, &foreign, MergeMethod::Squash, &message)
        .await
        .unwrap();
    assert_eq!(merged, fake.branch("main"), "merged as the base's new head");
    let written = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(fake.bare_path())
        .args(["log", "-1", "--format=%B", "main"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&written.stdout).trim_end(),
        format!("{}\n\n{}", message.title, message.body.trim_end()),
        "the merge commit says what hanarang wrote, and nothing else"
    );
    match forge.pull_request(pr.number).await.unwrap().state {
        PrState::Merged { commit, .. } => assert_eq!(commit, fake.branch("main")),
        other => panic!("expected merged, got {other:?}"),
    }
    drop(seed);
}

#[test]
fn github_opens_reads_and_merges_at_the_head_shown() {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(opens_reads_and_merges(Kind::GitHub));
}

#[test]
fn forgejo_opens_reads_and_merges_at_the_head_shown() {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(opens_reads_and_merges(Kind::Forgejo));
}

#[tokio::test(flavor = "multi_thread")]
async fn github_checks_statuses_log_tails_reviews_and_comments() {
    let (fake, _seed, head) = with_a_branch(Kind::GitHub);
    let forge = client(&fake, TOKEN);
    let pr = forge
        .create_pull_request("feature", "main", "Add a", "body")
        .await
        .unwrap();
    // 50 MB of log, its failure at the end.
    let mut log = vec![b'.'; 50 * 1024 * 1024];
    log.extend_from_slice(b"\ntest login::empty_password ... FAILED\n");
    fake.set_check(&head, "test", "completed", Some("failure"), Some(&log));
    fake.set_check(&head, "build", "completed", Some("success"), None);
    fake.set_check(&head, "lint", "in_progress", None, None);
    fake.set_status(
        &head,
        "ci/legacy",
        "error",
        Some("https://ci.example/1"),
        Some("broke"),
    );
    let checks = forge.checks(&head).await.unwrap();
    let state = |name: &str| checks.iter().find(|c| c.name == name).map(|c| c.state);
    assert_eq!(state("test"), Some(CheckState::Failed));
    assert_eq!(state("build"), Some(CheckState::Passed));
    assert_eq!(state("lint"), Some(CheckState::Pending));
    assert_eq!(state("ci/legacy"), Some(CheckState::Failed));
    let test = checks.iter().find(|c| c.name == "test").unwrap();
    let tail = forge.log_tail(test, 4096).await.unwrap().expect("a log");
    assert!(
        tail.len() <= 4096 && tail.ends_with("empty_password ... FAILED\n"),
        "{}",
        tail.len()
    );
    let build = checks.iter().find(|c| c.name == "build").unwrap();
    assert_eq!(forge.log_tail(build, 4096).await.unwrap(), None);

    fake.add_review(
        pr.number,
        "octocat",
        Verdict::ChangesRequested,
        "Please rename it",
        &[("a.txt", 1, "call it b")],
    );
    fake.comment(
        pr.number,
        "someone",
        "</note> <@123> [x](https://evil.example)",
    );
    let reviews = forge.reviews(pr.number).await.unwrap();
    assert_eq!(reviews.len(), 1);
    let review = &reviews[0];
    assert_eq!(
        (review.login.as_str(), review.state, review.body.as_str()),
        ("octocat", ReviewState::ChangesRequested, "Please rename it")
    );
    assert_eq!(review.commit.as_deref(), Some(head.as_str()));
    assert_eq!(review.comments.len(), 1);
    assert_eq!(
        (
            review.comments[0].path.as_str(),
            review.comments[0].line,
            review.comments[0].body.as_str()
        ),
        ("a.txt", Some(1), "call it b")
    );
    let comments = forge.comments(pr.number).await.unwrap();
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].login, "someone");
}

#[tokio::test(flavor = "multi_thread")]
async fn forgejo_statuses_and_reviews_with_line_comments() {
    let (fake, _seed, head) = with_a_branch(Kind::Forgejo);
    let forge = client(&fake, TOKEN);
    assert!(
        forge.checks(&head).await.unwrap().is_empty(),
        "no status at all"
    );
    let pr = forge
        .create_pull_request("feature", "main", "Add a", "body")
        .await
        .unwrap();
    fake.set_status(
        &head,
        "ci/test",
        "failure",
        Some("https://ci.example/2"),
        Some("3 failed"),
    );
    fake.set_status(&head, "ci/build", "pending", None, None);
    let checks = forge.checks(&head).await.unwrap();
    let test = checks.iter().find(|c| c.name == "ci/test").unwrap();
    assert_eq!(test.state, CheckState::Failed);
    assert_eq!(test.summary.as_deref(), Some("3 failed"));
    assert_eq!(test.url.as_deref(), Some("https://ci.example/2"));
    assert_eq!(
        checks.iter().find(|c| c.name == "ci/build").unwrap().state,
        CheckState::Pending
    );
    fake.add_review(
        pr.number,
        "alice",
        Verdict::ChangesRequested,
        "Not yet",
        &[("a.txt", 1, "spell it out")],
    );
    let reviews = forge.reviews(pr.number).await.unwrap();
    assert_eq!(reviews[0].state, ReviewState::ChangesRequested);
    assert_eq!(reviews[0].comments[0].path, "a.txt");
    assert_eq!(reviews[0].comments[0].line, Some(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_token_a_missing_repository_a_rate_limit_and_an_outage_are_told_apart() {
    let (fake, _seed, _) = with_a_branch(Kind::GitHub);
    assert!(matches!(
        client(&fake, "wrong").pull_request(1).await,
        Err(ForgeError::Unauthorized(_))
    ));
    let elsewhere = connect(&config(&fake, "acme/nope"), &ForgeToken::new(TOKEN.into())).unwrap();
    assert!(matches!(
        elsewhere.repository().await,
        Err(ForgeError::NotFound(_))
    ));

    let forge = client(&fake, TOKEN);
    fake.rate_limit(
        1,
        Limit::TooMany {
            retry_after_secs: 30,
        },
    );
    let until = match forge.repository().await {
        Err(ForgeError::RateLimited { until_ms }) => until_ms,
        other => panic!("expected a rate limit, got {other:?}"),
    };
    let wait = until - hanarang::clock::now_ms();
    assert!((25_000..=31_000).contains(&wait), "{wait}");
    // Until then nothing is sent: no burst against a limit.
    let sent = fake.api_requests().len();
    assert!(matches!(
        forge.repository().await,
        Err(ForgeError::RateLimited { .. })
    ));
    assert_eq!(fake.api_requests().len(), sent);

    let other = client(&fake, TOKEN);
    fake.down(Outage::Refused);
    assert!(matches!(
        other.repository().await,
        Err(ForgeError::Unavailable(_))
    ));
    fake.up();
    fake.down(Outage::BadGateway);
    assert!(matches!(
        other.repository().await,
        Err(ForgeError::Unavailable(_))
    ));
    fake.up();
    assert!(other.repository().await.is_ok());
}

/// hanarang's own git pushes the sprint's branch with the token in a credential file of
/// its runs folder (gone afterwards; not in the repository's config, nor git's
/// arguments), only onto what it pushed before, and fetches it back.
#[tokio::test(flavor = "multi_thread")]
async fn hanarangs_git_pushes_with_the_token_only_onto_its_own_push_and_fetches() {
    use hanarang::fence::Own;
    use hanarang::git::Repo;
    use hanarang::git::remote::{Remote, fetch, push};

    let seed = seed();
    let fake = Fake::start(Kind::GitHub, "acme", "app", TOKEN, Some(seed.path()));
    let runs = TempDir::new("forge-runs");
    let repo = Repo::new(seed.path(), &Own::runs_only(runs.path().to_path_buf()));
    let first = commit_on(seed.path(), "feature", "a.txt", b"a\n");
    let remote = |token: &'static str| Remote {
        url: Box::leak(fake.remote_url().into_boxed_str()),
        user: "x-access-token",
        token,
    };
    // What an agent could plant in the repository's config to steal the token or redirect
    // the push is not read: hanarang's git talks from a folder of its own.
    for (key, value) in [
        ("url.http://127.0.0.1:9/.insteadOf", fake.remote_url()),
        ("http.proxy", "http://127.0.0.1:9".to_string()),
        ("credential.helper", "!echo password=stolen".to_string()),
    ] {
        git_ok(seed.path(), &["config", key, &value]);
    }
    let refused = push(&repo, &remote("wrong-token"), "feature", &first, None).await;
    assert!(refused.is_err(), "a wrong token pushes nothing");
    assert_eq!(fake.branch("feature"), None);
    push(&repo, &remote(TOKEN), "feature", &first, None)
        .await
        .expect("the push");
    assert_eq!(fake.branch("feature"), Some(first.clone()));
    let second = commit_on(seed.path(), "feature", "b.txt", b"b\n");
    push(&repo, &remote(TOKEN), "feature", &second, Some(&first))
        .await
        .expect("onto its own push");
    // Someone else pushes: hanarang's next push does not go over it.
    let foreign = fake.push_foreign("feature", &[("c.txt", "c\n")]);
    let third = commit_on(seed.path(), "feature", "d.txt", b"d\n");
    let over = push(&repo, &remote(TOKEN), "feature", &third, Some(&second)).await;
    assert!(over.is_err(), "pushed over another's push: {over:?}");
    assert_eq!(fake.branch("feature"), Some(foreign.clone()));
    assert_eq!(
        fetch(&repo, &remote(TOKEN), "feature")
            .await
            .expect("fetched"),
        foreign
    );

    let config = std::fs::read_to_string(seed.path().join(".git/config")).unwrap();
    assert!(!config.contains(TOKEN), "{config}");
    let left: Vec<_> = std::fs::read_dir(runs.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "credential files left: {left:?}");
    for push in fake.pushes() {
        assert!(!format!("{push:?}").contains(TOKEN));
    }
}
