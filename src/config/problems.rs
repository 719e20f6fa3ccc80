//! Checking a config: every problem reported with its key path at once, from serde's
//! errors (each failing key removed and the rest read again) and from the rules beyond
//! the shape (placeholders, pointers, env names, reviewers, projects).

use super::*;
use crate::domain::Stage;

impl Config {
    /// The checks serde cannot state, each naming its key.
    pub(super) fn check(&self) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let mut problem = |key: &str, message: String| {
            problems.push(ConfigProblem {
                key: key.into(),
                message,
            })
        };
        self.check_database_and_host(&mut problem);
        self.check_pipeline(&mut problem);
        self.check_agents(&mut problem);
        self.check_projects(&mut problem);
        self.check_discord(&mut problem);
        problems
    }

    /// `[database]` and `[host]`.
    fn check_database_and_host(&self, problem: &mut impl FnMut(&str, String)) {
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
    }

    /// `[pipeline]`.
    fn check_pipeline(&self, problem: &mut impl FnMut(&str, String)) {
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
    }

    /// `[agent]`, each sister's table, the reviewer's parallel reviewers and the profiles.
    fn check_agents(&self, problem: &mut impl FnMut(&str, String)) {
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
                session_pointer: a.session_pointer.as_deref(),
                resume_args: a.resume_args.as_deref(),
                timeout: None,
            },
            token_env,
            problem,
        );
        for actor in Actor::ALL {
            let s = a.sister(actor);
            if actor.stage() != Stage::Reviewing && !s.reviewers.is_empty() {
                problem(
                    &format!("agent.{actor}.reviewers"),
                    format!(
                        "only {} (the reviewer) has reviewers",
                        Stage::Reviewing.actor()
                    ),
                );
            }
            let reviewers = if actor.stage() == Stage::Reviewing {
                s.reviewers.iter().collect()
            } else {
                Vec::new()
            };
            for (name, r) in reviewers {
                let table = reviewer_table(name);
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
                check_agent_fields(&table, &AgentFields::of(r), token_env, problem);
            }
            check_agent_fields(
                &format!("agent.{actor}"),
                &AgentFields::of(s),
                token_env,
                problem,
            );
        }

        for (name, profile) in &a.profiles {
            let table = format!("agent.profiles.{name}");
            check_agent_fields(&table, &AgentFields::of(profile), token_env, problem);
        }

        if git_identity(&a.git_author, Stage::Implementing.actor(), &self.host.name).is_none() {
            problem(
                "agent.git_author",
                format!(
                    "{:?}: expected \"Name <email>\" (with {{actor}} and {{host}} if wanted)",
                    a.git_author
                ),
            );
        }
    }

    /// Each `[projects.NAME]`: its name, workdir, recipe files and forge.
    fn check_projects(&self, problem: &mut impl FnMut(&str, String)) {
        // What of hanarang's is known here: the config's own path is set only once it is
        // checked.
        let own = secret_files(self);
        let workdirs = self.workdirs();
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
            for (field, message) in project_recipe(project, &own, &workdirs) {
                problem(&format!("{key}.{field}"), message);
            }
            if let Some(forge) = &project.forge {
                for (field, message) in forge_problems(forge) {
                    problem(&format!("{key}.forge.{field}"), message);
                }
            }
        }
    }

    /// `[discord]`.
    fn check_discord(&self, problem: &mut impl FnMut(&str, String)) {
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
            // Only what is certainly wrong: a file this user may not see may still be the
            // service's to read.
            if let Some(file) = &d.token_file {
                match std::fs::metadata(file) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => problem(
                        "discord.token_file",
                        format!("no file {} (it must hold the bot token)", file.display()),
                    ),
                    Ok(m) if m.is_dir() => problem(
                        "discord.token_file",
                        format!(
                            "{} is a folder, not the file of the bot token",
                            file.display()
                        ),
                    ),
                    _ => {}
                }
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
    }
}

/// The agent tables that set `program` but not `args`: `None` is `[agent]`, `Some` a
/// sister's table.
pub(super) fn programs_without_args(table: &toml::Table) -> Vec<Option<Actor>> {
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

/// The agent settings `[agent]` and `[agent.<sister>]` share, borrowed for checking.
pub(super) struct AgentFields<'a> {
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
    session_pointer: Option<&'a str>,
    resume_args: Option<&'a [String]>,
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
            session_pointer: s.session_pointer.as_deref(),
            resume_args: s.resume_args.as_deref(),
            timeout: s.timeout,
        }
    }
}

/// A reviewer's name goes into run ids, an environment variable and Discord lines.
pub(super) fn is_reviewer_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

pub(super) fn check_agent_fields(
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
    for (i, arg) in f.resume_args.unwrap_or_default().iter().enumerate() {
        let unknown = placeholder::names(arg)
            .into_iter()
            .find(|n| *n != placeholder::SESSION && !placeholder::SPAWN.contains(n));
        if let Some(name) = unknown {
            problem(
                &format!("{table}.resume_args[{i}]"),
                format!(
                    "{} (and {{{}}})",
                    unknown_placeholder(name, placeholder::SPAWN),
                    placeholder::SESSION
                ),
            );
        }
    }
    if f.resume_args
        .is_some_and(|a| !a.iter().any(|a| a.contains("{session}")))
    {
        problem(
            &format!("{table}.resume_args"),
            "must name the session to continue: {session}".into(),
        );
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
        ("session_pointer", f.session_pointer),
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

pub(super) fn unknown_placeholder(name: &str, known: &[&str]) -> String {
    let known: Vec<String> = known.iter().map(|k| format!("{{{k}}}")).collect();
    format!(
        "unknown placeholder {{{name}}}; known placeholders: {}",
        known.join(", ")
    )
}

pub(super) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    Key(String),
    Index(usize),
}

/// Deserializes the whole table, collecting every error instead of stopping at the first:
/// each failing key is recorded and taken out, and the rest is tried again.
pub(super) fn deserialize_all(mut table: toml::Table) -> (Option<Config>, Vec<ConfigProblem>) {
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
pub(super) fn explain(path: &[Step], message: &str) -> (Vec<Step>, String) {
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

pub(super) fn backticked<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    rest.split_once('`').map(|(inside, _)| inside)
}

pub(super) fn dotted(path: &[Step]) -> String {
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
pub(super) fn remove(table: &mut toml::Table, path: &[Step], key: &[Step]) -> bool {
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

pub(super) fn exists(table: &toml::Table, key: &[Step]) -> bool {
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
