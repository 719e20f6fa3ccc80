//! Benchmark of the sister runner (`hanarang::sister::run`). Run it with
//! `cargo bench --bench runner`; `docs/benchmarks/runner.md` says what it measures and
//! records the numbers. It only reports: nothing here asserts.
//!
//! 1. Overhead: a trivial sister that exits at once and prints a valid HandoffMessage, run
//!    through the runner and spawned bare with `std::process::Command` (same program, same
//!    args, same prompt on stdin, all of stdout read), interleaved in the same process.
//!    Reported per run (mean, median) and as the ratio of the medians. Target ≤ 1.3.
//!    Rows: a sister that reads its prompt (`cat`, one more process) and one that ignores
//!    it, on a multi-thread and a current-thread runtime, each row's runs writing over one
//!    `runs/<sprint>.contract.json` as the orchestrator gives a sprint's runs; one more row
//!    writes a new file each run (a sprint's first run). Every run gets a cgroup of its own
//!    where the host gives one, as the orchestrator's do. The runner's first step, writing
//!    the contract file, is then timed alone, since the file system's cost for it varies
//!    from machine to machine.
//! 2. Peak memory: a sister that streams 1 GB, to stdout (the runner stops it past
//!    `max_output_bytes`) and to stderr (drained to the end, a tail kept). Each case runs
//!    in a fresh child process of this benchmark (this executable re-run with
//!    `--memory-case <case>`), which prints its own `VmHWM` once the run is over, so the
//!    peak is the runner's alone. Target < 2 × `max_output_bytes` + 20 MB.
//! 3. Event streams: a sister that prints Claude Code's stream-json (`STREAM_EVENTS`
//!    tool calls, each with its result, then the result event), run with its stream read
//!    into steps (`stream = "claude-code"`) and bare, interleaved. Reported as the cost
//!    per event the runner adds: what reading the stream adds to a sister's wall time.
//!    Target: a few percent of a sister's time at the rate a CLI prints (under 1% at
//!    100 events a second).

#[allow(dead_code)] // what the other benchmarks share beside the machine line
mod common;
#[allow(dead_code)] // the benchmark uses a part of the tests' support
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fs_type, machine, median, mib, us};
use hanarang::config::AgentConfig;
use hanarang::handoff::message::Actor;
use hanarang::sister::{RunControl, RunReport, RunRequest, render_prompt, run};
use support::TempDir;

/// Runs of each kind measured after the warm-up, interleaved.
const ITERATIONS: usize = 200;
const WARMUP: usize = 20;
const RATIO_TARGET: f64 = 1.3;
/// What the streaming sisters write: 1 GiB.
const STREAM_BYTES: u64 = 1 << 30;
/// The memory target's allowance on top of twice the cap: 20 MB.
const MEMORY_SLACK: u64 = 20_000_000;
const MEMORY_CASE_ARG: &str = "--memory-case";
/// A valid harang message (harang: no git claim to check, so only the runner is timed).
const MESSAGE: &str = r#"{"actor":"harang","verdict":"PLAN_READY","payload":{"planDir":"plans/SPRINT-001","sprintId":"SPRINT-001","contractId":"C-SPRINT-001"}}"#;

/// A sister: `/bin/sh -c <script>`. No file, no bash: as cheap a process as there is.
struct Sister {
    name: &'static str,
    script: String,
}

impl Sister {
    fn program(&self) -> &'static str {
        "/bin/sh"
    }

    fn args(&self) -> Vec<String> {
        vec!["-c".to_string(), self.script.clone()]
    }
}

fn say() -> String {
    format!("printf '%s\\n' '{MESSAGE}'")
}

/// Reads its prompt, answers at once.
fn reads_prompt() -> Sister {
    Sister {
        name: "reads prompt, answers",
        script: format!("cat >/dev/null; {}", say()),
    }
}

/// Never reads its prompt, answers at once.
fn ignores_prompt() -> Sister {
    Sister {
        name: "ignores prompt, answers",
        script: say(),
    }
}

/// The memory cases, each run in a child process.
fn memory_sister(case: &str) -> Option<Sister> {
    let sister = match case {
        "idle" => Sister {
            name: "one trivial run (process baseline)",
            script: format!("cat >/dev/null; {}", say()),
        },
        "stdout" => Sister {
            name: "1 GiB to stdout (stopped past the cap)",
            script: format!("cat >/dev/null; head -c {STREAM_BYTES} /dev/zero"),
        },
        "stderr" => Sister {
            name: "1 GiB to stderr, then a message",
            script: format!(
                "cat >/dev/null; head -c {STREAM_BYTES} /dev/zero >&2; {}",
                say()
            ),
        },
        _ => return None,
    };
    Some(sister)
}

const MEMORY_CASES: [&str; 3] = ["idle", "stdout", "stderr"];

/// A run request the way the orchestrator builds one: the default agent settings (cap,
/// kill grace, timeout) with the sister's program and args, in a fresh workdir.
fn request(dir: &TempDir, sister: &Sister) -> RunRequest {
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).expect("create the workdir");
    let mut spec = AgentConfig::default().spec(Actor::Harang);
    spec.program = sister.program().to_string();
    spec.args = sister.args();
    RunRequest {
        spec,
        contract: support::contract(Actor::Harang, &workdir),
        contract_path: dir.path().join("runs/R1.contract.json"),
        repo: hanarang::git::Repo::new(&workdir, &Default::default()),
        workdir,
        token_env: "DISCORD_TOKEN".into(),
        role_text: None,
        check: None,
        base_check: None,
        fence: None,
        // As the orchestrator gives one, where the host has cgroup v2.
        containers: hanarang::sister::container::Containers::open(&dir.path().join("runs")).ok(),
        git_identity: None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == MEMORY_CASE_ARG) {
        memory_child(args.get(i + 1).map_or("", String::as_str));
        return;
    }
    println!("sister runner benchmark");
    println!("machine: {}", machine());
    // Every run writes its contract file there first: its file system weighs on the ratio.
    let tmp = std::env::temp_dir();
    println!(
        "run folders under {} ({})",
        tmp.display(),
        fs_type(&tmp).unwrap_or_else(|| "unknown file system".into())
    );
    println!();
    overhead();
    println!();
    memory();
    println!();
    streams();
}

// --- 3. event streams -------------------------------------------------------------------

/// Tool calls in the measured stream (each followed by its result: twice the lines).
const STREAM_EVENTS: usize = 20_000;
const STREAM_RUNS: usize = 20;

fn streams() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a multi-thread runtime");
    let dir = TempDir::new("bench-stream");
    let file = dir.path().join("stream.jsonl");
    let mut text =
        String::from("{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s-1\"}\n");
    for i in 0..STREAM_EVENTS {
        text.push_str(&format!(
            "{{\"type\":\"assistant\",\"message\":{{\"id\":\"m{i}\",\"content\":[{{\"type\":\"tool_use\",\"id\":\"t{i}\",\"name\":\"Edit\",\"input\":{{\"file_path\":\"src/part{i}.rs\"}}}}],\"usage\":{{\"input_tokens\":10,\"output_tokens\":1}}}},\"session_id\":\"s-1\"}}\n\
             {{\"type\":\"user\",\"message\":{{\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"t{i}\",\"content\":\"ok\"}}]}}}}\n"
        ));
    }
    text.push_str(&format!(
        "{{\"type\":\"result\",\"subtype\":\"success\",\"session_id\":\"s-1\",\"total_cost_usd\":0.42,\"usage\":{{\"input_tokens\":1234,\"output_tokens\":56}},\"structured_output\":{MESSAGE}}}\n"
    ));
    std::fs::write(&file, &text).expect("write the stream");
    let sister = Sister {
        name: "Claude Code stream-json",
        script: format!("cat >/dev/null; cat '{}'", file.display()),
    };
    let mut req = request(&dir, &sister);
    req.spec.stream = Some(hanarang::config::EventStream::ClaudeCode);
    req.spec.output_pointer = "/structured_output".into();
    let (program, args) = (sister.program(), sister.args());
    let (mut runner, mut bare) = (Vec::new(), Vec::new());
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..STREAM_RUNS + 2 {
        let run_id = format!("S-{i}");
        req.contract_path = dir.path().join(format!("runs/{run_id}.contract.json"));
        req.contract.run_id = run_id;
        let started = Instant::now();
        let report = rt.block_on(run(&req, RunControl::unattended()));
        let r = started.elapsed();
        let started = Instant::now();
        spawn_bare(program, &args, &req.workdir, "");
        let b = started.elapsed();
        if i >= 2 {
            runner.push(r);
            bare.push(b);
            *outcomes.entry(report.outcome.to_string()).or_default() += 1;
        }
    }
    let (r, b) = (median(&runner), median(&bare));
    let lines = 2 * STREAM_EVENTS + 2;
    let per_line = r.saturating_sub(b) / u32::try_from(lines).unwrap_or(u32::MAX);
    println!(
        "3. Event streams: {lines} lines ({}), {STREAM_RUNS} runs each, runner reading the stream vs bare",
        mib(text.len() as u64)
    );
    println!(
        "runner med {}, bare med {}, added per line {:.2} µs; at 100 lines a second that is {:.3}% of the sister's time; outcomes {outcomes:?}",
        us(r),
        us(b),
        per_line.as_secs_f64() * 1e6,
        per_line.as_secs_f64() * 100.0 * 100.0
    );
}

// --- 1. overhead ------------------------------------------------------------------------

/// One row of the overhead table: a sister on a runtime flavor.
struct Overhead {
    label: String,
    runner: Vec<Duration>,
    bare: Vec<Duration>,
    /// How many measured runs ended how (all `handoff` when the sister behaved).
    outcomes: std::collections::BTreeMap<String, usize>,
    same_stdout: bool,
}

fn overhead() {
    use ContractFiles::{FreshPerRun, PerSprint};
    let multi = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a multi-thread runtime");
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    // One folder for every row, removed only at the end: ext4 scans past inodes freed in
    // the last seconds when it allocates new ones, so removing a row's runs before the
    // next row would slow the contract files of the rows after it down.
    let dir = TempDir::new("bench");
    let rows = [
        measure(&dir, 0, &multi, "multi-thread", &reads_prompt(), PerSprint),
        measure(
            &dir,
            1,
            &multi,
            "multi-thread",
            &ignores_prompt(),
            PerSprint,
        ),
        measure(
            &dir,
            2,
            &current,
            "current-thread",
            &reads_prompt(),
            PerSprint,
        ),
        measure(
            &dir,
            3,
            &current,
            "current-thread",
            &ignores_prompt(),
            PerSprint,
        ),
        measure(
            &dir,
            4,
            &multi,
            "multi-thread",
            &ignores_prompt(),
            FreshPerRun,
        ),
    ];
    let w = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0);

    println!(
        "1. Overhead: runner vs bare std::process::Command, {ITERATIONS} runs each after {WARMUP} warm-up, interleaved"
    );
    println!(
        "{:<w$} {:>11} {:>11} {:>11} {:>11} {:>11} {:>7}  target ≤ {RATIO_TARGET}",
        "sister / runtime",
        "runner mean",
        "runner med",
        "bare mean",
        "bare med",
        "extra med",
        "ratio",
    );
    for row in &rows {
        let ratio = median(&row.runner).as_secs_f64() / median(&row.bare).as_secs_f64();
        let verdict = if ratio <= RATIO_TARGET {
            "PASS"
        } else {
            "FAIL"
        };
        let mut notes = Vec::new();
        for (outcome, n) in &row.outcomes {
            if outcome != "handoff" {
                notes.push(format!("{n} × {outcome}"));
            }
        }
        if !row.same_stdout {
            notes.push("stdout differs".into());
        }
        println!(
            "{:<w$} {:>11} {:>11} {:>11} {:>11} {:>11} {:>7.3}  {verdict}{}",
            row.label,
            us(mean(&row.runner)),
            us(median(&row.runner)),
            us(mean(&row.bare)),
            us(median(&row.bare)),
            us(median(&row.runner).saturating_sub(median(&row.bare))),
            ratio,
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join(", "))
            }
        );
    }
    println!(
        "for reference, the runner's first step alone (create the run folder, serialize the contract, write it), median of {ITERATIONS}:"
    );
    println!(
        "  the sprint's contract file rewritten in place: {}; a new file each run: {}; rewritten with truncation (std::fs::write): {}",
        us(contract_write(&dir, PerSprint, false)),
        us(contract_write(&dir, FreshPerRun, false)),
        us(contract_write(&dir, PerSprint, true))
    );
}

/// What `write_contract` in the runner does, timed alone: median per write. `truncate`:
/// the sprint's file rewritten by `std::fs::write` instead, for comparison.
fn contract_write(dir: &TempDir, files: ContractFiles, truncate: bool) -> Duration {
    use std::os::unix::fs::FileExt;
    let workdir = dir.path().join("work");
    let _ = std::fs::create_dir_all(&workdir);
    let mut contract = support::contract(Actor::Harang, &workdir);
    let mut samples = Vec::with_capacity(ITERATIONS);
    for i in 0..WARMUP + ITERATIONS {
        let path = match (files, truncate) {
            (ContractFiles::FreshPerRun, _) => {
                contract.run_id = format!("W{i}");
                dir.path().join(format!("write/W{i}.contract.json"))
            }
            (ContractFiles::PerSprint, false) => dir.path().join("write/in-place.contract.json"),
            (ContractFiles::PerSprint, true) => dir.path().join("write/truncated.contract.json"),
        };
        let started = Instant::now();
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let json = serde_json::to_vec_pretty(&contract).unwrap_or_default();
        if truncate {
            let _ = std::fs::write(&path, json);
        } else if let Ok(file) = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
        {
            let _ = file.write_all_at(&json, 0);
            let _ = file.set_len(json.len() as u64);
        }
        if i >= WARMUP {
            samples.push(started.elapsed());
        }
    }
    median(&samples)
}

/// Where each run's contract file goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ContractFiles {
    /// `runs/<sprint>.contract.json`, written over by each of the sprint's runs: what the
    /// orchestrator does (`Store::contract_path`).
    PerSprint,
    /// `runs/<run id>.contract.json`, a new file each run: as a sprint's first run.
    FreshPerRun,
}

/// Times `ITERATIONS` runner runs and as many bare spawns, alternating which goes first
/// (A B, B A, A B, ...) so neither always runs on a warmer cache.
fn measure(
    dir: &TempDir,
    row: usize,
    rt: &tokio::runtime::Runtime,
    flavor: &str,
    sister: &Sister,
    files: ContractFiles,
) -> Overhead {
    let mut req = request(dir, sister);
    let program = sister.program();
    let args = sister.args();

    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    let mut same_stdout = true;
    let mut runner = Vec::with_capacity(ITERATIONS);
    let mut bare = Vec::with_capacity(ITERATIONS);
    for i in 0..WARMUP + ITERATIONS {
        let run_id = format!("R{row}-{i}");
        req.contract_path = match files {
            ContractFiles::FreshPerRun => dir.path().join(format!("runs/{run_id}.contract.json")),
            ContractFiles::PerSprint => dir.path().join(format!("runs/S{row}.contract.json")),
        };
        req.contract.run_id = run_id;
        // The bare sister gets the very prompt the runner renders for this run.
        let prompt = render_prompt(
            &req.contract,
            &req.contract_path.display().to_string(),
            None,
        );
        let mut report: Option<RunReport> = None;
        let mut bare_stdout = Vec::new();
        let mut time_runner = || {
            let started = Instant::now();
            report = Some(rt.block_on(run(&req, RunControl::unattended())));
            started.elapsed()
        };
        let mut time_bare = || {
            let started = Instant::now();
            bare_stdout = spawn_bare(program, &args, &req.workdir, &prompt);
            started.elapsed()
        };
        let (r, b) = if i % 2 == 0 {
            let r = time_runner();
            (r, time_bare())
        } else {
            let b = time_bare();
            (time_runner(), b)
        };
        if i >= WARMUP {
            runner.push(r);
            bare.push(b);
            if let Some(report) = report {
                *outcomes.entry(report.outcome.to_string()).or_default() += 1;
                same_stdout &= report.stdout_tail.as_bytes() == bare_stdout.as_slice();
            }
        }
    }
    let files = match files {
        ContractFiles::PerSprint => "",
        ContractFiles::FreshPerRun => ", a new contract file each run",
    };
    Overhead {
        label: format!("{} / {flavor}{files}", sister.name),
        runner,
        bare,
        outcomes,
        same_stdout,
    }
}

/// The baseline: the same program and args, the prompt written to stdin, all of stdout
/// read, the child waited for. Returns its stdout.
fn spawn_bare(program: &str, args: &[String], workdir: &std::path::Path, prompt: &str) -> Vec<u8> {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(workdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the bare sister");
    if let Some(mut stdin) = child.stdin.take() {
        // A sister that does not read its prompt may close the pipe first: ignored, as
        // the runner ignores it. The prompt fits in the pipe buffer.
        let _ = stdin.write_all(prompt.as_bytes());
    }
    let mut out = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_end(&mut out);
    }
    let _ = child.wait();
    out
}

fn mean(samples: &[Duration]) -> Duration {
    let n = u32::try_from(samples.len().max(1)).unwrap_or(u32::MAX);
    samples.iter().sum::<Duration>() / n
}

// --- 2. peak memory ---------------------------------------------------------------------

/// In the child process: one run of the case's sister, then this process's peak RSS.
fn memory_child(case: &str) {
    let Some(sister) = memory_sister(case) else {
        eprintln!("unknown memory case {case:?}; known: {MEMORY_CASES:?}");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a multi-thread runtime");
    let dir = TempDir::new("bench-mem");
    let req = request(&dir, &sister);
    let report = rt.block_on(run(&req, RunControl::unattended()));
    drop(rt);
    println!(
        "RESULT vmhwm_kb={} outcome={} stdout_bytes={} stderr_bytes={} duration_ms={} max_output_bytes={}",
        vm_hwm_kb().unwrap_or(0),
        report.outcome,
        report.stdout_bytes,
        report.stderr_bytes,
        report.duration.as_millis(),
        req.spec.max_output_bytes
    );
}

/// This process's peak resident set (`VmHWM`), in kB.
fn vm_hwm_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn memory() {
    let exe = std::env::current_exe().expect("this benchmark's executable");
    println!("2. Peak memory (VmHWM of a fresh child process running one sister)");
    println!(
        "{:<40} {:>10} {:>12} {:>14} {:>14} {:>9} {:>10}  target",
        "case", "outcome", "peak RSS", "stdout bytes", "stderr bytes", "time", "limit"
    );
    for case in MEMORY_CASES {
        let name = memory_sister(case).map_or(case, |s| s.name);
        let output = Command::new(&exe)
            .args([MEMORY_CASE_ARG, case])
            .stderr(Stdio::inherit())
            .output();
        let fields = output.ok().and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("RESULT ").map(parse_fields))
        });
        let Some(fields) = fields else {
            println!("{name:<40} the child process reported nothing");
            continue;
        };
        let get = |k: &str| {
            fields
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        let num = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let peak = num("vmhwm_kb") * 1024;
        let limit = 2 * num("max_output_bytes") + MEMORY_SLACK;
        let verdict = match case {
            "idle" => "(baseline)",
            _ if peak < limit => "PASS",
            _ => "FAIL",
        };
        println!(
            "{name:<40} {:>10} {:>12} {:>14} {:>14} {:>9} {:>10}  {verdict}",
            get("outcome").unwrap_or("?"),
            mib(peak),
            num("stdout_bytes"),
            num("stderr_bytes"),
            format!("{} ms", num("duration_ms")),
            mib(limit),
        );
    }
    println!("limit = 2 × max_output_bytes + 20 MB (20 × 10^6 bytes)");
}

fn parse_fields(line: &str) -> Vec<(String, String)> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
