//! A usage limit is not a stop, with the real CLIs: Claude Code at its limit hands the
//! stage to Codex.

use super::*;

/// Claude Code at its usage limit (the fake model answers with the limit text Claude Code
/// really gets) hands the implementer's stage to Codex at once, in the same attempt; Codex
/// delivers it, and the console and `sprint log` name both agents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent CLIs from npm: scripts/test runs it (cargo test -- --include-ignored)"]
async fn claude_code_at_its_usage_limit_falls_back_to_codex() {
    let model = FakeModel::start().await;
    model.limit("narang", 1);
    let bench =
        Bench::with("claude-code", "fallback = [\"codex\"]\n", "claude", &model).with_codex(&model);
    let out = bench
        .hanarang(&["run", "add a greeting file", "--auto-approve"])
        .await;
    run_ok(&out);
    let log = bench.assert_delivered("SPRINT-001", &model).await;
    let narang: Vec<(&Value, &Value, &Value)> = log["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["actor"] == "narang")
        .map(|r| (&r["agent"], &r["outcome"], &r["attempt"]))
        .collect();
    assert_eq!(
        narang,
        [
            (
                &Value::from("claude-code"),
                &Value::from("paused"),
                &Value::from(1)
            ),
            (
                &Value::from("codex"),
                &Value::from("handoff"),
                &Value::from(1)
            ),
        ],
        "{log:#}"
    );
    let console = String::from_utf8_lossy(&out.stdout);
    assert!(
        console.contains("⏭️ Narang: Claude Code is at its usage limit until")
            && console.contains("; continuing with Codex"),
        "run said so: {console}"
    );
    let text = bench.hanarang(&["sprint", "log", "SPRINT-001"]).await;
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("agent claude-code") && text.contains("agent codex"),
        "{text}"
    );
    // Codex spoke the Responses API: the stage really went to it.
    assert!(
        model
            .requests()
            .iter()
            .any(|r| r.actor.as_deref() == Some("narang") && r.path.ends_with("/responses")),
        "Codex took the stage over"
    );
}
