//! `hanarang sprint …`: start, status, log and the durable steering commands.

use std::sync::Arc;

use crate::clock::now_ms;
use crate::config::Config;
use crate::domain::parse_sprint_id;
use crate::orchestrator::OrchestratorError;
use crate::orchestrator::client::{self, Answer};
use crate::output::Exit;
use crate::pipeline::Policy;
use crate::startup::open_store;
use crate::store::{CommandKind, Store};
use crate::{errln, outln};

use super::{COMMAND_WAIT, SprintCommand};

pub(super) async fn sprint(config: Arc<Config>, command: SprintCommand) -> Exit {
    // Only a new sprint may create the database; every other command acts on sprints that
    // are in it, and says where it looked when there is none.
    let store = match &command {
        SprintCommand::Start { .. } => open_store(&config).await,
        _ => Store::open_existing(&config.database.url)
            .await
            .map_err(|e| store_failed(&command, &e)),
    };
    let store = match store {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let exit = act(&config, &store, command).await;
    store.exit().await;
    exit
}

/// One `sprint` command on an open store.
async fn act(config: &Config, store: &Store, command: SprintCommand) -> Exit {
    let policy = Policy::from(&config.pipeline);
    let by = super::cli_author(config);
    let submit = |id: String, kind: CommandKind, text: Option<String>| {
        let store = store.clone();
        let by = by.clone();
        let id = parse_sprint_id(&id);
        async move {
            let request = client::Request {
                sprint_id: &id,
                kind,
                text: text.as_deref(),
                by: &by,
                seq: None,
            };
            let answer = client::submit(&store, &policy, request, None, COMMAND_WAIT).await;
            report_answer(&id, answer)
        }
    };
    match command {
        SprintCommand::Start {
            goal,
            project,
            focus,
        } => {
            let project = match config.project(project.as_deref()) {
                Ok((name, _)) => name.to_string(),
                Err(e) => {
                    errln!("hanarang sprint start: {e}");
                    return Exit::Usage;
                }
            };
            if goal.trim().is_empty() {
                errln!("hanarang sprint start: the goal must not be empty");
                return Exit::Usage;
            }
            match store
                .create_sprint(
                    &project,
                    &goal,
                    focus.as_deref(),
                    &by,
                    &config.pipeline.branch_template,
                    now_ms(),
                )
                .await
            {
                Ok(s) => {
                    outln!("{}", s.id);
                    Exit::Success
                }
                Err(e) => {
                    errln!("hanarang sprint start: {e}");
                    Exit::Failure
                }
            }
        }
        SprintCommand::Status { id, json } => {
            let id = id.as_deref().map(parse_sprint_id);
            crate::report::status(store, id.as_deref(), json).await
        }
        SprintCommand::Log {
            id,
            json: _,
            run: Some(run),
            stdout,
            stderr,
        } => {
            let capture = match (stdout, stderr) {
                (true, _) => crate::report::Capture::Stdout,
                (_, true) => crate::report::Capture::Stderr,
                _ => crate::report::Capture::Both,
            };
            crate::report::run_capture(store, &parse_sprint_id(&id), &run, capture).await
        }
        SprintCommand::Log { id, json, .. } => {
            crate::report::log(store, config, &parse_sprint_id(&id), json).await
        }
        SprintCommand::Show { id, json } => {
            crate::report::show(store, config, &parse_sprint_id(&id), json).await
        }
        SprintCommand::Diff { id } => {
            crate::report::diff(store, config, &parse_sprint_id(&id)).await
        }
        SprintCommand::Approve { id } => submit(id, CommandKind::Approve, None).await,
        SprintCommand::ApproveCi { id } => submit(id, CommandKind::ApproveCi, None).await,
        SprintCommand::RequestChanges { id, note } => {
            submit(id, CommandKind::RequestChanges, Some(note)).await
        }
        SprintCommand::Resume { id, focus } => submit(id, CommandKind::Resume, focus).await,
        SprintCommand::Abort { id, reason } => submit(id, CommandKind::Abort, reason).await,
        SprintCommand::Handoff { id, focus } => submit(id, CommandKind::Handoff, focus).await,
        SprintCommand::Note { id, text } => submit(id, CommandKind::Note, Some(text)).await,
    }
}

/// A command that found no database: a listing of all sprints has nothing to list (and
/// says why); a command about one sprint cannot find it.
fn store_failed(command: &SprintCommand, e: &crate::store::StoreError) -> Exit {
    match (command, e) {
        (SprintCommand::Status { id: None, json }, crate::store::StoreError::NoDatabase(_)) => {
            errln!("hanarang: {e}");
            if *json {
                outln!("[]");
            } else {
                outln!("no sprints yet: start one with `hanarang sprint start \"<goal>\"`");
            }
            Exit::Success
        }
        _ => {
            errln!("hanarang: {e}");
            Exit::Failure
        }
    }
}

fn report_answer(id: &str, answer: Result<Answer, crate::store::StoreError>) -> Exit {
    match answer {
        Ok(Answer::Applied(what)) => {
            outln!("{what}");
            Exit::Success
        }
        Ok(Answer::Refused(reason)) => {
            errln!("refused: {reason}");
            Exit::Refused
        }
        Ok(Answer::Queued(n)) => {
            outln!(
                "{id}: recorded as command #{n}; no orchestrator is running, so it is applied when `hanarang serve` starts"
            );
            Exit::Success
        }
        Ok(Answer::Unanswered(n)) => {
            errln!(
                "{id}: recorded as command #{n}, but the orchestrator has not answered within {}s; see `hanarang sprint log {id}`",
                COMMAND_WAIT.as_secs()
            );
            Exit::Failure
        }
        Err(e) => {
            errln!("hanarang: {e}");
            Exit::Failure
        }
    }
}

impl From<OrchestratorError> for Exit {
    fn from(_: OrchestratorError) -> Exit {
        Exit::Failure
    }
}
