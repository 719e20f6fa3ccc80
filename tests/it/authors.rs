//! Who gave each command is on record: the sprint's starter and every
//! command's author, as `sprint log` shows them in text and JSON.

use hanarang::pipeline::State;
use serde_json::Value;

use crate::support::pipeline::{Pipeline, Setup};

#[tokio::test(flavor = "multi_thread")]
async fn sprint_log_names_who_started_the_sprint_and_who_steered_it() {
    let p = Pipeline::start(Setup::default()).await;
    let out = p.files.hanarang(&["sprint", "start", "Add a login page"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p.wait_for("SPRINT-001", State::Done).await;
    let out = p
        .files
        .hanarang(&["sprint", "request-changes", "1", "--note", "bigger button"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p.wait_for("SPRINT-001", State::Done).await;
    let out = p.files.hanarang(&["sprint", "approve", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p.wait_for("SPRINT-001", State::Deployed).await;
    let me = crate::support::cli_author(&p.config.host.name);

    let out = p.files.hanarang(&["sprint", "log", "1", "--json"]);
    let log: Value = serde_json::from_slice(&out.stdout).expect("log JSON");
    assert_eq!(log["started_by"], me.as_str());
    let commands: Vec<(&str, &str, &str)> = log["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap_or_default(),
                c["by"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        commands,
        [
            ("request_changes", me.as_str(), "applied"),
            ("approve", me.as_str(), "applied")
        ]
    );
    let steered: Vec<(&str, &str)> = log["transitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .filter_map(|t| Some((t["event"].as_str()?, t["by"].as_str()?)))
        .collect();
    assert_eq!(
        steered,
        [("request_changes", me.as_str()), ("approve", me.as_str())]
    );

    let out = p.files.hanarang(&["sprint", "log", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("Started by {me}")), "{text}");
    assert!(text.contains(&format!("(by {me})")), "{text}");
    assert!(
        text.contains(&format!("approve         by {me}  applied")),
        "{text}"
    );
    p.stop().await;
}
