//! The project's own check (`check`), run by the orchestrator once the implementer's
//! `IMPL_DONE` holds: like a sister (no shell, its own process group, bounded output,
//! the whole group killed at `check_timeout` or a stop), so "the tests pass" is a fact.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::unix::pipe;
use tokio::time::Instant;

use super::Stopper;
use super::container::Container;
use super::contract::CheckResult;
use super::launch::{Io, Launch};
use super::process::{self, Activity, SharedCapture};
use super::{RunOutcome, RunReport, RunRequest, Stop, tail_text};
use crate::domain::Verdict;
use crate::git::facts;

/// How many lines of the check's output its failure quotes.
pub const TAIL_LINES: usize = 40;

/// The project's check, as a run of the implementer is given it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The program and its arguments (never empty: config checks it).
    pub command: Vec<String>,
    pub timeout: Duration,
}

/// How a check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckEnd {
    Exited(i32),
    Signalled(i32),
    TimedOut(Duration),
    /// A user's abort or handoff, or the orchestrator's shutdown, stopped it.
    Stopped(Stop),
    /// It could not be started (or waited for): why.
    Unstarted(String),
}

/// One check, as it is recorded and told.
#[derive(Debug, Clone)]
pub struct CheckReport {
    pub command: Vec<String>,
    /// The workdir's HEAD it checked, when the workdir is a git repository.
    pub head: Option<String>,
    pub end: CheckEnd,
    pub duration: Duration,
    /// The last `TAIL_LINES` lines of stdout and stderr, as written.
    pub output_tail: String,
    /// Run at the sprint's base commit, before the sister (`RunRequest::base_check`).
    pub at_base: bool,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.end == CheckEnd::Exited(0)
    }

    /// The exit code, when it exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        match self.end {
            CheckEnd::Exited(code) => Some(code),
            _ => None,
        }
    }

    /// How it failed, in words (`exited with code 101 after 12s`); `None` when it passed.
    pub fn failure(&self, project: &str) -> Option<String> {
        let took = humantime::format_duration(round_ms(self.duration));
        match &self.end {
            CheckEnd::Exited(0) => None,
            CheckEnd::Exited(code) => Some(format!("exited with code {code} after {took}")),
            CheckEnd::Signalled(signal) => Some(format!(
                "was killed by {} after {took}",
                process::signal_name(*signal)
            )),
            CheckEnd::TimedOut(limit) => Some(format!(
                "timed out after {} (projects.{project}.check_timeout)",
                humantime::format_duration(*limit),
            )),
            CheckEnd::Unstarted(why) => Some(format!("could not run: {why}")),
            CheckEnd::Stopped(_) => Some(format!("was stopped after {took}")),
        }
    }

    /// `sh -c 'cargo fmt --check && cargo test'`: as a shell reads it back.
    pub fn command_line(&self) -> String {
        crate::domain::shell_line(&self.command)
    }
}

/// Whether a run's end is one the project's check is run on: the implementer's
/// `IMPL_DONE`, its claims holding.
pub(super) fn applies(report: &RunReport) -> bool {
    report.outcome == RunOutcome::Handoff
        && (report.message.as_ref()).is_some_and(|v| v.message.verdict() == Verdict::ImplDone)
}

/// Runs the check for `req`'s run and folds what came of it into `report`: passed, the
/// handoff stands; otherwise `check_failed` (or what a stop makes of the run).
pub(super) async fn run_and_judge(
    req: &RunRequest,
    check: &Check,
    container: Option<&Container>,
    stop: &mut Stopper,
    report: &mut RunReport,
) {
    let span =
        tracing::info_span!("check", sprint = %req.contract.sprint_id, run = %req.contract.run_id);
    let done = tracing::Instrument::instrument(run(req, check, container, stop), span).await;
    tracing::info!(sprint = %req.contract.sprint_id, run = %req.contract.run_id, end = ?done.end, "check ended");
    let line = done.command_line();
    let took = humantime::format_duration(round_ms(done.duration));
    let how = match &done.end {
        // What a stop makes of the run, as if the sister were still at work.
        CheckEnd::Stopped(reason) => {
            (report.outcome, report.detail) = match reason {
                Stop::Abort => (
                    RunOutcome::Cancelled,
                    format!("stopped by a user's abort during the check `{line}`"),
                ),
                Stop::Handoff => (
                    RunOutcome::HandedOff,
                    format!(
                        "stopped by a user's handoff during the check `{line}`: a fresh session continues"
                    ),
                ),
                Stop::Shutdown => (
                    RunOutcome::Interrupted,
                    format!("the orchestrator shut down during the check `{line}`"),
                ),
            };
            report.check = Some(done);
            return;
        }
        _ => done.failure(&req.contract.project),
    };
    match how {
        None => report
            .detail
            .push_str(&format!("; check `{line}` passed in {took}")),
        Some(how) => {
            // The last line first: a status line cut to one line still shows it.
            let tail = done.output_tail.trim_end();
            let output = match tail.lines().rfind(|l| !l.trim().is_empty()) {
                None => "it printed nothing".to_string(),
                Some(last) => format!(
                    "its last line: {}; the last {} lines of its output:\n{tail}",
                    last.trim(),
                    tail.lines().count()
                ),
            };
            report.outcome = RunOutcome::CheckFailed;
            report.detail = format!("check `{line}` {how}; {output}");
        }
    }
    report.check = Some(done);
}

/// A duration shown to people: whole milliseconds.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Runs the check to its end in the workdir; every path ends with its group gone.
pub(super) async fn run(
    req: &RunRequest,
    check: &Check,
    container: Option<&Container>,
    stop: &mut Stopper,
) -> CheckReport {
    let started = Instant::now();
    let head = facts::head(&req.repo).await;
    let mut done = CheckReport {
        command: check.command.clone(),
        head,
        end: CheckEnd::Unstarted("the check is empty".into()),
        duration: Duration::ZERO,
        output_tail: String::new(),
        at_base: false,
    };
    let Some((program, args)) = check.command.split_first() else {
        return done;
    };
    // stdout and stderr share one pipe, as `2>&1` would: its tail is what a person running
    // the check in a terminal would have seen last, in order.
    let ends = std::io::pipe().and_then(|(reader, out)| Ok((reader, out.try_clone()?, out)));
    let (reader, err_end, out_end) = match ends {
        Ok(ends) => ends,
        Err(e) => {
            done.end = CheckEnd::Unstarted(format!("cannot make a pipe for its output: {e}"));
            return done;
        }
    };
    // Its run's container holds it, so a check left behind by a crash is found and
    // stopped at recovery like the sister's own processes.
    let mut command = Launch::new(program);
    command
        .args(args)
        .current_dir(&req.workdir)
        .env_remove(&req.token_env)
        .env("HANARANG_SPRINT_ID", &req.contract.sprint_id)
        .env("HANARANG_RUN_ID", &req.contract.run_id)
        .env("HANARANG_CONTRACT_FILE", &req.contract_path)
        .stdin(Io::Null)
        .stdout(Io::Fd(OwnedFd::from(out_end)))
        .stderr(Io::Fd(OwnedFd::from(err_end)));
    if let Some(fence) = &req.fence
        && let Err(why) = fence.apply(
            &mut command,
            std::slice::from_ref(&req.contract_path),
            &req.contract.run_id,
        )
    {
        done.end = CheckEnd::Unstarted(why);
        return done;
    }
    // Our copies of the pipe's write end go with the command: the output ends when the
    // check's processes are gone.
    let spawned = command.spawn(container);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            done.end = CheckEnd::Unstarted(format!(
                "cannot start {program:?} (projects.{}.check): {e}",
                req.contract.project
            ));
            return done;
        }
    };
    let pgid = child.id();
    let output: SharedCapture = Arc::new(Mutex::new(Default::default()));
    let pipes = async {
        match pipe::Receiver::from_owned_fd(OwnedFd::from(reader)) {
            Ok(pipe) => {
                let keep = req.spec.max_output_bytes;
                process::read_tail(pipe, keep, output.clone(), Activity::new()).await;
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the check's output"),
        }
    };
    tokio::pin!(pipes);
    let mut pipes_done = false;
    let timeout = tokio::time::sleep(check.timeout);
    tokio::pin!(timeout);
    let (status, interrupted) = loop {
        tokio::select! {
            () = &mut pipes, if !pipes_done => pipes_done = true,
            status = child.wait() => break (Some(status), None),
            () = &mut timeout => break (None, Some(CheckEnd::TimedOut(check.timeout))),
            reason = stop.wait() => break (None, Some(CheckEnd::Stopped(reason))),
        }
    };
    // A check that exited may have left a server or a watcher behind: its container (or
    // its group) is emptied.
    process::end_all(pgid, container, req.spec.kill_grace).await;
    let status = match status {
        Some(status) => status,
        None => child.wait().await,
    };
    if !pipes_done {
        let _ = tokio::time::timeout(req.spec.kill_grace, &mut pipes).await;
    }
    done.end = match (interrupted, status) {
        (Some(end), _) => end,
        (None, Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => CheckEnd::Exited(code),
                (None, Some(signal)) => CheckEnd::Signalled(signal),
                (None, None) => CheckEnd::Unstarted("it ended without a code or a signal".into()),
            }
        }
        (None, Err(e)) => CheckEnd::Unstarted(format!("cannot learn how it exited: {e}")),
    };
    let (bytes, _, _) = process::take(&output);
    done.output_tail = last_lines(&tail_text(&bytes), TAIL_LINES);
    done.duration = started.elapsed();
    done
}

/// The check as a sister's contract tells it, made for `run`.
pub(super) fn result_of(done: &CheckReport, run: &str) -> CheckResult {
    CheckResult {
        run: run.to_string(),
        command: done.command.clone(),
        passed: done.passed(),
        exit_code: done.exit_code(),
        duration_ms: i64::try_from(done.duration.as_millis()).unwrap_or(i64::MAX),
        head: done.head.clone(),
        output_tail: done.output_tail.clone(),
        detail: None,
    }
}

/// The last `n` lines of `text` (the trailing line break dropped).
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end_matches('\n').lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn the_tail_is_the_last_lines() {
        let text: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        let tail = last_lines(&text, 40);
        assert!(tail.starts_with("line 11\n"), "{tail}");
        assert!(tail.ends_with("line 50"), "{tail}");
        assert_eq!(last_lines("a\nb", 40), "a\nb");
        assert_eq!(last_lines("", 40), "");
    }
}
