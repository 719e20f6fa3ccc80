//! Typed configuration (`SPEC.md` §7), loaded from TOML.
//!
//! Loading reports *every* problem with its key path (`agent.narang.timeout: invalid
//! duration "2 hours"`), not just the first, and touches nothing: no database, no
//! process. The Discord token is never part of this file; only the name of the
//! environment variable that holds it is.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::domain::Actor;
use crate::pipeline::{Backoff, Policy};
use crate::placeholder;

pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1024 * 1024;
pub const DEFAULT_CONFIG_FILE: &str = "config.toml";
pub const CONFIG_ENV: &str = "HANARANG_CONFIG";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub database: DatabaseConfig,
    #[serde(default)]
    pub pipeline: PipelineConfig,
    #[serde(default)]
    pub agent: AgentConfig,
    #[serde(default)]
    pub projects: BTreeMap<String, ProjectConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discord: Option<DiscordConfig>,
    #[serde(default)]
    pub host: HostConfig,
}

/// This orchestrator host among several on one PostgreSQL database (SPEC §9).
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

fn default_lease_ttl() -> Dur {
    Dur(Duration::from_secs(30))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    #[serde(default = "default_database_url")]
    pub url: String,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: default_database_url(),
        }
    }
}

fn default_database_url() -> String {
    "sqlite://hanarang.db".into()
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

fn default_max_attempts() -> u32 {
    3
}
fn default_max_review_rounds() -> u32 {
    3
}
fn default_branch_template() -> String {
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

fn default_backoff_initial() -> Dur {
    Dur(Duration::from_secs(5))
}
fn default_backoff_factor() -> f64 {
    2.0
}
fn default_backoff_max() -> Dur {
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

/// `[agent]`: how every sister is spawned, unless its own table overrides it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    #[serde(default = "default_program")]
    pub program: String,
    #[serde(default = "default_args")]
    pub args: Vec<String>,
    /// JSON Pointer to the message inside the sister's stdout JSON; `""` is the whole value.
    #[serde(default)]
    pub output_pointer: String,
    #[serde(default = "default_max_output_bytes")]
    pub max_output_bytes: u64,
    #[serde(default = "default_kill_grace")]
    pub kill_grace: Dur,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_timeout: Option<Dur>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Where in the stdout envelope the CLI reports what the run cost (`SPEC.md` §3).
    #[serde(default, skip_serializing_if = "UsagePointers::is_unset")]
    pub usage: UsagePointers,
    /// Where the message is when nothing is at `output_pointer`: a string holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_pointer: Option<String>,
    /// What the agent prints when it hits its usage or rate limit (`SPEC.md` §3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pause_on: Vec<PauseRule>,
    /// How long a pause lasts when the message names no reset time.
    #[serde(default = "default_pause")]
    pub pause_default: Dur,
    #[serde(default, skip_serializing_if = "SisterConfig::is_unset")]
    pub harang: SisterConfig,
    #[serde(default, skip_serializing_if = "SisterConfig::is_unset")]
    pub narang: SisterConfig,
    #[serde(default, skip_serializing_if = "SisterConfig::is_unset")]
    pub darang: SisterConfig,
    #[serde(default, skip_serializing_if = "SisterConfig::is_unset")]
    pub erang: SisterConfig,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            program: default_program(),
            args: default_args(),
            output_pointer: String::new(),
            max_output_bytes: default_max_output_bytes(),
            kill_grace: default_kill_grace(),
            stall_timeout: None,
            env: BTreeMap::new(),
            usage: UsagePointers::default(),
            fallback_pointer: None,
            pause_on: Vec::new(),
            pause_default: default_pause(),
            harang: SisterConfig::default(),
            narang: SisterConfig::default(),
            darang: SisterConfig::default(),
            erang: SisterConfig::default(),
        }
    }
}

fn default_program() -> String {
    "openclaw".into()
}
fn default_args() -> Vec<String> {
    [
        "spawn",
        "--role",
        "{role}",
        "--contract",
        "{contract}",
        "--workdir",
        "{workdir}",
        "--output",
        "structured-json",
    ]
    .map(String::from)
    .to_vec()
}
fn default_max_output_bytes() -> u64 {
    DEFAULT_MAX_OUTPUT_BYTES as u64
}
fn default_kill_grace() -> Dur {
    Dur(Duration::from_secs(10))
}
fn default_pause() -> Dur {
    Dur(Duration::from_secs(30 * 60))
}

/// One usage-limit message: a regular expression over the captured output. A named group
/// `reset` holds when the limit resets (unix seconds, an RFC 3339 time, or a humantime
/// duration from now).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseRule {
    pub pattern: String,
    #[serde(default)]
    pub source: PauseSource,
}

/// Which captured stream a `PauseRule` reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PauseSource {
    Stdout,
    Stderr,
    #[default]
    Any,
}

/// `[agent.<sister>]`: overrides of `[agent]` for one sister, plus its timeout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SisterConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_pointer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_grace: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_timeout: Option<Dur>,
    /// Added to (and overriding) `[agent].env` for this sister.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsagePointers>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_pointer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_on: Option<Vec<PauseRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_default: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// `[agent.darang.reviewers.NAME]`: reviewers of one round that run in parallel, each
    /// over `[agent.darang]` (`SPEC.md` §10). Only darang has them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reviewers: BTreeMap<String, SisterConfig>,
}

/// JSON Pointers into a CLI's stdout envelope to what the run cost, as the CLI counted it
/// (Claude Code: `/usage/input_tokens`, `/usage/output_tokens`, `/total_cost_usd`). Found
/// figures override what the message says of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsagePointers {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<String>,
}

impl UsagePointers {
    fn is_unset(&self) -> bool {
        *self == UsagePointers::default()
    }
}

impl SisterConfig {
    fn is_unset(&self) -> bool {
        *self == SisterConfig::default()
    }
}

/// Everything needed to spawn one sister, with the overrides applied.
#[derive(Debug, Clone, PartialEq)]
pub struct SisterSpec {
    pub actor: Actor,
    pub program: String,
    pub args: Vec<String>,
    pub output_pointer: String,
    pub max_output_bytes: usize,
    pub kill_grace: Duration,
    pub stall_timeout: Option<Duration>,
    pub env: BTreeMap<String, String>,
    pub usage: UsagePointers,
    pub fallback_pointer: Option<String>,
    pub pause_on: Vec<PauseRule>,
    pub pause_default: Duration,
    pub timeout: Duration,
    /// The reviewer this is (`HANARANG_REVIEWER`, `{reviewer}`), when darang has several.
    pub reviewer: Option<String>,
}

impl AgentConfig {
    fn sister_mut(&mut self, actor: Actor) -> &mut SisterConfig {
        match actor {
            Actor::Harang => &mut self.harang,
            Actor::Narang => &mut self.narang,
            Actor::Darang => &mut self.darang,
            Actor::Erang => &mut self.erang,
        }
    }

    pub fn sister(&self, actor: Actor) -> &SisterConfig {
        match actor {
            Actor::Harang => &self.harang,
            Actor::Narang => &self.narang,
            Actor::Darang => &self.darang,
            Actor::Erang => &self.erang,
        }
    }

    /// The spawn settings of one sister: its table over `[agent]` over the defaults.
    pub fn spec(&self, actor: Actor) -> SisterSpec {
        self.spec_of(actor, self.sister(actor), None)
    }

    /// darang's reviewers by name, in name order (none: darang reviews alone).
    pub fn reviewers(&self) -> Vec<&str> {
        self.darang.reviewers.keys().map(String::as_str).collect()
    }

    /// One reviewer's spawn settings: its table over `[agent.darang]` over `[agent]`.
    /// `None` when darang has no reviewer of that name.
    pub fn reviewer_spec(&self, name: &str) -> Option<SisterSpec> {
        let own = self.darang.reviewers.get(name)?.over(&self.darang);
        Some(self.spec_of(Actor::Darang, &own, Some(name)))
    }

    /// `own` over `[agent]` over the defaults.
    fn spec_of(&self, actor: Actor, own: &SisterConfig, reviewer: Option<&str>) -> SisterSpec {
        let mut env = self.env.clone();
        env.extend(own.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        SisterSpec {
            actor,
            program: own.program.clone().unwrap_or_else(|| self.program.clone()),
            args: own.args.clone().unwrap_or_else(|| self.args.clone()),
            output_pointer: own
                .output_pointer
                .clone()
                .unwrap_or_else(|| self.output_pointer.clone()),
            max_output_bytes: usize::try_from(
                own.max_output_bytes.unwrap_or(self.max_output_bytes),
            )
            .unwrap_or(usize::MAX),
            kill_grace: own.kill_grace.unwrap_or(self.kill_grace).0,
            stall_timeout: own.stall_timeout.or(self.stall_timeout).map(|d| d.0),
            env,
            usage: own.usage.clone().unwrap_or_else(|| self.usage.clone()),
            fallback_pointer: own
                .fallback_pointer
                .clone()
                .or_else(|| self.fallback_pointer.clone()),
            pause_on: own
                .pause_on
                .clone()
                .unwrap_or_else(|| self.pause_on.clone()),
            pause_default: own.pause_default.unwrap_or(self.pause_default).0,
            timeout: own.timeout.map_or_else(|| default_timeout(actor), |d| d.0),
            reviewer: reviewer.map(str::to_string),
        }
    }
}

impl SisterConfig {
    /// This table's keys over `under`'s (a reviewer's over darang's); its env merged over
    /// theirs.
    fn over(&self, under: &SisterConfig) -> SisterConfig {
        let mut env = under.env.clone();
        env.extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        SisterConfig {
            program: self.program.clone().or_else(|| under.program.clone()),
            args: self.args.clone().or_else(|| under.args.clone()),
            output_pointer: self
                .output_pointer
                .clone()
                .or_else(|| under.output_pointer.clone()),
            max_output_bytes: self.max_output_bytes.or(under.max_output_bytes),
            kill_grace: self.kill_grace.or(under.kill_grace),
            stall_timeout: self.stall_timeout.or(under.stall_timeout),
            env,
            usage: self.usage.clone().or_else(|| under.usage.clone()),
            fallback_pointer: self
                .fallback_pointer
                .clone()
                .or_else(|| under.fallback_pointer.clone()),
            pause_on: self.pause_on.clone().or_else(|| under.pause_on.clone()),
            pause_default: self.pause_default.or(under.pause_default),
            timeout: self.timeout.or(under.timeout),
            reviewers: BTreeMap::new(),
        }
    }
}

/// The design's stage timeouts: the implementer gets the longest.
pub fn default_timeout(actor: Actor) -> Duration {
    match actor {
        Actor::Narang => Duration::from_secs(2 * 60 * 60),
        Actor::Harang | Actor::Darang | Actor::Erang => Duration::from_secs(30 * 60),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectConfig {
    /// The repository the sisters work in. A relative path is taken from the config
    /// file's directory.
    pub workdir: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordConfig {
    /// The environment variable that holds the bot token (never the token itself).
    #[serde(default = "default_token_env")]
    pub token_env: String,
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
    /// Who may start sprints from Discord without steering them (SPEC §11).
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

fn default_token_env() -> String {
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

/// One thing wrong with the config, with the dotted key it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "no config file: pass --config PATH, create ./{DEFAULT_CONFIG_FILE}, or set {CONFIG_ENV} (config.toml.example shows every key)"
    )]
    NotFound,
    #[error(
        "config {}: {bytes} bytes is more than a config can be ({MAX_CONFIG_BYTES} at most); is this the right file?", path.display()
    )]
    TooLarge { path: PathBuf, bytes: u64 },
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{}", invalid_report(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<ConfigProblem>,
    },
}

fn invalid_report(path: &Path, problems: &[ConfigProblem]) -> String {
    let mut out = format!(
        "{}: invalid config ({} problem{})",
        path.display(),
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for p in problems {
        out.push_str("\n  ");
        out.push_str(&p.to_string());
    }
    out
}

/// The largest config file read: anything bigger is not a config (a log, a database
/// named by mistake), and is refused before it is read whole.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

fn read_capped(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    let read_err = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        let bytes = std::fs::metadata(path).map_or(bytes.len() as u64, |m| m.len());
        return Err(ConfigError::TooLarge {
            path: path.to_path_buf(),
            bytes,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        read_err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text ({e})"),
        ))
    })
}

/// The config file to read: `--config`, else `./config.toml`, else `$HANARANG_CONFIG`.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, ConfigError> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    let local = PathBuf::from(DEFAULT_CONFIG_FILE);
    if local.is_file() {
        return Ok(local);
    }
    match std::env::var_os(CONFIG_ENV) {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
        _ => Err(ConfigError::NotFound),
    }
}

impl Config {
    /// Reads and checks a config file. Relative project workdirs are resolved against the
    /// file's directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read_capped(path)?;
        // Relative paths in the file are the file's: every command, wherever it is
        // started, finds the same database, programs and workdirs.
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let base = absolute.parent().unwrap_or(Path::new("/"));
        Config::parse(&text, base).map_err(|e| match e {
            ParseError::Syntax(message) => ConfigError::Syntax {
                path: path.to_path_buf(),
                message,
            },
            ParseError::Invalid(problems) => ConfigError::Invalid {
                path: path.to_path_buf(),
                problems,
            },
        })
    }

    /// Parses and checks config text; `base` (the config file's folder) is where relative
    /// paths start from: the SQLite database, workdirs, and programs named with a `/`.
    pub fn parse(text: &str, base: &Path) -> Result<Config, ParseError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            ParseError::Syntax(e.to_string().trim_end().replace('\n', "\n  "))
        })?;
        let programs_without_args = programs_without_args(&table);
        let (config, mut problems) = deserialize_all(table);
        let Some(mut config) = config else {
            return Err(ParseError::Invalid(problems));
        };
        if let Some(moved) = database_left_behind(&config.database.url, base) {
            problems.push(moved);
        }
        config.resolve_paths(base);
        // The design's `openclaw spawn …` arguments belong to its default program: a table
        // that names its own program without `args` passes none.
        for table in programs_without_args {
            match table {
                None => config.agent.args = Vec::new(),
                Some(actor) => config.agent.sister_mut(actor).args = Some(Vec::new()),
            }
        }
        // Checked even when some keys were already rejected (their defaults stand in), so
        // one run of `config check` shows everything.
        problems.extend(config.check());
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ParseError::Invalid(problems))
        }
    }

    /// Makes every relative path of the file absolute, from `base`.
    fn resolve_paths(&mut self, base: &Path) {
        self.database.url = absolute_sqlite_url(&self.database.url, base);
        for project in self.projects.values_mut() {
            if project.workdir.is_relative() {
                project.workdir = base.join(&project.workdir);
            }
            if let Ok(absolute) = std::fs::canonicalize(&project.workdir) {
                project.workdir = absolute;
            }
        }
        let relative_program = |program: &mut String| {
            // A bare name is looked up on PATH; a path with a `/` is the file's.
            if program.contains('/') && Path::new(program.as_str()).is_relative() {
                *program = base.join(program.as_str()).display().to_string();
            }
        };
        relative_program(&mut self.agent.program);
        for actor in Actor::ALL {
            if let Some(program) = &mut self.agent.sister_mut(actor).program {
                relative_program(program);
            }
        }
    }

    /// The checks serde cannot state, each naming its key.
    fn check(&self) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let mut problem = |key: &str, message: String| {
            problems.push(ConfigProblem {
                key: key.into(),
                message,
            })
        };
        let url = &self.database.url;
        if !(url.starts_with("sqlite:") || is_postgres_url(url)) {
            problem(
                "database.url",
                format!(
                    "{:?}: a database URL is sqlite:PATH (e.g. \"sqlite://hanarang.db\") or postgres://… (several hosts on one database)",
                    redacted(url)
                ),
            );
        }
        let host = &self.host;
        if host.name.trim().is_empty() || host.name.chars().any(char::is_control) {
            problem(
                "host.name",
                format!("{:?}: a host name is a non-empty line of text", host.name),
            );
        }
        if host.lease_ttl.0 < Duration::from_secs(1) {
            problem(
                "host.lease_ttl",
                "must be at least 1s (the lease is renewed every third of it)".into(),
            );
        }
        if host.max_sisters == Some(0) {
            problem(
                "host.max_sisters",
                "0 would run no sister at all: leave it out for no cap".into(),
            );
        }
        let p = &self.pipeline;
        if p.max_attempts == 0 {
            problem("pipeline.max_attempts", "must be at least 1".into());
        }
        if p.max_review_rounds == 0 {
            problem("pipeline.max_review_rounds", "must be at least 1".into());
        }
        if !(p.backoff.factor.is_finite() && p.backoff.factor >= 1.0) {
            problem(
                "pipeline.backoff.factor",
                format!("must be a number of at least 1.0, got {}", p.backoff.factor),
            );
        }
        if p.backoff.initial.0 > p.backoff.max.0 {
            problem(
                "pipeline.backoff.initial",
                "is longer than pipeline.backoff.max".into(),
            );
        }
        if p.branch_template.trim().is_empty() {
            problem("pipeline.branch_template", "must not be empty".into());
        }
        if let Some(name) = placeholder::first_unknown(&p.branch_template, placeholder::BRANCH) {
            problem(
                "pipeline.branch_template",
                unknown_placeholder(name, placeholder::BRANCH),
            );
        }
        if let Some(cost) = p.max_cost_usd
            && !(cost.is_finite() && cost > 0.0)
        {
            problem(
                "pipeline.max_cost_usd",
                format!("must be a positive number of US dollars, got {cost}"),
            );
        }

        let token_env = Some(self.token_env());
        let a = &self.agent;
        check_agent_fields(
            "agent",
            &AgentFields {
                program: Some(&a.program),
                args: Some(&a.args),
                output_pointer: Some(&a.output_pointer),
                max_output_bytes: Some(a.max_output_bytes),
                kill_grace: Some(a.kill_grace),
                stall_timeout: a.stall_timeout,
                env: &a.env,
                usage: Some(&a.usage),
                fallback_pointer: a.fallback_pointer.as_deref(),
                pause_on: Some(&a.pause_on),
                timeout: None,
            },
            token_env,
            &mut problem,
        );
        for actor in Actor::ALL {
            let s = a.sister(actor);
            if actor != Actor::Darang && !s.reviewers.is_empty() {
                problem(
                    &format!("agent.{actor}.reviewers"),
                    "only darang (the reviewer) has reviewers".into(),
                );
            }
            let reviewers = if actor == Actor::Darang {
                s.reviewers.iter().collect()
            } else {
                Vec::new()
            };
            for (name, r) in reviewers {
                let table = format!("agent.darang.reviewers.{name}");
                if !is_reviewer_name(name) {
                    problem(
                        &table,
                        format!(
                            "{name:?} is not a reviewer name: 1 to 32 lower-case letters, digits, '-' or '_'"
                        ),
                    );
                }
                if !r.reviewers.is_empty() {
                    problem(
                        &format!("{table}.reviewers"),
                        "a reviewer has no reviewers of its own".into(),
                    );
                }
                check_agent_fields(&table, &AgentFields::of(r), token_env, &mut problem);
            }
            check_agent_fields(
                &format!("agent.{actor}"),
                &AgentFields::of(s),
                token_env,
                &mut problem,
            );
        }

        for (name, project) in &self.projects {
            let key = format!("projects.{name}");
            if !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                problem(
                    &key,
                    "a project name may only use letters, digits, '-' and '_'".into(),
                );
            }
            let workdir = &project.workdir;
            if !workdir.exists() {
                problem(
                    &format!("{key}.workdir"),
                    format!("{} does not exist", workdir.display()),
                );
            } else if !workdir.is_dir() {
                problem(
                    &format!("{key}.workdir"),
                    format!("{} is not a directory", workdir.display()),
                );
            }
        }

        if let Some(d) = &self.discord {
            if !is_env_name(&d.token_env) {
                problem(
                    "discord.token_env",
                    format!(
                        "{:?} is not an environment variable name (the token itself never goes in this file)",
                        d.token_env
                    ),
                );
            }
            if d.nickname.as_deref().is_some_and(|n| n.trim().is_empty()) {
                problem("discord.nickname", "must not be empty".into());
            }
            if let Some(proxy) = &d.http_proxy
                && !(proxy.starts_with("http://") || proxy.starts_with("https://"))
            {
                problem(
                    "discord.http_proxy",
                    format!("{proxy:?}: expected a base URL starting with http:// or https://"),
                );
            }
        }
        problems
    }

    /// The resolved config as TOML, defaults filled in, for people to read: the values of
    /// `[agent].env` (API keys, say) are shown as `<set>`, since this lands in terminals
    /// and journals (the unit's `ExecStartPre`). The token is never part of the config.
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        let mut shown = self.clone();
        let hide = |env: &mut BTreeMap<String, String>| {
            env.values_mut().for_each(|v| *v = "<set>".into());
        };
        hide(&mut shown.agent.env);
        for actor in Actor::ALL {
            hide(&mut shown.agent.sister_mut(actor).env);
        }
        toml::to_string_pretty(&shown)
    }

    /// The project a command names, or the only one configured.
    pub fn project(&self, name: Option<&str>) -> Result<(&str, &ProjectConfig), String> {
        match name {
            Some(name) => self
                .projects
                .get_key_value(name)
                .map(|(k, v)| (k.as_str(), v))
                .ok_or_else(|| {
                    format!(
                        "unknown project {name:?}: configured projects are {}",
                        self.project_names()
                    )
                }),
            None => match self.projects.len() {
                1 => self
                    .projects
                    .iter()
                    .next()
                    .map(|(k, v)| (k.as_str(), v))
                    .ok_or_else(|| "no project is configured".to_string()),
                0 => Err(
                    "no project is configured: add a [projects.NAME] table with a workdir".into(),
                ),
                _ => Err(format!(
                    "several projects are configured ({}): pass --project",
                    self.project_names()
                )),
            },
        }
    }

    /// The environment variable that holds the Discord token; removed from every sister's
    /// environment even when Discord is not configured.
    pub fn token_env(&self) -> &str {
        self.discord
            .as_ref()
            .map_or(DEFAULT_TOKEN_ENV, |d| d.token_env.as_str())
    }

    /// What the messages call the user.
    pub fn nickname(&self) -> &str {
        self.discord
            .as_ref()
            .and_then(|d| d.nickname.as_deref())
            .unwrap_or(default_nickname(self.pipeline.locale))
    }

    fn project_names(&self) -> String {
        self.projects
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The agent tables that set `program` but not `args`: `None` is `[agent]`, `Some` a
/// sister's table.
fn programs_without_args(table: &toml::Table) -> Vec<Option<Actor>> {
    let sets_program_alone = |t: &toml::Table| t.contains_key("program") && !t.contains_key("args");
    let Some(toml::Value::Table(agent)) = table.get("agent") else {
        return Vec::new();
    };
    let mut tables = Vec::new();
    if sets_program_alone(agent) {
        tables.push(None);
    }
    for actor in Actor::ALL {
        if let Some(toml::Value::Table(own)) = agent.get(actor.as_str())
            && sets_program_alone(own)
        {
            tables.push(Some(actor));
        }
    }
    tables
}

/// The relative file path of a `sqlite:` URL and what follows it (`?mode=…`); `None` for
/// any other URL, an absolute path or an in-memory database.
fn relative_sqlite_path(url: &str) -> Option<(&str, Option<&str>)> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let in_memory = path.is_empty()
        || path == ":memory:"
        || query.is_some_and(|q| q.split('&').any(|kv| kv == "mode=memory"));
    (!in_memory && Path::new(path).is_relative()).then_some((path, query))
}

/// A `sqlite:` URL whose relative file path is taken from `base`; any other URL (and an
/// in-memory database) unchanged.
fn absolute_sqlite_url(url: &str, base: &Path) -> String {
    let Some((path, query)) = relative_sqlite_path(url) else {
        return url.to_string();
    };
    let mut absolute = format!("sqlite://{}", base.join(path).display());
    if let Some(query) = query {
        absolute.push('?');
        absolute.push_str(query);
    }
    absolute
}

/// Before relative SQLite paths were the config file's, they were the current folder's
/// (under systemd, its `WorkingDirectory`). A database found only there would be silently
/// replaced by a new empty one beside the config: refused, naming both places.
fn database_left_behind(url: &str, base: &Path) -> Option<ConfigProblem> {
    let (path, _) = relative_sqlite_path(url)?;
    let beside = std::path::absolute(base.join(path)).ok()?;
    let here = std::path::absolute(path).ok()?;
    (here != beside && !beside.exists() && here.is_file()).then(|| ConfigProblem {
        key: "database.url".into(),
        message: format!(
            "{url:?} is taken from the config file's folder ({}, which does not exist), but the database is at {}, where hanarang looked before: set url = \"sqlite://{}\" (or move the file beside the config)",
            beside.display(),
            here.display(),
            here.display()
        ),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    Syntax(String),
    Invalid(Vec<ConfigProblem>),
}

/// The agent settings `[agent]` and `[agent.<sister>]` share, borrowed for checking.
struct AgentFields<'a> {
    program: Option<&'a str>,
    args: Option<&'a [String]>,
    output_pointer: Option<&'a str>,
    max_output_bytes: Option<u64>,
    kill_grace: Option<Dur>,
    stall_timeout: Option<Dur>,
    env: &'a BTreeMap<String, String>,
    usage: Option<&'a UsagePointers>,
    fallback_pointer: Option<&'a str>,
    pause_on: Option<&'a [PauseRule]>,
    timeout: Option<Dur>,
}

impl<'a> AgentFields<'a> {
    fn of(s: &'a SisterConfig) -> AgentFields<'a> {
        AgentFields {
            program: s.program.as_deref(),
            args: s.args.as_deref(),
            output_pointer: s.output_pointer.as_deref(),
            max_output_bytes: s.max_output_bytes,
            kill_grace: s.kill_grace,
            stall_timeout: s.stall_timeout,
            env: &s.env,
            usage: s.usage.as_ref(),
            fallback_pointer: s.fallback_pointer.as_deref(),
            pause_on: s.pause_on.as_deref(),
            timeout: s.timeout,
        }
    }
}

/// A reviewer's name goes into run ids, an environment variable and Discord lines.
fn is_reviewer_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn check_agent_fields(
    table: &str,
    f: &AgentFields<'_>,
    token_env: Option<&str>,
    problem: &mut impl FnMut(&str, String),
) {
    if f.program.is_some_and(|p| p.trim().is_empty()) {
        problem(&format!("{table}.program"), "must not be empty".into());
    }
    for (i, arg) in f.args.unwrap_or_default().iter().enumerate() {
        if let Some(name) = placeholder::first_unknown(arg, placeholder::SPAWN) {
            problem(
                &format!("{table}.args[{i}]"),
                unknown_placeholder(name, placeholder::SPAWN),
            );
        }
    }
    let usage = f.usage.map(|u| {
        [
            ("usage.input_tokens", u.input_tokens.as_deref()),
            ("usage.output_tokens", u.output_tokens.as_deref()),
            ("usage.cost_usd", u.cost_usd.as_deref()),
        ]
    });
    let pointers = [
        ("output_pointer", f.output_pointer),
        ("fallback_pointer", f.fallback_pointer),
    ]
    .into_iter()
    .chain(usage.into_iter().flatten());
    for (key, pointer) in pointers {
        if let Some(pointer) = pointer
            && !pointer.is_empty()
            && !pointer.starts_with('/')
        {
            problem(
                &format!("{table}.{key}"),
                format!(
                    "{pointer:?} is not a JSON Pointer: use \"\" for the whole output or start with '/' (e.g. \"/structured_output\")"
                ),
            );
        }
    }
    for (i, rule) in f.pause_on.unwrap_or_default().iter().enumerate() {
        if let Err(e) = regex::Regex::new(&rule.pattern) {
            let why = e.to_string().lines().last().unwrap_or_default().to_string();
            problem(
                &format!("{table}.pause_on[{i}].pattern"),
                format!("not a regular expression: {why}"),
            );
        }
    }
    if f.max_output_bytes == Some(0) {
        problem(
            &format!("{table}.max_output_bytes"),
            "must be at least 1".into(),
        );
    }
    for (key, d) in [
        ("kill_grace", f.kill_grace),
        ("stall_timeout", f.stall_timeout),
        ("timeout", f.timeout),
    ] {
        if d.is_some_and(|d| d.0.is_zero()) {
            problem(&format!("{table}.{key}"), "must be longer than zero".into());
        }
    }
    for name in f.env.keys() {
        let key = format!("{table}.env.{name}");
        if !is_env_name(name) {
            problem(&key, "not an environment variable name".into());
        } else if name.starts_with("HANARANG_") {
            problem(
                &key,
                "HANARANG_* variables are set by the orchestrator".into(),
            );
        } else if Some(name.as_str()) == token_env {
            problem(
                &key,
                "the Discord token variable is never passed to a sister".into(),
            );
        }
    }
}

fn unknown_placeholder(name: &str, known: &[&str]) -> String {
    let known: Vec<String> = known.iter().map(|k| format!("{{{k}}}")).collect();
    format!(
        "unknown placeholder {{{name}}}; known placeholders: {}",
        known.join(", ")
    )
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Deserializes the whole table, collecting every error instead of stopping at the first:
/// each failing key is recorded and taken out, and the rest is tried again.
fn deserialize_all(mut table: toml::Table) -> (Option<Config>, Vec<ConfigProblem>) {
    let mut problems: Vec<ConfigProblem> = Vec::new();
    // Every round removes one key, so the loop ends; the bound is a second guard.
    for _ in 0..256 {
        let attempt: Result<Config, _> =
            serde_path_to_error::deserialize(toml::Value::Table(table.clone()));
        let error = match attempt {
            Ok(config) => return (Some(config), problems),
            Err(e) => e,
        };
        let path: Vec<Step> = error
            .path()
            .iter()
            .filter_map(|s| match s {
                serde_path_to_error::Segment::Map { key } => Some(Step::Key(key.clone())),
                serde_path_to_error::Segment::Seq { index } => Some(Step::Index(*index)),
                _ => None,
            })
            .collect();
        let (key, message) = explain(&path, &error.inner().to_string());
        let dotted_key = dotted(&key);
        if !problems.iter().any(|p| p.key == dotted_key) {
            problems.push(ConfigProblem {
                key: dotted_key,
                message,
            });
        }
        if !remove(&mut table, &path, &key) {
            break;
        }
    }
    if problems.is_empty() {
        problems.push(ConfigProblem {
            key: String::new(),
            message: "the config could not be read".into(),
        });
    }
    (None, problems)
}

/// Turns serde's message into one that names the key it is about.
fn explain(path: &[Step], message: &str) -> (Vec<Step>, String) {
    // The toml deserializer appends "in `key`"; the key is already named.
    let message = message.split("\nin `").next().unwrap_or(message).trim_end();
    let mut key = path.to_vec();
    if let Some(field) = backticked(message, "missing field `") {
        key.push(Step::Key(field.to_string()));
        let required = match path.first() {
            Some(Step::Key(table)) if table == "discord" => {
                "missing (required when [discord] is set)"
            }
            _ => "missing (required)",
        };
        return (key, required.to_string());
    }
    if let Some(field) = backticked(message, "unknown field `") {
        if key.last() != Some(&Step::Key(field.to_string())) {
            key.push(Step::Key(field.to_string()));
        }
        let expected = message
            .split_once(", expected ")
            .map(|(_, rest)| format!(" (expected {rest})"))
            .unwrap_or_default();
        return (key, format!("unknown key{expected}"));
    }
    if let Some(variant) = backticked(message, "unknown variant `") {
        let expected = message
            .split_once(", expected ")
            .map(|(_, rest)| format!(": expected {rest}"))
            .unwrap_or_default();
        return (key, format!("unknown value {variant:?}{expected}"));
    }
    (key, message.to_string())
}

fn backticked<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    rest.split_once('`').map(|(inside, _)| inside)
}

fn dotted(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
        }
    }
    out
}

/// Removes the value a problem is about, so the next round can find the next problem.
/// A missing key cannot be removed (its table goes instead), and an array element goes
/// with its array.
fn remove(table: &mut toml::Table, path: &[Step], key: &[Step]) -> bool {
    let target = if key.len() > path.len() && !exists(table, key) {
        path
    } else {
        key
    };
    let target = match target.iter().position(|s| matches!(s, Step::Index(_))) {
        Some(i) => &target[..i],
        None => target,
    };
    let Some((Step::Key(last), parents)) = target.split_last() else {
        return false;
    };
    let mut current = table;
    for step in parents {
        match step {
            Step::Key(k) => match current.get_mut(k) {
                Some(toml::Value::Table(t)) => current = t,
                _ => return false,
            },
            Step::Index(_) => return false,
        }
    }
    current.remove(last).is_some()
}

fn exists(table: &toml::Table, key: &[Step]) -> bool {
    let mut current = table;
    for (i, step) in key.iter().enumerate() {
        let Step::Key(k) = step else { return false };
        match current.get(k) {
            Some(toml::Value::Table(t)) => current = t,
            Some(_) => return i + 1 == key.len(),
            None => return false,
        }
    }
    true
}

/// Whether a database URL names PostgreSQL (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// `url` without its password, for messages and logs: `postgres://user:secret@host/db`
/// is shown as `postgres://user:***@host/db`, and a `password=` parameter as
/// `password=***`.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut shown = match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{path}")
        }
        _ => format!("{scheme}://{rest}"),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&params.join("&"));
    }
    shown
}
