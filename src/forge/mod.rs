//! The project's code forge: where a sprint is delivered as a pull request that the
//! team's CI checks and its people review, merged when a person approves. One trait,
//! `Forge`, that the loop asks for facts (a pull request's head, its checks, reviews and
//! comments) and for its writes (open, update, merge); one implementation per kind of
//! forge over HTTP (`github.rs`, `forgejo.rs`), both over one client (`http.rs`) that
//! makes conditional requests and honours the forge's rate limits. The branch itself is
//! pushed by hanarang's own git (`crate::git`), never by an agent.

use std::fmt;

use async_trait::async_trait;

use crate::config::{ForgeConfig, ForgeKind, MergeMethod};

pub mod ci_files;
mod forgejo;
mod github;
mod http;
pub mod words;

pub use http::Budget;

/// A pull request as the forge shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    /// Its page, for people.
    pub url: String,
    pub state: PrState,
    /// The commit its head branch points at.
    pub head: String,
    pub head_branch: String,
    pub base_branch: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrState {
    Open,
    /// Closed without a merge, by that login when the forge says.
    Closed {
        by: Option<String>,
    },
    /// Merged as `commit`, by that login when the forge says.
    Merged {
        by: Option<String>,
        commit: Option<String>,
    },
}

/// One of the forge's checks on a commit: a check run (GitHub) or a commit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub state: CheckState,
    /// The forge's own word: `success`, `failure`, `timed_out`, `error`, `pending`, …
    pub conclusion: String,
    /// Its page, for people.
    pub url: Option<String>,
    /// What the forge said of it (a check run's output, a status's description).
    pub summary: Option<String>,
    /// Where its log can be read, when the forge gives one (a GitHub Actions job).
    pub log: Option<String>,
}

pub use crate::domain::CheckState;

/// A review of a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub id: u64,
    pub login: String,
    pub state: ReviewState,
    pub body: String,
    /// The commit it reviewed.
    pub commit: Option<String>,
    /// Its comments on lines of the diff.
    pub comments: Vec<LineComment>,
}

pub use crate::domain::ReviewState;

/// A review's comment on a line of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineComment {
    pub path: String,
    pub line: Option<u64>,
    pub body: String,
}

/// A comment on the pull request's conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub id: u64,
    pub login: String,
    pub body: String,
}

/// The merge commit's title and message, as hanarang writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeMessage {
    pub title: String,
    pub body: String,
}

/// What the token may do on the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    pub default_branch: String,
    pub push: bool,
    /// Merge, where the forge tells it (GitHub's `maintain`/`admin` or `push`).
    pub merge: bool,
}

/// Why a forge call gave no answer. Each names what a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForgeError {
    /// 401: the token was refused.
    Unauthorized(String),
    /// 404: the repository, pull request or branch is not there (or not for this token).
    NotFound(String),
    /// The forge said no to a write, in its words (a merge refused: branch protection,
    /// required reviews, a conflict, a moved head).
    Refused { status: u16, message: String },
    /// 403/429 for its rate limit: nothing is asked before `until_ms` (unix ms).
    RateLimited { until_ms: i64 },
    /// The forge cannot be reached or failed (5xx, a timeout): tried again later.
    Unavailable(String),
    /// The forge answered something this client does not read.
    Invalid(String),
}

impl fmt::Display for ForgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForgeError::Unauthorized(m) => write!(f, "the forge refused the token: {m}"),
            ForgeError::NotFound(what) => write!(f, "not found on the forge: {what}"),
            ForgeError::Refused { status, message } => {
                write!(f, "the forge refused ({status}): {message}")
            }
            ForgeError::RateLimited { until_ms } => write!(
                f,
                "the forge's rate limit is reached until {}",
                crate::notify::messages::clock_time(*until_ms)
            ),
            ForgeError::Unavailable(m) => write!(f, "the forge cannot be reached: {m}"),
            ForgeError::Invalid(m) => {
                write!(f, "the forge answered what hanarang cannot read: {m}")
            }
        }
    }
}

impl std::error::Error for ForgeError {}

impl ForgeError {
    /// What kind of trouble it is, for the rules that decide what follows.
    pub fn fault(&self) -> crate::domain::ForgeFault {
        use crate::domain::ForgeFault;
        match self {
            ForgeError::Unauthorized(_) | ForgeError::NotFound(_) | ForgeError::Refused { .. } => {
                ForgeFault::Refused
            }
            ForgeError::RateLimited { .. } => ForgeFault::RateLimited,
            ForgeError::Unavailable(_) | ForgeError::Invalid(_) => ForgeFault::Unreachable,
        }
    }
}

pub type Result<T> = std::result::Result<T, ForgeError>;

/// A code forge's REST API, as the pipeline needs it.
#[async_trait]
pub trait Forge: Send + Sync + fmt::Debug {
    /// The login the token is.
    async fn login(&self) -> Result<String>;
    /// The user name hanarang's git gives with the token over HTTPS.
    async fn git_user(&self) -> Result<String>;
    async fn repository(&self) -> Result<Repository>;
    /// The commit `branch` points at on the forge; `None` when it has no such branch.
    async fn branch(&self, branch: &str) -> Result<Option<String>>;
    /// The open pull request from `head_branch`, when there is one.
    async fn open_pull_request(&self, head_branch: &str) -> Result<Option<PullRequest>>;
    /// Opens a pull request from `head_branch` onto `base_branch`.
    async fn create_pull_request(
        &self,
        head_branch: &str,
        base_branch: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest>;
    /// Sets a pull request's title and body.
    async fn update_pull_request(
        &self,
        number: u64,
        title: &str,
        body: &str,
    ) -> Result<PullRequest>;
    async fn pull_request(&self, number: u64) -> Result<PullRequest>;
    /// The checks on `commit`: check runs and commit statuses alike.
    async fn checks(&self, commit: &str) -> Result<Vec<Check>>;
    /// The last `max_bytes` of a check's log, when it has one.
    async fn log_tail(&self, check: &Check, max_bytes: usize) -> Result<Option<String>>;
    async fn reviews(&self, number: u64) -> Result<Vec<Review>>;
    async fn comments(&self, number: u64) -> Result<Vec<Comment>>;
    /// Merges the pull request with `method`, only while its head is `head`, its commit
    /// written with `message` (never the forge's default, which copies the commits'
    /// subjects); a refusal is `ForgeError::Refused` with the forge's words.
    async fn merge(
        &self,
        number: u64,
        head: &str,
        method: MergeMethod,
        message: &MergeMessage,
    ) -> Result<Option<String>>;
    /// What this client asked of the forge so far.
    fn budget(&self) -> Budget;
}

/// A forge's token: never printed, zeroed when dropped.
pub struct ForgeToken(secrecy::SecretString);

impl ForgeToken {
    pub fn new(token: String) -> ForgeToken {
        ForgeToken(secrecy::SecretString::new(token))
    }

    /// The token itself, for the one place that hands it on (git's credential file).
    pub fn expose(&self) -> &str {
        use secrecy::ExposeSecret;
        self.0.expose_secret()
    }
}

impl fmt::Debug for ForgeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ForgeToken(***)")
    }
}

/// The forge of `config`, with its token.
pub fn connect(config: &ForgeConfig, token: &ForgeToken) -> Result<Box<dyn Forge>> {
    let token = secrecy::SecretString::new(token.expose().to_string());
    let (Some(api), Some((owner, name))) = (config.api_base(), config.owner_and_name()) else {
        return Err(ForgeError::Invalid(format!(
            "no API URL or no owner/name for {:?}",
            config.repo
        )));
    };
    Ok(match config.kind {
        ForgeKind::Github => Box::new(github::GitHub::new(&api, token, owner, name)?),
        ForgeKind::Forgejo => Box::new(forgejo::Forgejo::new(&api, token, owner, name)?),
    })
}

/// The forge's token, read from its file (or systemd's credential): one line, trimmed.
pub fn read_token(config: &ForgeConfig) -> std::result::Result<ForgeToken, String> {
    let path = config
        .token_path()
        .ok_or("no token_file and no systemd credential forge-token")?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read the forge's token from {}: {e}", path.display()))?;
    let token = text.trim();
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err(format!(
            "{} does not hold one token on one line",
            path.display()
        ));
    }
    Ok(ForgeToken::new(token.to_string()))
}
