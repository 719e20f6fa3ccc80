//! `hanarang run` and `hanarang demo`: one sprint driven in the foreground, with console
//! progress, the deploy question and Ctrl-C.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use super::console::{Console, Progress};
use crate::clock::now_ms;
use crate::config::Config;
use crate::output::Exit;
use crate::pipeline::State;
use crate::startup::{open_store, shutdown_signal, start_orchestrator};
use crate::store::{CommandKind, Sprint};
use crate::{errln, out, outln};

use super::RunArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunMode {
    Foreground,
    Demo,
}

pub(super) async fn demo() -> Exit {
    let dir =
        std::env::temp_dir().join(format!("hanarang-demo-{}-{}", std::process::id(), now_ms()));
    let config = match crate::demo::config(&dir) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            errln!("hanarang demo: cannot prepare {}: {e}", dir.display());
            return Exit::Failure;
        }
    };
    outln!(
        "hanarang demo: simulated sisters, throwaway database in {}\n",
        dir.display()
    );
    let args = RunArgs {
        goal: "Add a greeting page to the demo app".into(),
        project: Some(crate::demo::PROJECT.into()),
        focus: None,
        auto_approve: true,
    };
    let ran = run_sprint(config.clone(), args, RunMode::Demo).await;
    show_recipe(&config).await;
    let _ = std::fs::remove_dir_all(&dir);
    ran
}

/// What the demo's sprint carried besides its states: the plan in its folder and the
/// contract with the review's marks.
async fn show_recipe(config: &Config) {
    let Ok(store) = open_store(config).await else {
        return;
    };
    if let Ok(sprints) = store.sprints().await {
        for sprint in sprints {
            let Ok(runs) = store.runs(&sprint.id).await else {
                continue;
            };
            outln!("\n{}'s recipe, as its sisters carried it:", sprint.id);
            if let Some(project) = config.projects.get(&sprint.project) {
                let folder = project.plan_dir_of(&sprint.id, &sprint.project, store.runs_dir());
                let plan = folder.join("plan.md");
                // The plan is the sister's: read as it could open it, else not counted.
                let root = match project.plans_in_tree() {
                    true => project.workdir.as_path(),
                    false => folder.as_path(),
                };
                let lines = crate::config::read_inside(
                    root,
                    &plan,
                    "plan",
                    &crate::fence::Own::of(config, store.runs_dir()).files,
                    crate::config::MAX_RECIPE_BYTES,
                )
                .map_or(0, |t| t.lines().count());
                outln!("  plan: {} ({lines} lines)", plan.display());
            }
            let log = store.transitions(&sprint.id).await.unwrap_or_default();
            let contract: Vec<String> = crate::store::contract_results(&runs, &log)
                .iter()
                .map(|c| format!("{} {}", crate::report::contract_mark(c.passed), c.item.id))
                .collect();
            outln!("  contract: {}", contract.join(" · "));
            let checks = store.checks(&sprint.id).await.unwrap_or_default();
            for check in &checks {
                let ended = crate::report::check_ended(check);
                // The check at the base, before any work; then each implementation's.
                let of = match check.at_base {
                    true => " at the base".to_string(),
                    false => format!(" of {}", check.run_id),
                };
                // The demo's own binary is the check: shown by its name.
                let program = check.command.first().map(|p| {
                    std::path::Path::new(p)
                        .file_name()
                        .map_or(p.clone(), |n| n.to_string_lossy().into_owned())
                });
                let command: Vec<String> = program
                    .into_iter()
                    .chain(check.command.iter().skip(1).cloned())
                    .collect();
                outln!(
                    "  check{of}: {ended}, `{}`",
                    crate::domain::shell_line(&command)
                );
            }
            let picture = std::env::temp_dir().join(format!(
                "hanarang-demo-{}-{}.png",
                std::process::id(),
                sprint.id
            ));
            let drawn = crate::report::picture::picture(&sprint, &runs, &checks, now_ms())
                .and_then(|png| std::fs::write(&picture, png).map_err(|e| e.to_string()));
            match drawn {
                Ok(()) => outln!("  picture: {}", picture.display()),
                Err(e) => errln!("  picture: cannot draw it: {e}"),
            }
        }
    }
    store.exit().await;
}

/// One sprint in the foreground: the orchestrator drives it (and the sprints its project
/// must finish first), the console prints its lines, and the terminal is asked for deploy
/// approval unless `--auto-approve`.
pub(super) async fn run_sprint(config: Arc<Config>, args: RunArgs, mode: RunMode) -> Exit {
    let project = match config.project(args.project.as_deref()) {
        Ok((name, _)) => name.to_string(),
        Err(e) => {
            errln!("hanarang run: {e}");
            return Exit::Usage;
        }
    };
    if args.goal.trim().is_empty() {
        errln!("hanarang run: the goal must not be empty");
        return Exit::Usage;
    }
    let Ok(store) = open_store(&config).await else {
        return Exit::Failure;
    };
    let exit = drive(config, args, mode, &store, project).await;
    store.exit().await;
    exit
}

/// `run_sprint` once the database is open.
async fn drive(
    config: Arc<Config>,
    args: RunArgs,
    mode: RunMode,
    store: &crate::store::Store,
    project: String,
) -> Exit {
    let orchestrator = match start_orchestrator(config.clone(), store.clone()).await {
        Ok(o) => o,
        Err(exit) => return exit,
    };
    let sprint = match queue(&config, &args, store, &project).await {
        Ok(s) => s,
        Err(exit) => return exit,
    };
    let orchestrator = orchestrator.only(&sprint);
    let handle = orchestrator.handle();
    let mut events = handle.subscribe();
    let mut steps = handle.subscribe_live();
    // The running sister's latest step, shown on the status line.
    let mut step: Option<crate::orchestrator::LiveStep> = None;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut driver = orchestrator.run_here(async move {
        let _ = stop_rx.await;
    });
    let terminal = std::io::stdout().is_terminal();
    let mut console = Console::for_new(&sprint, terminal);
    let mut ticker = tokio::time::interval(STATUS_EVERY);
    // After a long wait (the deploy question) one redraw, not a burst of them.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut current = sprint;
    // What the sprint was last said to wait for (the sprint ahead of it, and its state).
    let mut waits_for: Option<(String, State)> = None;
    let mut ended = None;
    let mut interrupted = false;
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let exit = loop {
        if current.state == State::Queued
            && let Err(exit) = tell_the_wait(store, &current, &mut waits_for, &mut console).await
        {
            break exit;
        }
        let progress = tokio::select! {
            p = console.next(store, &mut events, &config) => p,
            () = &mut shutdown => {
                interrupted = true;
                store.stopping();
                break Exit::Failure;
            }
            // The orchestrator stopped on its own (an error): nothing more will happen.
            r = &mut driver => {
                ended = Some(r);
                break Exit::Failure;
            }
            _ = ticker.tick(), if terminal => {
                show_status(&mut console, &current, step.as_ref(), &config);
                continue;
            }
            Ok(told) = steps.recv(), if terminal => {
                if told.sprint_id == current.id {
                    step = Some((*told).clone());
                    show_status(&mut console, &current, step.as_ref(), &config);
                }
                continue;
            }
        };
        current = match progress {
            Ok(Progress::Moved(s)) => {
                // The run that told it has ended.
                step = None;
                *s
            }
            Ok(Progress::Elsewhere) => continue,
            Err(e) => {
                console.clear_status();
                errln!("hanarang run: {e}");
                break Exit::Failure;
            }
        };
        show_status(&mut console, &current, step.as_ref(), &config);
        match current.state {
            State::Deployed => break Exit::Success,
            State::Aborted => break Exit::Failure,
            State::Escalated => {
                console.say(&format!(
                    "{} needs a human. Next: {}",
                    current.id,
                    next_step(&current, AppliedBy::Serve)
                ));
                break Exit::Escalated;
            }
            State::Done => {
                console.clear_status();
                let decision = if args.auto_approve {
                    Decision::Approve
                } else {
                    tokio::select! {
                        d = ask_deploy(&current.id, config.pipeline.locale) => d,
                        // Ctrl-C at the question: where the sprint stands is said below.
                        () = &mut shutdown => {
                            interrupted = true;
                            store.stopping();
                            break Exit::Failure;
                        }
                    }
                };
                if let Err(exit) = answer(&config, &args, store, &current, decision).await {
                    break exit;
                }
                handle.wake();
            }
            _ => {}
        }
    };
    console.clear_status();
    let _ = stop_tx.send(());
    let ended = match ended {
        Some(r) => r,
        None => driver.await,
    };
    if let Err(e) = ended {
        errln!("hanarang run: {e}");
        return Exit::Failure;
    }
    if interrupted {
        tell_where_it_stopped(store, &current.id).await;
    }
    if mode == RunMode::Demo && exit == Exit::Success {
        outln!("\ndemo finished: the sprint went from planning to deployed.");
    }
    exit
}

/// Creates the sprint `run` drives, and says it is queued.
async fn queue(
    config: &Config,
    args: &RunArgs,
    store: &crate::store::Store,
    project: &str,
) -> Result<Sprint, Exit> {
    let by = super::cli_author(config);
    let created = store
        .create_sprint(
            project,
            &args.goal,
            args.focus.as_deref(),
            &by,
            &config.pipeline.branch_template,
            now_ms(),
        )
        .await;
    let sprint = created.map_err(|e| {
        errln!("hanarang run: {e}");
        Exit::Failure
    })?;
    outln!(
        "{} queued: {}",
        sprint.id,
        crate::output::escape_controls(&sprint.goal)
    );
    Ok(sprint)
}

/// While the sprint is queued: which sprint holds the project, said once each time it
/// changes (`waits_for` is what was said last).
async fn tell_the_wait(
    store: &crate::store::Store,
    current: &Sprint,
    waits_for: &mut Option<(String, State)>,
    console: &mut Console,
) -> Result<(), Exit> {
    match store.ahead_of(current).await {
        Ok(ahead) => {
            let now = ahead.as_ref().map(|a| (a.id.clone(), a.state));
            if let Some(ahead) = ahead.filter(|_| now != *waits_for) {
                console.say(&waiting_line(current, &ahead));
            }
            *waits_for = now;
            Ok(())
        }
        Err(e) => {
            console.clear_status();
            errln!("hanarang run: {e}");
            Err(Exit::Failure)
        }
    }
}

/// The person's answer to the deploy question, as the command it is; `Err` ends `run`
/// (later, or the command could not be given).
async fn answer(
    config: &Config,
    args: &RunArgs,
    store: &crate::store::Store,
    current: &Sprint,
    decision: Decision,
) -> Result<(), Exit> {
    let by = if args.auto_approve {
        format!("{} --auto-approve", super::cli_author(config))
    } else {
        super::cli_author(config)
    };
    let (kind, text) = match decision {
        Decision::Approve => (CommandKind::Approve, None),
        Decision::RequestChanges(note) => (CommandKind::RequestChanges, Some(note)),
        Decision::Abort => (
            CommandKind::Abort,
            Some("declined at the deploy prompt".to_string()),
        ),
        Decision::Later => {
            outln!(
                "{} waits in done for deploy approval. Next: {}",
                current.id,
                next_step(current, AppliedBy::Serve)
            );
            return Err(Exit::Failure);
        }
    };
    let given = store
        .submit_command(
            &current.id,
            kind,
            text.as_deref(),
            &by,
            Some(current.last_seq),
            now_ms(),
        )
        .await;
    given.map(|_| ()).map_err(|e| {
        errln!("hanarang run: {e}");
        Exit::Failure
    })
}

/// After Ctrl-C: where the sprint stands (the orchestrator has stopped the sister and
/// recorded it) and the next command to give.
async fn tell_where_it_stopped(store: &crate::store::Store, sprint_id: &str) {
    match store.sprint(sprint_id).await {
        Ok(Some(s)) => outln!(
            "\n{} stopped: it is {} (round {}, attempt {}). Next: {}",
            s.id,
            s.state,
            s.round,
            s.attempt,
            next_step(&s, AppliedBy::Serve)
        ),
        Ok(None) => {}
        Err(e) => errln!("hanarang run: {e}"),
    }
}

/// How often `run` redraws its status line on a terminal.
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// The status line, with what the running sister does now when it told a step.
fn show_status(
    console: &mut Console,
    sprint: &Sprint,
    step: Option<&crate::orchestrator::LiveStep>,
    config: &Config,
) {
    let cx = crate::notify::Context::new(config, sprint);
    let now = now_ms();
    match crate::notify::messages::status_line(sprint, &cx, now) {
        Some(line) => {
            let doing = step.and_then(|s| {
                let started = s.live.step_at.unwrap_or(now);
                crate::notify::messages::now_text(&s.live, started, now)
            });
            match doing {
                Some(doing) => console.status(&format!(
                    "{line} · {}",
                    crate::output::escape_controls(&doing)
                )),
                None => console.status(&line),
            }
        }
        None => console.clear_status(),
    }
}

/// What a queued sprint of `run` waits for, and what moves it.
fn waiting_line(sprint: &Sprint, ahead: &Sprint) -> String {
    let why = if ahead.state == State::Queued {
        format!(
            "{} was queued before it in project {} and runs here first",
            ahead.id, sprint.project
        )
    } else {
        format!(
            "{} ({}) holds project {}'s pipeline lock",
            ahead.id, ahead.state, sprint.project
        )
    };
    format!(
        "{} waits: {why}. Next: {}. Commands given meanwhile (from another terminal) are applied here.",
        sprint.id,
        next_step(ahead, AppliedBy::ThisRun)
    )
}

/// Who would carry out the next step: this `run` (it drives the sprints ahead of its own),
/// or `serve` once this process has stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AppliedBy {
    ThisRun,
    Serve,
}

/// The command that moves a sprint on from where it stands.
fn next_step(s: &Sprint, by: AppliedBy) -> String {
    let id = &s.id;
    let applied = match by {
        AppliedBy::ThisRun => "",
        AppliedBy::Serve => {
            "; `hanarang serve` (or the next `hanarang run` of its project) applies it"
        }
    };
    match s.state {
        State::Done => format!(
            "`hanarang sprint approve {id}` deploys it (or `hanarang sprint request-changes {id} --note TEXT`, `hanarang sprint abort {id}`){applied}"
        ),
        State::Escalated => format!(
            "`hanarang sprint resume {id}` (optionally `--focus TEXT`) or `hanarang sprint abort {id}`{applied}"
        ),
        State::Deployed | State::Aborted => "nothing: it has ended".into(),
        _ if by == AppliedBy::ThisRun => {
            format!("it runs here until it ends (or `hanarang sprint abort {id}`)")
        }
        State::Queued => format!(
            "`hanarang serve` starts it once project {}'s pipeline lock is free (or `hanarang sprint abort {id}`)",
            s.project
        ),
        _ => format!("`hanarang serve` carries it on from here (or `hanarang sprint abort {id}`)"),
    }
}

enum Decision {
    Approve,
    RequestChanges(String),
    Abort,
    Later,
}

/// Asks on the terminal whether to deploy. End of input means "later".
async fn ask_deploy(sprint_id: &str, locale: crate::config::Locale) -> Decision {
    let prompt = crate::notify::messages::deploy_prompt(sprint_id, locale);
    tokio::task::spawn_blocking(move || {
        let read = || {
            let mut line = String::new();
            match std::io::stdin().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(line.trim().to_string()),
            }
        };
        loop {
            out!("{}", prompt.question);
            match read().as_deref() {
                None | Some("l") => return Decision::Later,
                Some("y") => return Decision::Approve,
                Some("a") => return Decision::Abort,
                Some("n") => {
                    out!("{}", prompt.what_to_change);
                    match read() {
                        Some(note) if !note.is_empty() => return Decision::RequestChanges(note),
                        Some(_) => outln!("{}", prompt.note_needed),
                        None => return Decision::Later,
                    }
                }
                Some(_) => {}
            }
        }
    })
    .await
    .unwrap_or(Decision::Later)
}
