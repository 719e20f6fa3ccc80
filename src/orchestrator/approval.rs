//! What an approval deploys: the commit the approving review saw, noted with the move into
//! `done`. Before the deployer starts (an approval, a resume into the deploy, a retry of
//! it), the loop asks git whether the branch still holds exactly that commit
//! (`sister::approved`); when it does not, the rules send the sprint back to review.

use super::{Orchestrator, OrchestratorError};
use crate::store::{Run, Sprint};

/// The approved commit of a sprint, and why it is no longer what would deploy (`None`:
/// it is).
pub(super) struct Gate {
    pub approved: String,
    pub moved: Option<String>,
}

impl Orchestrator {
    /// The approved commit of `sprint` and whether it still is what the branch holds;
    /// `None` when there is no git to tell (no project, no base, no approved head).
    pub(super) async fn gate(&self, sprint: &Sprint) -> Result<Option<Gate>, OrchestratorError> {
        // The base is recorded beside the loop's copies of the sprint, not in them.
        let base = match &sprint.base_commit {
            Some(base) => Some(base.clone()),
            None => self
                .store
                .sprint(&sprint.id)
                .await?
                .and_then(|s| s.base_commit),
        };
        let (Some(project), Some(base)) = (self.config.projects.get(&sprint.project), base) else {
            return Ok(None);
        };
        let log = self.store.transitions(&sprint.id).await?;
        let runs = self.store.runs(&sprint.id).await?;
        let Some(approved) = crate::store::approved_head(&log, &runs) else {
            return Ok(None);
        };
        let repo = self.repo(&project.workdir);
        let moved = crate::git::approved::moved(&repo, &sprint.branch, &base, &approved).await;
        if let Some(why) = &moved {
            tracing::warn!(sprint = %sprint.id, %approved, %why, "the approved commit is not what would deploy");
        }
        Ok(Some(Gate { approved, moved }))
    }
}

/// The head an approving review's run was given (`None` outside git).
pub(super) fn reviewed_head(runs: &[Run], run_id: &str) -> Option<String> {
    runs.iter()
        .find(|r| r.run_id == run_id)
        .and_then(|r| r.git_head.clone())
}
