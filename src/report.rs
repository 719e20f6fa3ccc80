//! `sprint status` and `sprint log`: what the database says about sprints, as text for
//! people and as stable JSON for programs (fields documented in README).

use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use crate::cli::Exit;
use crate::config::Config;
use crate::notify::messages::{Context, render};
use crate::store::{Spend, Sprint, Store};

fn time(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

fn print_json(value: &serde_json::Value) -> Exit {
    match serde_json::to_string_pretty(value) {
        Ok(text) => {
            println!("{text}");
            Exit::Success
        }
        Err(e) => {
            eprintln!("hanarang: {e}");
            Exit::Failure
        }
    }
}

fn no_sprint(id: &str) -> Exit {
    eprintln!("no sprint {id}");
    Exit::Failure
}

pub async fn status(store: &Store, id: Option<&str>, as_json: bool) -> Exit {
    if as_json && id.is_none() {
        return match store.status_json().await {
            Ok(json) => {
                println!("{json}");
                Exit::Success
            }
            Err(e) => failed(&e),
        };
    }
    let sprints = match id {
        Some(id) => match store.sprint(id).await {
            Ok(Some(s)) => vec![s],
            Ok(None) => return no_sprint(id),
            Err(e) => return failed(&e),
        },
        None => match store.sprints().await {
            Ok(all) => all,
            Err(e) => return failed(&e),
        },
    };
    let spend = match store.spend_by_sprint().await {
        Ok(s) => s,
        Err(e) => return failed(&e),
    };
    let spend_of = |s: &Sprint| spend.get(&s.id).cloned().unwrap_or_default();
    if as_json {
        /// A sprint with its spend, serialized straight to stdout.
        #[derive(serde::Serialize)]
        struct WithUsage<'a> {
            #[serde(flatten)]
            sprint: &'a Sprint,
            usage: Spend,
        }
        let rows: Vec<WithUsage<'_>> = sprints
            .iter()
            .map(|sprint| WithUsage {
                sprint,
                usage: spend_of(sprint),
            })
            .collect();
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let written = match (id, rows.first()) {
            (Some(_), Some(one)) => serde_json::to_writer_pretty(&mut out, one),
            _ => serde_json::to_writer_pretty(&mut out, &rows),
        };
        return match written.and_then(|()| {
            use std::io::Write;
            writeln!(out)
                .and_then(|()| out.flush())
                .map_err(serde_json::Error::io)
        }) {
            Ok(()) => Exit::Success,
            Err(e) if e.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe) => Exit::Success,
            Err(e) => {
                eprintln!("hanarang: {e}");
                Exit::Failure
            }
        };
    }
    if sprints.is_empty() {
        println!("no sprints yet: start one with `hanarang sprint start \"<goal>\"`");
    }
    for s in &sprints {
        println!("{}", status_line(s, &spend_of(s)));
    }
    Exit::Success
}

fn status_line(s: &Sprint, spend: &Spend) -> String {
    format!(
        "{:<11} {:<13} {:<12} round {:<2} attempt {:<2} ${:<7.2} {}",
        s.id, s.state, s.project, s.round, s.attempt, spend.cost_usd, s.goal
    )
}

pub async fn log(store: &Store, config: &Config, id: &str, as_json: bool) -> Exit {
    let sprint = match store.sprint(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return no_sprint(id),
        Err(e) => return failed(&e),
    };
    let (transitions, runs, usage) = match (
        store.transitions(id).await,
        store.runs(id).await,
        store.usage(id).await,
    ) {
        (Ok(t), Ok(r), Ok(u)) => (t, r, u),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return failed(&e),
    };
    if as_json {
        return print_json(&json!({
            "id": sprint.id,
            "state": sprint.state,
            "project": sprint.project,
            "goal": sprint.goal,
            "round": sprint.round,
            "attempt": sprint.attempt,
            "branch": sprint.branch,
            "transitions": transitions,
            "runs": runs,
            "usage": usage,
        }));
    }
    println!("{} · {}", sprint.id, sprint.goal);
    println!(
        "{} (round {}, attempt {}), project {}, branch {}\n",
        sprint.state, sprint.round, sprint.attempt, sprint.project, sprint.branch
    );
    println!("Transitions:");
    let cx = Context::new(config, &sprint);
    for t in &transitions {
        println!(
            "  #{:<3} {}  {:>12} → {:<12} {}",
            t.seq,
            time(t.at),
            t.from.as_str(),
            t.to.as_str(),
            render(t, &cx).text
        );
    }
    println!(
        "\nUsage: ${:.2}, {} input and {} output tokens",
        usage.total.cost_usd, usage.total.input_tokens, usage.total.output_tokens
    );
    for (sister, spend) in &usage.by_sister {
        println!(
            "  {sister:<7} ${:.2}, {} input and {} output tokens",
            spend.cost_usd, spend.input_tokens, spend.output_tokens
        );
    }
    println!("\nRuns (each given the document of its parent):");
    for r in &runs {
        let outcome = r.outcome.map_or("running", |o| o.as_str());
        let took = r
            .duration_ms
            .map(|ms| {
                humantime::format_duration(Duration::from_millis(
                    u64::try_from(ms).unwrap_or(0) / 100 * 100,
                ))
                .to_string()
            })
            .unwrap_or_default();
        let parent = r
            .parent_run_id
            .as_deref()
            .map_or_else(|| "(start)".to_string(), |p| format!("← {p}"));
        let document = if r.synthesized {
            "composed"
        } else {
            "from sister"
        };
        println!(
            "  {:<16} {:<7} round {} attempt {}  {:<18} {:<8} {parent} (document {document})",
            r.run_id,
            r.actor.as_str(),
            r.round,
            r.attempt,
            outcome,
            took
        );
        if let Some(detail) = &r.detail
            && r.outcome != Some(crate::sister::RunOutcome::Handoff)
        {
            println!("      {}", crate::notify::messages::one_line(detail));
        }
    }
    Exit::Success
}

fn failed(e: &crate::store::StoreError) -> Exit {
    eprintln!("hanarang: {e}");
    Exit::Failure
}
