//! The plain sections of the config: `[host]`, `[database]`, `[pipeline]`,
//! `[discord]`, and the value types they share (durations, Discord ids).

use super::*;

/// This orchestrator host among several on one PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// How the other hosts and `hanarang hosts` name this one; the machine's hostname by
    /// default.
    #[serde(default = "default_host_name")]
    pub name: String,
    /// A host whose lease is not renewed for this long has lost its sprints to the
    /// others; it renews every third of it.
    #[serde(default = "default_lease_ttl")]
    pub lease_ttl: Dur,
    /// At most this many sisters at once on this host (SQLite too); no cap when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sisters: Option<u32>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            name: default_host_name(),
            lease_ttl: default_lease_ttl(),
            max_sisters: None,
        }
    }
}

/// The machine's hostname (`unknown-host` where it cannot be read).
pub fn default_host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown-host".into())
}

pub(super) fn default_lease_ttl() -> Dur {
    Dur(Duration::from_secs(30))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    #[serde(default = "default_database_url")]
    pub url: DatabaseUrl,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: default_database_url(),
        }
    }
}

pub(super) fn default_database_url() -> DatabaseUrl {
    DatabaseUrl::from("sqlite://hanarang.db")
}

/// `database.url`. It may hold a password (`postgres://user:secret@host/db`), so it is
/// shown (`Debug`, `Display`: logs, errors, `doctor`) with any password replaced by `***`;
/// the URL itself is read as a `str` only where a connection is opened.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// The URL itself, password and all: for opening the database.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for DatabaseUrl {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for DatabaseUrl {
    fn from(url: String) -> DatabaseUrl {
        DatabaseUrl(url)
    }
}

impl From<&str> for DatabaseUrl {
    fn from(url: &str) -> DatabaseUrl {
        DatabaseUrl(url.to_string())
    }
}

impl PartialEq<&str> for DatabaseUrl {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", super::redacted(&self.0))
    }
}

impl std::fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&super::redacted(&self.0))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    #[serde(default = "default_max_review_rounds")]
    pub max_review_rounds: u32,
    #[serde(default)]
    pub backoff: BackoffConfig,
    #[serde(default = "default_branch_template")]
    pub branch_template: String,
    #[serde(default)]
    pub locale: Locale,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

/// The retry policy the pure core applies, as the config sets it (the core knows no
/// config).
impl Default for Policy {
    fn default() -> Self {
        Policy::from(&PipelineConfig::default())
    }
}

impl From<&PipelineConfig> for Policy {
    fn from(p: &PipelineConfig) -> Self {
        Policy {
            max_attempts: p.max_attempts,
            max_review_rounds: p.max_review_rounds,
            backoff: Backoff {
                initial: p.backoff.initial.0,
                factor: p.backoff.factor,
                max: p.backoff.max.0,
            },
        }
    }
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            max_attempts: default_max_attempts(),
            max_review_rounds: default_max_review_rounds(),
            backoff: BackoffConfig::default(),
            branch_template: default_branch_template(),
            locale: Locale::default(),
            max_cost_usd: None,
        }
    }
}

pub(super) fn default_max_attempts() -> u32 {
    3
}

pub(super) fn default_max_review_rounds() -> u32 {
    3
}

pub(super) fn default_branch_template() -> String {
    "feature/{sprint_lower}".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffConfig {
    #[serde(default = "default_backoff_initial")]
    pub initial: Dur,
    #[serde(default = "default_backoff_factor")]
    pub factor: f64,
    #[serde(default = "default_backoff_max")]
    pub max: Dur,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: default_backoff_initial(),
            factor: default_backoff_factor(),
            max: default_backoff_max(),
        }
    }
}

pub(super) fn default_backoff_initial() -> Dur {
    Dur(Duration::from_secs(5))
}

pub(super) fn default_backoff_factor() -> f64 {
    2.0
}

pub(super) fn default_backoff_max() -> Dur {
    Dur(Duration::from_secs(5 * 60))
}

/// The language of user-facing messages (console and Discord).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Locale {
    #[default]
    Ko,
    En,
}

/// One message in every language the lines are written in, side by side:
/// `say!(locale, ko: "{who}가 시작", en: "{who} starts")`. Names in braces are taken from
/// the scope as `format!` takes them, so both texts share what they show; a new message
/// or language is one edit here and where the message is.
#[macro_export]
macro_rules! say {
    ($locale:expr, ko: $ko:literal, en: $en:literal $(,)?) => {
        match $locale {
            $crate::config::Locale::Ko => format!($ko),
            $crate::config::Locale::En => format!($en),
        }
    };
}

impl Locale {
    /// `words` in this language.
    pub fn pick(self, words: crate::domain::Words) -> &'static str {
        match self {
            Locale::Ko => words.ko,
            Locale::En => words.en,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordConfig {
    /// The environment variable that holds the bot token (never the token itself).
    #[serde(default = "default_token_env")]
    pub token_env: String,
    /// A file holding the bot token, taken before systemd's credential and `token_env`
    /// (`DiscordConfig::token_source`). A relative path is the config file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    pub guild_id: Snowflake,
    pub forum_channel_id: Snowflake,
    /// The user the bot reports to and mentions on escalation and completion.
    pub user_id: Snowflake,
    /// What the lines call the user; the locale's default (`default_nickname`) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nickname: Option<String>,
    #[serde(default)]
    pub approver_user_ids: Vec<Snowflake>,
    #[serde(default)]
    pub approver_role_ids: Vec<Snowflake>,
    /// Who may start sprints from Discord without steering them.
    #[serde(default)]
    pub starter_user_ids: Vec<Snowflake>,
    #[serde(default)]
    pub starter_role_ids: Vec<Snowflake>,
    /// Whether the person who started a sprint may approve its deploy alone.
    #[serde(default)]
    pub approval: Approval,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_proxy: Option<String>,
}

/// `[discord] approval`: who may approve a sprint's deploy from Discord.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Approval {
    /// Any approver, the sprint's starter included.
    #[default]
    Any,
    /// Any approver but the one who started the sprint (the CLI is not bound by it).
    NotStarter,
}

impl DiscordConfig {
    /// Who may start sprints and who may approve deploys, for `config check` and `doctor`.
    pub fn access(&self) -> [String; 2] {
        let ids = |ids: &[Snowflake]| -> String {
            let list: Vec<String> = ids.iter().map(|s| s.0.to_string()).collect();
            format!("[{}]", list.join(", "))
        };
        let approvers = format!(
            "user {}, approver_user_ids {}, approver_role_ids {}",
            self.user_id.0,
            ids(&self.approver_user_ids),
            ids(&self.approver_role_ids)
        );
        let rule = match self.approval {
            Approval::Any => "approval = \"any\": a sprint's starter may approve it too",
            Approval::NotStarter => {
                "approval = \"not-starter\": a sprint's starter may not approve it alone"
            }
        };
        [
            format!(
                "start sprints: {approvers}, starter_user_ids {}, starter_role_ids {}",
                ids(&self.starter_user_ids),
                ids(&self.starter_role_ids)
            ),
            format!("steer and approve: {approvers} ({rule})"),
        ]
    }
}

pub const DEFAULT_TOKEN_ENV: &str = "DISCORD_TOKEN";

pub(super) fn default_token_env() -> String {
    DEFAULT_TOKEN_ENV.into()
}

/// What the bot calls the user unless `discord.nickname` says otherwise: the design's
/// "자기야", and its English counterpart with `locale = "en"`.
pub fn default_nickname(locale: Locale) -> &'static str {
    match locale {
        Locale::Ko => "자기야",
        Locale::En => "darling",
    }
}

/// A humantime duration (`"5s"`, `"2h 30m"`), printed back the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map(Dur).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?}: {e} (write e.g. \"90s\", \"30m\", \"2h\")"
            ))
        })
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(self.0).to_string())
    }
}

/// A Discord id, written in TOML as an integer or a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Snowflake(pub u64);

impl<'de> Deserialize<'de> for Snowflake {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Text(String),
        }
        let id = match Raw::deserialize(d)? {
            Raw::Int(n) => u64::try_from(n).ok(),
            Raw::Text(s) => s.trim().parse::<u64>().ok(),
        };
        match id {
            Some(n) if n > 0 => Ok(Snowflake(n)),
            _ => Err(serde::de::Error::custom(
                "expected a Discord id (a positive integer, e.g. 123456789012345678)",
            )),
        }
    }
}

impl Serialize for Snowflake {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}
