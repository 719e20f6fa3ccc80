//! Several orchestrator hosts on one PostgreSQL database: real `hanarang serve`
//! processes, each project served by two of them, one killed (`kill -9`) and one frozen
//! (`SIGSTOP` past its lease, then `SIGCONT`). Every sprint must still end deployed, no
//! two runs of one sprint may overlap, and the frozen host's late writes are refused.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hanarang::orchestrator::client::{self, Request};
use hanarang::pipeline::{Policy, State};
use hanarang::store::{CommandKind, HostRecord, Run, Sprint, Store};
use nix::sys::signal::Signal;

use crate::support::TempDir;
use crate::support::db::{Engine, TestDb};
use crate::support::fake_discord::{FakeConfig, FakeDiscord};
use crate::support::hosts::{Host, HostSetup};
use crate::support::pipeline::assert_log_is_whole;

mod frozen_before_spawn;

/// Waits in these tests are for other processes' leases to run out: far longer than the
/// pipeline's own.
const PATIENCE: Duration = Duration::from_secs(180);
const LEASE_TTL: &str = "2s";

fn start(dir: &Path, url: &str, name: &'static str, projects: &[&str], discord: &str) -> Host {
    let projects: Vec<String> = projects.iter().map(|p| p.to_string()).collect();
    Host::start(
        Path::new(env!("CARGO_BIN_EXE_hanarang")),
        dir,
        url,
        &HostSetup {
            name,
            projects: &projects,
            lease_ttl: LEASE_TTL,
            max_sisters: None,
            sister_seconds: "0.4",
            log_level: "hanarang=info",
            extra: discord,
        },
    )
}

/// Polls `check` until it gives a value; panics naming `what` (and the hosts' logs) after
/// `PATIENCE`.
async fn until<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    hosts: &[&Host],
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            let logs: Vec<String> = hosts
                .iter()
                .map(|h| format!("--- {} ---\n{}", h.name, h.log()))
                .collect();
            panic!("never happened: {what}\n{}", logs.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn sprints(store: &Store) -> Vec<Sprint> {
    store.sprints().await.expect("read the sprints")
}

async fn host(store: &Store, name: &str) -> Option<HostRecord> {
    store
        .hosts()
        .await
        .expect("read the hosts")
        .expect("a PostgreSQL database")
        .into_iter()
        .find(|h| h.name == name)
}

/// A sprint `name` owns whose sister runs (in a stage, a run not ended).
async fn running_on(store: &Store, name: &str) -> Option<Sprint> {
    for s in sprints(store).await {
        if s.host.as_deref() == Some(name)
            && s.state.stage().is_some()
            && s.state != State::Deploying
            && store
                .runs(&s.id)
                .await
                .ok()?
                .iter()
                .any(|r| r.outcome.is_none())
        {
            return Some(s);
        }
    }
    None
}

/// Each run's start and end as the sisters logged them, by sprint.
fn run_times(state: &Path) -> BTreeMap<String, Vec<(String, u128, Option<u128>)>> {
    let text = std::fs::read_to_string(state.join("runs.log")).unwrap_or_default();
    let mut by_sprint: BTreeMap<String, Vec<(String, u128, Option<u128>)>> = BTreeMap::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let [what, sprint, run, at] = parts[..] else {
            panic!("a bad line in runs.log: {line:?}");
        };
        let at: u128 = at.parse().expect("a time in runs.log");
        let runs = by_sprint.entry(sprint.to_string()).or_default();
        match what {
            "start" => runs.push((run.to_string(), at, None)),
            "end" => {
                let started = runs
                    .iter_mut()
                    .rev()
                    .find(|(r, _, end)| r == run && end.is_none())
                    .unwrap_or_else(|| panic!("{run} ended without a start"));
                started.2 = Some(at);
            }
            _ => panic!("a bad line in runs.log: {line:?}"),
        }
    }
    by_sprint
}

/// A human beside the hosts until every sprint is deployed: each `done` is approved, and
/// a deploy that a lost host interrupted (it escalates) is resumed. Any other escalation,
/// or an abort, is the task's error.
fn approve_until_deployed(store: Store) -> tokio::task::JoinHandle<Result<(), String>> {
    tokio::spawn(async move {
        loop {
            let now = sprints(&store).await;
            for s in &now {
                let kind = match s.state {
                    State::Done => CommandKind::Approve,
                    State::Escalated => {
                        let runs: Vec<Run> = store.runs(&s.id).await.unwrap_or_default();
                        let last = runs.last().map(|r| (r.actor, r.outcome));
                        if last
                            != Some((
                                hanarang::handoff::Actor::Erang,
                                Some(hanarang::sister::RunOutcome::Interrupted),
                            ))
                        {
                            return Err(format!("{} escalated: {last:?}", s.id));
                        }
                        CommandKind::Resume
                    }
                    State::Aborted => return Err(format!("{} was aborted", s.id)),
                    _ => continue,
                };
                let pending = store.pending_commands().await.unwrap_or_default();
                if pending.iter().any(|c| c.sprint_id == s.id) {
                    continue;
                }
                let request = Request {
                    sprint_id: &s.id,
                    kind,
                    text: None,
                    by: "test",
                    seq: None,
                };
                let _ =
                    client::submit(&store, &Policy::default(), request, None, Duration::ZERO).await;
            }
            if now.iter().all(|s| s.state == State::Deployed) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// Each of a sprint's runs (`run_times`) ended before the next started; sorts them by
/// their start.
fn assert_one_at_a_time(sprint: &str, runs: &mut [(String, u128, Option<u128>)]) {
    runs.sort_by_key(|(_, start, _)| *start);
    for pair in runs.windows(2) {
        let (first, _, end) = &pair[0];
        let (next, start, _) = &pair[1];
        let end = end.unwrap_or_else(|| panic!("{first} of {sprint} never ended"));
        assert!(
            end <= *start,
            "{sprint}: {next} started before {first} ended"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn three_hosts_survive_a_killed_and_a_frozen_host_and_deliver_every_sprint() {
    let db = TestDb::new(Engine::Postgres, "hosts").await;
    let dir = TempDir::new("hosts");
    for project in ["p1", "p2", "p3"] {
        std::fs::create_dir_all(dir.path().join(project)).expect("a workdir");
    }
    std::fs::create_dir_all(dir.path().join("sisters")).expect("the sisters' folder");
    // Each project is served by two hosts.
    // One bot among them, posting to the fake Discord.
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let c = fake.config();
    let discord = format!(
        "[discord]\ntoken_env = \"HANARANG_TEST_DISCORD_TOKEN\"\nguild_id = {}\nforum_channel_id = {}\nuser_id = 500\nhttp_proxy = \"{}\"\n",
        c.guild_id,
        c.forum_channel_id,
        fake.base_url()
    );
    let h1 = start(dir.path(), &db.url, "h1", &["p1", "p3"], &discord);
    let h2 = start(dir.path(), &db.url, "h2", &["p1", "p2"], &discord);
    let h3 = start(dir.path(), &db.url, "h3", &["p2", "p3"], &discord);
    let all = [&h1, &h2, &h3];
    let store = until("the database is set up", &all, || async {
        Store::open_existing(&db.url).await.ok()
    })
    .await;
    for name in ["h1", "h2", "h3"] {
        until(&format!("{name} holds its lease"), &all, || async {
            host(&store, name).await.filter(|h| !h.expired)
        })
        .await;
    }
    for n in 0..4 {
        for project in ["p1", "p2", "p3"] {
            store
                .create_sprint(
                    project,
                    &format!("goal {n}"),
                    None,
                    "cli:tester@test",
                    "feature/{sprint_lower}",
                    hanarang::clock::now_ms(),
                )
                .await
                .expect("queue a sprint");
        }
    }
    // A human meanwhile.
    let human = approve_until_deployed(store.clone());

    // kill -9 a host while one of its sisters runs.
    let (killed, lost) = until("a host runs a sister", &all, || async {
        for h in &all {
            if let Some(s) = running_on(&store, &h.name).await {
                return Some((*h, s));
            }
        }
        None
    })
    .await;
    killed.signal(Signal::SIGKILL);
    until(
        &format!("{} is taken over from {}", lost.id, killed.name),
        &all,
        || async {
            store
                .sprint(&lost.id)
                .await
                .ok()
                .flatten()
                .filter(|s| s.host.as_deref().is_some_and(|h| h != killed.name))
        },
    )
    .await;

    // Freeze one of the two others past its lease while it runs a sister of the project
    // both serve (held at its start, so it is surely running): the other one takes it
    // over.
    let survivors: Vec<&Host> = all
        .iter()
        .copied()
        .filter(|h| h.name != killed.name)
        .collect();
    let shared = match killed.name.as_str() {
        "h1" => "p2",
        "h2" => "p3",
        _ => "p1",
    };
    let hold = dir.path().join(shared).join("HOLD");
    std::fs::write(&hold, "").expect("hold the next sister");
    let held = dir.path().join(shared).join("HELD");
    let (frozen_host, frozen) = until(
        &format!("a survivor runs a sister of {shared}, held"),
        &all,
        || async {
            let text = std::fs::read_to_string(&held).ok()?;
            let (sprint, run) = text.trim().split_once(' ')?;
            let s = store.sprint(sprint).await.ok()??;
            let running = store
                .runs(sprint)
                .await
                .ok()?
                .iter()
                .any(|r| r.run_id == run && r.outcome.is_none());
            let host = survivors
                .iter()
                .find(|h| running && s.host.as_deref() == Some(h.name.as_str()))?;
            Some((*host, s))
        },
    )
    .await;
    let taker = survivors
        .iter()
        .find(|h| h.name != frozen_host.name)
        .expect("the other survivor");
    frozen_host.signal(Signal::SIGSTOP);
    until(
        &format!(
            "{} takes {} over from the frozen {}",
            taker.name, frozen.id, frozen_host.name
        ),
        &all,
        || async {
            store
                .sprint(&frozen.id)
                .await
                .ok()
                .flatten()
                .filter(|s| s.host.as_deref() == Some(taker.name.as_str()))
        },
    )
    .await;
    std::fs::remove_file(&hold).expect("release the held sisters");
    frozen_host.signal(Signal::SIGCONT);

    let delivered = tokio::time::timeout(PATIENCE, human).await;
    match delivered {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => panic!("{e}"),
        Ok(Err(e)) => panic!("the human's task failed: {e}"),
        Err(_) => {
            let logs: Vec<String> = all
                .iter()
                .map(|h| format!("--- {} ---\n{}", h.name, h.log()))
                .collect();
            let states: Vec<(String, State, Option<String>)> = sprints(&store)
                .await
                .into_iter()
                .map(|s| (s.id, s.state, s.host))
                .collect();
            panic!(
                "not every sprint was deployed: {states:?}\n{}",
                logs.join("\n")
            );
        }
    }

    for s in sprints(&store).await {
        assert_log_is_whole(&store.transitions(&s.id).await.expect("a sprint's log"));
    }
    // One forum post per sprint, every line in it once, through whichever bot ran then.
    // (Two bots that each made a post for one sprint across a failover: the second
    // one's board points to the first, and it has no lines.)
    let posts_of = |f: &FakeDiscord| -> Vec<_> {
        f.threads()
            .into_iter()
            .filter(|t| {
                !f.message(t.id)
                    .is_some_and(|board| board.content.contains("에서 이어집니다"))
            })
            .collect()
    };
    let posts_done = |f: &FakeDiscord| {
        let threads = posts_of(f);
        threads.len() == 12
            && threads.iter().all(|t| {
                f.messages(t.id)
                    .iter()
                    .any(|m| m.content.contains("배포 완료"))
            })
    };
    assert!(
        fake.wait_until(PATIENCE, posts_done).await,
        "every sprint's post ends with its deploy: {:#?}\n{}",
        fake.threads()
            .iter()
            .map(|t| (
                t.name.clone(),
                fake.messages(t.id)
                    .into_iter()
                    .map(|m| m.content)
                    .collect::<Vec<_>>()
            ))
            .collect::<Vec<_>>(),
        all.iter()
            .map(|h| format!("--- {} ---\n{}", h.name, h.log()))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for t in fake.threads() {
        if !posts_of(&fake).iter().any(|p| p.id == t.id) {
            assert_eq!(
                fake.messages(t.id).len(),
                1,
                "a pointer post has only its board"
            );
            continue;
        }
        let lines: Vec<String> = fake
            .messages(t.id)
            .into_iter()
            .filter(|m| m.id != t.id)
            .map(|m| m.content)
            .collect();
        let mut unique = lines.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            lines.len(),
            "a line posted twice in {}: {lines:#?}",
            t.name
        );
    }
    // No two runs of one sprint overlapped, nor two sprints of one project (its pipeline
    // lock), on whichever hosts they ran.
    let times = run_times(&dir.path().join("sisters"));
    let mut spans: BTreeMap<String, Vec<(u128, u128, String)>> = BTreeMap::new();
    for (sprint, mut runs) in times {
        assert_one_at_a_time(&sprint, &mut runs);
        let project = store
            .sprint(&sprint)
            .await
            .expect("read a sprint")
            .expect("a sprint the sisters ran")
            .project;
        let first = runs.first().map_or(0, |r| r.1);
        let last = runs.iter().filter_map(|r| r.2).max().unwrap_or(first);
        spans
            .entry(project)
            .or_default()
            .push((first, last, sprint));
    }
    for (project, mut sprints) in spans {
        sprints.sort();
        for pair in sprints.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "{project}: {} ran while {} still did",
                pair[1].2,
                pair[0].2
            );
        }
    }
    // The frozen host came back to a database that had given its sprint away: what it
    // then tried to write for it was refused, and it says so.
    let frozen_log = frozen_host.log();
    assert!(
        frozen_log.contains(&format!("{} was taken over by another host", frozen.id)),
        "{frozen_log}"
    );
    assert!(
        frozen_log.contains("this host's lease ran out"),
        "{frozen_log}"
    );
    // The killed host's lease is expired; the others' are not: as `hanarang hosts` says.
    let config = dir.path().join(format!("{}.toml", taker.name));
    let hanarang = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hanarang"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .expect("run hanarang");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let listed: serde_json::Value =
        serde_json::from_slice(&hanarang(&["hosts", "--json"])).expect("hosts --json");
    let listed = listed.as_array().expect("an array of hosts");
    assert_eq!(listed.len(), 3, "{listed:#?}");
    for h in &all {
        let record = listed
            .iter()
            .find(|r| r["name"] == h.name.as_str())
            .unwrap_or_else(|| panic!("{} is not listed: {listed:#?}", h.name));
        assert_eq!(record["expired"], h.name == killed.name, "{record}");
        assert!(
            record["projects"].as_array().is_some_and(|p| p.len() == 2),
            "{record}"
        );
        assert_eq!(
            record["sprints"],
            serde_json::json!([]),
            "every sprint is deployed: {record}"
        );
    }
    let text = String::from_utf8(hanarang(&["hosts"])).expect("text");
    assert!(
        text.contains(&format!("{}  EXPIRED", killed.name)),
        "{text}"
    );
    let status: serde_json::Value =
        serde_json::from_slice(&hanarang(&["sprint", "status", "--json"])).expect("status --json");
    for s in status.as_array().expect("an array of sprints") {
        let owner = s["host"].as_str().unwrap_or_else(|| panic!("no host: {s}"));
        assert!(["h1", "h2", "h3"].contains(&owner), "{s}");
    }
}
