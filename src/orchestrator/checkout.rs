//! Before a run in a git workdir: the sprint's branch made from its base (recorded once),
//! checked out, on a tree with no changes a run did not make (`sister::branch`).

use super::Orchestrator;
use crate::config::ProjectConfig;
use crate::sister::branch::{self, Checkout};
use crate::sister::facts;
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
        if !facts::in_git_repository(&project.workdir) {
            return Ok(None);
        }
        // While another run of the sprint works in the tree (a parallel reviewer), what
        // is changed there is that run's.
        let in_flight = runs.iter().any(|r| r.ended_at.is_none());
        let last_run_end = if in_flight {
            Some(i64::MAX)
        } else {
            runs.iter().filter_map(|r| r.ended_at).max()
        };
        let facts = branch::Sprint {
            project: &sprint.project,
            branch: &sprint.branch,
            recorded_base: sprint
                .base_branch
                .as_deref()
                .zip(sprint.base_commit.as_deref()),
            configured_base: project.base_branch.as_deref(),
            last_run_end,
        };
        let checkout = branch::prepare(&project.workdir, &facts).await?;
        if sprint.base_commit.is_none() {
            self.store
                .record_base(&sprint.id, &checkout.base_branch, &checkout.base_commit)
                .await
                .map_err(|e| format!("cannot record the sprint's base: {e}"))?;
        }
        Ok(Some(checkout))
    }
}
