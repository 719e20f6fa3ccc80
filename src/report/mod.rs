//! `sprint status` and `sprint log`: what the database says about sprints, as text for
//! people and as stable JSON for programs (fields documented in docs/cli.md).

use std::time::{Duration, UNIX_EPOCH};

use crate::notify::messages::one_line_cow;
use crate::output::escape_controls;
use crate::output::{Exit, print_json};
use std::collections::HashMap;

use crate::store::{RunLive, Spend, Sprint, Store};
use crate::{errln, out, outln};
use status::SprintStatus;
pub use status::status_json;

pub mod evidence;
mod log;
pub mod picture;
mod show;
mod status;
pub use log::{
    Capture, check_ended, checklist_json, contract_mark, failed_tests, log, run_capture,
};
pub use show::{diff, show};

/// How many of a failed run's last stderr lines `sprint log` shows under it.
const STDERR_LINES: usize = 8;

fn time(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

fn no_sprint(id: &str) -> Exit {
    errln!("no sprint {id}");
    Exit::Failure
}

/// A sprint as the `sprint status` table shows it: only its columns.
struct StatusRow<'a> {
    id: &'a str,
    state: &'static str,
    project: &'a str,
    round: i64,
    attempt: i64,
    cost_usd: f64,
    next_run_at: Option<i64>,
    /// The running sister's latest step.
    now: Option<&'a str>,
    goal: &'a str,
}

impl<'a> StatusRow<'a> {
    fn of(s: &'a Sprint, spend: &Spend, now: &'a HashMap<String, RunLive>) -> StatusRow<'a> {
        StatusRow {
            now: now.get(&s.id).and_then(|l| l.step.as_deref()),
            id: &s.id,
            state: s.state.as_str(),
            project: &s.project,
            round: i64::from(s.round),
            attempt: i64::from(s.attempt),
            cost_usd: spend.cost_usd,
            next_run_at: s.next_run_at,
            goal: &s.goal,
        }
    }
}

pub async fn status(store: &Store, id: Option<&str>, as_json: bool) -> Exit {
    if id.is_none() && as_json {
        return match status_json(store).await {
            Ok(json) => {
                outln!("{json}");
                Exit::Success
            }
            Err(e) => failed(&e),
        };
    }
    let now = match store.live_steps().await {
        Ok(now) => now,
        Err(e) => return failed(&e),
    };
    let Some(id) = id else {
        let all = match store.sprints_with_spend().await {
            Ok(all) => all,
            Err(e) => return failed(&e),
        };
        let rows: Vec<StatusRow> = all
            .iter()
            .map(|(s, spend)| StatusRow::of(s, spend, &now))
            .collect();
        return table(&rows);
    };
    let sprint = match store.sprint(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return no_sprint(id),
        Err(e) => return failed(&e),
    };
    let spend = match store.spend_by_sprint().await {
        Ok(s) => s.get(&sprint.id).cloned().unwrap_or_default(),
        Err(e) => return failed(&e),
    };
    if as_json {
        let waiting = match status::waiting_for(store, &sprint).await {
            Ok(waiting) => waiting,
            Err(e) => return failed(&e),
        };
        return print_json(&SprintStatus {
            sprint: &sprint,
            usage: &spend,
            now: now.get(&sprint.id),
            waiting,
        });
    }
    table(&[StatusRow::of(&sprint, &spend, &now)])
}

/// The `sprint status` table, written at once. Two passes over the rows (the widths,
/// then the lines) and no text made per row beyond what must be: 10,000 rows' worth of
/// small strings cost as much to free as to make.
fn table(rows: &[StatusRow]) -> Exit {
    use std::fmt::Write;
    if rows.is_empty() {
        outln!("no sprints yet: start one with `hanarang sprint start \"<goal>\"`");
        return Exit::Success;
    }
    let now = crate::clock::now_ms();
    // Columns are as wide as their widest cell in characters; ASCII, the usual case, is
    // counted by its length.
    let chars = |s: &str| {
        if s.is_ascii() {
            s.len()
        } else {
            s.chars().count()
        }
    };
    // A number's width: its digits and its sign.
    let digits = |n: i64| {
        n.unsigned_abs()
            .checked_ilog10()
            .map_or(1, |d| d as usize + 1)
            + usize::from(n < 0)
    };
    // A cost's width, measured by writing it into one reused buffer.
    let mut buf = String::new();
    let mut width_of = |cost: Cost| {
        buf.clear();
        let _ = write!(buf, "{cost}");
        buf.len()
    };
    // A due time only for a sprint waiting in a stage: `-` for every other.
    let next_runs: Vec<Option<String>> = rows
        .iter()
        .map(|s| {
            let waiting = s
                .state
                .parse::<crate::pipeline::State>()
                .is_ok_and(|st| st.stage().is_some());
            s.next_run_at
                .filter(|_| waiting)
                .map(|at| next_run(at, now))
        })
        .collect();
    let header = [
        "ID", "STATE", "PROJECT", "ROUND", "ATTEMPT", "COST", "NEXT RUN", "NOW",
    ];
    // A step is agent text: on one line, cut to a column's width.
    let steps: Vec<Option<String>> = rows
        .iter()
        .map(|s| {
            s.now
                .map(|step| escape_controls(&cut_chars(step, NOW_CHARS)).into_owned())
        })
        .collect();
    let mut widths = header.map(str::len);
    let mut goals = 0;
    for ((s, next), step) in rows.iter().zip(&next_runs).zip(&steps) {
        goals += s.goal.len();
        let cells = [
            chars(s.id),
            chars(s.state),
            chars(s.project),
            digits(s.round),
            digits(s.attempt),
            width_of(Cost(s.cost_usd)),
            next.as_deref().map_or(1, chars),
            step.as_deref().map_or(1, chars),
        ];
        for (width, cell) in widths.iter_mut().zip(cells) {
            *width = (*width).max(cell);
        }
    }
    const SPACES: &str = "                                ";
    // Room for every line as it usually is (a goal escaped or cut may differ): the cells
    // and their gaps, the goal and its newline.
    let line = widths.iter().map(|w| w + 2).sum::<usize>() + 1;
    let mut text = String::with_capacity((rows.len() + 1) * line + goals + "GOAL".len());
    // Pads the cell that starts at byte `from` of the text to its column's width.
    let pad = |text: &mut String, from: usize, width: usize| {
        let mut pad = width.saturating_sub(chars(&text[from..])) + 2;
        while pad > 0 {
            let n = pad.min(SPACES.len());
            text.push_str(&SPACES[..n]);
            pad -= n;
        }
    };
    for (cell, width) in header.iter().zip(widths) {
        let from = text.len();
        text.push_str(cell);
        pad(&mut text, from, width);
    }
    text.push_str("GOAL\n");
    for ((s, next), step) in rows.iter().zip(&next_runs).zip(&steps) {
        let cell = |text: &mut String, i: usize, write: &dyn Fn(&mut String)| {
            let from = text.len();
            write(text);
            pad(text, from, widths[i]);
        };
        cell(&mut text, 0, &|t| t.push_str(s.id));
        cell(&mut text, 1, &|t| t.push_str(s.state));
        cell(&mut text, 2, &|t| t.push_str(s.project));
        cell(&mut text, 3, &|t| {
            let _ = write!(t, "{}", s.round);
        });
        cell(&mut text, 4, &|t| {
            let _ = write!(t, "{}", s.attempt);
        });
        cell(&mut text, 5, &|t| {
            let _ = write!(t, "{}", Cost(s.cost_usd));
        });
        cell(&mut text, 6, &|t| {
            t.push_str(next.as_deref().unwrap_or("-"))
        });
        cell(&mut text, 7, &|t| {
            t.push_str(step.as_deref().unwrap_or("-"))
        });
        text.push_str(&escape_controls(&one_line_cow(s.goal)));
        text.push('\n');
    }
    out!("{text}");
    Exit::Success
}

/// How much of a running sister's step the `sprint status` table shows (characters).
const NOW_CHARS: usize = 40;

/// `text` cut to `max` characters, with `…` when something was cut.
fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A sprint's spend as the table shows it: `$1.25`.
#[derive(Clone, Copy)]
struct Cost(f64);

impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match cents(self.0) {
            Some(c) => write!(f, "${}.{:02}", c / 100, c % 100),
            None => write!(f, "${:.2}", self.0),
        }
    }
}

/// `usd` in whole cents, rounded as `{:.2}` rounds it, where its product by 100 in `f64`
/// decides that surely: under $10,000,000 (the product's error is then under 1e-7 of a
/// cent) and not within 1e-6 of a half cent. `None` for every other amount, which is
/// written by the float's own (slower) formatting.
fn cents(usd: f64) -> Option<u64> {
    let c = usd * 100.0;
    // `-0.0` too goes the slow way, which writes its sign.
    if !(c.is_sign_positive() && c < 1e9) || (c - c.floor() - 0.5).abs() < 1e-6 {
        return None;
    }
    // In range and whole: the conversion is exact.
    Some(c.round() as u64)
}

/// When a waiting stage's sister starts again: a retry's due time (`-` is written for a
/// sprint with none).
fn next_run(at: i64, now: i64) -> String {
    let wait = Duration::from_secs(u64::try_from((at - now).max(0)).unwrap_or(0) / 1000);
    if wait.is_zero() {
        format!("{} (due now)", time(at))
    } else {
        format!("{} (in {})", time(at), humantime::format_duration(wait))
    }
}

fn failed(e: &crate::store::StoreError) -> Exit {
    errln!("hanarang: {e}");
    Exit::Failure
}

/// `hanarang hosts [--json]`: the hosts sharing a PostgreSQL database.
pub async fn hosts(store: &Store, as_json: bool) -> Exit {
    let hosts = match store.hosts().await {
        Ok(Some(hosts)) => hosts,
        Ok(None) => {
            if as_json {
                outln!("[]");
            } else {
                outln!(
                    "this database is SQLite: one orchestrator drives it (several hosts share a database.url = \"postgres://…\")"
                );
            }
            return Exit::Success;
        }
        Err(e) => return failed(&e),
    };
    if as_json {
        return print_json(&hosts);
    }
    if hosts.is_empty() {
        outln!("no hosts yet: `hanarang serve` registers one");
        return Exit::Success;
    }
    for h in &hosts {
        let lease = if h.expired {
            "EXPIRED (its sprints go to the other hosts)"
        } else {
            "live"
        };
        outln!(
            "{}  {lease}, last heartbeat {}s ago (lease {}s), pid {} on {}",
            escape_controls(&h.name),
            h.heartbeat_age_ms.max(0) / 1000,
            h.lease_ttl_ms / 1000,
            h.pid,
            escape_controls(&h.machine)
        );
        outln!("    projects: {}", escape_controls(&h.projects.join(", ")));
        let owns = if h.sprints.is_empty() {
            "none".to_string()
        } else {
            h.sprints.join(", ")
        };
        outln!("    sprints:  {owns}");
    }
    Exit::Success
}

/// A sprint's pull request body: the summary people approve from (as its thread shows it),
/// with the link to the thread when it has one.
pub fn pull_request_body(
    store: crate::store::Store,
    config: std::sync::Arc<crate::config::Config>,
) -> crate::orchestrator::Describe {
    std::sync::Arc::new(move |sprint| {
        let (store, config) = (store.clone(), config.clone());
        Box::pin(async move {
            let id = sprint.id.clone();
            let evidence = evidence::Evidence::gather(&store, &config, sprint)
                .await
                .ok()?;
            let mut text = crate::discord::summary::summary(&evidence, config.pipeline.locale).text;
            let thread = store.forum_post(&id).await.ok().flatten();
            if let (Some(post), Some(discord)) = (thread, &config.discord) {
                text.push_str(&format!(
                    "\n\nThread: {}",
                    crate::notify::thread_url(discord.guild_id.0, post.thread_id)
                ));
            }
            text.push_str(&format!("\n\nOpened by hanarang for {id}."));
            Some(text)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::Cost;

    /// The table's costs read as `{:.2}` writes them: near half cents, on exact ties, at
    /// the edges of the fast path and across magnitudes.
    #[test]
    fn a_cost_is_written_as_the_float_formatting_writes_it() {
        let mut amounts = vec![
            0.0,
            -0.0,
            0.004,
            0.005,
            0.015,
            1.005,
            2.675,
            1e7,
            1e7 - 0.005,
        ];
        amounts.extend((0..4000).map(|k| f64::from(k) / 8.0)); // exact ties: 0.125, 0.375, …
        amounts.extend((0..4000).map(|k| f64::from(k) * 0.005)); // near ties
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let scale = [1e-3, 1.0, 1e3, 1e6, 1e8][(x % 5) as usize];
            amounts.push((x >> 11) as f64 / (1u64 << 53) as f64 * scale);
        }
        for usd in amounts {
            assert_eq!(Cost(usd).to_string(), format!("${usd:.2}"), "{usd:?}");
        }
    }
}
