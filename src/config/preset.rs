//! Agent presets: the values tested against each agent CLI, one file
//! each in `presets/`, compiled in. `preset = "NAME"` in `[agent]`, a sister's table or a
//! reviewer's fills the keys that table does not set itself; a preset's own sister tables
//! (Codex's `[agent.narang]`) fill that sister's table the same way, unless it names a
//! preset of its own. This happens on the TOML before it is read, so the rest of the
//! config (its layering, its checks) sees ordinary keys.

use std::collections::BTreeMap;

use super::ConfigProblem;
use crate::domain::{Actor, Stage};

/// The presets, by name.
pub const NAMES: [&str; 3] = ["claude-code", "codex", "openclaw"];

fn source(name: &str) -> Option<&'static str> {
    match name {
        "claude-code" => Some(include_str!("presets/claude-code.toml")),
        "codex" => Some(include_str!("presets/codex.toml")),
        "openclaw" => Some(include_str!("presets/openclaw.toml")),
        _ => None,
    }
}

/// One preset: its keys, and what it knows of its CLI.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub name: &'static str,
    /// How to ask the CLI its version (`--version`).
    pub version_args: Vec<String>,
    /// The versions it was tested with, inclusive: `(from, to)`.
    pub tested: (String, String),
    agent: toml::Table,
}

impl Preset {
    pub fn named(name: &str) -> Result<Preset, String> {
        let (Some(text), Some(&name)) = (source(name), NAMES.iter().find(|n| **n == name)) else {
            return Err(format!(
                "unknown preset {name:?} (one of: {})",
                NAMES.join(", ")
            ));
        };
        let table: toml::Table = text
            .parse()
            .map_err(|e| format!("preset {name} does not parse: {e}"))?;
        let part = |key: &str| match table.get(key) {
            Some(toml::Value::Table(t)) => t.clone(),
            _ => toml::Table::new(),
        };
        let cli = part("cli");
        let text_of =
            |v: Option<&toml::Value>| v.and_then(toml::Value::as_str).unwrap_or("").to_string();
        let tested = cli.get("tested").and_then(toml::Value::as_table);
        Ok(Preset {
            name,
            version_args: cli
                .get("version_args")
                .and_then(toml::Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_else(|| vec!["--version".into()]),
            tested: (
                text_of(tested.and_then(|t| t.get("from"))),
                text_of(tested.and_then(|t| t.get("to"))),
            ),
            agent: part("agent"),
        })
    }

    /// The keys it gives a table: `[agent]`'s (no sister tables), or one sister's own.
    fn keys(&self, sister: Option<Actor>) -> toml::Table {
        let mut keys = self.agent.clone();
        for actor in Actor::ALL {
            keys.remove(actor.as_str());
        }
        match sister {
            None => keys,
            Some(actor) => {
                let mut own = keys;
                if let Some(toml::Value::Table(t)) = self.agent.get(actor.as_str()) {
                    own.extend(t.clone());
                }
                own
            }
        }
    }

    /// A sister's table as the preset has it, if it has one.
    fn sister(&self, actor: Actor) -> Option<&toml::Table> {
        self.agent
            .get(actor.as_str())
            .and_then(toml::Value::as_table)
    }

    /// Whether `version` is within the versions it was tested with.
    pub fn tested_with(&self, version: &str) -> bool {
        let (from, to) = (numbers(&self.tested.0), numbers(&self.tested.1));
        let v = numbers(version);
        !v.is_empty() && v >= from && v <= to
    }

    /// The tested versions, as people read them.
    pub fn tested_range(&self) -> String {
        if self.tested.0 == self.tested.1 {
            self.tested.0.clone()
        } else {
            format!("{} to {}", self.tested.0, self.tested.1)
        }
    }
}

/// A version's numbers: `2.1.332 (Claude Code)` → `[2, 1, 332]`.
pub fn numbers(version: &str) -> Vec<u64> {
    let start = version
        .find(|c: char| c.is_ascii_digit())
        .unwrap_or(version.len());
    version[start..]
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .next()
        .unwrap_or("")
        .split('.')
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// Which preset each sister (and reviewer) uses, and where each resolved key came from:
/// `agent.narang.args` → `preset codex ([agent])`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Presets {
    /// `harang`, …, `darang reviewer NAME`, `profile NAME` → the preset it runs with.
    pub by_sister: BTreeMap<String, &'static str>,
    /// A table's key filled by a preset → which, and where it was named.
    pub filled: BTreeMap<String, String>,
    /// The preset `[agent]` names, if it names one.
    pub top: Option<&'static str>,
}

/// Replaces every `preset = NAME` in `[agent]`, its sister tables and the reviewer's parallel reviewers
/// by the keys it stands for (a table's own keys win). Unknown names are problems that
/// name the key; the table is then left as it is.
pub(super) fn expand(table: &mut toml::Table) -> (Presets, Vec<ConfigProblem>) {
    let mut presets = Presets::default();
    let mut problems = Vec::new();
    let Some(toml::Value::Table(agent)) = table.get_mut("agent") else {
        return (presets, problems);
    };
    let take = |t: &mut toml::Table, key: &str, problems: &mut Vec<ConfigProblem>| {
        let named = t.remove("preset")?;
        match named.as_str().map(Preset::named) {
            Some(Ok(p)) => Some(p),
            Some(Err(e)) => {
                problems.push(ConfigProblem {
                    key: format!("{key}.preset"),
                    message: e,
                });
                None
            }
            None => {
                problems.push(ConfigProblem {
                    key: format!("{key}.preset"),
                    message: format!("must be a string, one of: {}", NAMES.join(", ")),
                });
                None
            }
        }
    };
    let top = take(agent, "agent", &mut problems);
    presets.top = top.as_ref().map(|p| p.name);
    if let Some(p) = &top {
        fill(
            agent,
            &p.keys(None),
            "agent",
            &format!("preset {} ([agent])", p.name),
            &mut presets,
        );
    }
    for actor in Actor::ALL {
        let path = format!("agent.{actor}");
        let entry = agent
            .entry(actor.as_str())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let Some(own) = entry.as_table_mut() else {
            continue;
        };
        let own_preset = take(own, &path, &mut problems);
        match (&own_preset, &top) {
            (Some(p), _) => {
                fill(
                    own,
                    &p.keys(Some(actor)),
                    &path,
                    &format!("preset {} ([{path}])", p.name),
                    &mut presets,
                );
            }
            (None, Some(p)) => {
                if let Some(keys) = p.sister(actor) {
                    fill(
                        own,
                        keys,
                        &path,
                        &format!("preset {} ([agent])", p.name),
                        &mut presets,
                    );
                }
            }
            (None, None) => {}
        }
        let sister_preset = own_preset.as_ref().or(top.as_ref());
        if let Some(p) = sister_preset {
            presets.by_sister.insert(actor.to_string(), p.name);
        }
        if actor.stage() != Stage::Reviewing {
            continue;
        }
        let Some(toml::Value::Table(reviewers)) = own.get_mut("reviewers") else {
            continue;
        };
        for (name, reviewer) in reviewers.iter_mut() {
            let Some(reviewer) = reviewer.as_table_mut() else {
                continue;
            };
            let rpath = format!("{path}.reviewers.{name}");
            let mine = take(reviewer, &rpath, &mut problems);
            if let Some(p) = &mine {
                fill(
                    reviewer,
                    &p.keys(Some(actor)),
                    &rpath,
                    &format!("preset {} ([{rpath}])", p.name),
                    &mut presets,
                );
            }
            if let Some(p) = mine.as_ref().or(sister_preset) {
                presets
                    .by_sister
                    .insert(super::reviewer_label(name), p.name);
            }
        }
    }
    // A profile (`[agent.profiles.NAME]`) is an agent table of its own: only its preset
    // fills it.
    if let Some(toml::Value::Table(profiles)) = agent.get_mut("profiles") {
        for (name, profile) in profiles.iter_mut() {
            let Some(profile) = profile.as_table_mut() else {
                continue;
            };
            let path = format!("agent.profiles.{name}");
            if let Some(p) = take(profile, &path, &mut problems) {
                presets.by_sister.insert(format!("profile {name}"), p.name);
                fill(
                    profile,
                    &p.keys(None),
                    &path,
                    &format!("preset {} ([{path}])", p.name),
                    &mut presets,
                );
            }
        }
    }
    // Sister tables made only to be looked into stay out of the config.
    agent.retain(|k, v| {
        !(Actor::ALL.iter().any(|a| a.as_str() == k)
            && v.as_table().is_some_and(toml::Table::is_empty))
    });
    (presets, problems)
}

/// Puts `keys` into `table` where it has none of its own; `env` is merged (the table's
/// own variables win).
fn fill(
    table: &mut toml::Table,
    keys: &toml::Table,
    path: &str,
    from: &str,
    presets: &mut Presets,
) {
    for (key, value) in keys {
        if key == "env"
            && let (Some(toml::Value::Table(own)), toml::Value::Table(given)) =
                (table.get_mut("env"), value)
        {
            for (k, v) in given {
                own.entry(k.clone()).or_insert_with(|| v.clone());
            }
            continue;
        }
        if !table.contains_key(key) {
            table.insert(key.clone(), value.clone());
            presets
                .filled
                .insert(format!("{path}.{key}"), from.to_string());
        }
    }
}

/// The keys `config check` says the origin of.
const SHOWN: [&str; 10] = [
    "program",
    "args",
    "output_pointer",
    "fallback_pointer",
    "usage",
    "pause_on",
    "session_pointer",
    "resume_args",
    "stream",
    "env",
];

impl super::Config {
    /// Where each of a sister's (or one of the reviewer's parallel reviewers') spawn keys comes from:
    /// `(key, origin)`, the origin a preset (and where it was named), a table, or
    /// `default`.
    pub fn origins(&self, actor: Actor, reviewer: Option<&str>) -> Vec<(&'static str, String)> {
        let set = |t: &super::SisterConfig| -> toml::Table {
            toml::Table::try_from(t).unwrap_or_default()
        };
        let own = set(self.agent.sister(actor));
        let mine = reviewer
            .and_then(|name| self.agent.reviewing().reviewers.get(name))
            .map(set);
        let top = toml::Table::try_from(&self.agent).unwrap_or_default();
        let defaults = toml::Table::try_from(super::AgentConfig::default()).unwrap_or_default();
        let filled = |path: &str| self.presets.filled.get(path).cloned();
        SHOWN
            .into_iter()
            .map(|key| {
                let rpath = reviewer.map(super::reviewer_table);
                let origin = match (&mine, &rpath) {
                    (Some(t), Some(path)) if t.contains_key(key) => {
                        filled(&format!("{path}.{key}")).unwrap_or(format!("[{path}]"))
                    }
                    _ if own.contains_key(key) => filled(&format!("agent.{actor}.{key}"))
                        .unwrap_or(format!("[agent.{actor}]")),
                    _ if top.get(key).is_some() && top.get(key) != defaults.get(key) => {
                        filled(&format!("agent.{key}")).unwrap_or("[agent]".into())
                    }
                    _ => "default".into(),
                };
                (key, origin)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses_and_knows_its_tested_versions() {
        for name in NAMES {
            let p = Preset::named(name).expect("parses");
            assert!(!p.tested.0.is_empty(), "{name}");
            assert!(p.tested_with(&p.tested.0), "{name}");
            assert!(!p.keys(None).is_empty(), "{name}");
        }
    }

    #[test]
    fn versions_compare_by_their_numbers() {
        let p = Preset::named("claude-code").expect("parses");
        assert!(p.tested_with("2.1.332 (Claude Code)"));
        assert!(!p.tested_with("2.1.400 (Claude Code)"));
        assert!(!p.tested_with("2.1.97"));
        assert!(!p.tested_with("no version here"));
        assert_eq!(numbers("codex-cli 0.171.0"), [0, 171, 0]);
        assert_eq!(numbers("OpenClaw 2026.9.6 (eb377ac)"), [2026, 9, 6]);
    }
}
