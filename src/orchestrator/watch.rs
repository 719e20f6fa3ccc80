//! Watching an open pull request: merged or closed there, its branch moved by someone
//! else, its checks while `verifying` (with a failed one's log), and the words of the
//! project's people, which become notes for the sisters.

use std::time::Duration;

use super::forge::{Found, PeoplesWord, ProjectForge, published};
use crate::clock::now_ms;
use crate::forge::{CheckState, ForgeError, PrState, PullRequest, ReviewState};
use crate::git::Repo;
use crate::pipeline::forge::{CiVerdict, CiWait, Heard, PersonsWord, ci_verdict, review_word};
use crate::pipeline::fsm::FailedCheck;
use crate::pipeline::{Event, State};
use crate::store::{CommandKind, Sprint, TransitionRecord};

/// How much of a failed check's log is read, and how many of its last lines are kept.
const LOG_BYTES: usize = 64 * 1024;
const LOG_LINES: usize = 40;

/// Looks at the open pull request: merged or closed there, its branch moved by someone
/// else, its checks (while verifying), and the words of the project's people.
pub(super) async fn watch(
    forge: &ProjectForge,
    repo: &Repo,
    sprint: &Sprint,
    log: &[TransitionRecord],
) -> Found {
    let Some((number, _, pushed, pushed_at)) = published(log) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let pull = match forge.api().pull_request(number).await {
        Ok(pull) => pull,
        Err(ForgeError::NotFound(_)) => {
            return Ok((vec![Event::ForgeClosed { by: None }], Vec::new()));
        }
        Err(e) => return Err(e),
    };
    match &pull.state {
        PrState::Merged { by, commit } => {
            return Ok((
                vec![Event::ForgeMerged {
                    by: by.clone(),
                    commit: commit.clone(),
                }],
                Vec::new(),
            ));
        }
        PrState::Closed { by } => {
            return Ok((vec![Event::ForgeClosed { by: by.clone() }], Vec::new()));
        }
        PrState::Open => {}
    }
    let notes = peoples_words(forge, sprint, &pull).await?;
    if pull.head != pushed {
        return Ok((
            vec![moved(forge, repo, sprint, &pushed, &pull).await],
            notes,
        ));
    }
    if sprint.state != State::Verifying {
        return Ok((Vec::new(), notes));
    }
    let checks = forge.api().checks(&pushed).await?;
    let wait = CiWait {
        waits: forge.config.ci == crate::config::CiPolicy::Required,
        waited: Duration::from_millis(u64::try_from(now_ms() - pushed_at).unwrap_or(0)),
        absent_after: forge.config.ci_absent_after.0,
        timeout: forge.config.ci_timeout.0,
    };
    let states: Vec<CheckState> = checks.iter().map(|c| c.state).collect();
    let names =
        |at: &[usize]| -> Vec<String> { at.iter().map(|&i| checks[i].name.clone()).collect() };
    let event = match ci_verdict(&states, wait) {
        CiVerdict::Failed(at) => {
            let mut out = Vec::new();
            for check in at.iter().map(|&i| &checks[i]) {
                let log_tail = match forge.api().log_tail(check, LOG_BYTES).await {
                    Ok(Some(text)) => Some(last_lines(&text, LOG_LINES)),
                    Ok(None) => None,
                    Err(e) => {
                        tracing::warn!(check = %check.name, error = %e, "a failed check's log could not be read");
                        None
                    }
                };
                out.push(FailedCheck {
                    name: check.name.clone(),
                    conclusion: check.conclusion.clone(),
                    url: check.url.clone(),
                    summary: check.summary.clone(),
                    log_tail,
                });
            }
            Some(Event::ChecksFailed {
                head: pushed,
                failed: out,
            })
        }
        CiVerdict::Passed => Some(Event::ChecksPassed {
            head: pushed,
            checks: names(&(0..checks.len()).collect::<Vec<_>>()),
            none: false,
        }),
        CiVerdict::NoneRan => Some(Event::ChecksPassed {
            head: pushed,
            checks: Vec::new(),
            none: true,
        }),
        CiVerdict::NotWaited => Some(Event::ChecksPassed {
            head: pushed,
            checks: Vec::new(),
            none: false,
        }),
        CiVerdict::TimedOut(at) => Some(Event::ChecksTimedOut {
            head: pushed,
            pending: names(&at),
        }),
        CiVerdict::Waiting => None,
    };
    Ok((event.into_iter().collect(), notes))
}

/// Someone else pushed to the pull request's branch: what they pushed is fetched and
/// checked out (when the workdir holds no change), so the review that follows sees it.
async fn moved(
    forge: &ProjectForge,
    repo: &Repo,
    sprint: &Sprint,
    pushed: &str,
    pull: &PullRequest,
) -> Event {
    let taken = match forge.fetch(repo, &sprint.branch).await {
        Ok(fetched) => crate::git::branch::take(repo, &sprint.branch, &fetched).await,
        Err(e) => Err(e),
    };
    let short = |id: &str| id.get(..7).unwrap_or(id).to_string();
    let mut why = format!(
        "someone else pushed to the pull request's branch on the forge: {} → {}",
        short(pushed),
        short(&pull.head)
    );
    if let Err(e) = taken {
        why.push_str(&format!(" (not checked out here: {e})"));
    }
    Event::Moved {
        reviewed: pushed.to_string(),
        why,
    }
}

/// What a login may do on the sprint. The people of `people` are held to the rules of who
/// may steer and note by the Discord id they map to (a role cannot be looked up here:
/// list such a person's id among `approver_user_ids`); without a Discord table, the
/// operator's list is all there is.
fn heard(forge: &ProjectForge, sprint: &Sprint, login: &str) -> Heard {
    let Some(id) = forge.config.people.get(login) else {
        return Heard {
            note: false,
            steer: false,
        };
    };
    match &forge.discord {
        None => Heard {
            note: true,
            steer: true,
        },
        Some(d) => Heard {
            note: crate::config::may_note(d, *id, &[], sprint.started_by.as_deref()),
            steer: crate::config::may_steer(d, *id, &[]),
        },
    }
}

/// The command a person's word on the forge gives, if any.
fn command_of(word: PersonsWord) -> Option<CommandKind> {
    match word {
        PersonsWord::RequestChanges => Some(CommandKind::RequestChanges),
        PersonsWord::Note => Some(CommandKind::Note),
        PersonsWord::Nothing => None,
    }
}

/// Reviews and comments by the project's people, as notes (a "changes requested" review
/// at `done`, by one who may steer: a request for changes with its line comments). Anyone
/// else's are not read.
async fn peoples_words(
    forge: &ProjectForge,
    sprint: &Sprint,
    pull: &PullRequest,
) -> Result<Vec<PeoplesWord>, ForgeError> {
    let people = &forge.config.people;
    if people.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for review in forge.api().reviews(pull.number).await? {
        let word = review_word(
            review.state,
            sprint.state,
            heard(forge, sprint, &review.login),
        );
        let Some(kind) = command_of(word) else {
            continue;
        };
        let mut text = review.body.clone();
        for c in &review.comments {
            let place = match c.line {
                Some(line) => format!("{}:{line}", c.path),
                None => c.path.clone(),
            };
            text.push_str(&format!("\n- {place}: {}", c.body));
        }
        if text.trim().is_empty() {
            continue;
        }
        out.push(PeoplesWord {
            key: format!("forge:review:{}", review.id),
            by: format!("forge:{}", review.login),
            kind,
            text: text.trim().to_string(),
        });
    }
    for comment in forge.api().comments(pull.number).await? {
        let word = review_word(
            ReviewState::Commented,
            sprint.state,
            heard(forge, sprint, &comment.login),
        );
        let Some(kind) = command_of(word).filter(|_| !comment.body.trim().is_empty()) else {
            continue;
        };
        out.push(PeoplesWord {
            key: format!("forge:comment:{}", comment.id),
            by: format!("forge:{}", comment.login),
            kind,
            text: comment.body.trim().to_string(),
        });
    }
    Ok(out)
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
