//! A pull request's life on the forge, the same whichever API asked: opened on a head and
//! a base, edited, closed, reopened, merged for real in the bare repository. The APIs word
//! the answers; the controls act as people on the forge do.

use super::bare::{MergeError, Signature, Style};
use super::records::{Kind, MergeRecord, PullRequest};
use super::state::{Inner, State, now};

impl Inner {
    /// Opens a pull request of `head` into `base` by `author`. The caller checked both
    /// branches exist.
    pub(super) fn open_pr(
        &self,
        state: &mut State,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        author: &str,
    ) -> PullRequest {
        let at = now();
        let number = state.next_number;
        state.next_number += 1;
        let id = state.id();
        let pr = PullRequest {
            number,
            id,
            title: title.to_string(),
            body: body.to_string(),
            author: author.to_string(),
            head_ref: head.to_string(),
            head_sha: state.branches.get(head).cloned().unwrap_or_default(),
            base_ref: base.to_string(),
            open: true,
            merged: false,
            merged_by: None,
            closed_by: None,
            merge_commit: None,
            created_at: at,
            updated_at: at,
            closed_at: None,
            deleted: false,
        };
        state.prs.push(pr.clone());
        pr
    }

    /// The open pull request of `head` into `base` (any base when `None`).
    pub(super) fn open_pr_for(&self, state: &State, head: &str, base: Option<&str>) -> Option<u64> {
        state
            .prs
            .iter()
            .find(|p| {
                p.open && !p.deleted && p.head_ref == head && base.is_none_or(|b| p.base_ref == b)
            })
            .map(|p| p.number)
    }

    /// Closes (`open == false`) or reopens a pull request as `login`. Reopening needs its
    /// head branch.
    pub(super) fn set_open(&self, state: &mut State, number: u64, open: bool, login: &str) -> bool {
        let head_sha = state
            .pr(number)
            .and_then(|p| state.branches.get(&p.head_ref).cloned());
        let Some(pr) = state.pr_mut(number) else {
            return false;
        };
        if pr.merged || pr.open == open {
            return !pr.merged;
        }
        let at = now();
        if open {
            let Some(sha) = head_sha else {
                return false;
            };
            pr.head_sha = sha;
            pr.closed_by = None;
            pr.closed_at = None;
        } else {
            pr.closed_by = Some(login.to_string());
            pr.closed_at = Some(at);
        }
        pr.open = open;
        pr.updated_at = at;
        true
    }

    /// Merges pull request `number` in the bare repository as `login`, and marks it merged.
    /// Returns the commit its base now points at.
    pub(super) fn merge_pr(
        &self,
        state: &mut State,
        number: u64,
        style: Style,
        message: &str,
        login: &str,
    ) -> Result<String, MergeError> {
        let Some(pr) = state.pr(number).cloned() else {
            return Err(MergeError::Git(format!("no pull request #{number}")));
        };
        let Some(base_sha) = state.branches.get(&pr.base_ref).cloned() else {
            return Err(MergeError::Git(format!("no base branch {}", pr.base_ref)));
        };
        let (name, email) = match self.kind {
            Kind::GitHub => ("GitHub", "noreply@github.com"),
            Kind::Forgejo => ("Forgejo", "noreply@forgejo.invalid"),
        };
        let committer = Signature { name, email };
        let commit = self.bare.merge(
            &pr.base_ref,
            &base_sha,
            &pr.head_sha,
            style,
            message,
            &committer,
        )?;
        let at = now();
        if let Some(pr) = state.pr_mut(number) {
            pr.open = false;
            pr.merged = true;
            pr.merged_by = Some(login.to_string());
            pr.merge_commit = Some(commit.clone());
            pr.closed_at = Some(at);
            pr.updated_at = at;
        }
        let branches = self.bare.branches();
        state.set_branches(self.kind, branches);
        Ok(commit)
    }

    /// Notes a merge the client asked for.
    pub(super) fn record_merge(
        &self,
        state: &mut State,
        number: u64,
        method: &str,
        expected_head: Option<&str>,
        status: u16,
        commit: Option<&str>,
    ) {
        let head = state
            .pr(number)
            .map(|p| p.head_sha.clone())
            .unwrap_or_default();
        state.merges.push(MergeRecord {
            pr: number,
            method: method.to_string(),
            expected_head: expected_head.map(str::to_string),
            head,
            status,
            commit: commit.map(str::to_string),
        });
    }

    /// A user object as both forges nest it (`user`, `merged_by`, `creator`).
    pub(super) fn user_json(&self, login: &str) -> serde_json::Value {
        let id = login
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
            % 1_000_000;
        match self.kind {
            Kind::GitHub => serde_json::json!({
                "login": login,
                "id": id,
                "type": "User",
                "html_url": format!("{}/{login}", self.base_url()),
            }),
            Kind::Forgejo => serde_json::json!({
                "id": id,
                "login": login,
                "login_name": "",
                "full_name": "",
                "email": format!("{login}@noreply.invalid"),
                "username": login,
            }),
        }
    }
}
