//! Properties of the validator over generated inputs: arbitrary bytes and arbitrary JSON
//! never panic it, every problem it reports points into the value it was given, and a
//! valid message survives serialization and re-validation unchanged.

use hanarang::config::DEFAULT_MAX_OUTPUT_BYTES;
use hanarang::handoff::HandoffDocument;
use hanarang::handoff::message::{
    Actor, ChecklistItem, ChecklistResult, Common, DarangMessage, DarangVerdict, DeployPayload,
    ErangMessage, ErangVerdict, HandoffMessage, HarangMessage, HarangVerdict, ImplPayload,
    NarangMessage, NarangVerdict, PlanPayload, ReviewIssue, ReviewPayload, Severity, Usage,
};
use hanarang::handoff::schema::{self, Dialect};
use hanarang::handoff::validate::{
    Problem, consistency, validate_output, validate_value, without_nulls,
};
use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

/// Cases per property: modest, so the suite stays quick on two cores. `PROPTEST_CASES`
/// overrides it for a longer hunt.
const CASES: u32 = 256;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// Checks shared by the properties

/// A JSON Pointer (RFC 6901): empty, or `/`-separated segments where `~` is only ever
/// followed by `0` or `1`.
fn is_json_pointer(path: &str) -> bool {
    if path.is_empty() {
        return true;
    }
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    rest.split('/').all(|segment| {
        let bytes = segment.as_bytes();
        bytes
            .iter()
            .enumerate()
            .all(|(i, &b)| b != b'~' || matches!(bytes.get(i + 1), Some(b'0' | b'1')))
    })
}

/// The pointer one level up (`/a/b` -> `/a`, `/a` -> ``).
fn parent(path: &str) -> Option<&str> {
    path.rfind('/').map(|i| &path[..i])
}

/// Every problem path is a JSON Pointer that names the value's element, or — for a
/// missing field — an element of the value that lacks it.
fn check_problems_point_into(value: &Value, problems: &[Problem]) -> Result<(), TestCaseError> {
    prop_assert!(
        !problems.is_empty(),
        "an Err must carry at least one problem"
    );
    for p in problems {
        prop_assert!(
            is_json_pointer(&p.path),
            "problem path {:?} is not a JSON Pointer ({})",
            p.path,
            p.message
        );
        prop_assert!(
            !p.message.trim().is_empty(),
            "empty message at {:?}",
            p.path
        );
        let resolves = value.pointer(&p.path).is_some();
        let parent_resolves = parent(&p.path).is_some_and(|up| value.pointer(up).is_some());
        prop_assert!(
            resolves || parent_resolves,
            "problem path {:?} ({}) points nowhere in {}",
            p.path,
            p.message,
            value
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Arbitrary JSON, biased toward the message's vocabulary

const KEYS: &[&str] = &[
    "actor",
    "verdict",
    "payload",
    "abortReason",
    "errorReason",
    "planDir",
    "sprintId",
    "contractId",
    "branch",
    "commits",
    "workdir",
    "selfTestReport",
    "checklistResults",
    "issues",
    "artifactPath",
    "id",
    "passed",
    "note",
    "severity",
    "file",
    "line",
    "message",
    "deployArtifactPath",
    "projectType",
    "verificationResults",
    "handoff",
    "goal",
    "constraints",
    "progress",
    "keyDecisions",
    "criticalContext",
    "nextSteps",
    "usage",
    "inputTokens",
    "outputTokens",
    "costUsd",
];

const WORDS: &[&str] = &[
    "harang",
    "narang",
    "darang",
    "erang",
    "Harang",
    "PLAN_READY",
    "ABORT",
    "IMPL_DONE",
    "ERROR",
    "APPROVE",
    "REQUEST_CHANGES",
    "DEPLOY_DONE",
    "DEPLOY_FAILED",
    "blocker",
    "major",
    "minor",
    "nit",
    "",
    "  ",
    "\n",
    "plans/s1",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-z~/]{0,6}",
    ]
}

/// Numbers written as text and read back are the same number only when serde_json's
/// parser is exact for them: without its `float_roundtrip` feature it is not for every
/// f64 (9075.547331739577 reads back as 9075.547331739575). Properties that go through
/// text use `exact` floats; the others take any f64.
fn float(exact: bool) -> BoxedStrategy<Value> {
    if exact {
        prop_oneof![
            (-1_000_000i32..1_000_000).prop_map(|n| json!(f64::from(n) / 64.0)),
            Just(json!(1e20)),
            Just(json!(-0.0)),
        ]
        .boxed()
    } else {
        prop_oneof![
            any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
        ]
        .boxed()
    }
}

fn leaf(exact: bool) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::from(u32::MAX)),
            Just(1u64 << 32)
        ]
        .prop_map(Value::from),
        float(exact),
        prop::sample::select(WORDS).prop_map(|s| Value::String(s.to_string())),
        ".{0,12}".prop_map(Value::String),
    ]
}

fn json_value(exact: bool) -> impl Strategy<Value = Value> {
    leaf(exact).prop_recursive(6, 96, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..7)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// An object that looks like a message: a plausible actor and verdict, a payload made of
/// the message's keys, and sometimes `handoff` and `usage`, so the walk reaches deep into
/// every branch of the schema.
fn message_like(exact: bool) -> BoxedStrategy<Value> {
    let word = || prop::sample::select(WORDS).prop_map(|s| Value::String(s.to_string()));
    (
        prop::option::of(prop_oneof![4 => word(), 1 => json_value(exact)]),
        prop::option::of(prop_oneof![4 => word(), 1 => json_value(exact)]),
        prop::option::of(json_value(exact)),
        prop::option::of(json_value(exact)),
        prop::option::of(json_value(exact)),
        prop::option::of(json_value(exact)),
        prop::collection::vec((key(), json_value(exact)), 0..3),
    )
        .prop_map(|(actor, verdict, payload, reason, handoff, usage, extra)| {
            let mut m = Map::new();
            for (k, v) in extra {
                m.insert(k, v);
            }
            let mut put = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    m.insert(k.to_string(), v);
                }
            };
            put("actor", actor);
            put("verdict", verdict);
            put("payload", payload);
            put("abortReason", reason.clone());
            put("errorReason", reason);
            put("handoff", handoff);
            put("usage", usage);
            Value::Object(m)
        })
        .boxed()
}

// ---------------------------------------------------------------------------------------
// Valid messages, built from the types

fn text() -> impl Strategy<Value = String> + Clone {
    ".{0,16}"
}

/// A string the non-empty rules accept.
fn nonblank() -> impl Strategy<Value = String> + Clone {
    "[a-zA-Z0-9가-힣🦊][a-zA-Z0-9 ./_\"\\\\\n\t가-힣é-]{0,20}"
}

fn free_form() -> impl Strategy<Value = Value> {
    // Floats limited to what survives a text round trip bit for bit (serde_json's parser
    // is exact for them without `float_roundtrip`).
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1_000_000i32..1_000_000).prop_map(|n| json!(f64::from(n) / 8.0)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-zA-Z]{1,8}", inner), 0..4)
                .prop_map(|f| Value::Object(f.into_iter().collect())),
        ]
    })
}

/// What sisters print: dollars with a few decimals (see `float` on why not any f64).
fn cost() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        (0u32..1_000_000).prop_map(|cents| f64::from(cents) / 100.0),
        (0u32..1_000_000).prop_map(|n| f64::from(n) / 1e6),
    ]
}

fn common() -> BoxedStrategy<Common> {
    let document = (
        nonblank(),
        prop::collection::vec(text(), 0..3),
        prop::collection::vec(text(), 0..3),
        prop::collection::vec(text(), 0..3),
        prop::collection::vec(text(), 0..3),
        prop::collection::vec(text(), 0..3),
        nonblank(),
        any::<bool>(),
    )
        .prop_map(
            |(
                goal,
                constraints,
                mut progress,
                key_decisions,
                critical_context,
                mut next,
                anchor,
                in_progress,
            )| {
                // At least one real item, so the document is not empty.
                if in_progress {
                    progress.push(anchor);
                } else {
                    next.push(anchor);
                }
                HandoffDocument {
                    goal,
                    constraints,
                    progress,
                    key_decisions,
                    critical_context,
                    next_steps: next,
                }
            },
        );
    let usage = (
        prop::option::of(any::<u64>()),
        prop::option::of(any::<u64>()),
        prop::option::of(cost()),
    )
        .prop_map(|(input_tokens, output_tokens, cost_usd)| Usage {
            input_tokens,
            output_tokens,
            cost_usd,
        });
    (prop::option::of(document), prop::option::of(usage))
        .prop_map(|(handoff, usage)| Common { handoff, usage })
        .boxed()
}

fn plan_payload(s: impl Strategy<Value = String> + Clone) -> impl Strategy<Value = PlanPayload> {
    // Ids made unique by their position, as a valid contract's are.
    let checklist =
        prop::option::of(prop::collection::vec((s.clone(), s.clone()), 0..4)).prop_map(|items| {
            items.map(|items| {
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, (id, text))| ChecklistItem {
                        id: format!("{i}{id}"),
                        text,
                    })
                    .collect()
            })
        });
    (s.clone(), s.clone(), s, checklist).prop_map(
        |(plan_dir, sprint_id, contract_id, checklist)| PlanPayload {
            plan_dir,
            sprint_id,
            contract_id,
            checklist,
        },
    )
}

fn impl_payload(s: impl Strategy<Value = String> + Clone) -> impl Strategy<Value = ImplPayload> {
    (
        s.clone(),
        prop::collection::vec(s.clone(), 0..4),
        s,
        free_form(),
    )
        .prop_map(|(branch, commits, workdir, self_test_report)| ImplPayload {
            branch,
            commits,
            workdir,
            self_test_report,
        })
}

fn harang() -> BoxedStrategy<HandoffMessage> {
    prop_oneof![
        (plan_payload(nonblank()), prop::option::of(text()), common()).prop_map(
            |(p, abort_reason, common)| HarangMessage {
                verdict: HarangVerdict::PlanReady,
                payload: Some(p),
                abort_reason,
                common,
            }
        ),
        (prop::option::of(plan_payload(text())), nonblank(), common()).prop_map(
            |(payload, reason, common)| HarangMessage {
                verdict: HarangVerdict::Abort,
                payload,
                abort_reason: Some(reason),
                common,
            }
        ),
    ]
    .prop_map(HandoffMessage::Harang)
    .boxed()
}

fn narang() -> BoxedStrategy<HandoffMessage> {
    prop_oneof![
        (impl_payload(nonblank()), prop::option::of(text()), common()).prop_map(
            |(p, error_reason, common)| NarangMessage {
                verdict: NarangVerdict::ImplDone,
                payload: Some(p),
                error_reason,
                common,
            }
        ),
        (prop::option::of(impl_payload(text())), nonblank(), common()).prop_map(
            |(payload, reason, common)| NarangMessage {
                verdict: NarangVerdict::Error,
                payload,
                error_reason: Some(reason),
                common,
            }
        ),
    ]
    .prop_map(HandoffMessage::Narang)
    .boxed()
}

fn severity() -> impl Strategy<Value = Severity> {
    prop::sample::select(vec![
        Severity::Blocker,
        Severity::Major,
        Severity::Minor,
        Severity::Nit,
    ])
}

fn issue() -> impl Strategy<Value = ReviewIssue> {
    (
        prop::option::of(text()),
        severity(),
        prop::option::of(text()),
        prop::option::of(any::<u32>()),
        nonblank(),
    )
        .prop_map(|(id, severity, file, line, message)| ReviewIssue {
            id,
            severity,
            file,
            line,
            message,
        })
}

fn darang() -> BoxedStrategy<HandoffMessage> {
    let item = (nonblank(), any::<bool>(), prop::option::of(text()))
        .prop_map(|(id, passed, note)| ChecklistResult { id, passed, note });
    (
        prop::sample::select(vec![
            DarangVerdict::Approve,
            DarangVerdict::RequestChanges,
            DarangVerdict::Abort,
        ]),
        prop::collection::vec(item, 0..4),
        prop::collection::vec(issue(), 0..4),
        issue(),
        nonblank(),
        prop::option::of(text()),
        common(),
    )
        .prop_map(
            |(verdict, mut checklist, mut issues, spare, artifact_path, abort_reason, common)| {
                match verdict {
                    DarangVerdict::Approve => {
                        checklist.iter_mut().for_each(|c| c.passed = true);
                        for i in &mut issues {
                            if i.severity == Severity::Blocker {
                                i.severity = Severity::Major;
                            }
                        }
                    }
                    DarangVerdict::RequestChanges => {
                        if checklist.iter().all(|c| c.passed) && issues.is_empty() {
                            issues.push(spare);
                        }
                    }
                    DarangVerdict::Abort => {}
                }
                HandoffMessage::Darang(DarangMessage {
                    verdict,
                    payload: ReviewPayload {
                        checklist_results: checklist,
                        issues,
                        artifact_path,
                    },
                    abort_reason,
                    common,
                })
            },
        )
        .boxed()
}

fn erang() -> BoxedStrategy<HandoffMessage> {
    (
        prop::sample::select(vec![ErangVerdict::DeployDone, ErangVerdict::DeployFailed]),
        nonblank(),
        nonblank(),
        free_form(),
        prop::option::of(text()),
        common(),
    )
        .prop_map(
            |(
                verdict,
                deploy_artifact_path,
                project_type,
                verification_results,
                error_reason,
                common,
            )| {
                HandoffMessage::Erang(ErangMessage {
                    verdict,
                    payload: DeployPayload {
                        deploy_artifact_path,
                        project_type,
                        verification_results,
                    },
                    error_reason,
                    common,
                })
            },
        )
        .boxed()
}

fn valid_message() -> BoxedStrategy<HandoffMessage> {
    prop_oneof![harang(), narang(), darang(), erang()].boxed()
}

// ---------------------------------------------------------------------------------------
// Valid messages with a few things broken: deep into every branch of the schema

/// Every JSON Pointer in `value`, the root included.
fn pointers(value: &Value, here: &str, out: &mut Vec<String>) {
    out.push(here.to_string());
    match value {
        Value::Object(fields) => {
            for (name, field) in fields {
                let escaped = name.replace('~', "~0").replace('/', "~1");
                pointers(field, &format!("{here}/{escaped}"), out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, &format!("{here}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Removes the element at `path` (not the root) from its object or array.
fn remove_at(value: &mut Value, path: &str) {
    let Some(cut) = path.rfind('/') else { return };
    let (up, last) = (&path[..cut], &path[cut + 1..]);
    match value.pointer_mut(up) {
        Some(Value::Object(fields)) => {
            let name = last.replace("~1", "/").replace("~0", "~");
            fields.shift_remove(&name);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < items.len()
            {
                items.remove(i);
            }
        }
        _ => {}
    }
}

fn broken_message(exact: bool) -> BoxedStrategy<Value> {
    let edit = (
        any::<prop::sample::Index>(),
        0u8..5,
        json_value(exact),
        prop::sample::select(WORDS),
    );
    (valid_message(), prop::collection::vec(edit, 0..4))
        .prop_map(|(message, edits)| {
            let mut value = serde_json::to_value(&message).expect("a message serializes");
            for (at, op, replacement, word) in edits {
                let mut all = Vec::new();
                pointers(&value, "", &mut all);
                let path = &all[at.index(all.len())];
                match op {
                    0 => remove_at(&mut value, path),
                    1 => {
                        if let Some(v) = value.pointer_mut(path) {
                            *v = replacement;
                        }
                    }
                    2 => {
                        if let Some(v) = value.pointer_mut(path) {
                            *v = Value::String(word.to_string());
                        }
                    }
                    3 => {
                        if let Some(Value::Bool(b)) = value.pointer_mut(path) {
                            *b = !*b;
                        } else if let Some(v) = value.pointer_mut(path) {
                            *v = Value::String(" ".into());
                        }
                    }
                    _ => {
                        if let Some(Value::Object(fields)) = value.pointer_mut(path) {
                            fields.insert(word.to_string(), replacement);
                        }
                    }
                }
            }
            value
        })
        .boxed()
}

// ---------------------------------------------------------------------------------------
// Instances of the printed schemas: what an agent CLI given `hanarang schema` may send

/// Any value the schema allows, drawn from its keywords (the ones `hanarang schema` prints:
/// `const`, `enum`, `anyOf`/`oneOf`, `type` (one or a list), `minimum`/`maximum`,
/// `properties`/`required`, `items`). Optional properties come and go; numbers without
/// bounds range far, so a bound the schema leaves out is found.
fn instance(schema: &Value) -> BoxedStrategy<Value> {
    if let Some(value) = schema.get("const") {
        return Just(value.clone()).boxed();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return prop::sample::select(values.clone()).boxed();
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(alternatives) = schema.get(union).and_then(Value::as_array) {
            let each: Vec<BoxedStrategy<Value>> = alternatives.iter().map(instance).collect();
            return prop::strategy::Union::new(each).boxed();
        }
    }
    let types: Vec<String> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect(),
        // A free-form value (`{}`).
        _ => return leaf(true).boxed(),
    };
    let bound =
        |key: &str, default: f64| schema.get(key).and_then(Value::as_f64).unwrap_or(default);
    let each: Vec<BoxedStrategy<Value>> = types
        .iter()
        .map(|t| match t.as_str() {
            "null" => Just(Value::Null).boxed(),
            "boolean" => any::<bool>().prop_map(Value::Bool).boxed(),
            "integer" => {
                let (lo, hi) = (
                    bound("minimum", -1e13) as i64,
                    bound("maximum", 1e13) as i64,
                );
                prop_oneof![Just(lo), Just(hi), lo..=hi]
                    .prop_map(|n| json!(n))
                    .boxed()
            }
            "number" => {
                let (lo, hi) = (bound("minimum", -1e9), bound("maximum", 1e9));
                (lo..=hi).prop_map(|n| json!(n)).boxed()
            }
            "string" => "[a-zA-Z0-9 ./-]{0,12}".prop_map(Value::String).boxed(),
            "array" => {
                let items = schema.get("items").cloned().unwrap_or(json!({}));
                prop::collection::vec(instance(&items), 0..3)
                    .prop_map(Value::Array)
                    .boxed()
            }
            "object" => object_instance(schema),
            other => panic!("the printed schema uses a type the generator does not know: {other}"),
        })
        .collect();
    prop::strategy::Union::new(each).boxed()
}

fn object_instance(schema: &Value) -> BoxedStrategy<Value> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = properties
        .iter()
        .map(|(name, sub)| {
            let name = name.clone();
            let value = instance(sub);
            if required.contains(&name.as_str()) {
                value.prop_map(move |v| Some((name.clone(), v))).boxed()
            } else {
                prop::option::of(value.prop_map(move |v| (name.clone(), v))).boxed()
            }
        })
        .collect();
    fields
        .prop_map(|fields| Value::Object(fields.into_iter().flatten().collect()))
        .boxed()
}

/// One actor's schema in one dialect, as `hanarang schema --actor A --dialect D` prints it.
fn printed_schema() -> impl Strategy<Value = (Actor, Dialect, Value)> {
    let all: Vec<(Actor, Dialect)> = Actor::ALL
        .into_iter()
        .flat_map(|a| [(a, Dialect::Draft07), (a, Dialect::OpenaiStrict)])
        .collect();
    prop::sample::select(all).prop_flat_map(|(actor, dialect)| {
        let schema = schema::schema(Some(actor), dialect).expect("a schema per actor");
        instance(&schema).prop_map(move |v| (actor, dialect, v))
    })
}

// ---------------------------------------------------------------------------------------
// The properties

proptest! {
    #![proptest_config(config())]

    /// Bytes of any kind: an answer, never a panic; a rejection always says why.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        match validate_output(&bytes, DEFAULT_MAX_OUTPUT_BYTES, "", None) {
            Ok(valid) => prop_assert!(valid.raw.is_object()),
            Err(problems) => {
                prop_assert!(!problems.is_empty());
                for p in &problems {
                    prop_assert!(is_json_pointer(&p.path), "{:?}", p);
                }
            }
        }
    }

    /// A valid message's text with a few bytes changed, cut short or with bytes spliced in:
    /// close enough to JSON to reach the parser's and the walker's corners.
    #[test]
    fn mutated_valid_output_never_panics(
        message in valid_message(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = serde_json::to_vec(&message).unwrap();
        for (at, byte, kind) in edits {
            let i = at.index(bytes.len() + 1);
            match kind {
                0 if i < bytes.len() => bytes[i] = byte,
                1 if i < bytes.len() => { bytes.remove(i); }
                _ => bytes.insert(i, byte),
            }
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        match validate_output(&bytes, DEFAULT_MAX_OUTPUT_BYTES, "", None) {
            Ok(valid) => {
                // What passes must be a message that passes again.
                let again = validate_value(valid.raw.clone(), None);
                prop_assert_eq!(again.map(|v| v.message), Ok(valid.message));
            }
            Err(problems) => {
                prop_assert!(!problems.is_empty());
                for p in &problems {
                    prop_assert!(is_json_pointer(&p.path), "{:?}", p);
                }
            }
        }
    }

    /// Any JSON value, a message-like object or a valid message with a few things broken:
    /// no panic, and every problem points into the value.
    #[test]
    fn arbitrary_json_problems_point_into_the_value(
        value in prop_oneof![1 => json_value(false), 2 => message_like(false), 3 => broken_message(false)],
        expected in prop::option::of(prop::sample::select(Actor::ALL.to_vec())),
    ) {
        match validate_value(value.clone(), expected) {
            Ok(valid) => {
                // Kept as sent, but for a `null` in a field of the message's own, which
                // reads as absent.
                prop_assert_eq!(&valid.raw, &without_nulls(value.clone()));
                if let Some(actor) = expected {
                    prop_assert_eq!(valid.message.actor(), actor);
                }
                let again = validate_value(serde_json::to_value(&valid.message).unwrap(), expected);
                prop_assert_eq!(again.map(|v| v.message), Ok(valid.message));
            }
            Err(problems) => check_problems_point_into(&value, &problems)?,
        }
    }

    /// The whole pipeline agrees with the value check: from text, from an object envelope
    /// at a pointer, and from a string envelope holding the text.
    #[test]
    fn text_and_envelopes_agree_with_the_value(
        value in prop_oneof![message_like(true), broken_message(true)],
    ) {
        let direct = validate_value(value.clone(), None);
        let text = serde_json::to_string(&value).unwrap();
        let from_text = validate_output(text.as_bytes(), DEFAULT_MAX_OUTPUT_BYTES, "", None);
        prop_assert_eq!(&from_text, &direct);

        // (A string found at the pointer is read as JSON text, so only other values are
        // the message itself there.)
        if !value.is_string() {
            let envelope = json!({"type": "result", "structured_output": value});
            let bytes = serde_json::to_vec(&envelope).unwrap();
            let from_envelope =
                validate_output(&bytes, DEFAULT_MAX_OUTPUT_BYTES, "/structured_output", None);
            prop_assert_eq!(from_envelope.map(|v| v.message), direct.clone().map(|v| v.message));
        }

        let envelope = json!({"status": "ok", "final": text});
        let bytes = serde_json::to_vec(&envelope).unwrap();
        let from_string = validate_output(&bytes, DEFAULT_MAX_OUTPUT_BYTES, "/final", None);
        prop_assert_eq!(from_string.map(|v| v.message), direct.map(|v| v.message));
    }

    /// A valid message, serialized (compact or pretty) and validated again, is the same
    /// message; with its own actor expected too, and refused with any other.
    #[test]
    fn valid_messages_round_trip(message in valid_message(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&message).unwrap()
        } else {
            serde_json::to_string(&message).unwrap()
        };
        let actor = message.actor();
        let valid = validate_output(text.as_bytes(), DEFAULT_MAX_OUTPUT_BYTES, "", Some(actor))
            .map_err(|p| p.iter().map(Problem::to_string).collect::<Vec<_>>().join("; "));
        prop_assert!(valid.is_ok(), "{:?} for {}", valid, text);
        let valid = valid.unwrap();
        prop_assert_eq!(&valid.message, &message);
        prop_assert_eq!(&valid.raw, &serde_json::to_value(&message).unwrap());

        for other in Actor::ALL.into_iter().filter(|a| *a != actor) {
            let problems = validate_output(text.as_bytes(), DEFAULT_MAX_OUTPUT_BYTES, "", Some(other))
                .unwrap_err();
            prop_assert_eq!(
                problems,
                vec![Problem::new(
                    "/actor",
                    format!("expected a message from {other}, got one from {actor}")
                )]
            );
        }
    }

    /// The validator accepts what the schemas it prints allow: an instance of an actor's
    /// schema, in either dialect (strict mode's nulls included), has the message's shape.
    /// What it may still break are the rules beyond the shape, which no schema states.
    #[test]
    fn what_the_printed_schemas_allow_has_the_messages_shape(
        (actor, dialect, value) in printed_schema()
    ) {
        if let Err(problems) = validate_value(value.clone(), Some(actor)) {
            let message: Result<HandoffMessage, _> = serde_json::from_value(without_nulls(value.clone()));
            prop_assert!(
                message.is_ok(),
                "{actor} {dialect:?}: {value} is allowed by the schema but not read: {problems:?}"
            );
            prop_assert_eq!(
                problems,
                consistency(&message.unwrap()),
                "{} {:?}: {} was refused for its shape", actor, dialect, value
            );
        }
    }
}

/// The case the generator finds now and then, pinned: a `null` in an optional field of a
/// valid message is valid, and the stored message reads it as absent.
#[test]
fn a_null_optional_field_is_valid_and_stored_as_absent() {
    let value = json!({
        "actor": "darang", "verdict": "APPROVE",
        "payload": { "checklistResults": [{ "id": "c1", "passed": true, "note": null }],
                     "issues": [], "artifactPath": "/tmp/review.md" },
    });
    let valid = validate_value(value, None).expect("valid");
    assert_eq!(
        valid.raw["payload"]["checklistResults"][0],
        json!({ "id": "c1", "passed": true })
    );
}
