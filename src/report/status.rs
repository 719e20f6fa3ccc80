//! `sprint status --json`: every sprint with its spend, built from the sprint rows. Its
//! dollar amounts keep 15 significant digits, as SQLite's JSON writes them (and as this
//! list always read on SQLite), so a sum's float noise does not show.

use serde::Serialize;

use std::collections::HashMap;

use crate::store::{RunLive, Spend, Sprint, Store, StoreError};

/// A sprint with its spend: one entry of `sprint status --json`.
#[derive(Debug, Serialize)]
pub struct SprintStatus<'a> {
    #[serde(flatten)]
    pub sprint: &'a Sprint,
    pub usage: &'a Spend,
    /// What its running sister does now (its latest step, tokens and cost so far).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<&'a RunLive>,
    /// What it waits for from a person besides an approval (`ci_files`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<&'static str>,
}

impl SprintStatus<'_> {
    /// The list `sprint status --json` prints, compact; `now`: the running sisters' steps
    /// by sprint.
    pub fn list_json(
        sprints: &[(Sprint, Spend)],
        now: &HashMap<String, RunLive>,
        waiting: &HashMap<String, &'static str>,
    ) -> Result<String, StoreError> {
        let list: Vec<SprintStatus<'_>> = sprints
            .iter()
            .map(|(sprint, usage)| SprintStatus {
                sprint,
                usage,
                now: now.get(&sprint.id),
                waiting: waiting.get(&sprint.id).copied(),
            })
            .collect();
        let mut out = Vec::with_capacity(sprints.len() * 320);
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Dollars);
        list.serialize(&mut ser)
            .map_err(|e| StoreError::Encode("sprint status", e))?;
        String::from_utf8(out).map_err(|e| {
            StoreError::Encode("sprint status", serde::ser::Error::custom(e.to_string()))
        })
    }
}

/// Compact JSON whose floats are written as `real_text` writes them.
struct Dollars;

impl serde_json::ser::Formatter for Dollars {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        w.write_all(real_text(value).as_bytes())
    }
}

/// `x` as SQLite's `%!.15g` writes it: 15 significant digits, trailing zeros dropped but
/// one digit kept after the point, an exponent below 1e-4 and from 1e15 on.
fn real_text(x: f64) -> String {
    if !x.is_finite() {
        return "null".into();
    }
    if x == 0.0 {
        return "0.0".into();
    }
    let scientific = format!("{x:.14e}");
    let Some(exp) = scientific
        .split_once('e')
        .and_then(|(_, e)| e.parse::<i32>().ok())
    else {
        return x.to_string();
    };
    if !(-4..15).contains(&exp) {
        let mantissa = scientific.split_once('e').map_or("", |(m, _)| m);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", point_kept(mantissa), exp.unsigned_abs());
    }
    let decimals = usize::try_from(14 - exp).unwrap_or(0);
    point_kept(&format!("{x:.decimals$}"))
}

/// Trailing zeros dropped, one digit kept after the point.
fn point_kept(number: &str) -> String {
    if !number.contains('.') {
        return format!("{number}.0");
    }
    let trimmed = number.trim_end_matches('0');
    if trimmed.ends_with('.') {
        format!("{trimmed}0")
    } else {
        trimmed.to_string()
    }
}

/// Every sprint with its total spend as one compact JSON array, oldest first: what
/// `sprint status --json` prints.
pub async fn status_json(store: &Store) -> Result<String, StoreError> {
    let sprints = store.sprints_with_spend().await?;
    let mut waiting = HashMap::new();
    for (sprint, _) in &sprints {
        if let Some(what) = waiting_for(store, sprint).await? {
            waiting.insert(sprint.id.clone(), what);
        }
    }
    SprintStatus::list_json(&sprints, &store.live_steps().await?, &waiting)
}

/// What `sprint` waits for from a person besides an approval: only a sprint in
/// `verifying` can (its log is read for it, no other's).
pub async fn waiting_for(
    store: &Store,
    sprint: &Sprint,
) -> Result<Option<&'static str>, StoreError> {
    if sprint.state != crate::pipeline::State::Verifying {
        return Ok(None);
    }
    Ok(crate::store::waiting_for(
        &store.transitions(&sprint.id).await?,
    ))
}

#[cfg(test)]
mod tests {
    use super::real_text;

    #[test]
    fn dollars_read_as_sqlite_wrote_them() {
        for (x, text) in [
            (0.0, "0.0"),
            (0.11000000000000001, "0.11"),
            (0.5, "0.5"),
            (3.0, "3.0"),
            (12.345, "12.345"),
            (-2.25, "-2.25"),
            (1234567.125, "1234567.125"),
            (0.00012, "0.00012"),
            (0.00001234, "1.234e-05"),
            (1e20, "1.0e+20"),
            (0.1 + 0.2, "0.3"),
        ] {
            assert_eq!(real_text(x), text, "{x}");
        }
    }
}
