//! Before a run in a git workdir: the sprint's branch made from its base (recorded once),
//! checked out, on a tree with no changes a run did not make (`sister::branch`).

use super::Orchestrator;
use crate::config::ProjectConfig;
use crate::domain::RunOutcome;
use crate::git::Repo;
use crate::git::branch::{self, Checkout};
use crate::store::{Run, Sprint};

impl Orchestrator {
    /// The run's checkout, `None` when the workdir is no git repository; the error is the
    /// run's `spawn_failed` detail.
    pub(super) async fn checkout(
        &self,
        sprint: &Sprint,
        runs: &[Run],
        project: &ProjectConfig,
    ) -> Result<Option<Checkout>, String> {
        let repo = self.repo(&project.workdir);
        if !repo.is_repository() {
            // A sprint whose branch was made there does not go on without its repository:
            // its facts (the dirty tree, the claims) would go unchecked.
            let was = sprint
                .base_commit
                .as_deref()
                .or_else(|| runs.iter().find_map(|r| r.git_head.as_deref()));
            return match was {
                Some(commit) => Err(format!(
                    "the workdir {} is no longer a git repository (no .git), but the sprint's branch {} was made there (at {commit}): restore the repository, then resume the sprint",
                    project.workdir.display(),
                    sprint.branch
                )),
                None => Ok(None),
            };
        }
        // A run refused before its process started made no change; while another run of
        // the sprint works in the tree (a parallel reviewer), what changes there is its.
        let ran: Vec<&Run> = runs
            .iter()
            .filter(|r| r.outcome != Some(RunOutcome::SpawnFailed))
            .collect();
        let from = ran.iter().map(|r| r.started_at).min();
        let until = if ran.iter().any(|r| r.ended_at.is_none()) {
            Some(i64::MAX)
        } else {
            ran.iter().filter_map(|r| r.ended_at).max()
        };
        let facts = branch::Sprint {
            project: &sprint.project,
            branch: &sprint.branch,
            recorded_base: sprint
                .base_branch
                .as_deref()
                .zip(sprint.base_commit.as_deref()),
            configured_base: project.base_branch.as_deref(),
            worked: from.zip(until),
        };
        let checkout = branch::prepare(&repo, &facts).await?;
        if sprint.base_commit.is_none() {
            self.store
                .record_base(&sprint.id, &checkout.base_branch, &checkout.base_commit)
                .await
                .map_err(|e| format!("cannot record the sprint's base: {e}"))?;
        }
        Ok(Some(checkout))
    }

    /// git on `workdir`, fenced from hanarang's own files as a sister is.
    pub(super) fn repo(&self, workdir: &std::path::Path) -> Repo {
        Repo::new(
            workdir,
            &crate::fence::Own::of(&self.config, self.store.runs_dir()),
        )
    }
}
