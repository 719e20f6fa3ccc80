//! An agent that says it hit its usage or rate limit (`[agent].pause_on`) is not failing:
//! when its limit resets, from what it printed.

use crate::config::SisterSpec;

/// The first `pause_on` rule the captured output matches: when the limit resets (unix ms,
/// from the rule's `reset` group, else `pause_default` from `now_ms`) and what it said.
pub(super) fn usage_limit(
    spec: &SisterSpec,
    stdout: &[u8],
    stderr: &[u8],
    now_ms: i64,
) -> Option<(i64, String)> {
    use crate::config::PauseSource;
    const MAX_CHARS: usize = 200;
    let (out, err) = (
        String::from_utf8_lossy(stdout),
        String::from_utf8_lossy(stderr),
    );
    for rule in &spec.pause_on {
        // The pattern was checked when the config was loaded.
        let Ok(pattern) = regex::Regex::new(&rule.pattern) else {
            continue;
        };
        let texts: &[&str] = match rule.source {
            PauseSource::Stdout => &[&out],
            PauseSource::Stderr => &[&err],
            PauseSource::Any => &[&out, &err],
        };
        let Some(found) = texts.iter().find_map(|t| pattern.captures(t)) else {
            continue;
        };
        let default = now_ms
            .saturating_add(i64::try_from(spec.pause_default.as_millis()).unwrap_or(i64::MAX));
        let resume_at = found
            .name("reset")
            .and_then(|r| reset_time(r.as_str().trim(), now_ms))
            .filter(|&at| at > now_ms)
            .unwrap_or(default);
        let said = found.get(0).map_or("", |m| m.as_str()).trim();
        let said = match said.char_indices().nth(MAX_CHARS) {
            Some((cut, _)) => format!("{}…", &said[..cut]),
            None => said.to_string(),
        };
        return Some((resume_at, said));
    }
    None
}

/// A reset time as CLIs print it: unix seconds (or milliseconds), an RFC 3339 time, or a
/// humantime duration from now ("4h 12m").
fn reset_time(text: &str, now_ms: i64) -> Option<i64> {
    if let Ok(n) = text.parse::<i64>() {
        // Milliseconds are 13 digits in this century; seconds are 10.
        return Some(if n > 100_000_000_000 {
            n
        } else {
            n.saturating_mul(1000)
        });
    }
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return t
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_millis()).ok());
    }
    let wait = humantime::parse_duration(text).ok()?;
    Some(now_ms.saturating_add(i64::try_from(wait.as_millis()).ok()?))
}
