//! What a person following the thread sees while a sister works: the board's "Now:" line
//! from the sister's event stream, edited within the rate limit (a burst shows its
//! latest step, nothing is sent twice), and the project's check saying how it ended.

use hanarang::pipeline::State;

use super::*;

/// A pipeline whose implementer prints Claude Code's stream-json (`claude_stream.sh`:
/// `steps` edits, then `pytest -q test.py`, then it waits for `release`), and whose
/// project's check is `check.sh <check>`.
async fn streaming(fake: &FakeDiscord, steps: u32, check: &str) -> Pipeline {
    let files = Files::new(&Setup {
        narang: "claude-stream",
        ..Setup::default()
    });
    // The implementer is Claude Code's form: its stream read, the message in its envelope.
    let config = std::fs::read_to_string(&files.config_path).expect("the config");
    let config = config.replace(
        "[agent.narang]\nargs = [\"claude-stream\"]",
        &format!(
            "[agent.narang]\nargs = [\"claude-stream\", \"{steps}\"]\nstream = \"claude-code\"\noutput_pointer = \"/structured_output\"\nusage = {{ input_tokens = \"/usage/input_tokens\", output_tokens = \"/usage/output_tokens\", cost_usd = \"/total_cost_usd\" }}"
        ),
    );
    assert!(config.contains("stream = \"claude-code\""), "{config}");
    std::fs::write(&files.config_path, config).expect("write the config");
    let dir = files.state_dir.join("check");
    std::fs::create_dir_all(&dir).expect("the check's folder");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/checks/check.sh")
        .display()
        .to_string();
    let mut command = vec![script];
    command.extend(check.split(' ').map(str::to_string));
    command.push(dir.display().to_string());
    files.append_config(&format!(
        "check = {}\n",
        serde_json::to_string(&command).expect("a TOML array")
    ));
    files.append_config(&discord_table(fake));
    Pipeline::start_with(files).await
}

/// Every text the board (the thread's first message) was created or edited with.
fn board_versions(fake: &FakeDiscord, thread: u64) -> Vec<String> {
    fake.message(thread)
        .map(|m| {
            m.history
                .iter()
                .filter_map(|body| body["content"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_board_shows_the_running_sisters_latest_step_and_a_burst_collapses() {
    const STEPS: u32 = 40;
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = streaming(&fake, STEPS, "pass").await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    assert!(fake.wait_until(PATIENCE, |f| !f.threads().is_empty()).await);
    let thread = fake.threads()[0].id;

    // The implementer printed its 41 steps at once and waits: the board shows the last.
    assert!(
        fake.wait_until(PATIENCE, |f| board_versions(f, thread)
            .last()
            .is_some_and(|b| b.contains("지금: ▶️ pytest -q test.py")))
            .await,
        "the board shows the step: {:#?}",
        board_versions(&fake, thread)
    );
    let board = fake.message(thread).expect("the board").content;
    let now = board
        .lines()
        .find(|l| l.starts_with("지금: "))
        .expect("a Now line");
    // 41 model messages of 10 input and 1 output token each, so far.
    assert!(now.contains("451 tokens"), "{now}");
    assert_eq!(
        fake.message(thread).map(|m| m.allowed_mentions),
        Some(no_mentions())
    );

    // The run keeps the same step, and `sprint status --json` shows it.
    let runs = p.store.runs(&s.id).await.expect("runs");
    let running = runs.last().expect("narang's run");
    let live = running.live.clone().expect("a step recorded on the run");
    assert_eq!(live.step.as_deref(), Some("▶️ pytest -q test.py"));
    assert_eq!((live.input_tokens, live.output_tokens), (410, 41));
    let status: serde_json::Value = serde_json::from_str(
        &hanarang::report::status_json(&p.store)
            .await
            .expect("status"),
    )
    .expect("JSON");
    assert_eq!(
        status[0]["now"]["step"], "▶️ pytest -q test.py",
        "{status:#}"
    );
    // `sprint status` shows it in its NOW column, under its header.
    let out = p.files.hanarang(&["sprint", "status"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    let column = |line: &str, word: &str| line.find(word).map(|i| line[..i].chars().count());
    assert_eq!(
        column(lines[0], "NOW"),
        column(lines[1], "▶️ pytest -q test.py"),
        "{table}"
    );

    // A burst of 41 steps made far fewer edits than steps: the board skipped to the
    // latest, and no edit repeated the text before it.
    let versions = board_versions(&fake, thread);
    let told: Vec<&String> = versions.iter().filter(|v| v.contains("지금: ")).collect();
    assert!(
        told.len() < 10,
        "{} board edits showed a step: {told:#?}",
        told.len()
    );
    let edits_shown: usize = (1..=STEPS)
        .filter(|i| {
            versions
                .iter()
                .any(|v| v.contains(&format!("✏️ Edit src/part{i}.rs ")))
        })
        .count();
    assert!(edits_shown < 10, "{edits_shown} of {STEPS} edits shown");
    for pair in versions.windows(2) {
        assert_ne!(pair[0], pair[1], "an edit that changed nothing");
    }

    // Released, it ends with its result event: the message is read from it as from the
    // whole-output form, and the check's line comes with the next stage's.
    std::fs::write(p.files.state_dir.join("release"), "").expect("release");
    p.wait_for(&s.id, State::Done).await;
    let lines = wait_for_lines(&fake, 4).await;
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("🧪 검사 통과 (") && l.contains("\n🔍 다랑이가 리뷰 시작")),
        "{lines:#?}"
    );
    let runs = p.store.runs(&s.id).await.expect("runs");
    let narang = runs
        .iter()
        .find(|r| r.actor == hanarang::handoff::message::Actor::Narang)
        .expect("narang's run");
    assert_eq!(narang.outcome, Some(hanarang::domain::RunOutcome::Handoff));
    assert_eq!(narang.cost_usd, Some(0.42), "the result event's cost");
    // Once the run ended the board says nothing of a step.
    assert!(
        fake.wait_until(PATIENCE, |f| board_versions(f, thread)
            .last()
            .is_some_and(|b| !b.contains("지금: ")))
            .await
    );
    bot.stop().await;
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_check_posts_its_last_line_and_pings_no_one() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = streaming(&fake, 1, "fail-pinging").await;
    std::fs::write(p.files.state_dir.join("release"), "").expect("release");
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;
    assert!(
        fake.wait_until(PATIENCE, |f| texts(f)
            .iter()
            .any(|t| t.contains("❌ 검사 실패:")))
            .await,
        "{:#?}",
        texts(&fake)
    );
    let failed: Vec<FakeMessage> = line_messages(&fake)
        .into_iter()
        .filter(|m| m.content.contains("❌ 검사 실패:"))
        .collect();
    for m in &failed {
        // The check's own words, unable to ping (`@` followed by a zero-width space) and
        // inert (a mention's `<` escaped).
        assert!(
            m.content
                .contains("❌ 검사 실패: @\u{200B}everyone \\<@\u{200B}123> test broke"),
            "{}",
            m.content
        );
        let users = m.allowed_mentions["users"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            users.iter().all(|u| u.as_str() == Some(&USER.to_string())),
            "{:?}",
            m.allowed_mentions
        );
        assert_eq!(m.allowed_mentions["parse"], serde_json::json!([]));
    }
    bot.stop().await;
    p.stop().await;
}

/// Sharing a PostgreSQL database, a sister may run on another host, which tells this bot
/// nothing: the bot reads the running sisters' steps from the database within the interval.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn a_step_recorded_by_another_host_reaches_the_board() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let p = pipeline(
        Setup {
            narang: "hang-first 1",
            engine: support::db::Engine::Postgres,
            ..Setup::default()
        },
        &fake,
    )
    .await;
    let bot = Bot::start(&p, &fake).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.files
        .wait_hanging(hanarang::handoff::message::Actor::Narang)
        .await;
    let run = p.runs(&s.id).await.pop().expect("narang's run");
    assert!(fake.wait_until(PATIENCE, |f| !f.threads().is_empty()).await);
    let thread = fake.threads()[0].id;
    // The board has caught up with the implementer's start: nothing else will edit it.
    wait_for_lines(&fake, 2).await;
    assert!(
        fake.wait_until(PATIENCE, |f| board_versions(f, thread)
            .last()
            .is_some_and(|b| b.contains("⚙️ 구현")))
            .await
    );
    // Written as another host's loop writes its sister's step: through the database only.
    let step = hanarang::store::RunLive {
        step: Some("▶️ cargo test --workspace".into()),
        step_at: Some(hanarang::clock::now_ms()),
        input_tokens: 1200,
        output_tokens: 300,
        cost_usd: Some(0.02),
    };
    p.store.set_run_live(&run.run_id, &step).await.unwrap();
    assert!(
        fake.wait_until(PATIENCE, |f| board_versions(f, thread)
            .last()
            .is_some_and(|b| b.contains("▶️ cargo test --workspace")))
            .await,
        "{:#?}",
        board_versions(&fake, thread)
    );
    // The loop first: stopping the hanging sister writes to the database, whose pooled
    // connections the bot's runtime may have opened (gone with it).
    p.stop().await;
    bot.stop().await;
}
