//! What goes to the forge from a sprint: the route every run is told (the pull request,
//! the team's CI at the base), and the reviewed branch pushed — unless it changes files
//! the forge runs and no person let them run — with its pull request opened or updated.

use std::time::Duration;

use super::Orchestrator;
use super::forge::{Describe, Found, ProjectForge, published};
use crate::clock::now_ms;
use crate::config::CiPolicy;
use crate::forge::ForgeError;
use crate::git::Repo;
use crate::pipeline::Event;
use crate::pipeline::forge::{CiVerdict, CiWait, ci_verdict};
use crate::store::{Sprint, Store, TransitionRecord};

/// How long a run's composition waits for the forge's checks at the base.
const BASE_CHECKS_WAIT: Duration = Duration::from_secs(10);

impl Orchestrator {
    /// Where `sprint`'s work goes, for its runs: its project's forge, the pull request
    /// once opened, and what the forge's checks said at `base` — read from the forge the
    /// first time a sprint from that commit runs (bounded: a forge that does not answer
    /// in time is asked again at the next run), then kept.
    pub(super) async fn forge_route(
        &self,
        sprint: &Sprint,
        base: Option<&str>,
    ) -> Option<crate::sister::contract::ForgeRoute> {
        let forge = self.forges.of(&sprint.project)?;
        let log = self.store.transitions(&sprint.id).await.unwrap_or_default();
        let (pr, url) = match published(&log) {
            Some((pr, url, _, _)) => (Some(pr), Some(url)),
            None => (None, None),
        };
        let checks_at_base = match base {
            Some(base) => self.checks_at_base(forge, base).await,
            None => Vec::new(),
        };
        Some(crate::sister::contract::ForgeRoute {
            kind: forge.config.kind.as_str().to_string(),
            repo: forge.config.repo.clone(),
            pr,
            url,
            checks_at_base,
        })
    }

    /// What the forge says of its repository's checks at `base`, kept once read (for every
    /// project and sprint on that repository and commit).
    async fn checks_at_base(
        &self,
        forge: &ProjectForge,
        base: &str,
    ) -> Vec<crate::store::BaseCheck> {
        let repository = forge.config.repository_key();
        if let Ok(Some(kept)) = self.store.forge_base_checks(&repository, base).await {
            return kept;
        }
        let asked = tokio::time::timeout(BASE_CHECKS_WAIT, forge.api().checks(base)).await;
        let checks = match asked {
            Ok(Ok(checks)) => checks,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the forge's checks at the base could not be read; asked again at the next run");
                return Vec::new();
            }
            Err(_) => {
                tracing::warn!(
                    "the forge did not say its checks at the base in time; asked again at the next run"
                );
                return Vec::new();
            }
        };
        let read: Vec<crate::store::BaseCheck> = checks
            .into_iter()
            .map(|c| crate::store::BaseCheck {
                name: c.name,
                result: c.conclusion,
            })
            .collect();
        if let Err(e) = self
            .store
            .save_forge_base_checks(&repository, base, &read, now_ms())
            .await
        {
            tracing::warn!(error = %e, "the forge's checks at the base could not be kept");
        }
        read
    }
}

/// Pushes the reviewed branch (onto what hanarang pushed before, never over another's
/// push) and opens its pull request, or updates the one open.
pub(super) async fn publish(
    forge: &ProjectForge,
    store: &Store,
    describe: Option<Describe>,
    repo: &Repo,
    sprint: &Sprint,
    log: &[TransitionRecord],
) -> Found {
    let head = crate::git::facts::branch_head(repo, &sprint.branch)
        .await
        .ok_or_else(|| ForgeError::Invalid(format!("the branch {} is gone", sprint.branch)))?;
    if let Some(held) = ci_files_held(forge, repo, sprint, log, &head).await? {
        return Ok((held.into_iter().collect(), Vec::new()));
    }
    let before = published(log).map(|(_, _, head, _)| head);
    let url = forge
        .config
        .push_url()
        .ok_or_else(|| ForgeError::Invalid("no push URL".into()))?;
    let user = forge.api().git_user().await?;
    let remote = crate::git::remote::Remote {
        url: &url,
        user: &user,
        token: forge.token.expose(),
    };
    if before.as_deref() != Some(head.as_str()) {
        crate::git::remote::push(repo, &remote, &sprint.branch, &head, before.as_deref())
            .await
            .map_err(|why| match unreachable(&why) {
                true => ForgeError::Unavailable(why),
                // Refused: a branch there that hanarang did not push, a token without write.
                false => ForgeError::Refused {
                    status: 0,
                    message: why,
                },
            })?;
    }
    let title = crate::forge::words::title(&sprint.goal);
    let described = match describe {
        Some(describe) => describe(sprint.clone()).await,
        None => None,
    };
    // Whatever the summary quotes of the agents, nothing of it acts on the forge.
    let body = crate::forge::words::defused(&match described {
        Some(text) => text,
        None => body(store, sprint, &head).await,
    });
    let pull = match forge.api().open_pull_request(&sprint.branch).await? {
        Some(open) => {
            forge
                .api()
                .update_pull_request(open.number, &title, &body)
                .await?
        }
        None => {
            let base = match &sprint.base_branch {
                Some(base) => base.clone(),
                None => forge.api().repository().await?.default_branch,
            };
            forge
                .api()
                .create_pull_request(&sprint.branch, &base, &title, &body)
                .await?
        }
    };
    let mut events = vec![Event::Published {
        pr: pull.number,
        url: pull.url.clone(),
        head: head.clone(),
    }];
    // The pipeline's word on CI the moment the pull request is open: with no CI waited
    // for, the sprint is done at once.
    let at_once = CiWait {
        waits: forge.config.ci == CiPolicy::Required,
        waited: Duration::ZERO,
        absent_after: forge.config.ci_absent_after.0,
        timeout: forge.config.ci_timeout.0,
    };
    if ci_verdict(&[], at_once) == CiVerdict::NotWaited {
        events.push(Event::ChecksPassed {
            head,
            checks: Vec::new(),
            none: false,
        });
    }
    Ok((events, Vec::new()))
}

/// Whether the reviewed `head` must wait before it is pushed, because it changes files the
/// forge would run (with the repository's secrets) and no person has let that head run:
/// `Some(None)` while it waits already, `Some(Some(event))` to hold it now, `None` to push.
async fn ci_files_held(
    forge: &ProjectForge,
    repo: &Repo,
    sprint: &Sprint,
    log: &[TransitionRecord],
    head: &str,
) -> Result<Option<Option<Event>>, ForgeError> {
    use crate::pipeline::fsm::Note;
    if crate::store::ci_files_held(log) == Some(head) {
        return Ok(Some(None));
    }
    let let_run = log
        .iter()
        .any(|t| matches!(&t.note, Some(Note::CiApproved { head: h }) if h == head));
    let Some(base) = sprint.base_commit.as_deref() else {
        return Ok(None);
    };
    if let_run {
        return Ok(None);
    }
    let changed: Vec<String> = crate::git::patch::diffstat(repo, base, head)
        .await
        .map_err(ForgeError::Invalid)?
        .into_iter()
        .map(|(path, _, _)| path)
        .collect();
    let files = crate::forge::ci_files::touched(&changed, &forge.config.ci_files);
    Ok((!files.is_empty()).then(|| {
        Some(Event::CiFilesHeld {
            head: head.to_string(),
            files,
        })
    }))
}

/// The pull request's body where no summary is given: the sprint's goal and where the
/// branch comes from (no agent's words: they are quoted inert only by the summary).
async fn body(store: &Store, sprint: &Sprint, head: &str) -> String {
    let mut out = format!(
        "{}\n\nOpened by hanarang for {} (branch `{}` at `{}`).\n",
        sprint.goal, sprint.id, sprint.branch, head
    );
    if let (Ok(runs), Ok(log)) = (
        store.runs(&sprint.id).await,
        store.transitions(&sprint.id).await,
    ) {
        let contract = crate::store::contract_results(&runs, &log);
        let passed = contract.iter().filter(|c| c.passed == Some(true)).count();
        if !contract.is_empty() {
            out.push_str(&format!(
                "\nThe review passed {passed} of the contract's {} items.\n",
                contract.len()
            ));
        }
    }
    out
}

/// Whether git's failure is the network's (tried again later) rather than a refusal.
fn unreachable(why: &str) -> bool {
    [
        "Could not resolve host",
        "Failed to connect",
        "Connection refused",
        "Connection timed out",
        "Operation timed out",
        "The requested URL returned error: 5",
        "timed out",
    ]
    .iter()
    .any(|sign| why.contains(sign))
}
