//! What a run's end was: the interruption, the exit status and the output turned into
//! exactly one outcome, with the detail a person needs to act.

use std::time::Duration;

use super::process::{self, SharedCapture};
use super::{RunOutcome, RunReport, RunRequest, Stop, tail_text};
use crate::git::facts;
use crate::handoff::message::{ChecklistItem, HandoffMessage, Usage, Verdict};
use crate::handoff::validate::{
    Problem, envelope_status, extract_message, parse_output, validate_value,
};

/// Why the wait for the child ended before it exited by itself.
pub(super) enum Interruption {
    Stopped(Stop),
    TimedOut,
    Stalled,
    OverCap,
}

/// The report of a run whose sister (process group `pgid`) is gone.
pub(super) async fn report(
    req: &RunRequest,
    pgid: u32,
    status: std::io::Result<std::process::ExitStatus>,
    interruption: Option<Interruption>,
    stdout: &SharedCapture,
    stderr: &SharedCapture,
) -> RunReport {
    let spec = &req.spec;
    let (out, out_total, out_over) = process::take(stdout);
    let (err, err_total, _) = process::take(stderr);
    let mut report = RunReport {
        outcome: RunOutcome::Handoff,
        detail: String::new(),
        exit_code: None,
        signal: None,
        pid: Some(pgid),
        duration: Duration::ZERO,
        stdout_tail: tail_text(&out),
        stderr_tail: tail_text(&err),
        stdout_bytes: out_total,
        stderr_bytes: err_total,
        message: None,
        problems: Vec::new(),
        usage: None,
        resume_at_ms: None,
        session_id: None,
        check: None,
    };
    match &status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            report.exit_code = s.code();
            report.signal = s.signal();
        }
        Err(e) => tracing::warn!(error = %e, "could not wait for the sister"),
    }

    let over_cap_seen = out_over || matches!(interruption, Some(Interruption::OverCap));
    match interruption {
        Some(Interruption::Stopped(Stop::Abort)) => {
            report.outcome = RunOutcome::Cancelled;
            report.detail = "stopped by a user's abort".into();
        }
        Some(Interruption::Stopped(Stop::Handoff)) => {
            report.outcome = RunOutcome::HandedOff;
            report.detail = "stopped by a user's handoff: a fresh session continues".into();
        }
        Some(Interruption::Stopped(Stop::Shutdown)) => {
            report.outcome = RunOutcome::Interrupted;
            report.detail = "the orchestrator shut down while it ran".into();
        }
        Some(Interruption::TimedOut) => {
            report.outcome = RunOutcome::Timeout;
            report.detail = format!(
                "timed out after {} (agent.{}.timeout)",
                humantime::format_duration(spec.timeout),
                spec.actor
            );
        }
        Some(Interruption::Stalled) => {
            let stall = spec.stall_timeout.unwrap_or_default();
            report.outcome = RunOutcome::Timeout;
            report.detail = format!(
                "stalled: nothing on stdout or stderr for {} (stall_timeout)",
                humantime::format_duration(stall)
            );
        }
        Some(Interruption::OverCap) | None if over_cap_seen => {
            report.outcome = RunOutcome::BadOutput;
            report.detail = format!(
                "output too large: more than {} bytes on stdout (max_output_bytes); the sister was stopped",
                spec.max_output_bytes
            );
        }
        Some(Interruption::OverCap) | None => match (&status, report.exit_code, report.signal) {
            (Err(e), _, _) => {
                report.outcome = RunOutcome::ExitNonzero;
                report.detail = format!("could not learn how the sister exited: {e}");
            }
            (Ok(_), Some(0), _) => classify_output(req, &out, &mut report).await,
            (Ok(_), Some(code), _) => {
                report.outcome = RunOutcome::ExitNonzero;
                report.detail = format!("exited with code {code}");
                report.detail.push_str(&last_words(&report.stderr_tail));
                // A CLI that failed may still have said why in its envelope.
                if let Some(status) = parse_output(&out, spec.max_output_bytes)
                    .ok()
                    .as_ref()
                    .and_then(envelope_status)
                {
                    report
                        .detail
                        .push_str(&format!(" (the envelope says {status})"));
                }
            }
            (Ok(_), None, Some(signal)) => {
                report.outcome = RunOutcome::ExitNonzero;
                report.detail = format!("killed by {}", process::signal_name(signal));
                report.detail.push_str(&last_words(&report.stderr_tail));
            }
            (Ok(_), None, None) => {
                report.outcome = RunOutcome::ExitNonzero;
                report.detail = "exited without a code or a signal".into();
            }
        },
    }
    // What the CLI says the run cost counts whatever came of it: a failed run spent too.
    if let Ok(envelope) = parse_output(&out, spec.max_output_bytes) {
        report.usage = envelope_usage(&envelope, &spec.usage);
        report.session_id = envelope_session(&envelope, spec.session_pointer.as_deref());
    }
    // An agent that failed because it hit its usage limit is not failing: it waits.
    if matches!(
        report.outcome,
        RunOutcome::ExitNonzero | RunOutcome::BadOutput | RunOutcome::Timeout
    ) && let Some((resume_at_ms, said)) =
        super::pause::usage_limit(spec, &out, &err, crate::clock::now_ms())
    {
        report.outcome = RunOutcome::Paused;
        report.detail = format!(
            "usage limit: {said}; resumes at {}",
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH
                    + Duration::from_millis(u64::try_from(resume_at_ms).unwrap_or(0))
            )
        );
        report.resume_at_ms = Some(resume_at_ms);
    }
    report
}

/// What a failed sister said last: `: <its last non-empty stderr line>`, cut to a length
/// a status line can carry, or nothing when it said nothing.
fn last_words(stderr: &str) -> String {
    const MAX_CHARS: usize = 300;
    let Some(line) = stderr.lines().map(str::trim).rfind(|l| !l.is_empty()) else {
        return String::new();
    };
    match line.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!(": {}…", &line[..cut]),
        None => format!(": {line}"),
    }
}

/// The output of a sister that exited 0: a valid message whose claims hold, or bad output.
/// The message is at `output_pointer` in the stdout envelope, else (when nothing is there)
/// in the string at `fallback_pointer`; the envelope's own usage figures count over the
/// message's.
async fn classify_output(req: &RunRequest, stdout: &[u8], report: &mut RunReport) {
    let spec = &req.spec;
    let envelope = match parse_output(stdout, spec.max_output_bytes) {
        Ok(envelope) => envelope,
        Err(problem) => return bad_output(report, vec![problem]),
    };
    // Nothing (or null) where the message should be: the fallback, when it holds exactly
    // one JSON value; otherwise the miss at `output_pointer` is what is reported.
    let missing = !spec.output_pointer.is_empty()
        && envelope
            .pointer(&spec.output_pointer)
            .is_none_or(serde_json::Value::is_null);
    let fallback = spec
        .fallback_pointer
        .as_deref()
        .filter(|_| missing)
        .filter(|p| {
            envelope
                .pointer(p)
                .is_some_and(serde_json::Value::is_string)
        })
        .and_then(|p| extract_message(envelope.clone(), p).ok().map(|v| (p, v)));
    let (fallback, extracted) = match fallback {
        Some((pointer, value)) => (Some(pointer), Ok(value)),
        None if missing => (
            None,
            Err(Problem::new(
                spec.output_pointer.as_str(),
                format!(
                    "nothing at output_pointer {:?} in the sister's stdout JSON",
                    spec.output_pointer
                ),
            )),
        ),
        None => (
            None,
            extract_message(envelope.clone(), &spec.output_pointer),
        ),
    };
    let value = match extracted {
        Ok(value) => value,
        Err(mut problem) => {
            // Nothing where the message should be: what the CLI says of the run tells why
            // (a turn limit, an error), which "nothing at /structured_output" does not.
            if let Some(status) = envelope_status(&envelope) {
                problem
                    .message
                    .push_str(&format!("; the envelope says {status}"));
            }
            return bad_output(report, vec![problem]);
        }
    };
    match validate_value(value, None) {
        Ok(valid) => {
            if let Some(payload) = valid.message.implementation()
                && let Err(reason) = facts::check_impl_claim(&req.repo, payload).await
            {
                report.outcome = RunOutcome::BadOutput;
                report.detail = format!("the IMPL_DONE claim does not hold: {reason}");
                return;
            }
            if let (Some(_), Some(head)) = (valid.message.review(), &req.contract.head)
                && let Err(reason) =
                    crate::git::branch::unmoved(&req.repo, &req.contract.branch, head).await
            {
                report.outcome = RunOutcome::BadOutput;
                report.detail = reason;
                return;
            }
            if let Some(problem) = unreported_contract(&req.contract.checklist, &valid.message) {
                return bad_output(report, vec![problem]);
            }
            report.outcome = RunOutcome::Handoff;
            report.detail = format!("{} {}", valid.message.actor(), valid.message.verdict());
            if let Some(pointer) = fallback {
                report.detail.push_str(&format!(
                    " (taken from {pointer}: nothing was at {})",
                    spec.output_pointer
                ));
            }
            report.message = Some(valid);
        }
        Err(problems) => bad_output(report, problems),
    }
}

/// An APPROVE must report on every item of the sprint's contract: the items it leaves
/// out of `checklistResults`, as the problem its repair is told.
fn unreported_contract(contract: &[ChecklistItem], message: &HandoffMessage) -> Option<Problem> {
    let review = message.review()?;
    if message.verdict() != Verdict::Approve {
        return None;
    }
    let reported = &review.checklist_results;
    let missing: Vec<&str> = contract
        .iter()
        .map(|item| item.id.as_str())
        .filter(|id| !reported.iter().any(|r| r.id == *id))
        .collect();
    (!missing.is_empty()).then(|| {
        Problem::new(
            "/payload/checklistResults",
            format!(
                "APPROVE leaves contract items out of checklistResults: {}",
                missing.join(", ")
            ),
        )
    })
}

fn bad_output(report: &mut RunReport, problems: Vec<Problem>) {
    report.outcome = RunOutcome::BadOutput;
    let first = problems
        .first()
        .map_or_else(|| "invalid output".to_string(), ToString::to_string);
    report.detail = match problems.len() {
        0 | 1 => first,
        n => format!("{first} (and {} more)", n - 1),
    };
    report.problems = problems;
}

/// The session the CLI names in its envelope: an id of letters, digits, `-`, `_` and `.`
/// (it goes back to the CLI as an argument), at most 128 of them.
fn envelope_session(envelope: &serde_json::Value, pointer: Option<&str>) -> Option<String> {
    let id = envelope.pointer(pointer?)?.as_str()?;
    let fits = (1..=128).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    fits.then(|| id.to_string())
}

/// The usage the CLI reported in its envelope, at the configured pointers; `None` when it
/// reported none there.
fn envelope_usage(
    envelope: &serde_json::Value,
    at: &crate::config::UsagePointers,
) -> Option<Usage> {
    let find = |pointer: &Option<String>| pointer.as_deref().and_then(|p| envelope.pointer(p));
    let usage = Usage {
        input_tokens: find(&at.input_tokens).and_then(serde_json::Value::as_u64),
        output_tokens: find(&at.output_tokens).and_then(serde_json::Value::as_u64),
        cost_usd: find(&at.cost_usd)
            .and_then(serde_json::Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0),
    };
    (usage != Usage::default()).then_some(usage)
}
