//! `sprint log`: a sprint's transitions, commands, contract, checks and runs, and one
//! run's capture.

use crate::domain::Stage;
use std::time::Duration;

use serde_json::json;

use super::{STDERR_LINES, failed, no_sprint, time};
use crate::config::Config;
use crate::domain::parse_run_id;
use crate::notify::messages::{Context, one_line, render};
use crate::output::escape_controls;
use crate::output::{Exit, print_json};
use crate::store::{
    CheckRecord, Command, CommandKind, CommandStatus, ContractItem, Run, Sprint, Store, StoreError,
    TransitionRecord, Usage,
};
use crate::{errln, out, outln};

/// What `sprint log --run` prints of a run's capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    Both,
    Stdout,
    Stderr,
}

/// `sprint log ID [--json]`.
pub async fn log(store: &Store, config: &Config, id: &str, as_json: bool) -> Exit {
    let sprint = match store.sprint(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return no_sprint(id),
        Err(e) => return failed(&e),
    };
    let history = match History::read(store, id).await {
        Ok(history) => history,
        Err(e) => return failed(&e),
    };
    if as_json {
        return print_json(&log_json(store, &sprint, &history));
    }
    print_heading(&sprint);
    print_contract(&history.contract);
    print_transitions(config, &sprint, &history.transitions);
    let (notes, steering): (Vec<&Command>, Vec<&Command>) = history
        .commands
        .iter()
        .partition(|c| c.kind == CommandKind::Note);
    print_commands(&steering);
    print_notes(&notes);
    print_usage(&history.usage);
    print_runs(&history.runs);
    print_artifacts(store, &history.runs);
    print_checks(&history.checks);
    Exit::Success
}

/// What the database holds of a sprint, as `sprint log` shows it.
struct History {
    transitions: Vec<TransitionRecord>,
    runs: Vec<Run>,
    usage: Usage,
    commands: Vec<Command>,
    /// The planner's checklist, with the latest review's result on each item.
    contract: Vec<ContractItem>,
    checks: Vec<CheckRecord>,
}

impl History {
    /// The sprint's history from the database; the first error it gave, if any.
    async fn read(store: &Store, id: &str) -> Result<History, StoreError> {
        let (transitions, runs, usage, commands) = match (
            store.transitions(id).await,
            store.runs(id).await,
            store.usage(id).await,
            store.commands_of(id).await,
        ) {
            (Ok(t), Ok(r), Ok(u), Ok(c)) => (t, r, u, c),
            (Err(e), _, _, _) | (_, Err(e), _, _) | (_, _, Err(e), _) | (_, _, _, Err(e)) => {
                return Err(e);
            }
        };
        let contract = crate::store::contract_results(&runs, &transitions);
        let checks = store.checks(id).await?;
        Ok(History {
            transitions,
            runs,
            usage,
            commands,
            contract,
            checks,
        })
    }
}

/// Everything `sprint log --json` gives, in its fields' order.
fn log_json(store: &Store, sprint: &Sprint, history: &History) -> serde_json::Value {
    let mut out = json!({
        "id": sprint.id,
        "state": sprint.state,
        "project": sprint.project,
        "goal": sprint.goal,
        "round": sprint.round,
        "attempt": sprint.attempt,
        "branch": sprint.branch,
        "base_branch": sprint.base_branch,
        "base_commit": sprint.base_commit,
        "started_by": sprint.started_by,
        "checklist": checklist_json(&history.contract),
        "transitions": history.transitions,
        "runs": history.runs,
        "commands": history.commands,
        "notes": notes_json(&history.commands),
        "checks": history.checks,
        "artifacts": artifacts(store, &history.runs)
            .into_iter()
            .map(|(run, dir, files)| json!({ "run": run, "dir": dir, "files": files }))
            .collect::<Vec<_>>(),
        "usage": history.usage,
    });
    // Only while it waits for a person's word beyond an approval (older outputs had none).
    if let Some(waiting) = crate::store::waiting_for(&history.transitions) {
        out["waiting"] = json!(waiting);
    }
    out
}

/// The notes people left for the sisters, as `--json` gives them: who wrote each, when,
/// and which run it was given to.
fn notes_json(commands: &[Command]) -> Vec<serde_json::Value> {
    commands
        .iter()
        .filter(|c| c.kind == CommandKind::Note)
        .map(|c| {
            json!({
                "id": c.id,
                "by": c.by,
                "text": c.text,
                "at": c.created_at,
                "status": c.status,
                "delivered_run": c.delivered_run,
            })
        })
        .collect()
}

/// The sprint's id and goal, its state, round, attempt, project and branch, where it
/// branched from and who started it.
fn print_heading(sprint: &Sprint) {
    outln!("{} · {}", sprint.id, escape_controls(&sprint.goal));
    outln!(
        "{} (round {}, attempt {}), project {}, branch {}\n",
        sprint.state,
        sprint.round,
        sprint.attempt,
        sprint.project,
        escape_controls(&sprint.branch)
    );
    if let (Some(branch), Some(commit)) = (&sprint.base_branch, &sprint.base_commit) {
        outln!(
            "Branched from {} at {}\n",
            escape_controls(branch),
            escape_controls(commit)
        );
    }
    if let Some(by) = &sprint.started_by {
        outln!("Started by {}\n", escape_controls(by));
    }
}

/// The planner's checklist with the latest review's result on each item; nothing
/// without a contract.
fn print_contract(contract: &[ContractItem]) {
    if contract.is_empty() {
        return;
    }
    outln!(
        "Contract ({}'s checklist, with the latest review's result):",
        Stage::Planning.actor()
    );
    for c in contract {
        outln!(
            "  {} {}: {}",
            contract_mark(c.passed),
            escape_controls(&c.item.id),
            escape_controls(&one_line(&c.item.text))
        );
    }
    outln!();
}

/// Each transition: when, from which state to which, what it means, and who made it.
fn print_transitions(config: &Config, sprint: &Sprint, transitions: &[TransitionRecord]) {
    outln!("Transitions:");
    let cx = Context::new(config, sprint);
    for t in transitions {
        let by =
            t.by.as_deref()
                .map(|by| format!("  (by {})", escape_controls(by)))
                .unwrap_or_default();
        outln!(
            "  #{:<3} {}  {:>12} → {:<12} {}{by}",
            t.seq,
            time(t.at),
            t.from.as_str(),
            t.to.as_str(),
            escape_controls(&render(t, &cx).text)
        );
    }
}

/// The commands people gave the sprint: when, which, by whom, and what became of them.
fn print_commands(steering: &[&Command]) {
    if !steering.is_empty() {
        outln!("\nCommands:");
    }
    for c in steering {
        let answer = c
            .result
            .as_deref()
            .map(|r| format!(": {}", escape_controls(&one_line(r))))
            .unwrap_or_default();
        outln!(
            "  #{:<3} {}  {:<15} by {}  {}{answer}",
            c.id,
            time(c.created_at),
            c.kind.as_str(),
            escape_controls(&c.by),
            c.status.as_str()
        );
    }
}

/// The notes people left: when, by whom, which run was given each, and what it said.
fn print_notes(notes: &[&Command]) {
    if !notes.is_empty() {
        outln!("\nNotes:");
    }
    for c in notes {
        let given = match (&c.delivered_run, c.status) {
            (Some(run), _) => format!("given to {run}"),
            (None, CommandStatus::Refused) => "not given (refused)".to_string(),
            (None, _) => "for the next run".to_string(),
        };
        outln!(
            "  #{:<3} {}  by {}  {given}: {}",
            c.id,
            time(c.created_at),
            escape_controls(&c.by),
            escape_controls(&one_line(c.text.as_deref().unwrap_or_default()))
        );
    }
}

/// The sprint's spend and tokens, in all and by sister.
fn print_usage(usage: &Usage) {
    outln!(
        "\nUsage: ${:.2}, {} input and {} output tokens",
        usage.total.cost_usd,
        usage.total.input_tokens,
        usage.total.output_tokens
    );
    for (sister, spend) in &usage.by_sister {
        outln!(
            "  {sister:<7} ${:.2}, {} input and {} output tokens",
            spend.cost_usd,
            spend.input_tokens,
            spend.output_tokens
        );
    }
}

/// Each run, with the document it was given and the end of what it said.
fn print_runs(runs: &[Run]) {
    outln!("\nRuns (each given the document of its parent):");
    for r in runs {
        print_run(r);
    }
}

/// Each run's artifact folder that holds something, with its files.
fn print_artifacts(store: &Store, runs: &[Run]) {
    let kept = artifacts(store, runs);
    if !kept.is_empty() {
        outln!("\nArtifacts (what runs kept in their own folder):");
    }
    for (run, dir, files) in kept {
        outln!(
            "  {run:<16} {}: {}",
            dir.display(),
            escape_controls(&files.join(", "))
        );
    }
}

/// The project's checks, one each with the last line it printed.
fn print_checks(checks: &[CheckRecord]) {
    if !checks.is_empty() {
        outln!(
            "\nChecks (the project's check, run after {}'s IMPL_DONE):",
            Stage::Implementing.actor()
        );
    }
    for c in checks {
        print_check(c);
    }
}

/// The contract as `--json` gives it: `[{ id, text, passed }]`.
pub fn checklist_json(contract: &[crate::store::ContractItem]) -> Vec<serde_json::Value> {
    contract
        .iter()
        .map(|c| json!({ "id": c.item.id, "text": c.item.text, "passed": c.passed }))
        .collect()
}

/// ✅ passed, ❌ failed, · not reviewed yet.
pub fn contract_mark(passed: Option<bool>) -> &'static str {
    match passed {
        Some(true) => "✅",
        Some(false) => "❌",
        None => "·",
    }
}

/// How a check ended, in a few words.
pub fn check_ended(c: &CheckRecord) -> String {
    match c.exit_code {
        Some(0) => "passed".to_string(),
        Some(code) => format!("failed (exit code {code})"),
        None => "failed (killed, no exit code)".to_string(),
    }
}

/// How many tests a check's output says failed: the sum over libtest's `test result:`
/// lines (one per test binary), else the last line that counts `N failed` (pytest, jest,
/// go's summary alike). `None`: it says no count.
pub fn failed_tests(output: &str) -> Option<u64> {
    let count = |line: &str| -> Option<u64> {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
            .collect();
        words.windows(2).find_map(|w| {
            (w[1].trim_end_matches('.') == "failed")
                .then(|| w[0].parse::<u64>().ok())
                .flatten()
        })
    };
    let libtest: Vec<u64> = output
        .lines()
        .filter(|l| l.trim_start().starts_with("test result:"))
        .filter_map(count)
        .collect();
    if !libtest.is_empty() {
        return Some(libtest.iter().sum());
    }
    output.lines().rev().find_map(count)
}

/// One check: its run, how it ended, how long it took, the commit, the command, and the
/// last line it printed.
fn print_check(c: &CheckRecord) {
    let ended = check_ended(c);
    let took = humantime::format_duration(Duration::from_millis(
        u64::try_from(c.duration_ms).unwrap_or(0) / 100 * 100,
    ));
    let head = c
        .head
        .as_deref()
        .map_or("(no git)", |h| h.get(..12).unwrap_or(h));
    let base = if c.at_base { " (the base)" } else { "" };
    outln!(
        "  {:<16} {} {ended:<30} {took:<8} at {head}{base}  `{}`",
        c.run_id,
        time(c.at),
        escape_controls(&crate::domain::shell_line(&c.command))
    );
    if let Some(last) = c.output_tail.lines().rfind(|l| !l.trim().is_empty()) {
        outln!("      │ {}", escape_controls(last));
    }
}

/// Each run's artifact folder that holds something: the run, the folder, its files
/// (relative, sorted).
fn artifacts(store: &Store, runs: &[Run]) -> Vec<(String, std::path::PathBuf, Vec<String>)> {
    runs.iter()
        .filter_map(|r| {
            let dir = store.artifact_dir(&r.run_id);
            let mut files = Vec::new();
            list_files(&dir, &dir, &mut files);
            files.sort();
            (!files.is_empty()).then(|| (r.run_id.clone(), dir, files))
        })
        .collect()
}

/// The files under `dir`, as paths relative to `root`; what cannot be read is left out.
fn list_files(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => list_files(root, &path, out),
            Ok(_) => out.push(
                path.strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
            ),
            Err(_) => {}
        }
    }
}

fn print_run(r: &Run) {
    let outcome = r.outcome.map_or("running", |o| o.as_str());
    let took = r
        .duration_ms
        .map(|ms| {
            humantime::format_duration(Duration::from_millis(
                u64::try_from(ms).unwrap_or(0) / 100 * 100,
            ))
            .to_string()
        })
        .unwrap_or_default();
    let parent = r
        .parent_run_id
        .as_deref()
        .map_or_else(|| "(start)".to_string(), |p| format!("← {p}"));
    let document = if r.synthesized {
        "composed"
    } else {
        "from sister"
    };
    // One of several reviewers of a round: `<reviewer>/NAME`.
    let who = match &r.reviewer {
        Some(name) => format!("{}/{name}", r.actor.as_str()),
        None => r.actor.as_str().to_string(),
    };
    // A retry that continued an earlier run's agent session.
    let resumed = r
        .resumes
        .as_deref()
        .map_or(String::new(), |from| format!(", resumes {from}'s session"));
    // Which agent ran it: a usage limit may have handed the stage to another.
    let agent = r
        .agent
        .as_deref()
        .map_or(String::new(), |a| format!("agent {}, ", escape_controls(a)));
    outln!(
        "  {:<16} {:<7} round {} attempt {}  {:<18} {:<8} {parent} ({agent}document {document}{resumed})",
        r.run_id,
        who,
        r.round,
        r.attempt,
        outcome,
        took
    );
    let Some(outcome) = r.outcome else {
        return;
    };
    if outcome == crate::domain::RunOutcome::Handoff {
        return;
    }
    if let Some(detail) = &r.detail {
        outln!("      {}", escape_controls(&one_line(detail)));
    }
    // What the sister said about it: the end of its log.
    let stderr = r.stderr_tail.as_deref().unwrap_or_default();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        outln!("      (nothing on stderr)");
        return;
    }
    let shown = &lines[lines.len().saturating_sub(STDERR_LINES)..];
    outln!(
        "      stderr, last {} of {} lines (all of it: --run {} --stderr):",
        shown.len(),
        lines.len(),
        r.run_id
    );
    for line in shown {
        outln!("      │ {}", escape_controls(line));
    }
}

/// `sprint log ID --run RUN`: one run's capture as the database kept it (the last 64 KiB
/// of each stream), raw with `--stdout` or `--stderr`.
pub async fn run_capture(store: &Store, id: &str, run: &str, capture: Capture) -> Exit {
    let runs = match store.runs(id).await {
        Ok(runs) => runs,
        Err(e) => return failed(&e),
    };
    let wanted = parse_run_id(id, run);
    let Some(r) = runs.iter().find(|r| r.run_id == wanted) else {
        return match store.sprint(id).await {
            Ok(None) => no_sprint(id),
            Err(e) => failed(&e),
            Ok(Some(_)) => {
                let known: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
                errln!(
                    "{id} has no run {wanted}; its runs: {}",
                    if known.is_empty() {
                        "none yet".to_string()
                    } else {
                        known.join(", ")
                    }
                );
                Exit::Failure
            }
        };
    };
    let stdout = r.stdout_tail.as_deref().unwrap_or_default();
    let stderr = r.stderr_tail.as_deref().unwrap_or_default();
    match capture {
        // Raw, for a pipe or a file: exactly what was kept.
        Capture::Stdout => out!("{stdout}"),
        Capture::Stderr => out!("{stderr}"),
        Capture::Both => {
            print_run(r);
            for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
                outln!("\n{name} ({} bytes kept):", text.len());
                for line in text.lines() {
                    outln!("│ {}", escape_controls(line));
                }
            }
        }
    }
    Exit::Success
}

#[cfg(test)]
mod tests {
    use super::failed_tests;

    #[test]
    fn a_test_runners_count_of_failures_is_read() {
        let cargo = "test result: ok. 4 passed; 0 failed; 0 ignored\nfailures:\n    a\ntest result: FAILED. 9 passed; 3 failed; 0 ignored; 0 measured\nerror: test failed";
        assert_eq!(failed_tests(cargo), Some(3));
        assert_eq!(
            failed_tests("==== 2 failed, 7 passed in 0.1s ===="),
            Some(2)
        );
        assert_eq!(failed_tests("Diff in src/lib.rs at line 3"), None);
        assert_eq!(failed_tests("the build failed"), None);
    }
}
