//! A model API on loopback for the real agent CLIs (the `real_clis` tests): Anthropic's
//! Messages API (Claude Code), OpenAI's Responses API (Codex) and Chat Completions API
//! (OpenClaw with an OpenAI-compatible provider), all streaming server-sent events over
//! HTTP/1.1 the way the real services do.
//!
//! It plays the model: it reads hanarang's prompt out of the conversation the CLI sends,
//! and answers as that sister would. The implementer first asks the CLI's own shell tool
//! to create the sprint's branch and commit on it, then reports the commit the tool
//! printed; every sister then hands its message over the way its CLI expects (Claude
//! Code: a call of its `StructuredOutput` tool; Codex: the final message, filled to the
//! strict schema it was sent, `null` for every optional field left out; OpenClaw, which
//! sends no schema: the message as the final text). It can also answer a sister with
//! its service's usage-limit error.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use regex::Regex;
use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use super::http::{RawRequest, connection, next_request, reason};

/// The tokens the fake reports for every response, so a test can tell what the CLI
/// counted from what a sister's message claims.
pub const INPUT_TOKENS: u64 = 1000;
pub const OUTPUT_TOKENS: u64 = 100;

/// The file the implementer's shell command writes and commits.
pub fn implemented_file(sprint: &str) -> String {
    format!("hanarang-{}.txt", sprint.to_lowercase())
}

/// Which of the two APIs a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Messages,
    Responses,
    ChatCompletions,
    Other,
}

/// How the fake answered one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A call of the CLI's shell tool (the implementer's commit).
    Shell,
    /// The sister's HandoffMessage.
    Message,
    /// Plain text: after the message, or a request that carries no hanarang prompt.
    Text,
    /// The service's usage-limit error.
    UsageLimit,
    /// A route the fake does not serve.
    NotFound,
}

/// One request the fake answered.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub api: Api,
    pub method: String,
    pub path: String,
    /// The sister whose prompt the conversation carries.
    pub actor: Option<String>,
    pub sprint: Option<String>,
    pub answer: Answer,
    /// The credential the CLI sent (`x-api-key` or the bearer token).
    pub key: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct State {
    requests: Vec<ModelRequest>,
    /// Per actor: how many more of its requests get the usage-limit error.
    limits: Vec<(String, u32)>,
    /// Per actor: how many more of its messages name a commit that does not exist (an
    /// answer hanarang rejects as bad output).
    rejects: Vec<(String, u32)>,
}

struct Inner {
    state: Mutex<State>,
}

pub struct FakeModel {
    addr: SocketAddr,
    inner: Arc<Inner>,
    task: AbortHandle,
}

impl FakeModel {
    pub async fn start() -> FakeModel {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the fake model API");
        let addr = listener.local_addr().expect("its address");
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
        });
        let serving = inner.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_connection(serving.clone(), stream));
            }
        })
        .abort_handle();
        FakeModel { addr, inner, task }
    }

    /// `http://127.0.0.1:PORT`: Claude Code's `ANTHROPIC_BASE_URL`; Codex's provider
    /// `base_url` is this plus `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next `times` requests that carry `actor`'s prompt get the usage-limit error.
    pub fn limit(&self, actor: &str, times: u32) {
        self.state().limits.push((actor.to_string(), times));
    }

    /// The next `times` messages of `actor` claim a commit that does not exist, so the
    /// run's answer is rejected and the stage runs again.
    pub fn reject_first(&self, actor: &str, times: u32) {
        self.state().rejects.push((actor.to_string(), times));
    }

    pub fn requests(&self) -> Vec<ModelRequest> {
        self.state().requests.clone()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ---------------------------------------------------------------------------------------
// The conversation: whose prompt, how far it got
// ---------------------------------------------------------------------------------------

/// What hanarang's prompt says about the run (`sister::render_prompt`'s first lines).
#[derive(Debug, Clone)]
struct Prompt {
    actor: String,
    sprint: String,
    workdir: String,
    branch: String,
    goal: String,
}

fn parse_prompt(text: &str) -> Option<Prompt> {
    let who = Regex::new(r"You are \S+ \((harang|narang|darang|erang)\), the ").ok()?;
    let sprint = Regex::new(
        r#"Sprint (SPRINT-\d+) \(round \d+(?:, attempt [^)]*)?\), project "[^"]*", working directory (\S+), branch (\S+)\.\n"#,
    )
    .ok()?;
    let goal = Regex::new(r#"(?s)Goal: <goal from="[^"]*">(.*?)</goal>"#).ok()?;
    let actor = who.captures(text)?.get(1)?.as_str().to_string();
    let place = sprint.captures(text)?;
    Some(Prompt {
        actor,
        sprint: place.get(1)?.as_str().to_string(),
        workdir: place.get(2)?.as_str().to_string(),
        branch: place.get(3)?.as_str().to_string(),
        goal: goal
            .captures(text)
            .and_then(|c| c.get(1))
            .map(|g| g.as_str().to_string())
            .unwrap_or_default(),
    })
}

/// Every string in `value` under a `text`, `content`, `output` or `input` key (where
/// both APIs put what was said), joined.
fn all_text(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| all_text(v, out)),
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("text" | "content" | "output" | "input", Value::String(s)) => {
                        out.push_str(s);
                        out.push('\n');
                    }
                    _ => all_text(v, out),
                }
            }
        }
        _ => {}
    }
}

/// A tool result's text: a plain string, or the text of its content blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        other => {
            let mut text = String::new();
            all_text(other, &mut text);
            text
        }
    }
}

/// The last 40-hex word of what the shell tool printed: the commit `git rev-parse`
/// named.
fn commit_in(text: &str) -> Option<String> {
    Regex::new(r"\b[0-9a-f]{40}\b")
        .ok()?
        .find_iter(text)
        .last()
        .map(|m| m.as_str().to_string())
}

/// Where the conversation stands, read from the items the CLI sent back.
#[derive(Debug, Default)]
struct Progress {
    /// The message was handed over already (Claude Code: StructuredOutput was called).
    handed_over: bool,
    /// What the shell tool printed, once it ran.
    shell_output: Option<String>,
}

const SHELL_CALL: &str = "call_hanarang_commit";

fn messages_progress(body: &Value) -> Progress {
    let mut progress = Progress::default();
    for message in body["messages"].as_array().into_iter().flatten() {
        // A resumed session carries the earlier run's conversation: what was handed over
        // counts only after the latest prompt, the shell's work done before it still does.
        let mut said = String::new();
        all_text(message, &mut said);
        if message["role"] == "user" && parse_prompt(&said).is_some() {
            progress.handed_over = false;
        }
        for block in message["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") if block["name"] == "StructuredOutput" => {
                    progress.handed_over = true;
                }
                Some("tool_result") if block["tool_use_id"] == SHELL_CALL => {
                    progress.shell_output = Some(text_of(&block["content"]));
                }
                _ => {}
            }
        }
    }
    progress
}

fn chat_progress(body: &Value) -> Progress {
    let mut progress = Progress::default();
    // OpenClaw renames tool call ids (`call_x` → `callx`): the implementer's one tool
    // result is the shell's.
    for message in body["messages"].as_array().into_iter().flatten() {
        if message["role"] == "tool" {
            progress.shell_output = Some(text_of(&message["content"]));
        }
    }
    progress
}

fn responses_progress(body: &Value) -> Progress {
    let mut progress = Progress::default();
    for item in body["input"].as_array().into_iter().flatten() {
        let output = matches!(
            item["type"].as_str(),
            Some("custom_tool_call_output" | "function_call_output")
        );
        if output && item["call_id"] == SHELL_CALL {
            progress.shell_output = Some(text_of(&item["output"]));
        }
    }
    progress
}

/// The command the implementer runs through the CLI's shell tool.
fn commit_command(prompt: &Prompt) -> String {
    format!(
        "git checkout -q -B '{branch}' && printf 'implemented: %s\\n' '{sprint}' > '{file}' && git add -A && (git diff --cached --quiet || git commit -q -m '{sprint}: implement') && git rev-parse HEAD",
        branch = prompt.branch,
        sprint = prompt.sprint,
        file = implemented_file(&prompt.sprint),
    )
}

fn handoff(prompt: &Prompt, progress: &str, next: &str) -> Value {
    json!({
        "goal": prompt.goal,
        "constraints": ["work on the sprint's branch"],
        "progress": [progress],
        "keyDecisions": [],
        "criticalContext": [format!("working directory {}", prompt.workdir)],
        "nextSteps": [next],
    })
}

/// The sister's HandoffMessage, as a model that did its job would write it.
fn message(prompt: &Prompt, shell_output: Option<&str>) -> Value {
    // What the model claims it used; the CLI's own count must win where it has one.
    let usage = json!({ "inputTokens": 1, "outputTokens": 1 });
    match prompt.actor.as_str() {
        "harang" => json!({
            "actor": "harang",
            "verdict": "PLAN_READY",
            "payload": {
                "planDir": format!("{}/.plan", prompt.workdir),
                "sprintId": prompt.sprint,
                "contractId": format!("{}-C1", prompt.sprint),
            },
            "handoff": handoff(prompt, "plan written", "implement the plan"),
            "usage": usage,
        }),
        "narang" => match shell_output.and_then(commit_in) {
            Some(commit) => json!({
                "actor": "narang",
                "verdict": "IMPL_DONE",
                "payload": {
                    "branch": prompt.branch,
                    "commits": [commit],
                    "workdir": prompt.workdir,
                    "selfTestReport": { "passed": true },
                },
                "handoff": handoff(prompt, "implemented and committed", "review the commit"),
                "usage": usage,
            }),
            None => json!({
                "actor": "narang",
                "verdict": "ERROR",
                "errorReason": format!(
                    "the commit failed: {}",
                    shell_output.unwrap_or("the shell tool gave no output").trim()
                ),
                "usage": usage,
            }),
        },
        "darang" => json!({
            "actor": "darang",
            "verdict": "APPROVE",
            "payload": {
                "checklistResults": [{ "id": "c1", "passed": true, "note": "the commit is there" }],
                "issues": [],
                "artifactPath": format!("{}/.review.md", prompt.workdir),
            },
            "handoff": handoff(prompt, "reviewed", "deploy"),
            "usage": usage,
        }),
        _ => json!({
            "actor": "erang",
            "verdict": "DEPLOY_DONE",
            "payload": {
                "deployArtifactPath": format!("{}/.deploy", prompt.workdir),
                "projectType": "cli",
                "verificationResults": { "smoke": "passed" },
            },
            "handoff": handoff(prompt, "deployed", "nothing"),
            "usage": usage,
        }),
    }
}

/// `value` completed to OpenAI's strict schema `schema`: every property the schema
/// lists and the value leaves out is `null`, as a model under strict mode writes it.
fn fill_strict(value: &Value, schema: &Value, root: &Value) -> Value {
    let schema = resolve(schema, root);
    if let Some(branches) = schema["anyOf"].as_array().or(schema["oneOf"].as_array()) {
        let fitting = branches
            .iter()
            .map(|b| resolve(b, root))
            .find(|b| fits(value, b, root));
        return match fitting {
            Some(branch) => fill_strict(value, branch, root),
            None => value.clone(),
        };
    }
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            if let Some(properties) = schema["properties"].as_object() {
                for (key, property) in properties {
                    out.insert(
                        key.clone(),
                        match map.get(key) {
                            Some(v) => fill_strict(v, property, root),
                            None => Value::Null,
                        },
                    );
                }
            }
            for (key, v) in map {
                out.entry(key.clone()).or_insert_with(|| v.clone());
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| fill_strict(v, &schema["items"], root))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(pointer) => root
            .pointer(pointer.trim_start_matches('#'))
            .unwrap_or(schema),
        None => schema,
    }
}

/// Whether `value` could be an instance of the branch `schema` (by type, and for
/// objects by the `const`/`enum` of their discriminating properties).
fn fits(value: &Value, schema: &Value, root: &Value) -> bool {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let typed = types.is_empty()
        || types.contains(&kind)
        || (kind == "integer" && types.contains(&"number"));
    if !typed {
        return false;
    }
    let (Value::Object(map), Some(properties)) = (value, schema["properties"].as_object()) else {
        return true;
    };
    properties.iter().all(|(key, property)| {
        let property = resolve(property, root);
        match (
            map.get(key),
            property.get("const"),
            property["enum"].as_array(),
        ) {
            (Some(v), Some(c), _) => v == c,
            (Some(v), None, Some(allowed)) => allowed.contains(v),
            _ => true,
        }
    })
}

// ---------------------------------------------------------------------------------------
// Answers
// ---------------------------------------------------------------------------------------

/// One response: a JSON body, or server-sent events.
enum Reply {
    Json {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: Value,
    },
    /// Each event with its `event:` name, or only `data:` (Chat Completions, which ends
    /// with `data: [DONE]`).
    Events(Vec<(Option<&'static str>, Value)>),
}

impl Inner {
    fn handle(&self, request: &RawRequest) -> Reply {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let path = request
            .target
            .split('?')
            .next()
            .unwrap_or_default()
            .to_string();
        let api = if path.ends_with("/messages") {
            Api::Messages
        } else if path.ends_with("/responses") {
            Api::Responses
        } else if path.ends_with("/chat/completions") {
            Api::ChatCompletions
        } else {
            Api::Other
        };
        let mut said = String::new();
        all_text(&body["messages"], &mut said);
        all_text(&body["input"], &mut said);
        let prompt = parse_prompt(&said);
        let key = request
            .header("x-api-key")
            .or_else(|| {
                request
                    .header("authorization")
                    .and_then(|v| v.strip_prefix("Bearer "))
            })
            .map(str::to_string);

        let limited = prompt.as_ref().is_some_and(|p| {
            let mut state = lock(&self.state);
            match state
                .limits
                .iter_mut()
                .find(|(a, n)| *a == p.actor && *n > 0)
            {
                Some((_, n)) => {
                    *n -= 1;
                    true
                }
                None => false,
            }
        });
        let (answer, reply) = if api == Api::Other {
            if path.ends_with("/count_tokens") {
                (
                    Answer::Text,
                    json_ok(json!({ "input_tokens": INPUT_TOKENS })),
                )
            } else {
                (Answer::NotFound, not_found())
            }
        } else if limited {
            (Answer::UsageLimit, usage_limit(api))
        } else {
            self.answer(api, &body, prompt.as_ref())
        };
        lock(&self.state).requests.push(ModelRequest {
            api,
            method: request.method.clone(),
            path,
            actor: prompt.as_ref().map(|p| p.actor.clone()),
            sprint: prompt.as_ref().map(|p| p.sprint.clone()),
            answer,
            key,
            body,
        });
        reply
    }

    fn answer(&self, api: Api, body: &Value, prompt: Option<&Prompt>) -> (Answer, Reply) {
        let progress = match api {
            Api::Messages => messages_progress(body),
            Api::ChatCompletions => chat_progress(body),
            _ => responses_progress(body),
        };
        let step = match prompt {
            None => Step::Text("OK.".to_string()),
            Some(_) if progress.handed_over => Step::Text("Done.".to_string()),
            Some(p) if p.actor == "narang" && progress.shell_output.is_none() => {
                Step::Shell(commit_command(p))
            }
            Some(p) => {
                let mut m = message(p, progress.shell_output.as_deref());
                if self.rejects(&p.actor) {
                    m["payload"]["commits"] = json!(["0".repeat(40)]);
                }
                Step::Message(m)
            }
        };
        let answer = match step {
            Step::Text(_) => Answer::Text,
            Step::Shell(_) => Answer::Shell,
            Step::Message(_) => Answer::Message,
        };
        let reply = match api {
            Api::Messages if body["stream"] == true => named(messages_events(body, step)),
            Api::Messages => json_ok(messages_json(body, step)),
            Api::ChatCompletions => Reply::Events(chat_events(body, step)),
            _ => named(responses_events(body, step)),
        };
        (answer, reply)
    }
}

impl Inner {
    /// Whether this message of `actor` is one to be rejected (and counts it).
    fn rejects(&self, actor: &str) -> bool {
        let mut state = lock(&self.state);
        match state.rejects.iter_mut().find(|(a, n)| a == actor && *n > 0) {
            Some((_, n)) => {
                *n -= 1;
                true
            }
            None => false,
        }
    }
}

enum Step {
    Text(String),
    Shell(String),
    Message(Value),
}

fn named(events: Vec<(&'static str, Value)>) -> Reply {
    Reply::Events(events.into_iter().map(|(n, v)| (Some(n), v)).collect())
}

fn json_ok(body: Value) -> Reply {
    Reply::Json {
        status: 200,
        headers: Vec::new(),
        body,
    }
}

fn not_found() -> Reply {
    Reply::Json {
        status: 404,
        headers: Vec::new(),
        body: json!({ "error": { "type": "not_found_error", "message": "no such route" } }),
    }
}

/// What each service answers when the account's usage limit is reached, with the
/// reset an hour away.
fn usage_limit(api: Api) -> Reply {
    let resets_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() + 3600)
        .unwrap_or_default();
    match api {
        // OpenAI's error for a plan's usage limit. Codex prints "You've hit your usage
        // limit … try again at …"; OpenClaw "⚠️ API rate limit reached.", at once.
        Api::Responses | Api::ChatCompletions => Reply::Json {
            status: 429,
            headers: Vec::new(),
            body: json!({ "error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "plus",
                "resets_at": resets_at,
                "resets_in_seconds": 3600,
            }}),
        },
        // Anthropic's Messages API for an API key. `retry-after` past a minute (or
        // `x-should-retry: false`) makes Claude Code stop retrying; it then prints
        // "API Error: Request rejected (429) · <the error's message>".
        _ => Reply::Json {
            status: 429,
            headers: vec![
                ("retry-after", "3600".to_string()),
                ("x-should-retry", "false".to_string()),
            ],
            body: json!({ "type": "error", "error": {
                "type": "rate_limit_error",
                "message": "This request would exceed your organization's rate limit. Please try again later.",
            }}),
        },
    }
}

fn model_of(body: &Value) -> String {
    body["model"].as_str().unwrap_or("fake-model").to_string()
}

/// The content block of one Messages step.
fn messages_block(step: &Step) -> (Value, &'static str) {
    match step {
        Step::Text(text) => (json!({ "type": "text", "text": text }), "end_turn"),
        Step::Shell(command) => (
            json!({ "type": "tool_use", "id": SHELL_CALL, "name": "Bash",
                    "input": { "command": command, "description": "Commit the work" } }),
            "tool_use",
        ),
        Step::Message(message) => (
            json!({ "type": "tool_use", "id": "call_hanarang_message", "name": "StructuredOutput",
                    "input": message }),
            "tool_use",
        ),
    }
}

fn messages_json(body: &Value, step: Step) -> Value {
    let (block, stop) = messages_block(&step);
    json!({
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model_of(body),
        "content": [block], "stop_reason": stop, "stop_sequence": null,
        "usage": { "input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS },
    })
}

/// A Messages stream: the block opened empty and filled by deltas, as the API sends it.
fn messages_events(body: &Value, step: Step) -> Vec<(&'static str, Value)> {
    let (block, stop) = messages_block(&step);
    let (start, delta) = match block["type"].as_str() {
        Some("text") => (
            json!({ "type": "text", "text": "" }),
            json!({ "type": "text_delta", "text": block["text"] }),
        ),
        _ => (
            json!({ "type": "tool_use", "id": block["id"], "name": block["name"], "input": {} }),
            json!({ "type": "input_json_delta", "partial_json": block["input"].to_string() }),
        ),
    };
    vec![
        (
            "message_start",
            json!({ "type": "message_start", "message": {
                "id": "msg_fake", "type": "message", "role": "assistant", "model": model_of(body),
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": { "input_tokens": INPUT_TOKENS, "output_tokens": 1 },
            }}),
        ),
        (
            "content_block_start",
            json!({ "type": "content_block_start", "index": 0, "content_block": start }),
        ),
        (
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 0, "delta": delta }),
        ),
        (
            "content_block_stop",
            json!({ "type": "content_block_stop", "index": 0 }),
        ),
        (
            "message_delta",
            json!({ "type": "message_delta", "delta": { "stop_reason": stop, "stop_sequence": null },
                    "usage": { "output_tokens": OUTPUT_TOKENS } }),
        ),
        ("message_stop", json!({ "type": "message_stop" })),
    ]
}

/// Whether the Responses request offers a tool of this type and name, at the top level
/// or in a namespace (Codex's code mode nests its tools).
fn offers(body: &Value, kind: &str, name: &str) -> bool {
    fn walk(tools: &Value, kind: &str, name: &str) -> bool {
        tools
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| (t["type"] == kind && t["name"] == name) || walk(&t["tools"], kind, name))
    }
    walk(&body["tools"], kind, name)
        || body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|item| walk(&item["tools"], kind, name))
}

/// The output item of one Responses step.
fn responses_item(body: &Value, step: Step) -> Value {
    match step {
        Step::Text(text) => output_message(&text),
        Step::Message(message) => {
            let schema = &body["text"]["format"]["schema"];
            let filled = if schema.is_object() {
                fill_strict(&message, schema, schema)
            } else {
                message
            };
            output_message(&filled.to_string())
        }
        Step::Shell(command) if offers(body, "custom", "exec") => {
            // Code mode: the shell is reached from JavaScript through `tools.exec_command`.
            let code = format!(
                "const r = await tools.exec_command({{ cmd: {} }});\ntext(r.output);\ntext(`exit ${{r.exit_code}}`);",
                Value::String(command)
            );
            json!({ "type": "custom_tool_call", "id": "ctc_fake", "status": "completed",
                    "call_id": SHELL_CALL, "name": "exec", "input": code })
        }
        Step::Shell(command) if offers(body, "function", "exec_command") => json!({
            "type": "function_call", "id": "fc_fake", "status": "completed", "call_id": SHELL_CALL,
            "name": "exec_command", "arguments": json!({ "cmd": command }).to_string(),
        }),
        Step::Shell(command) => json!({
            "type": "function_call", "id": "fc_fake", "status": "completed", "call_id": SHELL_CALL,
            "name": "shell", "arguments": json!({ "command": ["bash", "-lc", command] }).to_string(),
        }),
    }
}

fn output_message(text: &str) -> Value {
    json!({ "type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
            "content": [{ "type": "output_text", "text": text, "annotations": [] }] })
}

/// A Responses stream: created, the item added, its text in deltas, done, completed.
fn responses_events(body: &Value, step: Step) -> Vec<(&'static str, Value)> {
    let item = responses_item(body, step);
    let response = |status: &str, output: Value| {
        json!({ "id": "resp_fake", "object": "response", "status": status, "model": model_of(body),
                "output": output,
                "usage": { "input_tokens": INPUT_TOKENS, "input_tokens_details": { "cached_tokens": 0 },
                           "output_tokens": OUTPUT_TOKENS, "output_tokens_details": { "reasoning_tokens": 0 },
                           "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS } })
    };
    let mut events = vec![
        (
            "response.created",
            json!({ "type": "response.created", "response": response("in_progress", json!([])) }),
        ),
        (
            "response.output_item.added",
            json!({ "type": "response.output_item.added", "output_index": 0, "item": item }),
        ),
    ];
    if let Some(text) = item["content"][0]["text"].as_str() {
        events.push((
            "response.output_text.delta",
            json!({ "type": "response.output_text.delta", "item_id": "msg_fake",
                    "output_index": 0, "content_index": 0, "delta": text }),
        ));
    }
    events.push((
        "response.output_item.done",
        json!({ "type": "response.output_item.done", "output_index": 0, "item": item }),
    ));
    events.push((
        "response.completed",
        json!({ "type": "response.completed", "response": response("completed", json!([item])) }),
    ));
    events
}

/// A Chat Completions stream: `data:` chunks only (the role, the content or the tool
/// call, the finish reason, the usage), then `data: [DONE]`.
fn chat_events(body: &Value, step: Step) -> Vec<(Option<&'static str>, Value)> {
    let chunk = |choices: Value| {
        json!({ "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                "model": model_of(body), "choices": choices })
    };
    let delta = |delta: Value, finish: Value| {
        chunk(json!([{ "index": 0, "delta": delta, "finish_reason": finish }]))
    };
    let mut events = Vec::new();
    let finish = match step {
        Step::Shell(command) => {
            events.push(delta(
                json!({ "role": "assistant", "content": null, "tool_calls": [{
                    "index": 0, "id": SHELL_CALL, "type": "function",
                    "function": { "name": "exec", "arguments": "" } }] }),
                Value::Null,
            ));
            events.push(delta(
                json!({ "tool_calls": [{ "index": 0, "function": {
                    "arguments": json!({ "command": command }).to_string() } }] }),
                Value::Null,
            ));
            "tool_calls"
        }
        Step::Text(text) => {
            events.push(delta(
                json!({ "role": "assistant", "content": "" }),
                Value::Null,
            ));
            events.push(delta(json!({ "content": text }), Value::Null));
            "stop"
        }
        Step::Message(message) => {
            events.push(delta(
                json!({ "role": "assistant", "content": "" }),
                Value::Null,
            ));
            events.push(delta(
                json!({ "content": message.to_string() }),
                Value::Null,
            ));
            "stop"
        }
    };
    events.push(delta(json!({}), Value::from(finish)));
    let mut usage = chunk(json!([]));
    usage["usage"] = json!({ "prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
                             "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS });
    events.push(usage);
    let mut events: Vec<(Option<&'static str>, Value)> =
        events.into_iter().map(|e| (None, e)).collect();
    events.push((None, Value::String("[DONE]".to_string())));
    events
}

// ---------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------

async fn write_reply(stream: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Json {
            status,
            headers,
            body,
        } => {
            let body = body.to_string();
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nrequest-id: req_fake\r\n",
                reason(status),
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
        }
        Reply::Events(events) => {
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nrequest-id: req_fake\r\ntransfer-encoding: chunked\r\n\r\n",
                )
                .await?;
            for (name, data) in events {
                let data = match data {
                    Value::String(raw) => raw,
                    other => other.to_string(),
                };
                let event = match name {
                    Some(name) => format!("event: {name}\ndata: {data}\n\n"),
                    None => format!("data: {data}\n\n"),
                };
                stream
                    .write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())
                    .await?;
                stream.flush().await?;
            }
            stream.write_all(b"0\r\n\r\n").await?;
        }
    }
    stream.flush().await
}

async fn serve_connection(inner: Arc<Inner>, stream: TcpStream) {
    let mut reader = connection(stream);
    while let Some(request) = next_request(&mut reader).await {
        let reply = inner.handle(&request);
        if write_reply(reader.get_mut(), reply).await.is_err() || request.wants_close() {
            return;
        }
    }
}
