//! A spawned sister, supervised to its end: its pipes served beside the wait, its
//! timeout, stall check and stop, and its whole process group killed whatever happened;
//! then, for the implementer's `IMPL_DONE`, the project's check under the same stop.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;
use tokio::time::Instant;

use tokio::sync::watch;

use super::classify::Interruption;
use super::container::Container;
use super::events::{Progress, StreamReader};
use super::process::{self, Activity, SharedCapture};
use super::spawn::spawn_error;
use super::{Prepared, RunControl, RunOutcome, RunReport, RunRequest, Stopper};

/// Spawns a prepared run and supervises it to its end (see `run`). The run's duration is
/// its sister's; a check after it has its own.
pub async fn run_prepared(req: &RunRequest, prepared: Prepared, control: RunControl) -> RunReport {
    if control
        .start_by
        .is_some_and(|by| tokio::time::Instant::now() > by)
    {
        return RunReport::early(
            RunOutcome::Interrupted,
            "not started: this host's claim on the sprint ran out before its sister could start (was the process frozen?); whichever host holds the sprint now runs it".into(),
        );
    }
    // Every process of the run, the check's too, goes in the run's container.
    let container = match &req.containers {
        Some(containers) => match containers
            .make(&req.contract.run_id, req.spec.kill_grace)
            .await
        {
            Ok(container) => Some(container),
            Err(e) => {
                return RunReport::early(
                    RunOutcome::SpawnFailed,
                    format!(
                        "cannot make the run's cgroup under {}: {e}",
                        containers.home().display()
                    ),
                );
            }
        },
        None => None,
    };
    let mut stop = Stopper(Some(control.stop));
    // The check at the base first, its result in the contract the sister reads.
    let (at_base, with_base, prepared) = match &req.base_check {
        Some(check) => {
            match at_base(
                req,
                check,
                container.as_ref(),
                &mut stop,
                control.progress.as_ref(),
            )
            .await
            {
                Ok((done, with_base)) => match super::prepare(&with_base) {
                    Ok(prepared) => (Some(done), Some(with_base), prepared),
                    Err(mut report) => {
                        report.check = Some(done);
                        return close(req, container, *report).await;
                    }
                },
                Err(report) => return close(req, container, report).await,
            }
        }
        None => (None, None, prepared),
    };
    let req = with_base.as_ref().unwrap_or(req);
    let started = Instant::now();
    let mut report = run_inner(
        req,
        prepared,
        container.as_ref(),
        &mut stop,
        control.progress.as_ref(),
    )
    .await;
    report.duration = started.elapsed();
    report.check = at_base;
    if let Some(check) = &req.check
        && super::check::applies(&report)
    {
        if let Some(progress) = &control.progress {
            progress.send_modify(|p| {
                p.step = Some(super::events::clean(&format!(
                    "🧪 {}",
                    crate::domain::shell_line(&check.command)
                )));
                p.step_at_ms = Some(crate::clock::now_ms());
            });
        }
        super::check::run_and_judge(req, check, container.as_ref(), &mut stop, &mut report).await;
    }
    close(req, container, report).await
}

/// The run's end: its container emptied and removed, its private temporary folder gone.
async fn close(req: &RunRequest, container: Option<Container>, report: RunReport) -> RunReport {
    if let Some(container) = container {
        container.close(req.spec.kill_grace).await;
    }
    if req.fence.is_some() {
        let _ = std::fs::remove_dir_all(crate::fence::private_tmp(&req.contract.run_id));
    }
    report
}

/// Runs the project's check at the base, before the sister: its report, and the request
/// whose contract says what it found. A stop during it ends the run there, the sister
/// never started and nothing recorded of the check (it did not finish).
async fn at_base(
    req: &RunRequest,
    check: &super::Check,
    container: Option<&Container>,
    stop: &mut Stopper,
    progress: Option<&watch::Sender<Progress>>,
) -> Result<(super::CheckReport, RunRequest), RunReport> {
    let line = crate::domain::shell_line(&check.command);
    if let Some(progress) = progress {
        progress.send_modify(|p| {
            p.step = Some(super::events::clean(&format!("🧪 {line} (at the base)")));
            p.step_at_ms = Some(crate::clock::now_ms());
        });
    }
    let span = tracing::info_span!("check_at_base", sprint = %req.contract.sprint_id, run = %req.contract.run_id);
    let mut done =
        tracing::Instrument::instrument(super::check::run(req, check, container, stop), span).await;
    tracing::info!(sprint = %req.contract.sprint_id, run = %req.contract.run_id, end = ?done.end, "check at the base ended");
    if let super::CheckEnd::Stopped(reason) = done.end {
        let (outcome, what) = match reason {
            super::Stop::Abort => (RunOutcome::Cancelled, "a user's abort"),
            super::Stop::Handoff => (RunOutcome::HandedOff, "a user's handoff"),
            super::Stop::Shutdown => (RunOutcome::Interrupted, "the orchestrator's shutdown"),
        };
        return Err(RunReport::early(
            outcome,
            format!(
                "stopped by {what} during the check `{line}` at the base, before the sister started"
            ),
        ));
    }
    done.at_base = true;
    let mut with_base = req.clone();
    let mut told = super::check::result_of(&done, &req.contract.run_id);
    told.detail = done.failure(&req.contract.project);
    with_base.contract.base_check = Some(told);
    Ok((done, with_base))
}

async fn run_inner(
    req: &RunRequest,
    prepared: Prepared,
    container: Option<&Container>,
    stop: &mut Stopper,
    progress: Option<&watch::Sender<Progress>>,
) -> RunReport {
    let Prepared { command, prompt } = prepared;
    let spec = &req.spec;
    let mut child = match command.spawn(container) {
        Ok(child) => child,
        Err(e) => return RunReport::early(RunOutcome::SpawnFailed, spawn_error(&spec.program, &e)),
    };
    let pgid = child.id();
    tracing::debug!(pgid, program = %spec.program, "sister spawned");

    let activity = Activity::new();
    let over_cap = Arc::new(Notify::new());
    let stdout: SharedCapture = Arc::new(Mutex::new(Default::default()));
    let stderr: SharedCapture = Arc::new(Mutex::new(Default::default()));
    // The pipes are served inside this task, beside the wait: no task to hand each chunk
    // to, and the prompt is written on the first poll.
    // A CLI that prints an event stream is read event by event, its final event kept;
    // any other's stdout is kept up to its cap.
    let stream = spec.stream.map(|form| {
        Arc::new(Mutex::new(StreamReader::new(
            form,
            spec.max_output_bytes,
            &req.workdir,
        )))
    });
    let read_out = child.stdout.take().map(|pipe| -> BoxFuture {
        match &stream {
            Some(reader) => Box::pin(process::read_stream(
                pipe,
                reader.clone(),
                activity.clone(),
                progress.cloned(),
            )),
            None => Box::pin(process::read_head(
                pipe,
                spec.max_output_bytes,
                stdout.clone(),
                over_cap.clone(),
                activity.clone(),
            )),
        }
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
    let (status, interruption) = loop {
        tokio::select! {
            () = &mut pipes, if !pipes_done => pipes_done = true,
            status = child.wait() => break (Some(status), None),
            () = &mut timeout => break (None, Some(Interruption::TimedOut)),
            () = over_cap.notified() => break (None, Some(Interruption::OverCap)),
            reason = stop.wait() => break (None, Some(Interruption::Stopped(reason))),
            () = tick(stall_check) => {
                if spec.stall_timeout.is_some_and(|s| activity.silent_for() >= s) {
                    break (None, Some(Interruption::Stalled));
                }
            }
        }
    };

    // Whatever happened, nothing the sister started outlives its part of the run: its
    // container (where the host gives one), else its process group.
    process::end_all(pgid, container, spec.kill_grace).await;
    let status = match status {
        Some(status) => status,
        None => child.wait().await,
    };
    // The pipes reach EOF once the group is gone. A daemon that escaped the group (setsid)
    // could hold them open: wait a bounded time, then take what was read.
    if !pipes_done {
        let _ = tokio::time::timeout(spec.kill_grace, &mut pipes).await;
    }
    let mut unfinished = false;
    if let Some(reader) = &stream {
        let mut reader = process::lock_reader(reader);
        if reader.malformed() > 0 {
            tracing::debug!(lines = reader.malformed(), "event stream lines not read");
        }
        let out = reader.take_output();
        unfinished = out.unfinished;
        process::fill(&stdout, out);
    }

    let mut report =
        super::classify::report(req, pgid, status, interruption, &stdout, &stderr).await;
    if unfinished && report.outcome == RunOutcome::BadOutput {
        report.detail = format!(
            "the event stream ended without its final event; its tail: {}",
            report.detail
        );
    }
    report
}

type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Sleeps `every` (the stall check's period), or forever when there is no stall check.
async fn tick(every: Option<Duration>) {
    match every {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
