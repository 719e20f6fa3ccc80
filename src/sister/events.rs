//! A CLI's event stream (one JSON event a line) read as it comes: each event becomes the
//! step a person sees (`✏️ Edit src/lib.rs`, `▶️ cargo test`, or the agent's last line of
//! text) and the tokens and cost so far; the stream's final event is kept as the run's
//! output, read afterwards exactly as a whole-output CLI's stdout is.
//!
//! Bounded whatever the CLI prints: a line past the cap is skipped to its end, a line that
//! is not JSON is counted and skipped, and only the head (for a CLI that printed no
//! stream), the final event and a short tail are kept.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::EventStream;

/// Claude Code's tool for the answer `--json-schema` asks for.
const STRUCTURED_OUTPUT: &str = "StructuredOutput";
/// How much of a step's text is kept (characters).
const STEP_CHARS: usize = 120;
/// The raw tail kept of a stream that ended without its final event: what it said last.
const TAIL: usize = 64 * 1024;

/// What a running sister is doing now, as its event stream tells.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    /// The latest step: a tool and its target, or the last line of the agent's text.
    pub step: Option<String>,
    /// When that step started (unix ms).
    pub step_at_ms: Option<i64>,
    /// Tokens so far, as the CLI reported them.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Cost so far, when the CLI reports one.
    pub cost_usd: Option<f64>,
}

/// What the stream left for the run's classification: the final event (or the whole
/// output of a CLI that printed no stream), with the count of bytes written.
#[derive(Debug, Default)]
pub struct StreamOutput {
    pub bytes: Vec<u8>,
    pub total: u64,
    /// A CLI that printed no stream wrote more than the cap.
    pub over_cap: bool,
    /// The stream's events were read, but not its final one (a cut stream): `bytes` is
    /// its tail.
    pub unfinished: bool,
}

/// Reads one run's event stream, chunk by chunk.
#[derive(Debug)]
pub struct StreamReader {
    form: EventStream,
    cap: usize,
    /// Paths under the workdir are shown relative to it.
    workdir: PathBuf,
    line: Vec<u8>,
    /// The current line passed the cap: it is skipped to its end.
    overlong: bool,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    final_event: Option<Vec<u8>>,
    /// Lines read as events of the form.
    events: u64,
    /// Lines that were not (too long, not JSON).
    malformed: u64,
    progress: Progress,
    /// Claude Code repeats one model message's usage on each of its content blocks: the
    /// message counted last, and the totals before it.
    message: Option<(String, u64, u64)>,
    counted: (u64, u64),
}

impl StreamReader {
    pub fn new(form: EventStream, cap: usize, workdir: &Path) -> StreamReader {
        StreamReader {
            form,
            cap: cap.max(1),
            workdir: workdir.to_path_buf(),
            line: Vec::new(),
            overlong: false,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            final_event: None,
            events: 0,
            malformed: 0,
            progress: Progress::default(),
            message: None,
            counted: (0, 0),
        }
    }

    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Lines that could not be read as events (too long, not JSON).
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Reads a chunk of stdout; `true` when the progress changed.
    pub fn feed(&mut self, chunk: &[u8], now_ms: i64) -> bool {
        self.total += chunk.len() as u64;
        let room = self.cap.saturating_sub(self.head.len());
        self.head.extend(&chunk[..chunk.len().min(room)]);
        self.tail.extend(chunk);
        if self.tail.len() > TAIL {
            let cut = self.tail.len() - TAIL;
            self.tail.drain(..cut);
        }
        let before = self.progress.clone();
        let mut rest = chunk;
        while !rest.is_empty() {
            let (piece, ended) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], Some(i + 1)),
                None => (rest, None),
            };
            if !self.overlong {
                if self.line.len() + piece.len() > self.cap {
                    self.overlong = true;
                    self.malformed += 1;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(piece);
                }
            }
            match ended {
                Some(n) => {
                    self.end_line(now_ms);
                    rest = &rest[n..];
                }
                None => break,
            }
        }
        self.progress != before
    }

    /// The stream ended: its last line counts even without a line feed.
    pub fn finish(&mut self, now_ms: i64) -> bool {
        let before = self.progress.clone();
        self.end_line(now_ms);
        self.progress != before
    }

    /// What the run's classification reads: the final event; else, when nothing read as
    /// an event, the head (a CLI that printed one JSON value); else the stream's tail.
    pub fn take_output(&mut self) -> StreamOutput {
        let total = self.total;
        if let Some(bytes) = self.final_event.take() {
            return StreamOutput {
                bytes,
                total,
                ..StreamOutput::default()
            };
        }
        if self.events == 0 {
            return StreamOutput {
                bytes: std::mem::take(&mut self.head),
                total,
                over_cap: total > self.cap as u64,
                unfinished: false,
            };
        }
        StreamOutput {
            bytes: Vec::from(std::mem::take(&mut self.tail)),
            total,
            over_cap: false,
            unfinished: true,
        }
    }

    fn end_line(&mut self, now_ms: i64) {
        let line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.overlong) {
            return;
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            return;
        }
        let Ok(event) = serde_json::from_slice::<Value>(text) else {
            self.malformed += 1;
            return;
        };
        let read = match self.form {
            EventStream::ClaudeCode => self.claude_event(&event, text, now_ms),
            EventStream::Codex => self.codex_event(&event, now_ms),
        };
        if read {
            self.events += 1;
        }
    }

    fn set_step(&mut self, step: String, now_ms: i64) {
        let step = clean(&step);
        if step.is_empty() || self.progress.step.as_deref() == Some(step.as_str()) {
            return;
        }
        self.progress.step = Some(step);
        self.progress.step_at_ms = Some(now_ms);
    }

    /// Claude Code's `stream-json`: `assistant` messages carry text and tool calls, the
    /// `result` event is the envelope `--output-format json` prints alone.
    fn claude_event(&mut self, event: &Value, line: &[u8], now_ms: i64) -> bool {
        match event.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                let message = event.get("message").unwrap_or(&Value::Null);
                for block in blocks(message) {
                    match block.get("type").and_then(Value::as_str) {
                        // Its answer, not a step.
                        Some("tool_use") if str_at(block, "/name") == Some(STRUCTURED_OUTPUT) => {}
                        Some("tool_use") => {
                            let name = str_at(block, "/name").unwrap_or("tool");
                            let input = block.get("input").unwrap_or(&Value::Null);
                            let step = self.tool_step(name, input);
                            self.set_step(step, now_ms);
                        }
                        Some("text") => {
                            if let Some(line) = str_at(block, "/text").and_then(last_line) {
                                self.set_step(format!("💬 {line}"), now_ms);
                            }
                        }
                        _ => {}
                    }
                }
                self.count_message(message);
                true
            }
            Some("result") => {
                self.final_event = Some(line.to_vec());
                let usage = |p: &str| event.pointer(p).and_then(Value::as_u64);
                if let Some(n) = usage("/usage/input_tokens") {
                    self.progress.input_tokens = n;
                }
                if let Some(n) = usage("/usage/output_tokens") {
                    self.progress.output_tokens = n;
                }
                if let Some(cost) = event
                    .get("total_cost_usd")
                    .and_then(Value::as_f64)
                    .filter(|c| c.is_finite() && *c >= 0.0)
                {
                    self.progress.cost_usd = Some(cost);
                }
                true
            }
            Some("system" | "user" | "stream_event") => true,
            _ => false,
        }
    }

    /// Adds one model message's usage once, however many events repeat it.
    fn count_message(&mut self, message: &Value) {
        let id = str_at(message, "/id").unwrap_or_default().to_string();
        let input = message
            .pointer("/usage/input_tokens")
            .and_then(Value::as_u64);
        let output = message
            .pointer("/usage/output_tokens")
            .and_then(Value::as_u64);
        if input.is_none() && output.is_none() {
            return;
        }
        let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
        match &self.message {
            Some((last, ..)) if *last == id && !id.is_empty() => {}
            Some((_, i, o)) => self.counted = (self.counted.0 + i, self.counted.1 + o),
            None => {}
        }
        self.message = Some((id, input, output));
        self.progress.input_tokens = self.counted.0 + input;
        self.progress.output_tokens = self.counted.1 + output;
    }

    /// Codex's `exec --json`: items start and complete (commands, file changes, the
    /// agent's messages); the last `agent_message` is its final answer.
    fn codex_event(&mut self, event: &Value, now_ms: i64) -> bool {
        let item = event.get("item").unwrap_or(&Value::Null);
        match event.get("type").and_then(Value::as_str) {
            Some(kind @ ("item.started" | "item.updated" | "item.completed")) => {
                match str_at(item, "/type") {
                    Some("command_execution") => {
                        if let Some(command) = str_at(item, "/command") {
                            self.set_step(format!("▶️ {}", unwrap_shell(command)), now_ms);
                        }
                    }
                    Some("file_change") => {
                        let paths: Vec<&str> = item
                            .get("changes")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|c| str_at(c, "/path"))
                            .collect();
                        if let Some(first) = paths.first() {
                            let more = match paths.len() {
                                1 => String::new(),
                                n => format!(" (+{})", n - 1),
                            };
                            let step = format!("✏️ Edit {}{more}", self.relative(first));
                            self.set_step(step, now_ms);
                        }
                    }
                    Some("mcp_tool_call") => {
                        let tool = str_at(item, "/tool").unwrap_or("tool");
                        self.set_step(format!("🔧 {tool}"), now_ms);
                    }
                    Some("web_search") => {
                        let query = str_at(item, "/query").unwrap_or_default();
                        self.set_step(format!("🔎 {query}"), now_ms);
                    }
                    Some("agent_message") if kind == "item.completed" => {
                        if let Some(text) = str_at(item, "/text") {
                            // A JSON answer is the final message, not a step to show.
                            let answer = text.trim_start().starts_with('{');
                            if let Some(line) = last_line(text).filter(|_| !answer) {
                                self.set_step(format!("💬 {line}"), now_ms);
                            }
                            // The line was within the cap, so is its text.
                            self.final_event = Some(text.as_bytes().to_vec());
                        }
                    }
                    _ => {}
                }
                true
            }
            Some("turn.completed") => {
                let usage = |p: &str| event.pointer(p).and_then(Value::as_u64).unwrap_or(0);
                self.progress.input_tokens += usage("/usage/input_tokens");
                self.progress.output_tokens += usage("/usage/output_tokens");
                true
            }
            Some("turn.failed" | "error") => {
                let said = str_at(event, "/error/message").or_else(|| str_at(event, "/message"));
                if let Some(said) = said {
                    self.set_step(format!("⚠️ {said}"), now_ms);
                }
                true
            }
            Some("thread.started" | "turn.started") => true,
            _ => false,
        }
    }

    /// A Claude Code tool call as a step: the tool and what it works on.
    fn tool_step(&self, name: &str, input: &Value) -> String {
        let path = || {
            str_at(input, "/file_path")
                .or_else(|| str_at(input, "/notebook_path"))
                .or_else(|| str_at(input, "/path"))
                .map(|p| self.relative(p))
        };
        let (emoji, target) = match name {
            "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => ("✏️", path()),
            "Bash" => ("▶️", str_at(input, "/command").map(str::to_string)),
            "Read" => ("📖", path()),
            "Grep" | "Glob" => ("🔎", str_at(input, "/pattern").map(str::to_string)),
            "WebFetch" => ("🌐", str_at(input, "/url").map(str::to_string)),
            "WebSearch" => ("🌐", str_at(input, "/query").map(str::to_string)),
            "Task" | "Agent" => ("🤖", str_at(input, "/description").map(str::to_string)),
            "TodoWrite" => ("📝", None),
            _ => ("🔧", None),
        };
        match (name, target) {
            // A command speaks for itself.
            ("Bash", Some(command)) => format!("{emoji} {command}"),
            (_, Some(target)) => format!("{emoji} {name} {target}"),
            (_, None) => format!("{emoji} {name}"),
        }
    }

    fn relative(&self, path: &str) -> String {
        Path::new(path)
            .strip_prefix(&self.workdir)
            .map_or_else(|_| path.to_string(), |p| p.display().to_string())
    }
}

fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// A Claude Code message's content blocks.
fn blocks(message: &Value) -> impl Iterator<Item = &Value> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The last non-empty line of a text.
fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

/// Codex runs each command through a shell (`/bin/bash -lc 'cargo test'`): the command.
fn unwrap_shell(command: &str) -> &str {
    for shell in [
        "/bin/bash -lc ",
        "/bin/sh -lc ",
        "bash -lc ",
        "sh -c ",
        "/bin/sh -c ",
    ] {
        if let Some(inner) = command.strip_prefix(shell) {
            let inner = inner.trim();
            return inner
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
                .unwrap_or(inner);
        }
    }
    command
}

/// A step on one line of plain characters, cut to `STEP_CHARS`.
pub(super) fn clean(step: &str) -> String {
    let flat: String = step
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    match flat.char_indices().nth(STEP_CHARS) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
