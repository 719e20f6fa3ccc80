//! What a test makes happen on the forge, as its people, its CI and its operators would:
//! checks and statuses on a commit, reviews and comments on a PR, a merge or a close on
//! the forge's own page, a push by someone else, a repository that refuses merges, rate
//! limits, an outage. Each is a plain method on [`Forge`]; a control misused by the test
//! (a PR that does not exist) panics with what was wrong.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::bare::{Signature, Style};
use super::state::{CheckRun, CommitStatus, IssueComment, LineComment, Review, now};
use super::{Etags, Forge, Kind, Limit, Outage, Permissions, Push, Verdict};

/// Who pushes in [`Forge::push_foreign`].
pub const SOMEONE_ELSE: &str = "someone-else";

impl Forge {
    /// Sets the check run `name` on `target` (a branch, read now, or a commit id), as
    /// GitHub Actions reports a job: `status` `queued` | `in_progress` | `completed`,
    /// `conclusion` (when completed) `success` | `failure` | `cancelled` | `timed_out` |
    /// `neutral` | `skipped` | `action_required` | …. With a `log` the run is an Actions
    /// job whose log `GET …/actions/jobs/{id}/logs` redirects to; without, a third-party
    /// app's check with no log. Setting the same name on the same commit updates the run.
    /// Returns its id (also its job's). GitHub only.
    pub fn set_check(
        &self,
        target: &str,
        name: &str,
        status: &str,
        conclusion: Option<&str>,
        log: Option<&[u8]>,
    ) -> u64 {
        assert_eq!(self.kind(), Kind::GitHub, "check runs are GitHub's");
        let sha = self.resolve(target);
        let mut state = self.inner.state();
        let at = now();
        let existing = state
            .checks
            .iter()
            .position(|c| c.sha == sha && c.name == name);
        let id = match existing {
            Some(i) => state.checks[i].id,
            None => state.id(),
        };
        let previous = existing.map(|i| state.checks.remove(i));
        state.checks.push(CheckRun {
            id,
            sha,
            name: name.to_string(),
            status: status.to_string(),
            conclusion: conclusion.map(str::to_string),
            title: previous.as_ref().and_then(|c| c.title.clone()),
            summary: previous.as_ref().and_then(|c| c.summary.clone()),
            text: previous.as_ref().and_then(|c| c.text.clone()),
            started_at: previous.as_ref().map_or(at, |c| c.started_at),
            completed_at: (status == "completed").then_some(at),
            log: log.map(|l| Arc::new(l.to_vec())),
        });
        drop(state);
        self.inner.bump();
        id
    }

    /// A check run's `output` (title, summary, text), as an app reports it.
    pub fn set_check_output(
        &self,
        id: u64,
        title: Option<&str>,
        summary: Option<&str>,
        text: Option<&str>,
    ) {
        let mut state = self.inner.state();
        let check = state
            .checks
            .iter_mut()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no check run {id}"));
        check.title = title.map(str::to_string);
        check.summary = summary.map(str::to_string);
        check.text = text.map(str::to_string);
        drop(state);
        self.inner.bump();
    }

    /// A commit status on `target` (a branch, read now, or a commit id): `state`
    /// `pending` | `success` | `failure` | `error` (Forgejo also `warning`). The latest per
    /// `context` counts. Returns its id.
    pub fn set_status(
        &self,
        target: &str,
        context: &str,
        state: &str,
        target_url: Option<&str>,
        description: Option<&str>,
    ) -> u64 {
        let sha = self.resolve(target);
        let mut held = self.inner.state();
        let id = held.id();
        held.statuses.push(CommitStatus {
            id,
            sha,
            context: context.to_string(),
            state: state.to_string(),
            target_url: target_url.map(str::to_string),
            description: description.map(str::to_string),
            at: now(),
        });
        drop(held);
        self.inner.bump();
        id
    }

    /// `login` reviews pull request `pr` at its current head, with comments on lines
    /// `(path, line in the new file, text)`. Returns the review's id.
    pub fn add_review(
        &self,
        pr: u64,
        login: &str,
        verdict: Verdict,
        body: &str,
        line_comments: &[(&str, u64, &str)],
    ) -> u64 {
        let mut state = self.inner.state();
        let head = state
            .pr(pr)
            .unwrap_or_else(|| panic!("no pull request #{pr}"))
            .head_sha
            .clone();
        let at = now();
        let review_id = state.id();
        state.reviews.push(Review {
            id: review_id,
            pr,
            login: login.to_string(),
            verdict,
            dismissed: false,
            body: body.to_string(),
            commit_id: head.clone(),
            at,
        });
        for (path, line, text) in line_comments {
            let id = state.id();
            state.line_comments.push(LineComment {
                id,
                review_id,
                pr,
                login: login.to_string(),
                path: path.to_string(),
                line: *line,
                body: text.to_string(),
                commit_id: head.clone(),
                at,
            });
        }
        drop(state);
        self.inner.bump();
        review_id
    }

    /// A maintainer dismisses a review (GitHub: `DISMISSED`; Forgejo: `dismissed`).
    pub fn dismiss_review(&self, review: u64) {
        let mut state = self.inner.state();
        let found = state
            .reviews
            .iter_mut()
            .find(|r| r.id == review)
            .unwrap_or_else(|| panic!("no review {review}"));
        found.dismissed = true;
        drop(state);
        self.inner.bump();
    }

    /// `login` comments on pull request `pr`'s conversation. Returns the comment's id.
    pub fn comment(&self, pr: u64, login: &str, body: &str) -> u64 {
        let mut state = self.inner.state();
        assert!(state.pr(pr).is_some(), "no pull request #{pr}");
        let id = state.id();
        state.comments.push(IssueComment {
            id,
            pr,
            login: login.to_string(),
            body: body.to_string(),
            at: now(),
        });
        drop(state);
        self.inner.bump();
        id
    }

    /// `login` merges pull request `pr` on the forge's page (a merge commit). Returns the
    /// commit the base now points at.
    pub fn merge_on_forge(&self, pr: u64, login: &str) -> String {
        let mut state = self.inner.state();
        let found = state
            .pr(pr)
            .unwrap_or_else(|| panic!("no pull request #{pr}"));
        assert!(found.open, "merging #{pr} on the forge: it is not open");
        let title = found.title.clone();
        let message = format!("Merge pull request #{pr} by {login}\n\n{title}");
        let commit = self
            .inner
            .merge_pr(&mut state, pr, Style::Merge, &message, login)
            .unwrap_or_else(|e| panic!("merging #{pr} on the forge: {e:?}"));
        drop(state);
        self.inner.bump();
        commit
    }

    /// `login` closes pull request `pr` without merging it.
    pub fn close(&self, pr: u64, login: &str) {
        let mut state = self.inner.state();
        assert!(
            self.inner.set_open(&mut state, pr, false, login),
            "closing #{pr}: no such open pull request"
        );
        drop(state);
        self.inner.bump();
    }

    /// `login` reopens pull request `pr` (its head branch must exist).
    pub fn reopen(&self, pr: u64, login: &str) {
        let mut state = self.inner.state();
        assert!(
            self.inner.set_open(&mut state, pr, true, login),
            "reopening #{pr}: merged, or its head branch is gone"
        );
        drop(state);
        self.inner.bump();
    }

    /// Someone else ([`SOMEONE_ELSE`]) pushes a commit writing `files` (path, content) on
    /// `branch` (created when missing). Returns the new commit.
    pub fn push_foreign(&self, branch: &str, files: &[(&str, &str)]) -> String {
        self.push_as(SOMEONE_ELSE, branch, files)
    }

    /// `login` pushes a commit writing `files` on `branch` (created when missing); on an
    /// empty forge, `push_as(…, "main", …)` makes the base. Returns the new commit.
    pub fn push_as(&self, login: &str, branch: &str, files: &[(&str, &str)]) -> String {
        let email = format!("{login}@users.noreply.invalid");
        let author = Signature {
            name: login,
            email: &email,
        };
        let message = format!("Change by {login}");
        let (old, new) = self
            .inner
            .bare
            .commit_files(branch, files, &author, &message)
            .unwrap_or_else(|e| panic!("{login}'s push to {branch}: {e}"));
        let branches = self.inner.bare.branches();
        let mut state = self.inner.state();
        let at_index = state.requests.len();
        state.pushes.push(Push {
            at_index,
            refname: format!("refs/heads/{branch}"),
            old: old.unwrap_or_else(|| "0".repeat(40)),
            new: new.clone(),
            by: login.to_string(),
            applied: true,
        });
        state.set_branches(self.inner.kind, branches);
        drop(state);
        self.inner.bump();
        new
    }

    /// `login` opens a pull request of `head` into `base` on the forge. Returns its number.
    pub fn open_pr_as(&self, login: &str, head: &str, base: &str, title: &str) -> u64 {
        let mut state = self.inner.state();
        for branch in [head, base] {
            assert!(state.branches.contains_key(branch), "no branch {branch}");
        }
        let number = self
            .inner
            .open_pr(&mut state, head, base, title, "", login)
            .number;
        drop(state);
        self.inner.bump();
        number
    }

    /// Every merge asked through the API is refused with `status` (GitHub and Forgejo
    /// answer 405) and `message` (the forge's reason: branch protection, required
    /// reviews, …) until [`Forge::accept_merges`].
    pub fn refuse_merges(&self, status: u16, message: &str) {
        self.inner.state().refusal = Some((status, message.to_string()));
        self.inner.bump();
    }

    pub fn accept_merges(&self) {
        self.inner.state().refusal = None;
        self.inner.bump();
    }

    /// The merge methods the repository allows, as the forge names them (GitHub `merge`,
    /// `squash`, `rebase`; Forgejo also `rebase-merge`, `fast-forward-only`).
    pub fn allow_merge_methods(&self, methods: &[&str]) {
        self.inner.state().merge_methods = methods.iter().map(|m| m.to_string()).collect();
        self.inner.bump();
    }

    /// The next `n` API requests are refused with `limit`.
    pub fn rate_limit(&self, n: u32, limit: Limit) {
        self.inner.state().forced_limit = (n > 0).then_some((n, limit));
        self.inner.bump();
    }

    /// GitHub's hourly budget (5,000 at the start): `remaining` requests left until it
    /// resets `reset_in` from now. Spent, every API request is refused 403 until then.
    pub fn set_rate_budget(&self, remaining: u32, reset_in: std::time::Duration) {
        let mut state = self.inner.state();
        state.remaining = remaining;
        state.reset_at = now() + reset_in.as_secs();
        drop(state);
        self.inner.bump();
    }

    /// While `lose` holds, a merge asked through the API is made but its answer is never
    /// sent (as when the asker dies, or the network drops, right after the call); once
    /// cleared, the held connections close unanswered.
    pub fn lose_merge_answers(&self, lose: bool) {
        self.inner.state().lose_merge_answers = lose;
        self.inner.bump();
    }

    /// The forge goes down until [`Forge::up`]. With [`Outage::Refused`], returns once
    /// nothing listens and every open connection is closed.
    pub fn down(&self, outage: Outage) {
        self.inner.outage.send_replace(Some(outage));
        self.inner.bump();
        if outage == Outage::Refused {
            self.settle("stop listening", |inner| {
                !*inner.listening.borrow() && inner.connections.load(Ordering::SeqCst) == 0
            });
        }
    }

    /// The forge is back, on the same port; returns once it listens.
    pub fn up(&self) {
        self.inner.outage.send_replace(None);
        self.inner.bump();
        self.settle("listen again", |inner| *inner.listening.borrow());
    }

    /// Waits (a few seconds at most) for the server's thread to catch up with a control.
    fn settle(&self, what: &str, done: impl Fn(&super::state::Inner) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !done(&self.inner) {
            assert!(
                std::time::Instant::now() < deadline,
                "the fake forge did not {what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// The pull request is gone (an admin deleted it, or the repository was re-created):
    /// 404 from now on.
    pub fn delete_pr(&self, pr: u64) {
        let mut state = self.inner.state();
        let found = state
            .pr_mut(pr)
            .unwrap_or_else(|| panic!("no pull request #{pr}"));
        found.deleted = true;
        drop(state);
        self.inner.bump();
    }

    /// Someone deletes `branch` on the forge. On GitHub, an open PR whose head it was is
    /// closed.
    pub fn delete_branch(&self, branch: &str) {
        let old = self.branch(branch);
        self.inner
            .bare
            .delete_branch(branch)
            .unwrap_or_else(|e| panic!("deleting {branch}: {e}"));
        let branches = self.inner.bare.branches();
        let mut state = self.inner.state();
        let at_index = state.requests.len();
        state.pushes.push(Push {
            at_index,
            refname: format!("refs/heads/{branch}"),
            old: old.unwrap_or_else(|| "0".repeat(40)),
            new: "0".repeat(40),
            by: SOMEONE_ELSE.to_string(),
            applied: true,
        });
        state.set_branches(self.inner.kind, branches);
        drop(state);
        self.inner.bump();
    }

    /// What the token may do from now on.
    pub fn set_permissions(&self, permissions: Permissions) {
        self.inner.state().permissions = permissions;
        self.inner.bump();
    }

    /// Which `ETag` GET answers carry (GitHub's default `Weak`, Forgejo's `Off`).
    pub fn set_etags(&self, etags: Etags) {
        self.inner.state().etags = etags;
        self.inner.bump();
    }

    /// A branch name, read now, or a commit id that exists.
    fn resolve(&self, target: &str) -> String {
        let state = self.inner.state();
        state
            .resolve(&self.inner.bare, target)
            .unwrap_or_else(|| panic!("no branch or commit {target} on the forge"))
    }
}
