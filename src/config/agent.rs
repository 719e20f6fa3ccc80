//! `[agent]`, its per-sister tables and darang's reviewers, and how they resolve into
//! one `SisterSpec` per sister (its table over `[agent]` over the defaults).

use super::*;
use crate::domain::Stage;

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
    /// Where in the stdout envelope the CLI reports what the run cost.
    #[serde(default, skip_serializing_if = "UsagePointers::is_unset")]
    pub usage: UsagePointers,
    /// Where the message is when nothing is at `output_pointer`: a string holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_pointer: Option<String>,
    /// What the agent prints when it hits its usage or rate limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pause_on: Vec<PauseRule>,
    /// How long a pause lasts when the message names no reset time.
    #[serde(default = "default_pause")]
    pub pause_default: Dur,
    /// Where in the stdout envelope the CLI reports its session id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_pointer: Option<String>,
    /// The args that continue a recorded session (`{session}`), for a retry of the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_args: Option<Vec<String>>,
    /// The CLI prints an event stream (one JSON event a line) in this form: its steps show
    /// while it runs, and the envelope is read from the stream's final event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<EventStream>,
    /// Where a confined sister may write besides its workdir, its artifact folder and the
    /// temporary folder: the CLI's own state (`~/.claude`). `~/` is the user's home; a
    /// relative path starts at the config file's folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// `"required"`: no sister starts unconfined; `"auto"`: confined where
    /// the kernel has Landlock.
    #[serde(default)]
    pub confine: Confine,
    /// Who a sister's commits are by (author and committer): `Name <email>`, with
    /// `{actor}` (its name) and `{host}` (`[host] name`). So `git log` says which sister
    /// made each commit, and no sister borrows a person's identity.
    #[serde(default = "default_git_author")]
    pub git_author: String,
    /// The agents that take a stage over when this one is at its usage limit, in order:
    /// preset names or `[agent.profiles.NAME]` names. A sister's own
    /// `fallback` replaces it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<String>,
    /// `[agent.profiles.NAME]`: named agent tables a `fallback` may name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiles: BTreeMap<String, SisterConfig>,
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
            session_pointer: None,
            resume_args: None,
            stream: None,
            writable: Vec::new(),
            confine: Confine::default(),
            git_author: default_git_author(),
            fallback: Vec::new(),
            profiles: BTreeMap::new(),
            harang: SisterConfig::default(),
            narang: SisterConfig::default(),
            darang: SisterConfig::default(),
            erang: SisterConfig::default(),
        }
    }
}

pub(super) fn default_program() -> String {
    "openclaw".into()
}

pub(super) fn default_args() -> Vec<String> {
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

pub(super) fn default_max_output_bytes() -> u64 {
    DEFAULT_MAX_OUTPUT_BYTES as u64
}

pub(super) fn default_kill_grace() -> Dur {
    Dur(Duration::from_secs(10))
}

pub(super) fn default_pause() -> Dur {
    Dur(Duration::from_secs(30 * 60))
}

/// Whether sisters may run unconfined where Landlock is missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confine {
    /// Confined where the kernel has Landlock; elsewhere `serve` warns at start.
    #[default]
    Auto,
    /// No sister (or check) starts without confinement.
    Required,
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

/// The event stream forms hanarang reads: Claude Code's `--output-format stream-json`
/// (the `result` event is the envelope) and Codex's `exec --json` (the last
/// `agent_message` item's text is the output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventStream {
    ClaudeCode,
    Codex,
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
    pub session_pointer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_args: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<EventStream>,
    /// Replaces `[agent].writable` for this sister.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writable: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Replaces `[agent].fallback` for this sister (`[]`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Vec<String>>,
    /// `[agent.darang.reviewers.NAME]`: reviewers of one round that run in parallel, each
    /// over `[agent.darang]`. Only darang has them.
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

impl SisterConfig {
    /// This table's keys over `under`'s (a reviewer's over darang's); its env merged over
    /// theirs.
    pub(super) fn over(&self, under: &SisterConfig) -> SisterConfig {
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
            session_pointer: self
                .session_pointer
                .clone()
                .or_else(|| under.session_pointer.clone()),
            resume_args: self
                .resume_args
                .clone()
                .or_else(|| under.resume_args.clone()),
            stream: self.stream.or(under.stream),
            writable: self.writable.clone().or_else(|| under.writable.clone()),
            timeout: self.timeout.or(under.timeout),
            fallback: self.fallback.clone().or_else(|| under.fallback.clone()),
            reviewers: BTreeMap::new(),
        }
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
    /// Where the envelope holds the agent's session id, when its CLI can resume one.
    pub session_pointer: Option<String>,
    /// The args that continue session `{session}`; `None`: every run starts afresh.
    pub resume_args: Option<Vec<String>>,
    /// The CLI's event stream form, when it prints one.
    pub stream: Option<EventStream>,
    /// Where it may write besides its workdir, artifact folder and the temporary folder.
    pub writable: Vec<String>,
    pub timeout: Duration,
    /// The reviewer this is (`HANARANG_REVIEWER`, `{reviewer}`), when darang has several.
    pub reviewer: Option<String>,
}

/// A parallel reviewer's config table: `agent.darang.reviewers.NAME`.
pub fn reviewer_table(name: &str) -> String {
    format!("agent.{}.reviewers.{name}", Stage::Reviewing.actor())
}

/// A parallel reviewer as people read it: `darang reviewer NAME`.
pub fn reviewer_label(name: &str) -> String {
    format!("{} reviewer {name}", Stage::Reviewing.actor())
}

impl AgentConfig {
    pub fn sister_mut(&mut self, actor: Actor) -> &mut SisterConfig {
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

    /// The reviewer's own table, where its parallel reviewers are.
    pub fn reviewing(&self) -> &SisterConfig {
        self.sister(Stage::Reviewing.actor())
    }

    /// The reviewer's parallel reviewers by name, in name order (none: it reviews alone).
    pub fn reviewers(&self) -> Vec<&str> {
        self.reviewing()
            .reviewers
            .keys()
            .map(String::as_str)
            .collect()
    }

    /// One reviewer's spawn settings: its table over the reviewer's over `[agent]`.
    /// `None` when there is no reviewer of that name.
    pub fn reviewer_spec(&self, name: &str) -> Option<SisterSpec> {
        let own = self.reviewing().reviewers.get(name)?.over(self.reviewing());
        Some(self.spec_of(Stage::Reviewing.actor(), &own, Some(name)))
    }

    /// `own` over `[agent]` over the defaults.
    pub(super) fn spec_of(
        &self,
        actor: Actor,
        own: &SisterConfig,
        reviewer: Option<&str>,
    ) -> SisterSpec {
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
            session_pointer: own
                .session_pointer
                .clone()
                .or_else(|| self.session_pointer.clone()),
            resume_args: own.resume_args.clone().or_else(|| self.resume_args.clone()),
            stream: own.stream.or(self.stream),
            writable: own
                .writable
                .clone()
                .unwrap_or_else(|| self.writable.clone()),
            timeout: own.timeout.map_or(actor.info().timeout, |d| d.0),
            reviewer: reviewer.map(str::to_string),
        }
    }
}

pub(super) fn default_git_author() -> String {
    "{actor} (hanarang) <hanarang@{host}>".into()
}

/// The name and e-mail a sister commits as: `git_author` with its placeholders filled;
/// `None` when it is not `Name <email>`.
pub fn git_identity(template: &str, actor: Actor, host: &str) -> Option<(String, String)> {
    let filled =
        crate::placeholder::substitute(template, &[("actor", actor.as_str()), ("host", host)]);
    let (name, rest) = filled.split_once('<')?;
    let email = rest.strip_suffix('>')?.trim();
    let name = name.trim();
    let bad = |s: &str| s.is_empty() || s.contains(['<', '>', '\n', '\0']);
    (!bad(name) && !bad(email) && email.contains('@'))
        .then(|| (name.to_string(), email.to_string()))
}
