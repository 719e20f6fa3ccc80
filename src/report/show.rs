//! `sprint show` and `sprint diff` (`SPEC.md` §13): what a sprint did, from git and the
//! database — never from what a sister claimed: its commits and diff against its base,
//! the contract with the review's word on each item, the checks, each review round's
//! findings, and the time and spend per sister.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use super::{failed, no_sprint};
use crate::config::Config;
use crate::domain::Actor;
use crate::notify::messages::one_line;
use crate::output::{Exit, escape_controls, print_json};
use crate::sister::{RunOutcome, facts};
use crate::store::{Run, Sprint, Store};
use crate::{errln, out, outln};

/// What git says of the sprint's branch: `None` outside git or before a base was
/// recorded; `Err` when git could not answer.
struct Work {
    head: String,
    commits: Vec<(String, String)>,
    diffstat: Vec<(String, u64, u64)>,
}

async fn work(config: &Config, sprint: &Sprint) -> Option<Result<Work, String>> {
    let workdir = &config.projects.get(&sprint.project)?.workdir;
    let base = sprint.base_commit.as_deref()?;
    let Some(head) = facts::branch_head(workdir, &sprint.branch).await else {
        return Some(Err(format!(
            "the branch {:?} is gone from {}",
            sprint.branch,
            workdir.display()
        )));
    };
    let found = async {
        Ok(Work {
            commits: facts::commits_between(workdir, base, &head).await?,
            diffstat: facts::diffstat(workdir, base, &head).await?,
            head: head.clone(),
        })
    };
    Some(found.await)
}

/// One review round's verdicts: `(reviewer, verdict, findings)`.
type Round = (u32, Vec<(String, String, Vec<String>)>);

fn rounds(runs: &[Run]) -> Vec<Round> {
    let mut by_round: BTreeMap<u32, Vec<(String, String, Vec<String>)>> = BTreeMap::new();
    let reviews = runs
        .iter()
        .filter(|r| r.actor == Actor::Darang && r.outcome == Some(RunOutcome::Handoff));
    for run in reviews {
        let Some(m) = &run.message else { continue };
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        let findings = m["payload"]["issues"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| {
                let place = match (i["file"].as_str(), i["line"].as_u64()) {
                    (Some(f), Some(l)) => format!(" {f}:{l}"),
                    (Some(f), None) => format!(" {f}"),
                    _ => String::new(),
                };
                format!(
                    "[{}]{place} {}",
                    text(&i["severity"]),
                    one_line(&text(&i["message"]))
                )
            })
            .collect();
        let reviewer = run.reviewer.clone().unwrap_or_else(|| "darang".into());
        by_round
            .entry(run.round)
            .or_default()
            .push((reviewer, text(&m["verdict"]), findings));
    }
    by_round.into_iter().collect()
}

/// Time per sister: the summed duration of its runs.
fn time_by_sister(runs: &[Run]) -> BTreeMap<String, i64> {
    let mut time = BTreeMap::new();
    for run in runs {
        *time.entry(run.actor.to_string()).or_insert(0) += run.duration_ms.unwrap_or(0);
    }
    time
}

/// `sprint show ID [--json]`.
pub async fn show(store: &Store, config: &Config, id: &str, as_json: bool) -> Exit {
    let sprint = match store.sprint(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return no_sprint(id),
        Err(e) => return failed(&e),
    };
    let (runs, usage, checks) = match (
        store.runs(id).await,
        store.usage(id).await,
        store.checks(id).await,
    ) {
        (Ok(r), Ok(u), Ok(c)) => (r, u, c),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return failed(&e),
    };
    let work = work(config, &sprint).await;
    let contract = crate::store::contract_results(&runs);
    let rounds = rounds(&runs);
    let time = time_by_sister(&runs);
    if as_json {
        let (head, commits, diffstat, git_error) = match &work {
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
            "commits": commits,
            "diffstat": diffstat,
            "git_error": git_error,
            "checklist": super::checklist_json(&contract),
            "checks": checks,
            "rounds": rounds
                .iter()
                .map(|(round, reviews)| json!({
                    "round": round,
                    "reviews": reviews
                        .iter()
                        .map(|(reviewer, verdict, findings)| json!({ "reviewer": reviewer, "verdict": verdict, "findings": findings }))
                        .collect::<Vec<_>>(),
                }))
                .collect::<Vec<_>>(),
            "spend": { "total": usage.total, "by_sister": by_sister },
        }));
    }
    outln!("{} · {}", sprint.id, escape_controls(&sprint.goal));
    outln!(
        "{} (round {}), project {}",
        sprint.state,
        sprint.round,
        sprint.project
    );
    match (&sprint.base_branch, &sprint.base_commit, &work) {
        (Some(base), Some(commit), Some(Ok(w))) => {
            outln!(
                "Branch {} from {} at {}, now at {}",
                escape_controls(&sprint.branch),
                escape_controls(base),
                short(commit),
                short(&w.head)
            );
            outln!("\nCommits ({}):", w.commits.len());
            for (id, subject) in &w.commits {
                outln!("  {} {}", short(id), escape_controls(subject));
            }
            let (added, removed) = w
                .diffstat
                .iter()
                .fold((0, 0), |(a, r), (_, x, y)| (a + x, r + y));
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
        for c in &contract {
            outln!(
                "  {} {}: {}",
                super::contract_mark(c.passed),
                escape_controls(&c.item.id),
                escape_controls(&c.item.text)
            );
        }
    }
    if !checks.is_empty() {
        outln!("\nChecks:");
        for c in &checks {
            outln!(
                "  {} `{}` in {} at {}",
                super::check_ended(c),
                escape_controls(&c.command.join(" ")),
                humantime::format_duration(Duration::from_millis(
                    u64::try_from(c.duration_ms).unwrap_or(0) / 1000 * 1000
                )),
                c.head.as_deref().map_or("(no git)", short)
            );
        }
    }
    if !rounds.is_empty() {
        outln!("\nReview rounds:");
    }
    for (round, reviews) in &rounds {
        for (reviewer, verdict, findings) in reviews {
            let said = if findings.is_empty() {
                String::new()
            } else {
                format!(": {}", findings.join("; "))
            };
            outln!("  {round}  {reviewer} {verdict}{}", escape_controls(&said));
        }
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

/// `sprint diff ID`: the patch of the sprint's branch against its base, on stdout.
pub async fn diff(store: &Store, config: &Config, id: &str) -> Exit {
    let sprint = match store.sprint(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return no_sprint(id),
        Err(e) => return failed(&e),
    };
    let (Some(project), Some(base)) = (
        config.projects.get(&sprint.project),
        sprint.base_commit.as_deref(),
    ) else {
        errln!(
            "{}: no base recorded (its workdir is not a git repository, or no run started), so there is no diff",
            sprint.id
        );
        return Exit::Failure;
    };
    let Some(head) = facts::branch_head(&project.workdir, &sprint.branch).await else {
        errln!(
            "{}: the branch {:?} is gone from {}",
            sprint.id,
            sprint.branch,
            project.workdir.display()
        );
        return Exit::Failure;
    };
    match facts::patch(&project.workdir, base, &head).await {
        Ok(patch) => {
            out!("{patch}");
            Exit::Success
        }
        Err(e) => {
            errln!("{}: {e}", sprint.id);
            Exit::Failure
        }
    }
}

fn short(id: &str) -> &str {
    id.get(..7).unwrap_or(id)
}
