//! GitHub's REST API (github.com, and Enterprise at its `api_url`): pull requests, check
//! runs and commit statuses, reviews and comments, the merge at an expected head. The
//! shapes read are the documented ones, fields this client does not use left out.

use async_trait::async_trait;
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::http::{Budget, Client, Scheme};
use super::{
    Check, CheckState, Comment, Forge, ForgeError, LineComment, MergeMessage, PrState, PullRequest,
    Repository, Result, Review, ReviewState,
};
use crate::config::MergeMethod;

#[derive(Debug)]
pub struct GitHub {
    client: Client,
    owner: String,
    /// `owner/name`.
    repo: String,
}

impl GitHub {
    pub fn new(
        base: &str,
        token: secrecy::SecretString,
        owner: &str,
        name: &str,
    ) -> Result<GitHub> {
        Ok(GitHub {
            client: Client::new(base, token, Scheme::Bearer)?,
            owner: owner.to_string(),
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
    #[serde(default)]
    merged_at: Option<String>,
    merged_by: Option<User>,
    merge_commit_sha: Option<String>,
    head: Ref,
    base: Ref,
}

/// A pull request's issue: who closed it.
#[derive(Deserialize)]
struct Issue {
    closed_by: Option<User>,
}

#[derive(Deserialize)]
struct Ref {
    #[serde(rename = "ref")]
    name: String,
    sha: String,
}

impl From<Pull> for PullRequest {
    fn from(p: Pull) -> PullRequest {
        // A pull request in a list carries no `merged`: its `merged_at` tells.
        let merged = p.merged || p.merged_at.is_some();
        let state = match (p.state.as_str(), merged) {
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
struct CheckRuns {
    check_runs: Vec<CheckRun>,
}

#[derive(Deserialize)]
struct CheckRun {
    id: u64,
    name: String,
    status: String,
    conclusion: Option<String>,
    html_url: Option<String>,
    output: Option<Output>,
    app: Option<App>,
}

#[derive(Deserialize)]
struct Output {
    title: Option<String>,
    summary: Option<String>,
}

#[derive(Deserialize)]
struct App {
    slug: Option<String>,
}

#[derive(Deserialize)]
struct Combined {
    statuses: Vec<Status>,
}

#[derive(Deserialize)]
struct Status {
    context: String,
    state: String,
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
    pull_request_review_id: Option<u64>,
    path: String,
    line: Option<u64>,
    #[serde(default)]
    original_line: Option<u64>,
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
struct Merged {
    sha: Option<String>,
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
    maintain: bool,
    #[serde(default)]
    push: bool,
}

#[derive(Deserialize)]
struct Branch {
    commit: BranchCommit,
}

#[derive(Deserialize)]
struct BranchCommit {
    sha: String,
}

fn query(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[async_trait]
impl Forge for GitHub {
    async fn login(&self) -> Result<String> {
        Ok(self.client.get::<User>("/user").await?.login)
    }

    /// GitHub takes any user with an app or personal token; this is the documented one.
    async fn git_user(&self) -> Result<String> {
        Ok("x-access-token".to_string())
    }

    async fn repository(&self) -> Result<Repository> {
        let r: Repo = self.client.get(&self.path("")).await?;
        let p = r.permissions;
        Ok(Repository {
            default_branch: r.default_branch,
            push: p.push || p.maintain || p.admin,
            merge: p.push || p.maintain || p.admin,
        })
    }

    async fn branch(&self, branch: &str) -> Result<Option<String>> {
        let b: Option<Branch> = self
            .client
            .get_optional(&self.path(&format!("/branches/{}", query(branch))))
            .await?;
        Ok(b.map(|b| b.commit.sha))
    }

    async fn open_pull_request(&self, head_branch: &str) -> Result<Option<PullRequest>> {
        let head = format!("{}:{head_branch}", self.owner);
        let pulls: Vec<Pull> = self
            .client
            .get(&self.path(&format!("/pulls?state=open&head={}", query(&head))))
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
        // The pull request does not say who closed it; its issue does.
        if let PrState::Closed { by } = &mut pull.state {
            let issue: Issue = self
                .client
                .get(&self.path(&format!("/issues/{number}")))
                .await?;
            *by = issue.closed_by.map(|u| u.login);
        }
        Ok(pull)
    }

    async fn checks(&self, commit: &str) -> Result<Vec<Check>> {
        let runs: CheckRuns = self
            .client
            .get(&self.path(&format!("/commits/{commit}/check-runs?per_page=100")))
            .await?;
        let combined: Combined = self
            .client
            .get(&self.path(&format!("/commits/{commit}/status?per_page=100")))
            .await?;
        let mut checks: Vec<Check> = runs
            .check_runs
            .into_iter()
            .map(|r| {
                let state = match (r.status.as_str(), r.conclusion.as_deref()) {
                    ("completed", Some("success" | "neutral" | "skipped")) => CheckState::Passed,
                    ("completed", _) => CheckState::Failed,
                    _ => CheckState::Pending,
                };
                let actions = r
                    .app
                    .and_then(|a| a.slug)
                    .is_some_and(|slug| slug == "github-actions");
                let summary = r
                    .output
                    .map(|o| {
                        [o.title, o.summary]
                            .into_iter()
                            .flatten()
                            .filter(|s| !s.is_empty())
                            .collect::<Vec<_>>()
                            .join(": ")
                    })
                    .filter(|s| !s.is_empty());
                Check {
                    name: r.name,
                    state,
                    conclusion: r.conclusion.unwrap_or(r.status),
                    url: r.html_url,
                    summary,
                    // An Actions job's id is its check run's.
                    log: actions.then(|| self.path(&format!("/actions/jobs/{}/logs", r.id))),
                }
            })
            .collect();
        checks.extend(combined.statuses.into_iter().map(|s| Check {
            state: match s.state.as_str() {
                "success" => CheckState::Passed,
                "pending" => CheckState::Pending,
                _ => CheckState::Failed,
            },
            name: s.context,
            conclusion: s.state,
            url: s.target_url,
            summary: s.description.filter(|d| !d.is_empty()),
            log: None,
        }));
        Ok(checks)
    }

    async fn log_tail(&self, check: &Check, max_bytes: usize) -> Result<Option<String>> {
        let Some(path) = &check.log else {
            return Ok(None);
        };
        match self.client.tail(path, max_bytes).await {
            Ok(text) => Ok(Some(text)),
            // A log expired or not kept: the check is reported without it.
            Err(ForgeError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn reviews(&self, number: u64) -> Result<Vec<Review>> {
        let raw: Vec<ReviewRaw> = self
            .client
            .get(&self.path(&format!("/pulls/{number}/reviews?per_page=100")))
            .await?;
        let comments: Vec<ReviewComment> = self
            .client
            .get(&self.path(&format!("/pulls/{number}/comments?per_page=100")))
            .await?;
        Ok(raw
            .into_iter()
            .map(|r| Review {
                id: r.id,
                login: r.user.map(|u| u.login).unwrap_or_default(),
                state: match r.state.as_str() {
                    "APPROVED" => ReviewState::Approved,
                    "CHANGES_REQUESTED" => ReviewState::ChangesRequested,
                    "COMMENTED" => ReviewState::Commented,
                    _ => ReviewState::Other,
                },
                body: r.body.unwrap_or_default(),
                commit: r.commit_id,
                comments: comments
                    .iter()
                    .filter(|c| c.pull_request_review_id == Some(r.id))
                    .map(|c| LineComment {
                        path: c.path.clone(),
                        line: c.line.or(c.original_line),
                        body: c.body.clone(),
                    })
                    .collect(),
            })
            .collect())
    }

    async fn comments(&self, number: u64) -> Result<Vec<Comment>> {
        let raw: Vec<IssueComment> = self
            .client
            .get(&self.path(&format!("/issues/{number}/comments?per_page=100")))
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
        let merged: Merged = self
            .client
            .write(
                Method::PUT,
                &self.path(&format!("/pulls/{number}/merge")),
                &json!({
                    "merge_method": method.as_str(),
                    "sha": head,
                    "commit_title": message.title,
                    "commit_message": message.body,
                }),
            )
            .await?;
        Ok(merged.sha)
    }

    fn budget(&self) -> Budget {
        self.client.budget()
    }
}
