//! The sister runner: spawns one sister as the spawn contract says (`SPEC.md` §3) and turns
//! whatever the process does into exactly one outcome.
//!
//! No shell ever runs: `program` + `args`, placeholders substituted as whole strings. The
//! sister gets its contract file, its prompt on stdin and its environment (minus the
//! Discord token). Its stdout is read with a cap, its stderr keeps only a tail, a timeout
//! or a stop kills its whole process group, and its output is validated before anything
//! believes it.

pub mod contract;
pub mod facts;
pub mod process;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

pub use contract::{ContractFile, render_prompt};

use crate::config::SisterSpec;
pub use crate::domain::RunOutcome;
use crate::handoff::message::HandoffMessage;
use crate::handoff::message::Usage;
use crate::handoff::validate::{
    Problem, Validated, envelope_status, extract_message, parse_output, validate_value,
};
use crate::placeholder;
use process::{Activity, SharedCapture};

/// How much of each stream a run record keeps.
pub const TAIL_BYTES: usize = 64 * 1024;

/// Why a user stopped a running sister.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The sprint is aborted: outcome `cancelled`.
    Abort,
    /// A fresh session takes over: outcome `handed_off`.
    Handoff,
    /// The orchestrator shuts down: outcome `interrupted`, retried after a restart.
    Shutdown,
}

/// Everything one run needs.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub spec: SisterSpec,
    pub contract: ContractFile,
    /// Where the contract file is written (its folder is created).
    pub contract_path: PathBuf,
    pub workdir: PathBuf,
    /// The Discord token variable, removed from the sister's environment.
    pub token_env: String,
}

/// How a run ended, with what the user needs to know.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub outcome: RunOutcome,
    /// The exit code or signal, the first validation problem, the timeout that fired.
    pub detail: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The sister's process (and process group) id, when it was spawned.
    pub pid: Option<u32>,
    pub duration: Duration,
    /// The last `TAIL_BYTES` of stdout and stderr, as text.
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Set when the outcome is `handoff`.
    pub message: Option<Validated>,
    /// Every problem when the outcome is `bad_output` because of the message.
    pub problems: Vec<Problem>,
    /// What the CLI's envelope reported the run cost (`[agent].usage`); it counts over the
    /// message's own `usage`.
    pub usage: Option<Usage>,
    /// With outcome `paused`: when the stage may run again (unix ms).
    pub resume_at_ms: Option<i64>,
}

impl RunReport {
    /// A run that could not even be started.
    pub fn spawn_failed(detail: String) -> RunReport {
        RunReport::early(RunOutcome::SpawnFailed, detail)
    }

    fn early(outcome: RunOutcome, detail: String) -> RunReport {
        RunReport {
            outcome,
            detail,
            exit_code: None,
            signal: None,
            pid: None,
            duration: Duration::ZERO,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            stdout_bytes: 0,
            stderr_bytes: 0,
            message: None,
            problems: Vec::new(),
            usage: None,
            resume_at_ms: None,
        }
    }
}

/// Why the wait for the child ended before it exited by itself.
enum Interruption {
    Stopped(Stop),
    TimedOut,
    Stalled,
    OverCap,
}

/// How the caller steers a run while it goes.
#[derive(Debug)]
pub struct RunControl {
    /// Stops the run; dropping the sender means it is never stopped.
    pub stop: oneshot::Receiver<Stop>,
}

impl RunControl {
    /// A run nobody will stop, and whose pid nobody needs.
    pub fn unattended() -> RunControl {
        let (_, stop) = oneshot::channel();
        RunControl { stop }
    }
}

/// Runs one sister to its end: `prepare`, then `run_prepared`. Never panics on anything
/// the child does; every path ends with the sister's whole process group gone.
pub async fn run(req: &RunRequest, control: RunControl) -> RunReport {
    match prepare(req) {
        Ok(prepared) => run_prepared(req, prepared, control).await,
        Err(report) => *report,
    }
}

/// A run's files written (the contract, and the schema files its arguments name), its
/// command built and its prompt rendered: everything before the spawn.
#[derive(Debug)]
pub struct Prepared {
    command: Command,
    prompt: String,
}

/// Writes the run's files and renders its arguments and prompt. The error is the run's
/// report (`spawn_failed`, saying which file or folder).
pub fn prepare(req: &RunRequest) -> Result<Prepared, Box<RunReport>> {
    let spec = &req.spec;
    let c = &req.contract;
    let contract_file = req.contract_path.display().to_string();
    let workdir = req.workdir.display().to_string();
    let round = c.round.to_string();
    let attempt = c.attempt.to_string();
    let schemas = match schema_inputs(req) {
        Ok(s) => s,
        Err(e) => {
            return Err(Box::new(RunReport::early(
                RunOutcome::SpawnFailed,
                format!("cannot write the schema files beside {contract_file}: {e}"),
            )));
        }
    };
    let values = [
        ("role", c.role.as_str()),
        ("contract", c.contract_id.as_str()),
        ("workdir", workdir.as_str()),
        ("sprint", c.sprint_id.as_str()),
        ("run", c.run_id.as_str()),
        ("contract_file", contract_file.as_str()),
        ("branch", c.branch.as_str()),
        ("round", round.as_str()),
        ("attempt", attempt.as_str()),
        ("schema", schemas.inline.as_str()),
        ("schema_file", schemas.file.as_str()),
        ("openai_schema_file", schemas.openai_file.as_str()),
        ("reviewer", spec.reviewer.as_deref().unwrap_or("")),
    ];
    let args: Vec<String> = spec
        .args
        .iter()
        .map(|a| placeholder::substitute(a, &values))
        .collect();

    if !req.workdir.is_dir() {
        return Err(Box::new(RunReport::early(
            RunOutcome::SpawnFailed,
            format!("the workdir {workdir} does not exist or is not a directory"),
        )));
    }
    if let Err(e) = write_contract(req) {
        return Err(Box::new(RunReport::early(
            RunOutcome::SpawnFailed,
            format!("cannot write the contract file {contract_file}: {e}"),
        )));
    }
    let prompt = render_prompt(c, &contract_file);
    let mut command = Command::new(&spec.program);
    command
        .args(&args)
        .current_dir(&req.workdir)
        .env_remove(&req.token_env)
        .envs(&spec.env)
        .env("HANARANG_SPRINT_ID", &c.sprint_id)
        .env("HANARANG_ROLE", c.role.as_str())
        .env("HANARANG_RUN_ID", &c.run_id)
        .env("HANARANG_CONTRACT_FILE", &contract_file)
        .env("HANARANG_ROUND", &round)
        .env("HANARANG_ATTEMPT", &attempt);
    if let Some(reviewer) = &spec.reviewer {
        command.env("HANARANG_REVIEWER", reviewer);
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    Ok(Prepared { command, prompt })
}

/// Spawns a prepared run and supervises it to its end (see `run`).
pub async fn run_prepared(req: &RunRequest, prepared: Prepared, control: RunControl) -> RunReport {
    let started = Instant::now();
    let mut report = run_inner(req, prepared, control).await;
    report.duration = started.elapsed();
    report
}

async fn run_inner(req: &RunRequest, prepared: Prepared, control: RunControl) -> RunReport {
    let RunControl { mut stop } = control;
    let Prepared {
        mut command,
        prompt,
    } = prepared;
    let spec = &req.spec;
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return RunReport::early(RunOutcome::SpawnFailed, spawn_error(&spec.program, &e)),
    };
    let Some(pgid) = child.id() else {
        // Already reaped: cannot happen before the first wait, but never trust it.
        return RunReport::early(
            RunOutcome::SpawnFailed,
            "the sister vanished at spawn".into(),
        );
    };
    tracing::debug!(pgid, program = %spec.program, "sister spawned");

    let activity = Activity::new();
    let over_cap = Arc::new(Notify::new());
    let stdout: SharedCapture = Arc::new(Mutex::new(Default::default()));
    let stderr: SharedCapture = Arc::new(Mutex::new(Default::default()));
    // The pipes are served inside this task, beside the wait: no task to hand each chunk
    // to, and the prompt is written on the first poll.
    let read_out = child.stdout.take().map(|pipe| {
        process::read_head(
            pipe,
            spec.max_output_bytes,
            stdout.clone(),
            over_cap.clone(),
            activity.clone(),
        )
    });
    let read_err = child.stderr.take().map(|pipe| {
        process::read_tail(
            pipe,
            spec.max_output_bytes,
            stderr.clone(),
            activity.clone(),
        )
    });
    // A sister that never reads its stdin, or closes it early, is normal: write errors
    // are ignored.
    let write_in = child.stdin.take().map(|mut pipe| async move {
        let _ = pipe.write_all(prompt.as_bytes()).await;
        let _ = pipe.shutdown().await;
    });
    let pipes = async {
        tokio::join!(
            async {
                if let Some(f) = read_out {
                    f.await;
                }
            },
            async {
                if let Some(f) = read_err {
                    f.await;
                }
            },
            async {
                if let Some(f) = write_in {
                    f.await;
                }
            },
        );
    };
    tokio::pin!(pipes);
    let mut pipes_done = false;

    let timeout = tokio::time::sleep(spec.timeout);
    tokio::pin!(timeout);
    let stall_check = spec
        .stall_timeout
        .map(|s| (s / 4).clamp(Duration::from_millis(10), Duration::from_secs(1)));
    let mut stop_open = true;
    let (status, interruption) = loop {
        tokio::select! {
            () = &mut pipes, if !pipes_done => pipes_done = true,
            status = child.wait() => break (Some(status), None),
            () = &mut timeout => break (None, Some(Interruption::TimedOut)),
            () = over_cap.notified() => break (None, Some(Interruption::OverCap)),
            reason = &mut stop, if stop_open => match reason {
                Ok(reason) => break (None, Some(Interruption::Stopped(reason))),
                // The sender is gone: nobody can stop this run any more.
                Err(_) => stop_open = false,
            },
            () = tick(stall_check) => {
                if spec.stall_timeout.is_some_and(|s| activity.silent_for() >= s) {
                    break (None, Some(Interruption::Stalled));
                }
            }
        }
    };

    // Whatever happened, nothing the sister started outlives the run: its group, and
    // whatever left the group (a daemon started with `setsid`) but kept the run's
    // environment.
    let markers = process::run_markers(&req.contract.run_id, &req.contract_path);
    process::kill_run(Some(pgid), &markers, spec.kill_grace).await;
    let status = match status {
        Some(status) => status,
        None => child.wait().await,
    };
    // The pipes reach EOF once the group is gone. A daemon that escaped the group (setsid)
    // could hold them open: wait a bounded time, then take what was read.
    if !pipes_done {
        let _ = tokio::time::timeout(spec.kill_grace, &mut pipes).await;
    }

    let (out, out_total, out_over) = process::take(&stdout);
    let (err, err_total, _) = process::take(&stderr);
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
    }
    // An agent that failed because it hit its usage limit is not failing: it waits.
    if matches!(
        report.outcome,
        RunOutcome::ExitNonzero | RunOutcome::BadOutput | RunOutcome::Timeout
    ) && let Some((resume_at_ms, said)) = usage_limit(spec, &out, &err, crate::clock::now_ms())
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

/// The first `pause_on` rule the captured output matches: when the limit resets (unix ms,
/// from the rule's `reset` group, else `pause_default` from `now_ms`) and what it said.
fn usage_limit(
    spec: &SisterSpec,
    stdout: &[u8],
    stderr: &[u8],
    now_ms: i64,
) -> Option<(i64, String)> {
    use crate::config::PauseSource;
    const MAX_CHARS: usize = 200;
    let (out, err) = (
        String::from_utf8_lossy(stdout),
        String::from_utf8_lossy(stderr),
    );
    for rule in &spec.pause_on {
        // The pattern was checked when the config was loaded.
        let Ok(pattern) = regex::Regex::new(&rule.pattern) else {
            continue;
        };
        let texts: &[&str] = match rule.source {
            PauseSource::Stdout => &[&out],
            PauseSource::Stderr => &[&err],
            PauseSource::Any => &[&out, &err],
        };
        let Some(found) = texts.iter().find_map(|t| pattern.captures(t)) else {
            continue;
        };
        let default = now_ms
            .saturating_add(i64::try_from(spec.pause_default.as_millis()).unwrap_or(i64::MAX));
        let resume_at = found
            .name("reset")
            .and_then(|r| reset_time(r.as_str().trim(), now_ms))
            .filter(|&at| at > now_ms)
            .unwrap_or(default);
        let said = found.get(0).map_or("", |m| m.as_str()).trim();
        let said = match said.char_indices().nth(MAX_CHARS) {
            Some((cut, _)) => format!("{}…", &said[..cut]),
            None => said.to_string(),
        };
        return Some((resume_at, said));
    }
    None
}

/// A reset time as CLIs print it: unix seconds (or milliseconds), an RFC 3339 time, or a
/// humantime duration from now ("4h 12m").
fn reset_time(text: &str, now_ms: i64) -> Option<i64> {
    if let Ok(n) = text.parse::<i64>() {
        // Milliseconds are 13 digits in this century; seconds are 10.
        return Some(if n > 100_000_000_000 {
            n
        } else {
            n.saturating_mul(1000)
        });
    }
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return t
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_millis()).ok());
    }
    let wait = humantime::parse_duration(text).ok()?;
    Some(now_ms.saturating_add(i64::try_from(wait.as_millis()).ok()?))
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
            if let HandoffMessage::Narang(m) = &valid.message
                && let Some(payload) = &m.payload
                && let Err(reason) = facts::check_impl_claim(&req.workdir, payload).await
            {
                report.outcome = RunOutcome::BadOutput;
                report.detail = format!("the IMPL_DONE claim does not hold: {reason}");
                return;
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

/// What the schema placeholders stand for. The files are written (beside the contract
/// file) only when an argument uses them.
#[derive(Default)]
struct SchemaInputs {
    inline: String,
    file: String,
    openai_file: String,
}

fn schema_inputs(req: &RunRequest) -> std::io::Result<SchemaInputs> {
    use crate::handoff::schema::{Dialect, schema};
    let uses = |name: &str| {
        req.spec
            .args
            .iter()
            .any(|a| placeholder::names(a).contains(&name))
    };
    let actor = Some(req.contract.role);
    let dir = req.contract_path.parent().map_or_else(
        || std::path::PathBuf::from("."),
        std::path::Path::to_path_buf,
    );
    let mut out = SchemaInputs::default();
    let text = |dialect| {
        schema(actor, dialect)
            .map_err(std::io::Error::other)
            .and_then(|s| serde_json::to_string(&s).map_err(std::io::Error::other))
    };
    if uses("schema") {
        out.inline = text(Dialect::Draft07)?;
    }
    // Beside the contract file, named after it: `<sprint>.contract.json` →
    // `<sprint>.schema.json`, rewritten for each run as the contract file is.
    let contract_name = req
        .contract_path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("run.contract.json");
    let stem = contract_name
        .strip_suffix(".contract.json")
        .or_else(|| contract_name.strip_suffix(".json"))
        .unwrap_or(contract_name);
    for (name, suffix, dialect, slot) in [
        (
            "schema_file",
            "schema.json",
            Dialect::Draft07,
            &mut out.file,
        ),
        (
            "openai_schema_file",
            "schema.openai.json",
            Dialect::OpenaiStrict,
            &mut out.openai_file,
        ),
    ] {
        if uses(name) {
            std::fs::create_dir_all(&dir)?;
            let path = dir.join(format!("{stem}.{suffix}"));
            write_in_place(&path, text(dialect)?.as_bytes())?;
            *slot = path.display().to_string();
        }
    }
    Ok(out)
}

fn write_contract(req: &RunRequest) -> std::io::Result<()> {
    if let Some(dir) = req.contract_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::to_vec_pretty(&req.contract).map_err(std::io::Error::other)?;
    write_in_place(&req.contract_path, &json)
}

/// Writes a file over its old content, then cuts it to length. An existing file keeps
/// its inode and blocks: on ext4 that is several times cheaper than creating a file or
/// truncating it to zero first (docs/benchmarks.md). Nobody reads the file while it is
/// written: a run's files are written before its sister exists.
fn write_in_place(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.write_all_at(bytes, 0)?;
    file.set_len(u64::try_from(bytes.len()).unwrap_or(u64::MAX))
}

fn spawn_error(program: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("program not found: {program:?} (check agent.program and PATH)")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("program is not executable: {program:?} (permission denied)")
        }
        _ => format!("cannot start {program:?}: {e}"),
    }
}

/// Sleeps `every` (the stall check's period), or forever when there is no stall check.
async fn tick(every: Option<Duration>) {
    match every {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// The last `TAIL_BYTES` of a stream as text, cut on a character boundary.
pub fn tail_text(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(TAIL_BYTES);
    let text = String::from_utf8_lossy(&bytes[start..]);
    text.trim_start_matches('\u{FFFD}').to_string()
}
