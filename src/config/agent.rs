//! `[agent]`, its per-sister tables and the reviewer's parallel reviewers, and how they resolve into
//! one `SisterSpec` per sister (its table over `[agent]` over the defaults).

use super::*;
use crate::domain::Stage;

/// Declares `[agent]` and a sister's table (`[agent.NAME]`, a reviewer's, a profile) from
/// one list of keys, so a key is declared once:
/// - `inherited`: `[agent]` holds a value (its default here); a sister's table may set it
///   (`Option` there), and its own value wins;
/// - `optional`: unset unless some table sets it; the sister's wins;
/// - `agent` and `sister`: the keys only one of them has (`env` is in both: it merges).
macro_rules! agent_tables {
    (
        inherited { $( $(#[$im:meta])* $i:ident : $it:ty = $id:expr $(, skip if $iskip:literal)? ; )* }
        optional { $( $(#[$om:meta])* $o:ident : $ot:ty ; )* }
        agent { $( $(#[$am:meta])* $a:ident : $at:ty = $ad:expr $(, skip if $askip:literal)? ; )* }
        sister { $( $(#[$sm:meta])* $s:ident : $st:ty ; )* }
    ) => {
        /// `[agent]`: how every sister is spawned, unless its own table overrides it.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct AgentConfig {
            $( $(#[$im])* $(#[serde(skip_serializing_if = $iskip)])? pub $i: $it, )*
            $( $(#[$om])* #[serde(skip_serializing_if = "Option::is_none")] pub $o: Option<$ot>, )*
            $( $(#[$am])* $(#[serde(skip_serializing_if = $askip)])? pub $a: $at, )*
        }

        impl Default for AgentConfig {
            fn default() -> Self {
                AgentConfig {
                    $( $i: $id, )*
                    $( $o: None, )*
                    $( $a: $ad, )*
                }
            }
        }

        /// `[agent.<sister>]`: overrides of `[agent]` for one sister, plus its timeout.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct SisterConfig {
            $( $(#[$im])* #[serde(default, skip_serializing_if = "Option::is_none")] pub $i: Option<$it>, )*
            $( $(#[$om])* #[serde(default, skip_serializing_if = "Option::is_none")] pub $o: Option<$ot>, )*
            $( $(#[$sm])* pub $s: $st, )*
        }

        impl SisterConfig {
            /// The keys this table sets over `under`'s (a reviewer's over the reviewer's);
            /// its env merged over theirs; its own reviewers none.
            pub(super) fn over(&self, under: &SisterConfig) -> SisterConfig {
                let mut env = under.env.clone();
                env.extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
                SisterConfig {
                    $( $i: self.$i.clone().or_else(|| under.$i.clone()), )*
                    $( $o: self.$o.clone().or_else(|| under.$o.clone()), )*
                    env,
                    timeout: self.timeout.or(under.timeout),
                    fallback: self.fallback.clone().or_else(|| under.fallback.clone()),
                    reviewers: BTreeMap::new(),
                }
            }
        }

        impl AgentConfig {
            /// `own`'s keys over `[agent]`'s, as one `[agent]`: its env merged over this one.
            fn with_own(&self, own: &SisterConfig) -> AgentConfig {
                let mut env = self.env.clone();
                env.extend(own.env.iter().map(|(k, v)| (k.clone(), v.clone())));
                AgentConfig {
                    $( $i: own.$i.clone().unwrap_or_else(|| self.$i.clone()), )*
                    $( $o: own.$o.clone().or_else(|| self.$o.clone()), )*
                    env,
                    ..self.clone()
                }
            }
        }
    };
}

agent_tables! {
    inherited {
        program: String = default_program();
        args: Vec<String> = default_args();
        /// JSON Pointer to the message inside the sister's stdout JSON; `""` is the whole value.
        output_pointer: String = String::new();
        max_output_bytes: u64 = DEFAULT_MAX_OUTPUT_BYTES as u64;
        kill_grace: Dur = Dur(Duration::from_secs(10));
        /// Where in the stdout envelope the CLI reports what the run cost.
        usage: UsagePointers = UsagePointers::default(), skip if "UsagePointers::is_unset";
        /// What the agent prints when it hits its usage or rate limit.
        pause_on: Vec<PauseRule> = Vec::new(), skip if "Vec::is_empty";
        /// How long a pause lasts when the message names no reset time.
        pause_default: Dur = Dur(Duration::from_secs(30 * 60));
        /// Where a confined sister may write besides its workdir, its artifact folder and
        /// the temporary folder: the CLI's own state (`~/.claude`). `~/` is the user's home;
        /// a relative path starts at the config file's folder. A sister's replaces it.
        writable: Vec<String> = Vec::new(), skip if "Vec::is_empty";
    }
    optional {
        stall_timeout: Dur;
        /// Where the message is when nothing is at `output_pointer`: a string holding it.
        fallback_pointer: String;
        /// Where in the stdout envelope the CLI reports its session id.
        session_pointer: String;
        /// The args that continue a recorded session (`{session}`), for a retry of the stage.
        resume_args: Vec<String>;
        /// The CLI prints an event stream (one JSON event a line) in this form: its steps
        /// show while it runs, and the envelope is read from the stream's final event.
        stream: EventStream;
    }
    agent {
        env: BTreeMap<String, String> = BTreeMap::new(), skip if "BTreeMap::is_empty";
        /// `"required"`: no sister starts unconfined; `"auto"`: confined where
        /// the kernel has Landlock.
        confine: Confine = Confine::default();
        /// Who a sister's commits are by (author and committer): `Name <email>`, with
        /// `{actor}` (its name) and `{host}` (`[host] name`). So `git log` says which sister
        /// made each commit, and no sister borrows a person's identity.
        git_author: String = default_git_author();
        /// The agents that take a stage over when this one is at its usage limit, in order:
        /// preset names or `[agent.profiles.NAME]` names. A sister's own
        /// `fallback` replaces it.
        fallback: Vec<String> = Vec::new(), skip if "Vec::is_empty";
        /// `[agent.profiles.NAME]`: named agent tables a `fallback` may name.
        profiles: BTreeMap<String, SisterConfig> = BTreeMap::new(), skip if "BTreeMap::is_empty";
        harang: SisterConfig = SisterConfig::default(), skip if "SisterConfig::is_unset";
        narang: SisterConfig = SisterConfig::default(), skip if "SisterConfig::is_unset";
        darang: SisterConfig = SisterConfig::default(), skip if "SisterConfig::is_unset";
        erang: SisterConfig = SisterConfig::default(), skip if "SisterConfig::is_unset";
    }
    sister {
        /// Added to (and overriding) `[agent].env` for this sister.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>;
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<Dur>;
        /// Replaces `[agent].fallback` for this sister (`[]`: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fallback: Option<Vec<String>>;
        /// `[agent.darang.reviewers.NAME]`: reviewers of one round that run in parallel,
        /// each over the reviewer's table. Only the reviewer has them.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        reviewers: BTreeMap<String, SisterConfig>;
    }
}

impl AgentConfig {
    /// What is said when some sister runs the design's default command (no preset and no
    /// program set), and its fix: `openclaw spawn …` is the design's own wrapper, a command
    /// the OpenClaw CLI does not have. Said by `config check` and `doctor`.
    pub fn design_default(&self) -> Option<(&'static str, &'static str)> {
        let runs_it =
            |spec: SisterSpec| spec.program == default_program() && spec.args == default_args();
        Actor::ALL.into_iter().any(|actor| runs_it(self.spec(actor))).then_some((
            "sisters run the design's `openclaw spawn …` (the default while neither agent.preset nor agent.program is set), a wrapper the OpenClaw CLI does not have",
            "set agent.preset = \"claude-code\", \"codex\" or \"openclaw\" (or agent.program and agent.args) for the agent CLI you use",
        ))
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
    /// Where the envelope holds the agent's session id, when its CLI can resume one.
    pub session_pointer: Option<String>,
    /// The args that continue session `{session}`; `None`: every run starts afresh.
    pub resume_args: Option<Vec<String>>,
    /// The CLI's event stream form, when it prints one.
    pub stream: Option<EventStream>,
    /// Where it may write besides its workdir, artifact folder and the temporary folder.
    pub writable: Vec<String>,
    pub timeout: Duration,
    /// The reviewer this is (`HANARANG_REVIEWER`, `{reviewer}`), when the reviewer has several.
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
        let a = self.with_own(own);
        SisterSpec {
            actor,
            program: a.program,
            args: a.args,
            output_pointer: a.output_pointer,
            max_output_bytes: usize::try_from(a.max_output_bytes).unwrap_or(usize::MAX),
            kill_grace: a.kill_grace.0,
            stall_timeout: a.stall_timeout.map(|d| d.0),
            env: a.env,
            usage: a.usage,
            fallback_pointer: a.fallback_pointer,
            pause_on: a.pause_on,
            pause_default: a.pause_default.0,
            session_pointer: a.session_pointer,
            resume_args: a.resume_args,
            stream: a.stream,
            writable: a.writable,
            timeout: own.timeout.map_or(actor.info().timeout, |d| d.0),
            reviewer: reviewer.map(str::to_string),
        }
    }
}

fn default_git_author() -> String {
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
