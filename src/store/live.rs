//! What a running sister is doing now, as its run keeps it: the latest step read from its
//! CLI's event stream, when that step started, and the tokens and cost so far. Written
//! while it runs (about once a second, the latest winning); kept after it ends as its last
//! step.

use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunLive {
    /// A tool and its target (`✏️ Edit src/lib.rs`), or the agent's last line of text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// When the step started (unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_at: Option<i64>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl RunLive {
    /// The run's live columns; `None` when its sister never told a step or a count.
    pub(super) fn from_columns(
        step: Option<String>,
        step_at: Option<i64>,
        input_tokens: Option<i64>,
        output_tokens: Option<i64>,
        cost_usd: Option<f64>,
    ) -> Option<RunLive> {
        if step.is_none() && input_tokens.is_none() && output_tokens.is_none() {
            return None;
        }
        Some(RunLive {
            step,
            step_at,
            input_tokens: input_tokens.unwrap_or(0),
            output_tokens: output_tokens.unwrap_or(0),
            cost_usd,
        })
    }
}
