//! This benchmark run again as a child (`--pipeline-child <mode> <n>`): one pipeline pass
//! with what only a process of its own can change (PATH without git, the SQL statements
//! counted, a trace), reported on one `RESULT` line.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::setup::hanarang_binary;
use crate::sprints::pipeline_once;
use crate::sql_count;
use crate::support::TempDir;

/// How this benchmark runs itself as a child (the no-git variants, the statement count).
pub const CHILD_ARG: &str = "--pipeline-child";

/// Runs the pipeline in a child of this benchmark: `nogit` with `PATH` emptied of git,
/// `both` the same with its database on /dev/shm, `count` with the SQL statements
/// counted. Returns the wall time, the problems it
/// reported and its other fields.
pub fn pipeline_child(mode: &str, n: usize) -> (Duration, Vec<String>, HashMap<String, String>) {
    let exe = std::env::current_exe().expect("this benchmark's executable");
    let empty = TempDir::new("no-git-path");
    let mut cmd = Command::new(exe);
    cmd.args([CHILD_ARG, mode, &n.to_string()])
        .stderr(Stdio::inherit());
    if mode == "nogit" || mode == "both" {
        cmd.env("PATH", empty.path());
    }
    let stdout = cmd
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT ").map(str::to_string));
    let Some(line) = line else {
        return (
            Duration::ZERO,
            vec!["the child reported nothing".into()],
            HashMap::new(),
        );
    };
    let mut elapsed = Duration::ZERO;
    let mut problems = Vec::new();
    let mut fields: HashMap<String, String> = line
        .split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let statements: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("STMT "))
        .collect();
    fields.insert("by_sql".into(), statements.join("\n"));
    for (key, value) in &fields {
        let (key, value) = (key.as_str(), value.as_str());
        match key {
            "elapsed_ns" => elapsed = Duration::from_nanos(value.parse().unwrap_or(0)),
            "deployed" if value != n.to_string() => {
                problems.push(format!("deployed {value} of {n}"));
            }
            "problems" if value != "0" => problems.push(format!("{value} problems")),
            _ => {}
        }
    }
    (elapsed, problems, fields)
}

/// In the child: one pipeline pass, then a line for the parent.
pub fn child_main(mode: &str, n: usize) {
    if mode == "count" {
        sql_count::install();
    }
    if mode == "trace" {
        tracing_subscriber::fmt()
            .with_env_filter(format!(
                "hanarang=debug,{}=debug",
                hanarang::store::testing::SQL_EVENTS
            ))
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .init();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a multi-thread runtime");
    let bin = hanarang_binary();
    let root = (mode == "both").then(|| Path::new("/dev/shm"));
    let run = rt.block_on(pipeline_once(&bin, n, &format!("wall-a-{mode}"), root));
    for p in &run.problems {
        eprintln!("{mode} child: {p}");
    }
    let (statements, in_sqlite) = run.statements;
    for (count, ns, text) in &run.by_sql {
        println!("STMT {count} {ns} {text}");
    }
    let (own, children) = cpu_ticks();
    println!(
        "RESULT elapsed_ns={} deployed={} problems={} statements={statements} in_sqlite_ns={} cpu_self_ticks={own} cpu_children_ticks={children}",
        run.elapsed.as_nanos(),
        run.deployed,
        run.problems.len(),
        in_sqlite.as_nanos()
    );
}

/// CPU time (clock ticks, user + system) of this process and of its reaped children,
/// from `/proc/self/stat`.
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let fields: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    match fields.as_slice() {
        [utime, stime, cutime, cstime] => (utime + stime, cutime + cstime),
        _ => (0, 0),
    }
}
