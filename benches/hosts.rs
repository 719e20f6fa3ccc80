//! Several hosts on one PostgreSQL database, measured: `cargo bench --bench
//! hosts`. 30 projects, sisters that each take 1 s, every host serving every project with
//! `[host] max_sisters = 4`. For 1, 2 and 3 hosts (real `hanarang serve` processes on the
//! server `HANARANG_TEST_POSTGRES` names, by default the machine's own): sprints delivered
//! per minute, and the claim latency (queued → planning) at p50 and p99. Then, with two
//! hosts, one is killed (`kill -9`) while it runs sisters: how long until its sprints run
//! again on the other. Targets (docs/benchmarks/several-hosts.md): three hosts move at
//! least 2.7× the sprints of one; a lost host's sprints run again within `lease_ttl` + 5 s.

#[allow(dead_code)] // the machine line of what both benchmarks print
#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)] // the benchmark uses a part of the tests' support
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use hanarang::pipeline::State;
use hanarang::store::{CommandKind, Store};
use support::TempDir;
use support::db::{Engine, TestDb};
use support::hosts::{Host, HostSetup};

const PROJECTS: usize = 30;
const SISTER_SECONDS: &str = "1";
const MAX_SISTERS: u32 = 4;
/// Sprints per host in a throughput round: each host keeps its 4 sisters busy.
const SPRINTS_PER_HOST: usize = 30;
const LEASE_TTL: Duration = Duration::from_secs(10);

fn start(dir: &Path, url: &str, name: &str) -> Host {
    let projects: Vec<String> = (0..PROJECTS).map(|p| format!("p{p}")).collect();
    let ttl = format!("{}s", LEASE_TTL.as_secs());
    Host::start(
        &common::hanarang_binary(),
        dir,
        url,
        &HostSetup {
            name,
            projects: &projects,
            lease_ttl: &ttl,
            max_sisters: Some(MAX_SISTERS),
            sister_seconds: SISTER_SECONDS,
            log_level: "warn",
            extra: "",
        },
    )
}

/// Queues `n` sprints, spread over the projects.
async fn queue(store: &Store, n: usize) {
    for i in 0..n {
        store
            .create_sprint(
                &format!("p{}", i % PROJECTS),
                "bench",
                None,
                "cli:bench@bench",
                "b/{sprint_lower}",
                hanarang::clock::now_ms(),
            )
            .await
            .expect("queue a sprint");
    }
}

/// A fresh database and folder with `hosts` hosts serving every project.
async fn cluster(hosts: usize) -> (TestDb, TempDir, Vec<Host>, Store) {
    let db = TestDb::new(Engine::Postgres, "bench-hosts").await;
    let dir = TempDir::new("bench-hosts");
    // The first host sets the database up; the others join it.
    let mut started = vec![start(dir.path(), &db.url, "h1")];
    let store = loop {
        if let Ok(store) = Store::open_existing(&db.url).await {
            break store;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for n in 2..=hosts {
        started.push(start(dir.path(), &db.url, &format!("h{n}")));
    }
    (db, dir, started, store)
}

/// Approves every sprint waiting in `done` (the human), until all `n` are deployed.
async fn deliver(store: &Store, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let sprints = store.sprints().await.expect("read the sprints");
        let pending = store.pending_commands().await.unwrap_or_default();
        for s in sprints.iter().filter(|s| s.state == State::Done) {
            if !pending.iter().any(|c| c.sprint_id == s.id) {
                let _ = store
                    .submit_command(
                        &s.id,
                        CommandKind::Approve,
                        None,
                        "bench",
                        None,
                        hanarang::clock::now_ms(),
                    )
                    .await;
            }
        }
        if sprints
            .iter()
            .filter(|s| s.state == State::Deployed)
            .count()
            >= n
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the sprints were not delivered in 15 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One throughput round: `hosts` hosts, `SPRINTS_PER_HOST` sprints each, spread over the
/// projects. Returns sprints per minute and the claim latencies (ms).
async fn round(hosts: usize) -> (f64, Vec<i64>) {
    let (_db, _dir, started, store) = cluster(hosts).await;
    let n = SPRINTS_PER_HOST * hosts;
    let t = Instant::now();
    queue(&store, n).await;
    deliver(&store, n).await;
    let per_minute = n as f64 / t.elapsed().as_secs_f64() * 60.0;
    let mut claims = Vec::new();
    for s in store.sprints().await.expect("read the sprints") {
        let log = store.transitions(&s.id).await.expect("a sprint's log");
        if let Some(planning) = log.iter().find(|t| t.to == State::Planning) {
            claims.push(planning.at - s.created_at);
        }
    }
    claims.sort_unstable();
    drop(started);
    (per_minute, claims)
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Two hosts; the one running sisters is killed: how long until one of its sprints runs
/// again on the other host.
async fn takeover() -> Duration {
    let (_db, _dir, mut started, store) = cluster(2).await;
    queue(&store, 8).await;
    // Wait until h1 runs a sister, then kill it.
    let victim = loop {
        let mut found = None;
        for s in store.sprints().await.expect("read the sprints") {
            if s.host.as_deref() == Some("h1")
                && s.state.stage().is_some()
                && s.state != State::Deploying
                && store
                    .runs(&s.id)
                    .await
                    .unwrap_or_default()
                    .iter()
                    .any(|r| r.outcome.is_none())
            {
                found = Some(s);
                break;
            }
        }
        if let Some(s) = found {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let before = store.runs(&victim.id).await.unwrap_or_default().len();
    let killed = Instant::now();
    started[0].signal(nix::sys::signal::Signal::SIGKILL);
    loop {
        let runs = store.runs(&victim.id).await.unwrap_or_default();
        if runs.len() > before {
            let elapsed = killed.elapsed();
            started.remove(0);
            return elapsed;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(120),
            "{} never ran again",
            victim.id
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "hosts benchmark: {PROJECTS} projects, sisters of {SISTER_SECONDS} s, max_sisters = {MAX_SISTERS}, {SPRINTS_PER_HOST} sprints per host; {}",
        common::machine()
    );
    let mut rates = Vec::new();
    for hosts in 1..=3 {
        let (per_minute, claims) = rt.block_on(round(hosts));
        println!(
            "{hosts} host(s): {per_minute:.1} sprints/min; claim latency (queued → planning) p50 {} ms, p99 {} ms",
            percentile(&claims, 0.5),
            percentile(&claims, 0.99)
        );
        rates.push(per_minute);
    }
    println!(
        "3 hosts / 1 host: {:.2}× (target ≥ 2.7×)",
        rates[2] / rates[0]
    );
    let back = rt.block_on(takeover());
    println!(
        "a killed host's sprint ran again on the other after {:.1} s (lease_ttl {} s; target ≤ {} s)",
        back.as_secs_f64(),
        LEASE_TTL.as_secs(),
        LEASE_TTL.as_secs() + 5
    );
}
