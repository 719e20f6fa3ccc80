use super::*;

const CAP: usize = 1024 * 1024;

fn reader(form: EventStream) -> StreamReader {
    StreamReader::new(form, CAP, Path::new("/work/app"))
}

/// Everything `feed` holds on to, in bytes.
fn held(r: &StreamReader) -> usize {
    r.line.len() + r.head.len() + r.tail.len() + r.final_event.as_ref().map_or(0, Vec::len)
}

fn feed_all(r: &mut StreamReader, text: &str, chunk: usize) {
    for piece in text.as_bytes().chunks(chunk) {
        r.feed(piece, 1_000);
    }
    r.finish(1_000);
}

const CLAUDE: &str = r#"{"type":"system","subtype":"init","session_id":"s-1","tools":["Edit","Bash"]}
{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Looking at the code.\nI will fix the slug."}],"usage":{"input_tokens":100,"output_tokens":10}},"session_id":"s-1"}
{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{"file_path":"/work/app/slugify/__main__.py","old_string":"a","new_string":"b"}}],"usage":{"input_tokens":100,"output_tokens":10}},"session_id":"s-1"}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}
{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"pytest -q test.py"}}],"usage":{"input_tokens":50,"output_tokens":5}},"session_id":"s-1"}
{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-1","total_cost_usd":0.25,"usage":{"input_tokens":400,"output_tokens":40},"structured_output":{"actor":"narang"}}
"#;

#[test]
fn claude_code_steps_tokens_and_its_result_event_as_the_output() {
    let mut r = reader(EventStream::ClaudeCode);
    let mut steps = Vec::new();
    for line in CLAUDE.lines().take(5) {
        r.feed(format!("{line}\n").as_bytes(), 1_000);
        steps.push(r.progress().step.clone());
        if line.contains("\"id\":\"m2\"") {
            // m1 counted once though two events carried it, plus m2.
            assert_eq!(r.progress().input_tokens, 150);
            assert_eq!(r.progress().output_tokens, 15);
        }
    }
    assert_eq!(
        steps,
        [
            None,
            Some("💬 I will fix the slug.".to_string()),
            Some("✏️ Edit slugify/__main__.py".to_string()),
            Some("✏️ Edit slugify/__main__.py".to_string()),
            Some("▶️ pytest -q test.py".to_string()),
        ]
    );
    let last = CLAUDE.lines().last().unwrap_or_default();
    r.feed(last.as_bytes(), 2_000);
    r.finish(2_000);
    let p = r.progress().clone();
    assert_eq!((p.input_tokens, p.output_tokens), (400, 40));
    assert_eq!(p.cost_usd, Some(0.25));
    assert_eq!(
        p.step_at_ms,
        Some(1_000),
        "the step started when it was read"
    );
    let out = r.take_output();
    assert_eq!(out.bytes, last.as_bytes(), "the result event, as printed");
    assert!(!out.over_cap);
    assert_eq!(out.total, (CLAUDE.len() - 1) as u64);
}

#[test]
fn chunks_cut_anywhere_read_the_same() {
    for chunk in [1, 7, 64, 4096] {
        let mut r = reader(EventStream::ClaudeCode);
        feed_all(&mut r, CLAUDE, chunk);
        assert_eq!(r.progress().step.as_deref(), Some("▶️ pytest -q test.py"));
        assert_eq!(r.malformed(), 0);
        let out = r.take_output();
        assert!(
            out.bytes.starts_with(br#"{"type":"result""#),
            "chunk {chunk}"
        );
    }
}

const CODEX: &str = r#"{"type":"thread.started","thread_id":"th-1"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"/bin/bash -lc 'pytest -q test.py'","aggregated_output":"","status":"in_progress"}}
{"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"/work/app/slugify/__main__.py","kind":"update"},{"path":"/work/app/README.md","kind":"update"}],"status":"completed"}}
{"type":"item.completed","item":{"id":"i3","type":"agent_message","text":"{\"actor\":\"narang\",\"abortReason\":null}"}}
{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":0,"output_tokens":80}}
"#;

#[test]
fn codex_steps_tokens_and_its_last_message_as_the_output() {
    let mut r = reader(EventStream::Codex);
    let mut steps = Vec::new();
    for line in CODEX.lines() {
        r.feed(format!("{line}\n").as_bytes(), 5);
        steps.push(r.progress().step.clone());
    }
    assert_eq!(steps[2].as_deref(), Some("▶️ pytest -q test.py"));
    assert_eq!(
        steps[3].as_deref(),
        Some("✏️ Edit slugify/__main__.py (+1)")
    );
    let p = r.progress().clone();
    assert_eq!(
        (p.input_tokens, p.output_tokens, p.cost_usd),
        (1200, 80, None)
    );
    let out = r.take_output();
    assert_eq!(out.bytes, br#"{"actor":"narang","abortReason":null}"#);
}

#[test]
fn malformed_lines_are_skipped_and_the_final_event_kept() {
    let mut text = String::from("not json at all\n{\"type\":\n\u{0}\u{1}garbage\n[1,2\n");
    text.push_str(CLAUDE);
    text.push_str("trailing garbage after the result\n");
    let mut r = reader(EventStream::ClaudeCode);
    feed_all(&mut r, &text, 333);
    assert_eq!(r.malformed(), 5);
    assert!(r.take_output().bytes.starts_with(br#"{"type":"result""#));
}

#[test]
fn a_50_mb_line_is_skipped_with_memory_bounded_and_the_final_event_kept() {
    let mut r = reader(EventStream::ClaudeCode);
    r.feed(b"{\"type\":\"system\"}\n", 0);
    let block = vec![b'x'; 64 * 1024];
    let mut most = 0;
    for _ in 0..(50 * 16) {
        r.feed(&block, 0);
        most = most.max(held(&r));
    }
    r.feed(b"\n", 0);
    let result = CLAUDE.lines().last().unwrap_or_default();
    r.feed(result.as_bytes(), 0);
    r.feed(b"\n", 0);
    assert!(most <= 3 * CAP + TAIL, "held {most} bytes");
    assert_eq!(r.malformed(), 1);
    let out = r.take_output();
    assert_eq!(out.bytes, result.as_bytes());
    assert_eq!(out.total, 50 * 1024 * 1024 + 20 + result.len() as u64);
}

#[test]
fn a_50_mb_stream_of_events_keeps_memory_bounded_and_the_final_event() {
    let mut r = reader(EventStream::Codex);
    let line = format!(
        "{{\"type\":\"item.completed\",\"item\":{{\"type\":\"command_execution\",\"command\":\"echo {}\"}}}}\n",
        "y".repeat(1000)
    );
    let mut chunk = String::new();
    while chunk.len() < 64 * 1024 {
        chunk.push_str(&line);
    }
    let mut fed = 0usize;
    let mut most = 0;
    while fed < 50 * 1024 * 1024 {
        r.feed(chunk.as_bytes(), 0);
        fed += chunk.len();
        most = most.max(held(&r));
    }
    feed_all(&mut r, CODEX, 4096);
    assert!(most <= 3 * CAP + TAIL, "held {most} bytes");
    assert_eq!(
        r.take_output().bytes,
        br#"{"actor":"narang","abortReason":null}"#
    );
}

#[test]
fn a_cut_stream_without_its_final_event_leaves_its_tail() {
    let cut = &CLAUDE[..CLAUDE.len() - 40];
    let mut r = reader(EventStream::ClaudeCode);
    feed_all(&mut r, cut, 100);
    assert_eq!(r.progress().step.as_deref(), Some("▶️ pytest -q test.py"));
    assert_eq!(r.malformed(), 1, "the cut result line");
    let out = r.take_output();
    assert!(out.unfinished);
    assert!(out.bytes.ends_with(&cut.as_bytes()[cut.len() - 20..]));
    assert!(!out.over_cap);
}

#[test]
fn a_cli_that_streams_nothing_leaves_its_whole_output() {
    let message = "{\n  \"actor\": \"harang\",\n  \"verdict\": \"PLAN_READY\"\n}\n";
    for form in [EventStream::ClaudeCode, EventStream::Codex] {
        let mut r = reader(form);
        feed_all(&mut r, message, 5);
        assert_eq!(r.progress(), &Progress::default());
        let out = r.take_output();
        assert_eq!(out.bytes, message.as_bytes());
        assert!(!out.over_cap);
    }
    // On one line, a message is no event of either form.
    let mut r = reader(EventStream::Codex);
    feed_all(&mut r, r#"{"actor":"harang","verdict":"PLAN_READY"}"#, 64);
    assert_eq!(
        r.take_output().bytes,
        br#"{"actor":"harang","verdict":"PLAN_READY"}"#
    );
}

#[test]
fn a_whole_output_past_the_cap_is_over_the_cap() {
    let mut r = StreamReader::new(EventStream::ClaudeCode, 16, Path::new("/"));
    feed_all(&mut r, &"z".repeat(100), 7);
    let out = r.take_output();
    assert_eq!(out.bytes.len(), 16);
    assert!(out.over_cap);
}

#[test]
fn a_step_is_one_line_without_control_characters_and_cut() {
    let mut r = reader(EventStream::ClaudeCode);
    let long = "a".repeat(500);
    let event = serde_json::json!({"type":"assistant","message":{"content":[
        {"type":"tool_use","name":"Bash","input":{"command":format!("echo 1 &&\n\u{1b}[31m {long}")}}
    ]}});
    feed_all(&mut r, &format!("{event}\n"), 4096);
    let step = r.progress().step.clone().unwrap_or_default();
    assert!(step.starts_with("▶️ echo 1 && [31m"), "{step}");
    assert!(!step.chars().any(char::is_control));
    assert_eq!(step.chars().count(), STEP_CHARS + 1);
}
