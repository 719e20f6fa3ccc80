//! Typed configuration, loaded from TOML.
//!
//! Loading reports *every* problem with its key path (`agent.narang.timeout: invalid
//! duration "2 hours"`), not just the first, and touches nothing: no database, no
//! process. The Discord token is never part of this file; only where it is (a file, or
//! the name of the environment variable that holds it).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::domain::Actor;
use crate::pipeline::{Backoff, Policy};
use crate::placeholder;

mod agent;
mod fallback;
mod forge;
mod inside;
mod paths;
pub mod preset;
mod problems;
mod project;
mod roles;
mod sections;

pub use agent::*;
pub use fallback::{AgentChoice, title};
pub use forge::*;
use inside::read_operators;
pub use inside::{MAX_RECIPE_BYTES, Refused, read_inside};
pub use paths::*;
use problems::*;
pub use project::*;
pub use roles::{may_approve, may_note, may_start, may_steer};
pub use sections::*;

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
    /// The presets named in `[agent]` and its tables, as expanded (`config::preset`).
    #[serde(skip)]
    pub presets: preset::Presets,
    /// The file it was read from (kept from sisters).
    #[serde(skip)]
    pub source: Option<PathBuf>,
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    Syntax(String),
    Invalid(Vec<ConfigProblem>),
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
        let parsed = Config::parse(&text, base).map(|mut c| {
            c.source = Some(absolute.clone());
            c
        });
        parsed.map_err(|e| match e {
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
        let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            ParseError::Syntax(e.to_string().trim_end().replace('\n', "\n  "))
        })?;
        // A preset named as a fallback is a profile of that preset.
        fallback::preset_profiles(&mut table);
        let (presets, preset_problems) = preset::expand(&mut table);
        // Under a preset, a program named alone keeps the preset's args.
        let mut programs_without_args = programs_without_args(&table);
        programs_without_args.retain(|t| match t {
            None => !presets.filled.contains_key("agent.program"),
            Some(actor) => !presets.by_sister.contains_key(actor.as_str()),
        });
        let (config, mut problems) = deserialize_all(table);
        problems.extend(preset_problems);
        let Some(mut config) = config else {
            return Err(ParseError::Invalid(problems));
        };
        config.presets = presets;
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
        problems.extend(config.check_fallbacks());
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ParseError::Invalid(problems))
        }
    }

    /// Every project's workdir: a file in any of them is the agents' to change.
    pub fn workdirs(&self) -> Vec<&Path> {
        self.projects
            .values()
            .map(|p| p.workdir.as_path())
            .collect()
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

    /// Whether an approval of `project`'s sprints merges its pull request (it delivers
    /// through its forge) rather than starting the deployer.
    pub fn merges(&self, project: &str) -> bool {
        self.forge_of(project).is_some()
    }

    /// `project`'s forge, when it delivers through one.
    pub fn forge_of(&self, project: &str) -> Option<&ForgeConfig> {
        self.projects.get(project)?.forge.as_ref()
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
