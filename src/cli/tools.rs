//! The commands that need no database: `schema`, `validate`, `config check`.

use std::io::Read;

use crate::config::{self, Config};
use crate::domain::Actor;
use crate::handoff::schema;
use crate::handoff::validate;
use crate::output::{Exit, print_json};
use crate::{errln, out, outln};

use super::{SchemaArgs, ValidateArgs};

pub(super) fn print_schema(args: &SchemaArgs) -> Exit {
    match schema::schema(args.actor, args.dialect) {
        Ok(s) => print_json(&s),
        Err(e) => {
            errln!("hanarang schema: {e}");
            Exit::Usage
        }
    }
}

/// The largest input `validate` reads: the runner's default cap, so a file that would be
/// rejected at run time is rejected here too.
const VALIDATE_MAX_BYTES: usize = config::DEFAULT_MAX_OUTPUT_BYTES;

pub(super) fn validate_file(args: &ValidateArgs) -> Exit {
    let source = match &args.file {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "stdin".to_string(),
    };
    let mut bytes = Vec::new();
    let cap = VALIDATE_MAX_BYTES as u64 + 1;
    let read = match &args.file {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::File::open(p).and_then(|f| f.take(cap).read_to_end(&mut bytes))
        }
        _ => std::io::stdin().lock().take(cap).read_to_end(&mut bytes),
    };
    if let Err(e) = read {
        errln!("hanarang validate: cannot read {source}: {e}");
        return Exit::Failure;
    }
    match validate::validate_output(&bytes, VALIDATE_MAX_BYTES, &args.pointer, args.actor) {
        Ok(valid) => match serde_json::to_value(&valid.message) {
            Ok(v) => print_json(&v),
            Err(e) => {
                errln!("hanarang validate: {e}");
                Exit::Failure
            }
        },
        Err(problems) => {
            errln!(
                "{source}: invalid HandoffMessage ({} problem{})",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
            for p in problems {
                errln!("  {p}");
            }
            Exit::Failure
        }
    }
}

pub(super) fn config_check(path: Option<&std::path::Path>) -> Exit {
    let loaded = config::locate(path).and_then(|p| Config::load(&p).map(|c| (p, c)));
    match loaded {
        Ok((path, config)) => match config.to_toml() {
            Ok(text) => {
                outln!("# {}: valid", path.display());
                out!("{text}");
                outln!(
                    "\n# How each sister is spawned (its table over [agent] over the defaults):"
                );
                let reviewers = config.agent.reviewers();
                let specs = Actor::ALL
                    .into_iter()
                    .map(|actor| (actor.to_string(), config.agent.spec(actor), None))
                    .chain(reviewers.iter().filter_map(|name| {
                        let spec = config.agent.reviewer_spec(name)?;
                        Some((crate::config::reviewer_label(name), spec, Some(*name)))
                    }));
                for (who, spec, reviewer) in specs {
                    let preset = config
                        .presets
                        .by_sister
                        .get(&who)
                        .map_or(String::new(), |p| format!(", preset {p}"));
                    outln!(
                        "#   {who}: {} {} (timeout {}, output_pointer {:?}{preset})",
                        crate::domain::shell_word(&spec.program),
                        crate::domain::shell_line(&spec.args),
                        humantime::format_duration(spec.timeout),
                        spec.output_pointer
                    );
                    for (key, origin) in config.origins(spec.actor, reviewer) {
                        outln!("#     {key:<16} from {origin}");
                    }
                    // At a usage limit the stage goes to the next agent of this chain.
                    let chain: Vec<String> = config
                        .chain(spec.actor, reviewer)
                        .into_iter()
                        .map(|c| c.name)
                        .collect();
                    if chain.len() > 1 {
                        outln!("#     {:<16} {}", "at a usage limit", chain.join(" → "));
                    }
                }
                if let Some((what, fix)) = config.agent.design_default() {
                    errln!("hanarang config check: warning: {what}; {fix}");
                }
                if !reviewers.is_empty() {
                    outln!(
                        "# {} reviews with {} reviewers in parallel: {}",
                        crate::domain::Stage::Reviewing.actor(),
                        reviewers.len(),
                        reviewers.join(", ")
                    );
                }
                if let Some(discord) = &config.discord {
                    outln!("\n# Who may act from Discord:");
                    for line in discord.access() {
                        outln!("#   {line}");
                    }
                }
                Exit::Success
            }
            Err(e) => {
                errln!("hanarang config check: {e}");
                Exit::Failure
            }
        },
        Err(e) => {
            errln!("{e}");
            Exit::Usage
        }
    }
}
