//! The evidence to approve in the sprint's thread, through the real
//! serenity client against the fake Discord, which takes uploads as Discord does
//! (`payload_json` and `files[N]` parts): the summary at `done`, the patch and the
//! picture; long findings attached whole; archived posts; a restart mid-upload.

use super::delivery::{thread_of, wait_for_thread_lines};
use super::*;
use crate::support::fake_discord::FakeFile;
use crate::support::git;
use crate::support::pipeline::workdir;

/// narang claims the sprint's branch, which the orchestrator made.
const ON_THE_BRANCH: &str = "[agent.narang.env]\nSAY_BRANCH = \"feature/sprint-001\"\n";

/// A project that is a git repository with one commit on `main`; returns the base commit.
pub(super) fn repository(files: &Files) -> (std::path::PathBuf, String) {
    files.append_config("base_branch = \"main\"\n");
    let repo = workdir(files, "app");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "app\n").expect("readme");
    git(&repo, &["add", "README.md"]);
    git(&repo, &["commit", "-q", "-m", "root"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    (repo, base)
}

/// The project's check: the check fixture, passing.
fn passing_check(files: &Files) {
    let dir = files.state_dir.join("check");
    std::fs::create_dir_all(&dir).expect("the check's folder");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checks/check.sh");
    let command = [
        script.display().to_string(),
        "pass".into(),
        dir.display().to_string(),
    ];
    files.append_config(&format!(
        "check = {}\n",
        serde_json::to_string(&command).expect("a TOML array")
    ));
}

/// The messages that follow a line (the summary's parts), in order: not the decision's
/// buttons that come after them.
pub(super) fn parts(fake: &FakeDiscord) -> Vec<FakeMessage> {
    fake.post_lines()
        .into_iter()
        .filter(|m| !is_line(m))
        .filter(|m| {
            !m.history[0]["nonce"]
                .as_str()
                .is_some_and(|n| n.ends_with("-decide"))
        })
        .collect()
}

pub(super) async fn wait_for_file(fake: &FakeDiscord, name: &str) -> FakeFile {
    let found = |f: &FakeDiscord| {
        let thread = f.threads().first()?.id;
        f.files_in(thread)
            .into_iter()
            .find(|file| file.filename == name)
    };
    assert!(
        fake.wait_until(PATIENCE, |f| found(f).is_some()).await,
        "no {name} attached; parts: {:#?}",
        parts(fake).iter().map(|m| &m.content).collect::<Vec<_>>()
    );
    found(fake).expect("found above")
}

pub(super) fn git_diff(repo: &std::path::Path, base: &str, head: &str) -> Vec<u8> {
    std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "diff",
            "--no-color",
            "--full-index",
            &format!("{base}..{head}"),
            "--",
        ])
        .output()
        .expect("git diff")
        .stdout
}

/// The PNG decoded: its size, and how many colours its pixels have (up to 10).
fn picture(file: &FakeFile) -> (u32, u32, usize) {
    let pixmap = tiny_skia::Pixmap::decode_png(&file.data).expect("a valid PNG");
    let mut colours = std::collections::HashSet::new();
    for p in pixmap.pixels() {
        colours.insert((p.red(), p.green(), p.blue()));
        if colours.len() >= 10 {
            break;
        }
    }
    (pixmap.width(), pixmap.height(), colours.len())
}

#[tokio::test(flavor = "multi_thread")]
async fn done_posts_the_summary_the_patch_and_the_picture() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup {
        harang: "plan-checklist tests",
        narang: "commits 2 1",
        darang: "changes-until 2",
        extra: ON_THE_BRANCH,
        ..Setup::default()
    });
    let (repo, base) = repository(&files);
    passing_check(&files);
    files.append_config(&discord_table(&fake));
    let p = Pipeline::start_with(files).await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let patch = wait_for_file(&fake, "SPRINT-001.patch").await;
    let head = git(&repo, &["rev-parse", "feature/sprint-001"]);

    // The summary follows the done line, and pings no one.
    let texts = texts(&fake);
    assert_eq!(
        texts.last().map(String::as_str),
        Some(
            format!(
                "<@500> ✅ SPRINT-001 완료. {} 배포 승인해주세요",
                &head[..7]
            )
            .as_str()
        ),
        "the done line names the commit an approval deploys"
    );
    let summary = parts(&fake);
    assert_eq!(summary.len(), 1, "{summary:#?}");
    let text = &summary[0].content;
    for expected in [
        "📋 **SPRINT-001 요약** · 라운드 2",
        &format!("🔏 승인하면 리뷰된 커밋 `{}`을 그대로 배포", &head[..7]),
        "**계약** (1)",
        "✅ **tests**",
        "**검사** `",
        &format!("✅ {}에서 → ✅ {}에서", &base[..7], &head[..7]),
        &format!(
            "**커밋** (3) · 파일 3개, +3 −0 · main {} → feature/sprint-001 {}",
            &base[..7],
            &head[..7]
        ),
        "add part 1.1",
        "add part 1.2",
        "add part 2.1",
        "　part-2-1.txt +1 −0",
        "라운드 1 · darang: REQUEST_CHANGES — \\[major\\] src/login.rs:12 validate the password length",
        "라운드 2 · darang: APPROVE",
        "**시간과 비용**",
        "harang ",
        "narang ",
        "darang ",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from\n{text}");
    }
    assert_eq!(
        summary[0].allowed_mentions,
        json!({"parse": [], "users": [], "roles": []})
    );

    // The patch is git's own diff of base..branch; the picture a real PNG of the sprint.
    assert_eq!(patch.data, git_diff(&repo, &base, &head));
    let png = wait_for_file(&fake, "SPRINT-001.png").await;
    assert_eq!(png.content_type, "image/png");
    let (width, height, colours) = picture(&png);
    assert!(
        (800..=2000).contains(&width) && (300..=1500).contains(&height),
        "{width}×{height}"
    );
    assert!(
        colours > 3,
        "the picture is more than a blank: {colours} colours"
    );
    let names: Vec<String> = summary[0]
        .files
        .iter()
        .map(|f| f.filename.clone())
        .collect();
    assert_eq!(
        names,
        ["SPRINT-001.patch", "SPRINT-001.png"],
        "no findings file: nothing was cut"
    );
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_5000_line_finding_is_attached_whole_and_every_message_fits() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup {
        darang: "long-finding-until 2 5000",
        ..Setup::default()
    });
    files.append_config(&discord_table(&fake));
    let p = Pipeline::start_with(files).await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let review = wait_for_file(&fake, "SPRINT-001-review.md").await;
    let review = String::from_utf8(review.data).expect("text");
    for n in [1, 2500, 5000] {
        assert!(
            review.contains(&format!("line {n} of the finding\n")),
            "line {n} in the file"
        );
    }
    assert_eq!(review.matches(" of the finding").count(), 5000);
    let summary: String = parts(&fake).into_iter().map(|m| m.content).collect();
    assert!(
        summary.contains(
            "라운드 1 · darang: REQUEST_CHANGES — \\[major\\] src/login.rs:7 line 1 of the finding"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("📎 SPRINT-001-review.md"),
        "the summary says where the rest is: {summary}"
    );
    // Discord took every message: none over its limit was refused.
    let refused: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.status == 400)
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_archived_post_is_found_continued_and_reopened() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    // A bot stopped after creating the sprint's post and before recording it; the post
    // archived since.
    let left = fake.add_forum_post("SPRINT-001 · Add a login page", true);
    let (p, bot, s) = waiting_in_done(&fake).await;
    assert_eq!(thread_of(&fake, "SPRINT-001"), [left], "no second post");
    let created: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.is("POST", "/channels/*/threads"))
        .collect();
    assert!(created.is_empty(), "{created:#?}");

    // The post archives again while the sprint waits for its approval: the next line
    // reopens it, and the board is edited again.
    fake.archive_thread(left);
    let approve = p.files.hanarang(&["sprint", "approve", &s.id]);
    assert_eq!(approve.status.code(), Some(0));
    p.wait_for(&s.id, State::Deployed).await;
    let lines = wait_for_thread_lines(&fake, left, 6).await;
    assert_eq!(lines[5], HAPPY_LINES[5]);
    let thread = fake
        .threads()
        .into_iter()
        .find(|t| t.id == left)
        .expect("the post");
    assert!(!thread.archived, "posting reopened it");
    assert!(
        fake.wait_until(PATIENCE, |f| f
            .message(left)
            .is_some_and(|b| b.content.contains("배포 완료")))
            .await,
        "the board shows the deploy"
    );
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn new_posts_archive_after_a_week_not_a_day() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, bot, _) = waiting_in_done(&fake).await;
    let thread = fake.threads().into_iter().next().expect("a post");
    assert_eq!(thread.create_body["auto_archive_duration"], 10080);
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_between_the_upload_and_its_cursor_posts_the_summary_once() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup::default());
    files.append_config(&discord_table(&fake));
    fake.hold_uploads(true);
    let mut serve = spawn_serve(&files);
    let start = files.hanarang(&["sprint", "start", "Add a login page"]);
    assert_eq!(String::from_utf8_lossy(&start.stdout).trim(), "SPRINT-001");
    // The summary's upload reaches Discord; serve dies before it hears back.
    assert!(
        fake.wait_until(PATIENCE, |f| f.held_requests() == 1).await,
        "the upload is under way"
    );
    serve.kill().expect("kill serve");
    serve.wait().expect("serve ends");
    fake.hold_uploads(false);
    assert!(
        fake.wait_until(PATIENCE, |f| parts(f).len() == 1).await,
        "Discord made the message"
    );
    // serve again: it delivers the rest of the log from its cursors.
    let mut serve = spawn_serve(&files);
    let uploads = |f: &FakeDiscord| {
        f.requests()
            .into_iter()
            .filter(|r| r.is("POST", "/channels/*/messages"))
            .filter(|r| {
                r.body["nonce"]
                    .as_str()
                    .is_some_and(|n| n.contains("-p") && !n.ends_with("-decide"))
            })
            .filter(|r| r.succeeded())
            .count()
    };
    if !fake.wait_until(PATIENCE, |f| uploads(f) == 2).await {
        let _ = serve.kill();
        let out = serve.wait_with_output().expect("serve ends");
        panic!(
            "not tried again after the restart: {:#?}\n{}",
            fake.requests()
                .iter()
                .filter(|r| r.method == "POST")
                .map(|r| format!(
                    "{} {} {} {}",
                    r.method,
                    r.path,
                    r.status,
                    r.body.to_string().chars().take(300).collect::<String>()
                ))
                .collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let approve = files.hanarang(&["sprint", "approve", "1"]);
    assert_eq!(approve.status.code(), Some(0));
    wait_for_lines(&fake, 6).await;
    assert_eq!(parts(&fake).len(), 1, "the summary is there once");
    assert_eq!(texts(&fake).len(), 6, "{:#?}", texts(&fake));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal serve");
    serve.wait().expect("serve ends");
}
