//! Forgejo's (and Gitea's: one API) REST API under `…/api/v1`: pull requests, commit
//! statuses, reviews and their comments, comments, the merge at an expected head
//! (`head_commit_id`). The shapes read are the documented ones, fields this client does
//! not use left out. Lists are read one page of 50: a sprint's pull request has fewer
//! reviews and comments than that to act on.

use async_trait::async_trait;
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::http::{Budget, Client, Scheme};
use super::{
    Check, CheckState, Comment, Forge, LineComment, MergeMessage, PrState, PullRequest, Repository,
    Result, Review, ReviewState,
};
use crate::config::MergeMethod;

#[derive(Debug)]
pub struct Forgejo {
    client: Client,
    /// `owner/name`.
    repo: String,
}

impl Forgejo {
    pub fn new(
        base: &str,
        token: secrecy::SecretString,
        owner: &str,
        name: &str,
    ) -> Result<Forgejo> {
        Ok(Forgejo {
            client: Client::new(base, token, Scheme::Token)?,
            repo: format!("{owner}/{name}"),
        })
    }

    fn path(&self, rest: &str) -> String {
        format!("/repos/{}{rest}", self.repo)
    }
}

#[derive(Deserialize)]
struct User {
    login: String,
}

#[derive(Deserialize)]
struct Pull {
    number: u64,
    html_url: String,
    state: String,
    #[serde(default)]
    merged: bool,
    merged_by: Option<User>,
    merge_commit_sha: Option<String>,
    head: Ref,
    base: Ref,
}

/// An event of an issue's timeline (`close`, `reopen`, `comment`, …) and who made it.
#[derive(Deserialize)]
struct TimelineEvent {
    #[serde(rename = "type", default)]
    kind: String,
    user: Option<User>,
}

#[derive(Deserialize)]
struct Ref {
    #[serde(rename = "ref")]
    name: String,
    sha: String,
}

impl From<Pull> for PullRequest {
    fn from(p: Pull) -> PullRequest {
        let state = match (p.state.as_str(), p.merged) {
            (_, true) => PrState::Merged {
                by: p.merged_by.map(|u| u.login),
                commit: p.merge_commit_sha,
            },
            ("closed", false) => PrState::Closed { by: None },
            _ => PrState::Open,
        };
        PullRequest {
            number: p.number,
            url: p.html_url,
            state,
            head: p.head.sha,
            head_branch: p.head.name,
            base_branch: p.base.name,
        }
    }
}

#[derive(Deserialize)]
struct Combined {
    /// `null` when the commit has no status at all.
    #[serde(default)]
    statuses: Option<Vec<Status>>,
}

#[derive(Deserialize)]
struct Status {
    context: String,
    /// Gitea names a status's state `status`.
    status: String,
    target_url: Option<String>,
    description: Option<String>,
}

#[derive(Deserialize)]
struct ReviewRaw {
    id: u64,
    user: Option<User>,
    state: String,
    #[serde(default)]
    body: Option<String>,
    commit_id: Option<String>,
}

#[derive(Deserialize)]
struct ReviewComment {
    path: String,
    /// The line in the new file; Gitea gives `position` (and `original_position`).
    #[serde(default)]
    position: Option<u64>,
    #[serde(default)]
    original_position: Option<u64>,
    body: String,
}

#[derive(Deserialize)]
struct IssueComment {
    id: u64,
    user: Option<User>,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Deserialize)]
struct Repo {
    default_branch: String,
    #[serde(default)]
    permissions: Permissions,
}

#[derive(Deserialize, Default)]
struct Permissions {
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    push: bool,
}

#[derive(Deserialize)]
struct Branch {
    commit: BranchCommit,
}

#[derive(Deserialize)]
struct BranchCommit {
    id: String,
}

fn segment(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[async_trait]
impl Forge for Forgejo {
    async fn login(&self) -> Result<String> {
        Ok(self.client.get::<User>("/user").await?.login)
    }

    /// Forgejo and Gitea want the token's own login.
    async fn git_user(&self) -> Result<String> {
        self.login().await
    }

    async fn repository(&self) -> Result<Repository> {
        let r: Repo = self.client.get(&self.path("")).await?;
        let p = r.permissions;
        Ok(Repository {
            default_branch: r.default_branch,
            push: p.push || p.admin,
            merge: p.push || p.admin,
        })
    }

    async fn branch(&self, branch: &str) -> Result<Option<String>> {
        let b: Option<Branch> = self
            .client
            .get_optional(&self.path(&format!("/branches/{}", segment(branch))))
            .await?;
        Ok(b.map(|b| b.commit.id))
    }

    async fn open_pull_request(&self, head_branch: &str) -> Result<Option<PullRequest>> {
        let pulls: Vec<Pull> = self
            .client
            .get(&self.path("/pulls?state=open&limit=50"))
            .await?;
        Ok(pulls
            .into_iter()
            .map(PullRequest::from)
            .find(|p| p.head_branch == head_branch))
    }

    async fn create_pull_request(
        &self,
        head_branch: &str,
        base_branch: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest> {
        let pull: Pull = self
            .client
            .write(
                Method::POST,
                &self.path("/pulls"),
                &json!({ "title": title, "head": head_branch, "base": base_branch, "body": body }),
            )
            .await?;
        Ok(pull.into())
    }

    async fn update_pull_request(
        &self,
        number: u64,
        title: &str,
        body: &str,
    ) -> Result<PullRequest> {
        let pull: Pull = self
            .client
            .write(
                Method::PATCH,
                &self.path(&format!("/pulls/{number}")),
                &json!({ "title": title, "body": body }),
            )
            .await?;
        Ok(pull.into())
    }

    async fn pull_request(&self, number: u64) -> Result<PullRequest> {
        let pull: Pull = self
            .client
            .get(&self.path(&format!("/pulls/{number}")))
            .await?;
        let mut pull = PullRequest::from(pull);
        // Gitea's pull request does not say who closed it; its issue's timeline does.
        if let PrState::Closed { by } = &mut pull.state {
            let timeline: Vec<TimelineEvent> = self
                .client
                .get(&self.path(&format!("/issues/{number}/timeline")))
                .await?;
            *by = timeline
                .into_iter()
                .rev()
                .find(|e| e.kind == "close")
                .and_then(|e| e.user)
                .map(|u| u.login);
        }
        Ok(pull)
    }

    async fn checks(&self, commit: &str) -> Result<Vec<Check>> {
        let combined: Combined = self
            .client
            .get(&self.path(&format!("/commits/{commit}/status")))
            .await?;
        Ok(combined
            .statuses
            .unwrap_or_default()
            .into_iter()
            .map(|s| Check {
                state: match s.status.as_str() {
                    "success" | "warning" => CheckState::Passed,
                    "pending" => CheckState::Pending,
                    _ => CheckState::Failed,
                },
                name: s.context,
                conclusion: s.status,
                url: s.target_url,
                summary: s.description.filter(|d| !d.is_empty()),
                log: None,
            })
            .collect())
    }

    async fn log_tail(&self, _check: &Check, _max_bytes: usize) -> Result<Option<String>> {
        // A commit status carries a link, not a log.
        Ok(None)
    }

    async fn reviews(&self, number: u64) -> Result<Vec<Review>> {
        let raw: Vec<ReviewRaw> = self
            .client
            .get(&self.path(&format!("/pulls/{number}/reviews?limit=50")))
            .await?;
        let mut reviews = Vec::with_capacity(raw.len());
        for r in raw {
            let state = match r.state.as_str() {
                "APPROVED" => ReviewState::Approved,
                "REQUEST_CHANGES" => ReviewState::ChangesRequested,
                "COMMENT" => ReviewState::Commented,
                _ => ReviewState::Other,
            };
            // Only a review a person acts on has comments worth a request.
            let comments = match state {
                ReviewState::ChangesRequested | ReviewState::Commented => {
                    let raw: Vec<ReviewComment> = self
                        .client
                        .get(&self.path(&format!("/pulls/{number}/reviews/{}/comments", r.id)))
                        .await?;
                    raw.into_iter()
                        .map(|c| LineComment {
                            path: c.path,
                            line: c.position.filter(|p| *p > 0).or(c.original_position),
                            body: c.body,
                        })
                        .collect()
                }
                _ => Vec::new(),
            };
            reviews.push(Review {
                id: r.id,
                login: r.user.map(|u| u.login).unwrap_or_default(),
                state,
                body: r.body.unwrap_or_default(),
                commit: r.commit_id,
                comments,
            });
        }
        Ok(reviews)
    }

    async fn comments(&self, number: u64) -> Result<Vec<Comment>> {
        let raw: Vec<IssueComment> = self
            .client
            .get(&self.path(&format!("/issues/{number}/comments?limit=50")))
            .await?;
        Ok(raw
            .into_iter()
            .map(|c| Comment {
                id: c.id,
                login: c.user.map(|u| u.login).unwrap_or_default(),
                body: c.body.unwrap_or_default(),
            })
            .collect())
    }

    async fn merge(
        &self,
        number: u64,
        head: &str,
        method: MergeMethod,
        message: &MergeMessage,
    ) -> Result<Option<String>> {
        let _: serde_json::Value = self
            .client
            .write(
                Method::POST,
                &self.path(&format!("/pulls/{number}/merge")),
                &json!({
                    "Do": method.as_str(),
                    "head_commit_id": head,
                    "MergeTitleField": message.title,
                    "MergeMessageField": message.body,
                }),
            )
            .await?;
        // The merge's answer is empty: the pull request names its merge commit.
        match self.pull_request(number).await?.state {
            PrState::Merged { commit, .. } => Ok(commit),
            _ => Ok(None),
        }
    }

    fn budget(&self) -> Budget {
        self.client.budget()
    }
}
