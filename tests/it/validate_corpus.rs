//! The corpus of sister outputs in `tests/fixtures/messages/`, run through the real
//! `hanarang validate` and through the library's `validate_output`, against what
//! `expected.toml` says of each file. Plus the inputs that are better generated than
//! stored: stdin, a missing file, an output over the size cap.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use hanarang::config::DEFAULT_MAX_OUTPUT_BYTES;
use hanarang::handoff::message::{
    Common, DeployPayload, ErangMessage, ErangVerdict, HandoffMessage, Usage,
};
use hanarang::handoff::validate::{Problem, consistency, validate_output, validate_value};
use hanarang::handoff::{Actor, Validated};
use serde::Deserialize;
use serde_json::Value;

const EXPECTATIONS: &str = "expected.toml";

/// One table of `expected.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expectation {
    valid: bool,
    actor: Option<String>,
    pointer: Option<String>,
    expect_actor: Option<String>,
    expect_verdict: Option<String>,
    #[serde(default)]
    paths: Vec<String>,
    contains: Option<String>,
    problems: Option<usize>,
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/messages")
}

fn fixture_files() -> BTreeSet<String> {
    std::fs::read_dir(fixtures_dir())
        .expect("tests/fixtures/messages exists")
        .map(|entry| entry.expect("readable directory entry"))
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .map(|entry| entry.file_name().into_string().expect("UTF-8 file name"))
        .filter(|name| name != EXPECTATIONS)
        .collect()
}

/// The expectations, each checked for being well-formed (so a typo cannot turn a case
/// into one that asserts nothing).
fn expectations() -> BTreeMap<String, Expectation> {
    let text = std::fs::read_to_string(fixtures_dir().join(EXPECTATIONS))
        .expect("tests/fixtures/messages/expected.toml is readable");
    let table: BTreeMap<String, Expectation> = toml::from_str(&text).expect("expected.toml parses");
    for (file, e) in &table {
        if e.valid {
            assert!(
                e.expect_actor.is_some() && e.expect_verdict.is_some(),
                "{file}: a valid fixture needs expect_actor and expect_verdict"
            );
            assert!(
                e.paths.is_empty() && e.contains.is_none() && e.problems.is_none(),
                "{file}: a valid fixture has no paths, contains or problems"
            );
        } else {
            assert!(
                !e.paths.is_empty(),
                "{file}: an invalid fixture must list at least one path"
            );
            assert!(
                e.expect_actor.is_none() && e.expect_verdict.is_none(),
                "{file}: an invalid fixture has no expect_actor or expect_verdict"
            );
            for path in &e.paths {
                assert!(
                    path.is_empty() || path.starts_with('/'),
                    "{file}: {path:?} is not a JSON Pointer"
                );
            }
        }
        if let Some(actor) = &e.actor {
            actor
                .parse::<Actor>()
                .unwrap_or_else(|err| panic!("{file}: {err}"));
        }
    }
    table
}

fn expected_actor(file: &str, e: &Expectation) -> Option<Actor> {
    e.actor
        .as_deref()
        .map(|a| a.parse().unwrap_or_else(|err| panic!("{file}: {err}")))
}

fn hanarang() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hanarang"));
    cmd.env_remove("RUST_LOG")
        .env_remove("HANARANG_CONFIG")
        .current_dir(env!("CARGO_TARGET_TMPDIR"));
    cmd
}

fn validate_command(e: &Expectation) -> Command {
    let mut cmd = hanarang();
    cmd.arg("validate");
    if let Some(actor) = &e.actor {
        cmd.args(["--actor", actor]);
    }
    if let Some(pointer) = &e.pointer {
        cmd.args(["--pointer", pointer]);
    }
    cmd
}

fn run_on_file(e: &Expectation, path: &Path) -> Output {
    validate_command(e)
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .expect("hanarang runs")
}

fn run_on_stdin(args: &[&str], input: Vec<u8>) -> Output {
    let mut child = hanarang()
        .arg("validate")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hanarang starts");
    let mut stdin = child.stdin.take().expect("piped stdin");
    // Written from a thread: the reader may stop at its cap, and a full pipe must not
    // deadlock the test.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("hanarang finishes");
    writer.join().expect("stdin writer thread");
    output
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The CLI's line for one problem, as `hanarang validate` prints it on stderr.
fn path_prefix(path: &str) -> String {
    if path.is_empty() {
        "  (root): ".to_string()
    } else {
        format!("  {path}: ")
    }
}

/// The header line and the problem lines of an invalid run's stderr.
fn split_report<'a>(source: &str, stderr: &'a str) -> Result<Vec<&'a str>, String> {
    let mut lines = stderr.lines();
    let header = lines.next().unwrap_or_default();
    let problems: Vec<&str> = lines.collect();
    let n = problems.len();
    let expected = format!(
        "{source}: invalid HandoffMessage ({n} problem{})",
        if n == 1 { "" } else { "s" }
    );
    if header != expected {
        return Err(format!(
            "header {header:?}, expected {expected:?}\n{stderr}"
        ));
    }
    if n == 0 {
        return Err(format!("no problem lines\n{stderr}"));
    }
    if let Some(bad) = problems.iter().find(|l| !l.starts_with("  ")) {
        return Err(format!("problem line not indented: {bad:?}\n{stderr}"));
    }
    Ok(problems)
}

/// Checks reported problems (as `(path, message)`) against an invalid fixture's
/// expectation; every failure is described.
fn check_problems(e: &Expectation, problems: &[(String, String)]) -> Vec<String> {
    let mut failures = Vec::new();
    let listing = problems
        .iter()
        .map(|(p, m)| format!("    {p:?}: {m}"))
        .collect::<Vec<_>>()
        .join("\n");
    for path in &e.paths {
        if !problems.iter().any(|(p, _)| p == path) {
            failures.push(format!("no problem at {path:?}; got\n{listing}"));
        }
    }
    if let Some(needle) = &e.contains
        && !problems.iter().any(|(_, m)| m.contains(needle.as_str()))
    {
        failures.push(format!(
            "no problem message contains {needle:?}; got\n{listing}"
        ));
    }
    if let Some(n) = e.problems
        && problems.len() != n
    {
        failures.push(format!(
            "{} problems, expected {n}; got\n{listing}",
            problems.len()
        ));
    }
    for (p, _) in problems {
        if !(p.is_empty() || p.starts_with('/')) {
            failures.push(format!("problem path {p:?} is not a JSON Pointer"));
        }
    }
    failures
}

/// Parses one CLI problem line back into `(path, message)`.
fn parse_problem_line(line: &str) -> (String, String) {
    let line = line.strip_prefix("  ").unwrap_or(line);
    if let Some(message) = line.strip_prefix("(root): ") {
        return (String::new(), message.to_string());
    }
    match line.split_once(": ") {
        Some((path, message)) => (path.to_string(), message.to_string()),
        None => (line.to_string(), String::new()),
    }
}

fn fail_all(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} fixture failure(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_fixture_is_listed_and_every_listing_has_a_file() {
    let files = fixture_files();
    let table = expectations();
    let listed: BTreeSet<String> = table.keys().cloned().collect();
    let unlisted: Vec<&String> = files.difference(&listed).collect();
    let missing: Vec<&String> = listed.difference(&files).collect();
    assert!(
        unlisted.is_empty(),
        "fixtures with no table in expected.toml: {unlisted:?}"
    );
    assert!(
        missing.is_empty(),
        "expected.toml lists files that do not exist: {missing:?}"
    );
    let valid = table.values().filter(|e| e.valid).count();
    let invalid = table.len() - valid;
    assert!(table.len() >= 45, "only {} fixtures", table.len());
    assert!(
        valid >= 10 && invalid >= 30,
        "{valid} valid, {invalid} invalid"
    );
}

#[test]
fn the_valid_fixtures_cover_every_actor_and_verdict() {
    let covered: BTreeSet<(String, String)> = expectations()
        .values()
        .filter(|e| e.valid)
        .map(|e| {
            (
                e.expect_actor.clone().unwrap_or_default(),
                e.expect_verdict.clone().unwrap_or_default(),
            )
        })
        .collect();
    for actor in Actor::ALL {
        for verdict in actor.verdicts() {
            let pair = (actor.to_string(), verdict.to_string());
            assert!(covered.contains(&pair), "no valid fixture for {pair:?}");
        }
    }
}

#[test]
fn corpus_through_the_binary() {
    let dir = fixtures_dir();
    let mut failures = Vec::new();
    for (file, e) in expectations() {
        let path = dir.join(&file);
        let out = run_on_file(&e, &path);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        let mut fail = |what: String| failures.push(format!("{file}: {what}"));
        if e.valid {
            if out.status.code() != Some(0) {
                fail(format!(
                    "exit {:?}, expected 0\n{stderr}",
                    out.status.code()
                ));
                continue;
            }
            if !stderr.is_empty() {
                fail(format!("stderr not empty on a valid message:\n{stderr}"));
            }
            let printed: Value = match serde_json::from_str(&stdout) {
                Ok(v) => v,
                Err(err) => {
                    fail(format!("stdout is not JSON ({err}):\n{stdout}"));
                    continue;
                }
            };
            for (key, want) in [("actor", &e.expect_actor), ("verdict", &e.expect_verdict)] {
                let got = printed.get(key).and_then(Value::as_str);
                if got != want.as_deref() {
                    fail(format!("printed {key} {got:?}, expected {want:?}"));
                }
            }
        } else {
            if out.status.code() != Some(1) {
                fail(format!(
                    "exit {:?}, expected 1\n{stderr}",
                    out.status.code()
                ));
                continue;
            }
            if !stdout.is_empty() {
                fail(format!("stdout not empty on an invalid message:\n{stdout}"));
            }
            let lines = match split_report(&path.display().to_string(), &stderr) {
                Ok(lines) => lines,
                Err(err) => {
                    fail(err);
                    continue;
                }
            };
            for want in &e.paths {
                let prefix = path_prefix(want);
                if !lines.iter().any(|l| l.starts_with(&prefix)) {
                    fail(format!("stderr has no line starting {prefix:?}:\n{stderr}"));
                }
            }
            let problems: Vec<(String, String)> =
                lines.iter().map(|l| parse_problem_line(l)).collect();
            for f in check_problems(&e, &problems) {
                fail(f);
            }
        }
    }
    fail_all(failures);
}

#[test]
fn corpus_through_the_library_agrees_with_the_binary() {
    let dir = fixtures_dir();
    let mut failures = Vec::new();
    for (file, e) in expectations() {
        let path = dir.join(&file);
        let bytes = std::fs::read(&path).expect("fixture is readable");
        let result = validate_output(
            &bytes,
            DEFAULT_MAX_OUTPUT_BYTES,
            e.pointer.as_deref().unwrap_or(""),
            expected_actor(&file, &e),
        );
        let out = run_on_file(&e, &path);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        let mut fail = |what: String| failures.push(format!("{file}: {what}"));
        match (e.valid, result) {
            (true, Ok(Validated { message, raw })) => {
                if message.actor().as_str() != e.expect_actor.as_deref().unwrap_or_default()
                    || message.verdict().as_str() != e.expect_verdict.as_deref().unwrap_or_default()
                {
                    fail(format!(
                        "library says {} {}, expected {:?} {:?}",
                        message.actor(),
                        message.verdict(),
                        e.expect_actor,
                        e.expect_verdict
                    ));
                }
                if !raw.is_object() {
                    fail(format!("raw is not the message object: {raw}"));
                }
                let normalized = serde_json::to_value(&message).expect("message serializes");
                match serde_json::from_str::<Value>(&stdout) {
                    Ok(printed) if printed == normalized => {}
                    Ok(printed) => fail(format!(
                        "the binary printed\n{printed}\nthe library's message is\n{normalized}"
                    )),
                    Err(err) => fail(format!("binary stdout is not JSON ({err}): {stdout}")),
                }
            }
            (false, Err(problems)) => {
                let pairs: Vec<(String, String)> = problems
                    .iter()
                    .map(|p| (p.path.clone(), p.message.clone()))
                    .collect();
                for f in check_problems(&e, &pairs) {
                    fail(format!("library: {f}"));
                }
                let from_library: Vec<String> = problems.iter().map(|p| format!("  {p}")).collect();
                let from_binary: Vec<String> = stderr.lines().skip(1).map(str::to_string).collect();
                if from_library != from_binary {
                    fail(format!(
                        "library problems\n{}\ndiffer from the binary's\n{}",
                        from_library.join("\n"),
                        from_binary.join("\n")
                    ));
                }
            }
            (true, Err(problems)) => fail(format!(
                "library rejects a valid fixture: {}",
                problems
                    .iter()
                    .map(Problem::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
            (false, Ok(v)) => fail(format!(
                "library accepts an invalid fixture as {} {}",
                v.message.actor(),
                v.message.verdict()
            )),
        }
    }
    fail_all(failures);
}

#[test]
fn valid_output_is_normalized_and_validates_again() {
    let path = fixtures_dir().join("valid_unknown_extra_fields_ignored.json");
    let e = Expectation {
        valid: true,
        actor: None,
        pointer: None,
        expect_actor: None,
        expect_verdict: None,
        paths: vec![],
        contains: None,
        problems: None,
    };
    let out = run_on_file(&e, &path);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    // Unknown fields are ignored: gone from the normalized message...
    assert!(printed.get("model").is_none(), "{printed}");
    assert!(printed.get("thinking").is_none(), "{printed}");
    assert!(printed["payload"].get("estimate").is_none(), "{printed}");
    assert!(printed["handoff"].get("mood").is_none(), "{printed}");
    assert_eq!(printed["payload"]["planDir"], "plans/sprint-42");
    assert_eq!(printed["usage"]["costUsd"], 0.42);
    // ...but kept in the raw JSON the library returns.
    let bytes = std::fs::read(&path).unwrap();
    let validated = validate_output(&bytes, DEFAULT_MAX_OUTPUT_BYTES, "", None).unwrap();
    assert_eq!(validated.raw["model"], "claude-opus");
    assert_eq!(validated.raw["payload"]["estimate"], "2h");
    // The printed message is itself valid and means the same.
    let again = validate_value(printed, Some(Actor::Harang)).expect("normalized is valid");
    assert_eq!(again.message, validated.message);
}

#[test]
fn envelope_message_is_printed_without_its_envelope() {
    for (file, pointer, actor) in [
        (
            "envelope_claude_code_structured_output.json",
            "/structured_output",
            "darang",
        ),
        ("envelope_openclaw_final_string.json", "/final", "narang"),
    ] {
        let out = hanarang()
            .args(["validate", "--actor", actor, "--pointer", pointer])
            .arg(fixtures_dir().join(file))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{file}: {}", text(&out.stderr));
        let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(printed["actor"], actor, "{file}");
        for envelope_key in ["type", "subtype", "structured_output", "status", "final"] {
            assert!(printed.get(envelope_key).is_none(), "{file}: {printed}");
        }
    }
}

#[test]
fn stdin_is_read_with_a_dash_or_no_file() {
    let valid = std::fs::read(fixtures_dir().join("harang_plan_ready.json")).unwrap();
    let from_file = hanarang()
        .arg("validate")
        .arg(fixtures_dir().join("harang_plan_ready.json"))
        .output()
        .unwrap();
    assert_eq!(from_file.status.code(), Some(0));
    for args in [&["-"][..], &[][..], &["--actor", "harang", "-"][..]] {
        let out = run_on_stdin(args, valid.clone());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(out.stdout, from_file.stdout, "{args:?}");
    }

    let blocker = std::fs::read(fixtures_dir().join("darang_approve_with_blocker.json")).unwrap();
    let out = run_on_stdin(&["--actor", "darang", "-"], blocker);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        text(&out.stderr),
        "stdin: invalid HandoffMessage (1 problem)\n  \
         /payload/issues/2/severity: APPROVE with a blocker issue\n"
    );

    let out = run_on_stdin(&["-"], Vec::new());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .starts_with("stdin: invalid HandoffMessage (1 problem)\n  (root): output is empty"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_missing_file_is_a_failure_naming_the_file() {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-sister-output.json");
    let _ = std::fs::remove_file(&path);
    let out = hanarang().arg("validate").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot read {}", path.display())),
        "{stderr}"
    );
    assert!(stderr.contains("No such file"), "{stderr}");
    assert!(!stderr.contains("invalid HandoffMessage"), "{stderr}");
}

/// A valid message padded with trailing spaces to exactly `len` bytes.
fn padded_message(len: usize) -> Vec<u8> {
    let mut bytes = std::fs::read(fixtures_dir().join("harang_abort.json")).unwrap();
    assert!(bytes.len() <= len);
    bytes.resize(len, b' ');
    bytes
}

#[test]
fn output_over_the_cap_is_refused_and_at_the_cap_accepted() {
    let cap = DEFAULT_MAX_OUTPUT_BYTES;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let over = dir.join("validate-over-the-cap.json");
    let at = dir.join("validate-at-the-cap.json");
    std::fs::write(&over, padded_message(cap + 1)).unwrap();
    std::fs::write(&at, padded_message(cap)).unwrap();

    let expected_message = format!(
        "output too large: {} bytes, over the cap of {cap} bytes",
        cap + 1
    );

    let out = hanarang().arg("validate").arg(&over).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "{}: invalid HandoffMessage (1 problem)\n",
            over.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("  (root): {expected_message}")),
        "{stderr}"
    );

    let out = hanarang().arg("validate").arg(&at).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // The same through stdin, with more than the cap on offer.
    let out = run_on_stdin(&["-"], padded_message(cap + 4096));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("(root): output too large"), "{stderr}");
    assert!(
        stderr.contains(&format!("over the cap of {cap} bytes")),
        "{stderr}"
    );

    // And the library, with its own count.
    let problems = validate_output(&padded_message(cap + 1), cap, "", None).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].path, "");
    assert!(
        problems[0].message.starts_with(&expected_message),
        "{problems:?}"
    );
    assert!(validate_output(&padded_message(cap), cap, "", None).is_ok());

    let _ = std::fs::remove_file(over);
    let _ = std::fs::remove_file(at);
}

#[test]
fn generated_binary_inputs_are_refused_at_the_root() {
    // Non-UTF-8 in several places, and nesting at serde_json's recursion limit (128).
    let message = br#"{"actor":"harang","verdict":"ABORT","abortReason":"x"}"#.to_vec();
    let mut cases: Vec<(Vec<u8>, &str)> = vec![
        (
            [&[0xFFu8][..], &message[..]].concat(),
            "not UTF-8: invalid byte at offset 0",
        ),
        ([&message[..], &[0xC3u8][..]].concat(), "not UTF-8"),
        (vec![0xFE, 0xFF, 0x00, b'{', 0x00, b'}'], "not UTF-8"),
        (vec![0u8; 16], "not valid JSON"),
    ];
    let deep_ok = format!("{}{}", "[".repeat(127), "]".repeat(127)).into_bytes();
    let deep_bad = format!("{}{}", "[".repeat(128), "]".repeat(128)).into_bytes();
    cases.push((deep_bad, "recursion limit exceeded"));
    for (bytes, needle) in cases {
        let problems = validate_output(&bytes, DEFAULT_MAX_OUTPUT_BYTES, "", None).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "", "{problems:?}");
        assert!(problems[0].message.contains(needle), "{problems:?}");
        let out = run_on_stdin(&["-"], bytes);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains(needle), "{}", text(&out.stderr));
    }
    // 127 levels still parse: the problem is then the shape, not the JSON.
    let problems = validate_output(&deep_ok, DEFAULT_MAX_OUTPUT_BYTES, "", None).unwrap_err();
    assert_eq!(
        problems,
        vec![Problem::new(
            "",
            "expected a JSON object (a HandoffMessage), got an array"
        )]
    );
}

fn erang_with_cost(cost: f64) -> HandoffMessage {
    HandoffMessage::Erang(ErangMessage {
        verdict: ErangVerdict::DeployDone,
        payload: DeployPayload {
            deploy_artifact_path: "deploys/s.md".into(),
            project_type: "cli".into(),
            verification_results: Value::Null,
        },
        error_reason: None,
        common: Common {
            handoff: None,
            usage: Some(Usage {
                input_tokens: None,
                output_tokens: None,
                cost_usd: Some(cost),
            }),
        },
    })
}

/// JSON cannot carry NaN or infinity, so the non-finite branch of the cost rule is
/// reached through `consistency` on a message built in Rust.
#[test]
fn non_finite_or_negative_cost_breaks_consistency() {
    for cost in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.01, -1e300] {
        assert_eq!(
            consistency(&erang_with_cost(cost)),
            vec![Problem::new(
                "/usage/costUsd",
                "must be a non-negative number"
            )],
            "cost {cost}"
        );
    }
    for cost in [0.0, -0.0, 0.000_001, 1e300] {
        assert_eq!(consistency(&erang_with_cost(cost)), vec![], "cost {cost}");
    }
}
