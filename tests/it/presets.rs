//! The agent presets shipped in `config.toml.example`, each run through the real runner
//! against a stand-in that checks the flags the preset passes and prints the tool's
//! documented envelope: the message must come out extracted and validated.

use std::path::Path;

use hanarang::config::Config;
use hanarang::handoff::message::Actor;
use hanarang::sister::{RunControl, RunOutcome, run};

use crate::support::{Fixture, preset};

fn stand_in(tool: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(tool)
        .display()
        .to_string()
}

async fn run_preset(name: &str, program: &str, pointer: &str) {
    let config =
        Config::parse(&preset(name), Path::new(".")).expect("the preset is a valid config");
    for actor in Actor::ALL {
        let mut spec = config.agent.spec(actor);
        assert_eq!(spec.program, program, "{name} runs {program}");
        assert_eq!(spec.output_pointer, pointer, "{name}'s envelope");
        spec.program = stand_in(program);
        let mut fixture = Fixture::new(actor, "valid.sh");
        spec.timeout = fixture.request.spec.timeout;
        spec.kill_grace = fixture.request.spec.kill_grace;
        fixture.request.spec = spec;
        let report = run(&fixture.request, RunControl::unattended()).await;
        assert_eq!(
            report.outcome,
            RunOutcome::Handoff,
            "{name} as {actor}: {} / stderr: {}",
            report.detail,
            report.stderr_tail
        );
        let message = report.message.expect("a validated message").message;
        assert_eq!(message.actor(), actor);
    }
}

#[tokio::test]
async fn claude_code_preset_takes_the_inline_schema_and_reads_structured_output() {
    run_preset("claude-code", "claude", "/structured_output").await;
}

#[tokio::test]
async fn codex_preset_takes_a_strict_schema_file_and_reads_the_bare_message() {
    run_preset("codex", "codex", "").await;
}

#[tokio::test]
async fn openclaw_preset_parses_the_final_text() {
    run_preset("openclaw", "openclaw", "/final").await;
}

#[test]
fn codex_preset_leaves_fencing_to_hanarang_and_writes_its_own_state() {
    // Codex's bubblewrap cannot run inside hanarang's Landlock fence (no mounts there):
    // the fence takes its place, and every sister may write Codex's home.
    let config = Config::parse(&preset("codex"), Path::new(".")).expect("a valid preset");
    for actor in Actor::ALL {
        let spec = config.agent.spec(actor);
        assert!(
            spec.args.join(" ").contains("--sandbox danger-full-access"),
            "{actor}: {:?}",
            spec.args
        );
        assert_eq!(spec.writable, ["~/.codex/"], "{actor}");
    }
}

/// Each preset's `pause_on` catches its CLI's own usage-limit text (as the installed
/// binaries print it), and not an ordinary failure.
#[test]
fn presets_pause_on_their_cli_s_usage_limit_text() {
    for (name, limited) in [
        (
            "claude-code",
            "You've hit your session limit · resets 3pm (UTC)",
        ),
        ("claude-code", "Usage limit reached · limit resets 3pm"),
        (
            "claude-code",
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · rate limited"}"#,
        ),
        (
            "codex",
            "ERROR: You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at Mar 17th, 2030 5:46 PM.",
        ),
    ] {
        let config = Config::parse(&preset(name), Path::new(".")).expect("a valid preset");
        let rules = config.agent.spec(Actor::Narang).pause_on;
        assert!(!rules.is_empty(), "{name} has pause_on");
        let matches = |text: &str| {
            rules
                .iter()
                .any(|r| regex::Regex::new(&r.pattern).unwrap().is_match(text))
        };
        assert!(matches(limited), "{name}: {limited}");
        assert!(!matches("error: the build failed"), "{name}");
    }
}
