//! A usage limit is not a stop: each sister's chain of agents, from its own agent to the
//! fallbacks it names (`fallback = ["codex"]`, presets or `[agent.profiles.NAME]`), and
//! the checks that keep a chain finite and every name known.

use super::*;
use crate::domain::Stage;

/// One agent of a sister's chain: its name (a preset or a profile), and how that sister
/// runs with it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentChoice {
    pub name: String,
    pub spec: SisterSpec,
}

/// How people read an agent's name: a preset's product name (`Claude Code`), else the
/// name as written.
pub fn title(name: &str) -> String {
    match name {
        "claude-code" => "Claude Code".into(),
        "codex" => "Codex".into(),
        "openclaw" => "OpenClaw".into(),
        other => other.into(),
    }
}

/// Every preset a `fallback` names becomes a profile of that preset, unless a profile of
/// that name exists: the rest of loading then sees one kind of fallback.
pub(super) fn preset_profiles(table: &mut toml::Table) {
    let Some(toml::Value::Table(agent)) = table.get_mut("agent") else {
        return;
    };
    let mut lists: Vec<&toml::Value> = Vec::new();
    lists.extend(agent.get("fallback"));
    for actor in Actor::ALL {
        let own = agent.get(actor.as_str()).and_then(toml::Value::as_table);
        lists.extend(own.and_then(|t| t.get("fallback")));
        let reviewers = own
            .and_then(|t| t.get("reviewers"))
            .and_then(toml::Value::as_table);
        for reviewer in reviewers.into_iter().flat_map(|r| r.values()) {
            lists.extend(reviewer.as_table().and_then(|t| t.get("fallback")));
        }
    }
    let profiles = agent.get("profiles").and_then(toml::Value::as_table);
    for profile in profiles.into_iter().flat_map(|p| p.values()) {
        lists.extend(profile.as_table().and_then(|t| t.get("fallback")));
    }
    let named: Vec<String> = lists
        .iter()
        .filter_map(|l| l.as_array())
        .flatten()
        .filter_map(toml::Value::as_str)
        .filter(|name| preset::NAMES.contains(name))
        .map(str::to_string)
        .collect();
    if named.is_empty() {
        return;
    }
    let entry = agent
        .entry("profiles")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(profiles) = entry.as_table_mut() else {
        return;
    };
    for name in named {
        profiles.entry(name.clone()).or_insert_with(|| {
            let mut preset = toml::Table::new();
            preset.insert("preset".into(), toml::Value::String(name));
            toml::Value::Table(preset)
        });
    }
}

impl Config {
    /// A sister's (or one of the reviewer's parallel reviewers') agents in the order they take its stage
    /// over: its own agent, then its fallbacks (its table's `fallback`, else the reviewer's for a
    /// reviewer, else `[agent]`'s), each profile followed by its own fallbacks, none twice.
    pub fn chain(&self, actor: Actor, reviewer: Option<&str>) -> Vec<AgentChoice> {
        let a = &self.agent;
        let (own, spec) = match reviewer {
            Some(name) => match (a.reviewing().reviewers.get(name), a.reviewer_spec(name)) {
                (Some(r), Some(spec)) => (r.over(a.reviewing()), spec),
                _ => (a.reviewing().clone(), a.spec(actor)),
            },
            None => (a.sister(actor).clone(), a.spec(actor)),
        };
        let first = self.own_agent(actor, reviewer, &spec);
        let list = own.fallback.unwrap_or_else(|| a.fallback.clone());
        let mut names = vec![first];
        self.walk(&list, &mut names);
        let mut chain = Vec::with_capacity(names.len());
        for name in names {
            let spec = match chain.is_empty() {
                true => spec.clone(),
                false => match a.profiles.get(&name) {
                    Some(profile) => profile_spec(&spec, profile),
                    None => continue,
                },
            };
            chain.push(AgentChoice { name, spec });
        }
        chain
    }

    /// How `actor` runs with the profile `name` (`None`: no such profile).
    pub fn profile_spec(&self, name: &str, actor: Actor) -> Option<SisterSpec> {
        let profile = self.agent.profiles.get(name)?;
        Some(profile_spec(&self.agent.spec(actor), profile))
    }

    /// The name of the agent a sister's own table runs: its preset, else its program's
    /// file name.
    fn own_agent(&self, actor: Actor, reviewer: Option<&str>, spec: &SisterSpec) -> String {
        let key = match reviewer {
            Some(name) => super::reviewer_label(name),
            None => actor.to_string(),
        };
        match self.presets.by_sister.get(&key) {
            Some(preset) => (*preset).to_string(),
            None => program_name(&spec.program),
        }
    }

    /// `list` and each profile's own fallbacks after it, depth first, into `seen` (names
    /// already there are skipped, so a chain always ends).
    fn walk(&self, list: &[String], seen: &mut Vec<String>) {
        for name in list {
            if seen.contains(name) {
                continue;
            }
            seen.push(name.clone());
            if let Some(next) = self
                .agent
                .profiles
                .get(name)
                .and_then(|p| p.fallback.as_ref())
            {
                self.walk(next, seen);
            }
        }
    }

    /// Every fallback list names a known agent other than its table's own, no chain
    /// comes back to where it started, and every profile runs something.
    pub(super) fn check_fallbacks(&self) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let a = &self.agent;
        let top_name = match self.presets.top {
            Some(preset) => preset.to_string(),
            None => program_name(&a.program),
        };
        let mut lists: Vec<(String, &[String], Option<String>)> =
            vec![("agent.fallback".into(), &a.fallback, Some(top_name))];
        for actor in Actor::ALL {
            if let Some(list) = &a.sister(actor).fallback {
                let own = self.own_agent(actor, None, &a.spec(actor));
                lists.push((format!("agent.{actor}.fallback"), list, Some(own)));
            }
        }
        for (name, r) in &a.reviewing().reviewers {
            if let (Some(list), Some(spec)) = (&r.fallback, a.reviewer_spec(name)) {
                let own = self.own_agent(Stage::Reviewing.actor(), Some(name), &spec);
                let key = format!("{}.fallback", super::reviewer_table(name));
                lists.push((key, list, Some(own)));
            }
        }
        for (name, profile) in &a.profiles {
            let key = format!("agent.profiles.{name}");
            if !problems::is_reviewer_name(name) {
                problems.push(problem(
                    &key,
                    format!("{name:?} is not a profile name: 1 to 32 lower-case letters, digits, '-' or '_'"),
                ));
            }
            if profile.program.is_none() {
                problems.push(problem(
                    &key,
                    format!(
                        "profile {name:?} runs nothing: give it `preset = \"NAME\"` or a `program`"
                    ),
                ));
            }
            if profile.timeout.is_some() {
                problems.push(problem(
                    &format!("{key}.timeout"),
                    "a stage's timeout is its sister's: set it in [agent.<sister>]".into(),
                ));
            }
            if !profile.reviewers.is_empty() {
                problems.push(problem(
                    &format!("{key}.reviewers"),
                    format!(
                        "a profile has no reviewers: they are {}'s ([{}])",
                        crate::domain::Stage::Reviewing.actor(),
                        super::reviewer_table("NAME")
                    ),
                ));
            }
            if let Some(list) = &profile.fallback {
                lists.push((format!("{key}.fallback"), list, Some(name.clone())));
            }
        }
        for (key, list, own) in lists {
            for (i, name) in list.iter().enumerate() {
                let at = format!("{key}[{i}]");
                if own.as_deref() == Some(name.as_str()) {
                    problems.push(problem(
                        &at,
                        format!("{name:?} is this table's own agent: a fallback names another one"),
                    ));
                } else if !a.profiles.contains_key(name) {
                    problems.push(problem(
                        &at,
                        format!(
                            "{name:?} is neither a preset ({}) nor a profile ([agent.profiles.{name}])",
                            preset::NAMES.join(", ")
                        ),
                    ));
                }
            }
            let Some(own) = own else { continue };
            if list.contains(&own) {
                continue;
            }
            if let Some(path) = self.cycle(&own, list, &mut vec![own.clone()]) {
                problems.push(problem(
                    &key,
                    format!(
                        "the chain comes back to {own:?}: {} (a chain of fallbacks must end)",
                        path.join(" → ")
                    ),
                ));
            }
        }
        problems
    }

    /// A path of profile fallbacks from `list` back to `start`, if there is one.
    fn cycle(&self, start: &str, list: &[String], path: &mut Vec<String>) -> Option<Vec<String>> {
        for name in list {
            if name == start {
                let mut found = path.clone();
                found.push(name.clone());
                return Some(found);
            }
            if path.contains(name) {
                continue;
            }
            let Some(next) = self
                .agent
                .profiles
                .get(name)
                .and_then(|p| p.fallback.as_ref())
            else {
                continue;
            };
            path.push(name.clone());
            if let Some(found) = self.cycle(start, next, path) {
                return Some(found);
            }
            path.pop();
        }
        None
    }
}

fn problem(key: &str, message: String) -> ConfigProblem {
    ConfigProblem {
        key: key.into(),
        message,
    }
}

/// `/usr/bin/claude` → `claude`.
fn program_name(program: &str) -> String {
    Path::new(program)
        .file_name()
        .map_or_else(|| program.to_string(), |n| n.to_string_lossy().into_owned())
}

/// How a sister runs with a profile: the profile's agent keys (its CLI's program, args,
/// pointers, pause rules, session keys: none of them taken from the sister's own agent),
/// with the sister's stage settings (timeout, env, output cap) where the profile sets none.
fn profile_spec(base: &SisterSpec, p: &SisterConfig) -> SisterSpec {
    let mut env = base.env.clone();
    env.extend(p.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    SisterSpec {
        actor: base.actor,
        program: p.program.clone().unwrap_or_default(),
        args: p.args.clone().unwrap_or_default(),
        output_pointer: p.output_pointer.clone().unwrap_or_default(),
        max_output_bytes: p.max_output_bytes.map_or(base.max_output_bytes, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        }),
        kill_grace: p.kill_grace.map_or(base.kill_grace, |d| d.0),
        stall_timeout: p.stall_timeout.map(|d| d.0).or(base.stall_timeout),
        env,
        usage: p.usage.clone().unwrap_or_default(),
        fallback_pointer: p.fallback_pointer.clone(),
        pause_on: p.pause_on.clone().unwrap_or_default(),
        pause_default: p.pause_default.map_or(base.pause_default, |d| d.0),
        session_pointer: p.session_pointer.clone(),
        resume_args: p.resume_args.clone(),
        stream: p.stream,
        writable: p.writable.clone().unwrap_or_else(|| base.writable.clone()),
        timeout: base.timeout,
        reviewer: base.reviewer.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ParseError> {
        Config::parse(text, Path::new("/"))
    }

    fn keys(text: &str) -> Vec<String> {
        match parse(text) {
            Err(ParseError::Invalid(problems)) => problems.into_iter().map(|p| p.key).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_sisters_chain_is_its_agent_then_its_fallbacks() {
        let config = parse(
            "[agent]\npreset = \"claude-code\"\nfallback = [\"codex\", \"mine\"]\n\
             [agent.profiles.mine]\nprogram = \"./mine\"\nfallback = [\"openclaw\"]\n\
             [agent.erang]\nfallback = []\n",
        )
        .expect("valid");
        let chain = config.chain(Stage::Implementing.actor(), None);
        let names: Vec<&str> = chain.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["claude-code", "codex", "mine", "openclaw"]);
        assert_eq!(chain[1].spec.program, "codex");
        assert_eq!(chain[1].spec.session_pointer, None, "nothing of Claude's");
        assert_eq!(chain[1].spec.timeout, chain[0].spec.timeout);
        assert!(chain[2].spec.program.ends_with("/mine"));
        assert_eq!(config.chain(Stage::Deploying.actor(), None).len(), 1);
    }

    #[test]
    fn unknown_names_cycles_and_self_are_refused_by_key() {
        assert_eq!(
            keys("[agent]\npreset = \"codex\"\nfallback = [\"gemini\"]\n"),
            ["agent.fallback[0]"]
        );
        assert_eq!(
            keys("[agent.narang]\npreset = \"codex\"\nfallback = [\"codex\"]\n"),
            ["agent.narang.fallback[0]"]
        );
        assert_eq!(
            keys(
                "[agent.profiles.a]\nprogram = \"a\"\nfallback = [\"b\"]\n\
                 [agent.profiles.b]\nprogram = \"b\"\nfallback = [\"a\"]\n"
            ),
            ["agent.profiles.a.fallback", "agent.profiles.b.fallback"]
        );
        assert_eq!(
            keys("[agent.profiles.a]\nargs = []\n"),
            ["agent.profiles.a"]
        );
        assert_eq!(
            keys(
                "[agent]\npreset = \"claude-code\"\nfallback = [\"mine\"]\n\
                 [agent.profiles.mine]\nprogram = \"m\"\nfallback = [\"claude-code\"]\n"
            ),
            ["agent.fallback"]
        );
    }
}
