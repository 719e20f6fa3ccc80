//! What the sisters wrote reaches Discord as text. Their agents put links, bold,
//! spoilers, a heading, a quote, a code fence and bidi controls into everything a person
//! reads (`scripted.sh markup`: the checklist, a step, an error, commit subjects, a file
//! name, findings); through the real bot against the fake Discord, none of it is live on
//! the card, the board, the lines, the digest or `review.md`. The bot's own bold, code,
//! mention and links are, and so is the person's own goal.

use hanarang::discord::inert::live;
use hanarang::pipeline::State;
use hanarang::store::CommandKind;

use super::evidence::{git_diff, parts, repository, wait_for_file};
use super::*;
use crate::support::git;

/// What an agent's text must never be on Discord.
const NEVER: [&str; 10] = [
    "a masked link",
    "an autolink",
    "a bare URL",
    "a spoiler",
    "strike",
    "underline",
    "a mention",
    "a block at a line's start",
    "an ordered list",
    "an invisible character",
];

/// `text` has nothing of `NEVER` live (but the bot's own mention of the user that starts
/// the `done` and escalation lines).
fn assert_inert(what: &str, text: &str) {
    let mention = format!("<@{USER}> ");
    let found: Vec<&str> = live(text.strip_prefix(&mention).unwrap_or(text))
        .into_iter()
        .filter(|f| NEVER.contains(f))
        .collect();
    assert!(found.is_empty(), "{what}: {found:?} live in\n{text}");
}

/// A pipeline whose sisters write Markdown into all a person reads, in a git repository,
/// narang in Claude Code's stream-json and failing its first `errors` runs.
async fn marked_up(fake: &FakeDiscord, errors: u32) -> (Pipeline, std::path::PathBuf, String) {
    let files = Files::new(&Setup {
        harang: "markup",
        narang: "markup",
        darang: "markup",
        ..Setup::default()
    });
    let config = std::fs::read_to_string(&files.config_path).expect("the config");
    let config = config.replace(
        "[agent.narang]\nargs = [\"markup\"]",
        "[agent.narang]\nargs = [\"markup\"]\nstream = \"claude-code\"\noutput_pointer = \"/structured_output\"",
    );
    assert!(config.contains("stream = \"claude-code\""), "{config}");
    std::fs::write(&files.config_path, config).expect("write the config");
    let (repo, base) = repository(&files);
    files.append_config(&format!(
        "[agent.narang.env]\nSAY_BRANCH = \"feature/sprint-001\"\nMARKUP_ERRORS = \"{errors}\"\n"
    ));
    files.append_config(&discord_table(fake));
    (Pipeline::start_with(files).await, repo, base)
}

/// The person's goal, with a link of their own.
const GOAL: &str = "Add a login page like [the docs](https://docs.example/login)";

#[tokio::test(flavor = "multi_thread")]
async fn the_card_board_and_lines_show_what_the_sisters_wrote_as_text() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, repo, base) = marked_up(&fake, 1).await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", GOAL, None).await;
    assert!(fake.wait_until(PATIENCE, |f| !f.threads().is_empty()).await);
    let thread = fake.threads()[0].id;

    // narang's second attempt waits with its step on the board (the board stays so until
    // it is released): the command it runs is text.
    let board = |f: &FakeDiscord| f.message(thread).map(|m| m.content).unwrap_or_default();
    assert!(
        fake.wait_until(PATIENCE, |f| board(f).contains("시도: 2/3")
            && board(f).contains("지금: ▶️ echo"))
            .await,
        "the board shows the step: {}",
        board(&fake)
    );
    let shown = board(&fake);
    let now = shown
        .lines()
        .find(|l| l.starts_with("지금: "))
        .expect("a Now line");
    assert!(
        now.starts_with(
            "지금: ▶️ echo \\[Approve here\\](https\\://evil.example/approve) \\*\\*LGTM\\*\\* \\|\\|x\\|\\| <U+202E> · "
        ),
        "{now}"
    );
    assert_inert("the Now line", now);
    let contract = shown
        .lines()
        .find(|l| l.starts_with("계약 "))
        .expect("a contract line");
    assert_eq!(contract, "계약 (2): C1 · \\<https\\://evil.example/c2>");
    // The person's goal keeps its link.
    let header = shown.lines().next().unwrap_or_default();
    assert_eq!(header, format!("**SPRINT-001 · {GOAL}**"));
    assert!(live(header).contains(&"a masked link"), "{header}");

    std::fs::write(p.files.state_dir.join("release"), "").expect("release narang");
    p.wait_for(&s.id, State::Done).await;
    let review = wait_for_file(&fake, "SPRINT-001-review.md").await;
    let patch = wait_for_file(&fake, "SPRINT-001.patch").await;

    // The lines: narang's error is text in its retry line; the bot's mention is live.
    let lines = texts(&fake);
    let retry = lines
        .iter()
        .find(|l| l.starts_with("⚠️ "))
        .expect("a retry line");
    assert!(
        retry.contains(
            "\\[Retry here\\](https\\://evil.example/retry) \\~\\~fine\\~\\~ <U+202E>attempt 1"
        ),
        "{retry}"
    );
    for line in &lines {
        assert_inert("a line", line);
    }
    let last = lines.last().map(String::as_str).unwrap_or_default();
    assert!(
        last.starts_with("<@500> ✅ SPRINT-001 완료. ") && last.ends_with(" 배포 승인해주세요"),
        "{last}"
    );

    // The card: the item's link, bold and the spoiler it opens, the subject that would
    // close it, the file name and the finding are text; the bot's bold and code are not.
    let card: Vec<String> = parts(&fake).into_iter().map(|m| m.content).collect();
    let card = card.join("\n");
    for expected in [
        "✅ **C1** \\[Approve here\\](https\\://evil.example/approve) \\*\\*LGTM\\*\\* \\|\\|",
        "✅ **\\<https\\://evil.example/c2>** \\# Approved <U+202E>gnp.exe",
        " \\|\\| closes it \\*\\*merged\\*\\* <U+202E>txt.exe",
        "　\\[Approve here\\](evil) \\~\\~x\\~\\~ \\|\\|.txt +1 −0",
        "라운드 1 · darang: REQUEST_CHANGES — \\[major\\] src/login.rs:12 > quote \\[Approve here\\](https\\://evil.example/approve) \\<https\\://evil.example/x> \\`\\`\\` code \\`\\`\\`",
    ] {
        assert!(card.contains(expected), "{expected:?} missing from\n{card}");
    }
    assert_inert("the card", &card);
    assert!(
        !card.contains("**LGTM**") && !card.contains("**merged**"),
        "{card}"
    );
    let own = live(&card);
    assert!(own.contains(&"bold") && own.contains(&"code"), "{own:?}");

    // review.md is inert for a Markdown viewer too; the patch is the committed bytes.
    let review = String::from_utf8(review.data).expect("text");
    assert!(
        review.contains(
            "- \\[major\\] src/login.rs:12 > quote \\[Approve here\\](https\\://evil.example/approve)\n\\<https\\://evil.example/x>\n\\`\\`\\`\ncode\n\\`\\`\\`\n"
        ),
        "{review}"
    );
    let head = git(&repo, &["rev-parse", "feature/sprint-001"]);
    assert_eq!(patch.data, git_diff(&repo, &base, &head));
    assert!(
        String::from_utf8_lossy(&patch.data).contains("[Approve here](evil) ~~x~~ ||.txt"),
        "the patch is as git made it"
    );

    // Nothing the fake was sent carries a bidi control: not the board in any version.
    let sent: Vec<String> = fake
        .requests()
        .into_iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        !sent.iter().any(|b| b.contains('\u{202E}')),
        "a bidi control reached Discord"
    );
    let versions = fake.message(thread).map(|m| m.history).unwrap_or_default();
    for version in versions {
        assert_inert(
            "a board",
            &version["content"]
                .as_str()
                .unwrap_or_default()
                .replace(header, ""),
        );
    }

    // The bot's own link stays a link: a card clicked after the sprint moved on points to
    // the card that stands now.
    let done = decision(&fake).await;
    assert!(matches!(
        p.command(&s.id, CommandKind::RequestChanges, Some("one more round"))
            .await,
        hanarang::orchestrator::client::Answer::Applied(_)
    ));
    p.wait_for(&s.id, State::Done).await;
    standing_card(&p, &fake, &s.id, 2).await;
    let stale = click_approve(&fake, APPROVER, &done, 2).await;
    let said = stale[1].content().unwrap_or_default();
    assert!(
        said.contains("지금 카드: https://discord.com/channels/"),
        "{said}"
    );
    assert!(live(said).contains(&"a bare URL"), "{said}");
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_escalation_shows_the_sisters_reasons_as_text_in_its_lines_digest_and_log() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let (p, _, _) = marked_up(&fake, 9).await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;
    assert!(
        fake.wait_until(PATIENCE, |f| parts(f)
            .iter()
            .any(|m| m.content.contains("attempt 3")))
            .await,
        "the digest follows the escalation: {:#?}",
        texts(&fake)
    );

    // The two retry lines and the escalation line name narang's errors, as text.
    let lines = texts(&fake);
    let naming: Vec<&String> = lines
        .iter()
        .filter(|l| {
            l.contains(
                "\\[Retry here\\](https\\://evil.example/retry) \\~\\~fine\\~\\~ <U+202E>attempt",
            )
        })
        .collect();
    assert_eq!(naming.len(), 3, "{lines:#?}");
    assert!(naming[2].starts_with("<@500> 🚨 "), "{lines:#?}");
    for line in &lines {
        assert_inert("a line", line);
    }
    // The digest gives each attempt's detail: the last line of what narang printed.
    let digest: Vec<String> = parts(&fake).into_iter().map(|m| m.content).collect();
    let digest = digest.join("\n");
    for n in 2..=3 {
        assert!(
            digest.contains(&format!(
                "exited with code 1: \\[Retry here\\](https\\://evil.example/retry) \\~\\~fine\\~\\~ <U+202E>attempt {n}"
            )),
            "{digest}"
        );
    }
    assert_inert("the digest", &digest);

    // `/sprint log` in Discord reads the same lines.
    let log = fake.slash(STRANGER, &[], &["sprint", "log"], json!({"id": "1"}));
    let answer = fake.wait_for_responses(log.id, 2, PATIENCE).await;
    let said = answer[1].content().unwrap_or_default();
    assert!(said.contains("\\[Retry here\\]"), "{said}");
    assert_inert("/sprint log", said);
    bot.stop().await;
    p.stop().await;
}
