//! `[projects.NAME.forge]`: a project that delivers through its code forge — a pull
//! request its CI checks and its people review, merged when a person approves. The token
//! is read from a file (or systemd's credential `forge-token`), never from this file nor
//! an environment a sister inherits.

use super::*;

/// The name of the systemd credential that holds a forge's token
/// (`LoadCredential=forge-token:/etc/hanarang/forge-token`).
pub const FORGE_TOKEN_CREDENTIAL: &str = "forge-token";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeConfig {
    pub kind: ForgeKind,
    /// `owner/name`.
    pub repo: String,
    /// The API's base URL: GitHub Enterprise, a self-hosted Forgejo (`…/api/v1`).
    /// GitHub's default is `https://api.github.com`; Forgejo has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// Where the branch is pushed; by default the forge's HTTPS URL of `repo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The token's file; relative to the config file. Unset: systemd's credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    #[serde(default)]
    pub merge: MergeMethod,
    #[serde(default)]
    pub ci: CiPolicy,
    /// The forge's checks still pending this long after the push: escalated.
    #[serde(default = "default_ci_timeout")]
    pub ci_timeout: Dur,
    /// No check reported this long after the push: done, saying no CI ran.
    #[serde(default = "default_ci_absent_after")]
    pub ci_absent_after: Dur,
    /// How often an open pull request is looked at while its checks run; four times as
    /// long while it waits for a person.
    #[serde(default = "default_poll_interval")]
    pub poll_interval: Dur,
    /// Forge login → Discord user id: whose reviews and comments are notes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub people: BTreeMap<String, u64>,
    /// Files the project's CI runs besides the ones every forge runs (`forge::ci_files`):
    /// globs relative to the repository (`**` any folders, `*` and `?` within a name). A
    /// change to one waits for a person before it is pushed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ci_files: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// github.com and GitHub Enterprise.
    Github,
    /// Forgejo and Gitea: one API.
    Forgejo,
}

impl ForgeConfig {
    /// The repository as one forge knows it, across projects: its API and owner/name
    /// (what its checks at a commit are kept under).
    pub fn repository_key(&self) -> String {
        format!("{} {}", self.api_base().unwrap_or_default(), self.repo)
    }
}

impl ForgeKind {
    /// Its name in the config (`kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::Github => "github",
            ForgeKind::Forgejo => "forgejo",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeMethod {
    #[default]
    Merge,
    Squash,
    Rebase,
}

impl MergeMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            MergeMethod::Merge => "merge",
            MergeMethod::Squash => "squash",
            MergeMethod::Rebase => "rebase",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CiPolicy {
    /// `done` only once the pull request's checks are green.
    #[default]
    Required,
    /// The forge's checks are not waited for.
    None,
}

pub(super) fn default_ci_timeout() -> Dur {
    Dur(Duration::from_secs(60 * 60))
}

pub(super) fn default_ci_absent_after() -> Dur {
    Dur(Duration::from_secs(10 * 60))
}

pub(super) fn default_poll_interval() -> Dur {
    Dur(Duration::from_secs(30))
}

impl ForgeConfig {
    /// The API's base URL, without a trailing `/`.
    pub fn api_base(&self) -> Option<String> {
        let url = match (&self.api_url, self.kind) {
            (Some(url), _) => url.clone(),
            (None, ForgeKind::Github) => "https://api.github.com".into(),
            (None, ForgeKind::Forgejo) => return None,
        };
        Some(url.trim_end_matches('/').to_string())
    }

    /// Where the branch is pushed: `remote`, else the forge's HTTPS URL of the repository.
    pub fn push_url(&self) -> Option<String> {
        if let Some(remote) = &self.remote {
            return Some(remote.clone());
        }
        match self.kind {
            ForgeKind::Github => {
                let api = self.api_base()?;
                // GitHub Enterprise serves its API at <host>/api/v3, github.com at api.*.
                let web = match api.strip_suffix("/api/v3") {
                    Some(host) => host.to_string(),
                    None => api.replacen("://api.", "://", 1),
                };
                Some(format!("{web}/{}.git", self.repo))
            }
            ForgeKind::Forgejo => {
                let api = self.api_base()?;
                let web = api.strip_suffix("/api/v1").unwrap_or(&api);
                Some(format!("{web}/{}.git", self.repo))
            }
        }
    }

    /// Where the token is read from: `token_file`, else systemd's credential.
    pub fn token_path(&self) -> Option<PathBuf> {
        self.token_file
            .clone()
            .or_else(|| Some(super::paths::credentials_dir()?.join(FORGE_TOKEN_CREDENTIAL)))
    }

    /// The owner and the name of `repo`.
    pub fn owner_and_name(&self) -> Option<(&str, &str)> {
        self.repo.split_once('/')
    }
}

/// What is wrong with a project's `forge` table, as (key under the table, reason).
pub(super) fn forge_problems(forge: &ForgeConfig) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut problem = |key: &str, message: String| out.push((key.to_string(), message));
    let part_ok = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match forge.repo.split_once('/') {
        Some((owner, name)) if part_ok(owner) && part_ok(name) => {}
        _ => problem(
            "repo",
            format!(
                "{:?}: expected owner/name (e.g. \"octocat/app\")",
                forge.repo
            ),
        ),
    }
    let is_http = |url: &str| {
        url::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
    };
    match (&forge.api_url, forge.kind) {
        (Some(url), _) => match is_http(url) {
            None => problem(
                "api_url",
                format!("{url:?}: expected a base URL starting with https:// (or http://)"),
            ),
            Some(u) if !u.username().is_empty() || u.password().is_some() => problem(
                "api_url",
                "must not hold a user or password: the token goes in token_file".into(),
            ),
            Some(_) => {}
        },
        (None, ForgeKind::Forgejo) => problem(
            "api_url",
            "a Forgejo or Gitea forge needs its API's URL (e.g. \"https://codeberg.org/api/v1\")"
                .into(),
        ),
        (None, ForgeKind::Github) => {}
    }
    if let Some(remote) = &forge.remote {
        match is_http(remote) {
            None => problem(
                "remote",
                format!(
                    "{remote:?}: expected the repository's HTTPS URL (the token is given to git over HTTPS only)"
                ),
            ),
            Some(u) if !u.username().is_empty() || u.password().is_some() => problem(
                "remote",
                "must not hold a user or password: the token goes in token_file".into(),
            ),
            Some(_) => {}
        }
    }
    match forge.token_path() {
        None => problem(
            "token_file",
            format!(
                "no token: set token_file, or give systemd's credential {FORGE_TOKEN_CREDENTIAL} (LoadCredential=)"
            ),
        ),
        // Only what is certainly wrong: a file this user may not see may still be the
        // service's to read.
        Some(file) => match std::fs::metadata(&file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => problem(
                "token_file",
                format!(
                    "no file {} (it must hold the forge's token)",
                    file.display()
                ),
            ),
            Ok(m) if m.is_dir() => problem(
                "token_file",
                format!("{} is a folder, not the file of the token", file.display()),
            ),
            _ => {}
        },
    }
    for (key, value) in [
        ("ci_timeout", forge.ci_timeout),
        ("ci_absent_after", forge.ci_absent_after),
        ("poll_interval", forge.poll_interval),
    ] {
        if value.0.is_zero() {
            problem(key, "must be longer than zero".into());
        }
    }
    for (login, id) in &forge.people {
        if login.trim().is_empty() {
            problem("people", "a forge login must not be empty".into());
        }
        if *id == 0 {
            problem(&format!("people.{login}"), "0 is no Discord user id".into());
        }
    }
    for glob in &forge.ci_files {
        if glob.trim().is_empty() || glob.starts_with('/') {
            problem(
                "ci_files",
                format!("{glob:?} is no path of the repository (relative, like \"ci/**\")"),
            );
        }
    }
    out
}
