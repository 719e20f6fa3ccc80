//! A host frozen between recording a run and starting its sister (issue 41), on real
//! `hanarang serve` processes sharing one PostgreSQL database: stopped (`SIGSTOP`) there,
//! its sprint taken over by another host whose sister then works in the workdir, and
//! woken (`SIGCONT`). Its own sister must never start (two agents would work in one
//! workdir at once), and the sprint must still end deployed, nothing lost.
//!
//! Where the host stops is held from outside, never timed: the run's contract file is a
//! FIFO the test made, its pipe shrunk to a page, far less than the contract. A move into
//! a stage commits its run, then writes the run's files (`Composed::prepare`), then
//! spawns; so the host waits in `write(2)` with its run on record (checked) until the
//! test reads, and is frozen there. No hook in hanarang is needed, so none can be reached
//! by a user.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use hanarang::pipeline::State;
use hanarang::sister::{ContractFile, RunOutcome};
use hanarang::store::Store;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::signal::Signal;
use nix::sys::stat::Mode;

use super::{LEASE_TTL, PATIENCE, approve_until_deployed, assert_one_at_a_time, run_times, until};
use crate::support::TempDir;
use crate::support::db::{Engine, TestDb};
use crate::support::hosts::{Host, HostSetup};
use crate::support::pipeline::assert_log_is_whole;

/// The pipe behind the contract FIFO holds this much (a page, the least a pipe holds).
const PIPE_BYTES: i32 = 4096;

/// A host serving `p1`, which logs each sister it spawns (the supervisor's debug line).
fn start(dir: &Path, url: &str, name: &'static str) -> Host {
    Host::start(
        Path::new(env!("CARGO_BIN_EXE_hanarang")),
        dir,
        url,
        &HostSetup {
            name,
            projects: &["p1".to_string()],
            lease_ttl: LEASE_TTL,
            max_sisters: None,
            sister_seconds: "0.2",
            log_level: "hanarang=info,hanarang::sister::supervise=debug",
            extra: "",
        },
    )
}

/// What a read of the FIFO (opened without blocking) found.
enum Fifo {
    Bytes(Vec<u8>),
    /// Nothing there now; the writer still has it open.
    Empty,
    /// No writer has it open: none yet, or the one there was closed it.
    NoWriter,
}

fn read_fifo(fifo: &File, max: usize) -> Fifo {
    let mut buf = vec![0; max];
    let mut reader = fifo;
    match reader.read(&mut buf) {
        Ok(0) => Fifo::NoWriter,
        Ok(n) => {
            buf.truncate(n);
            Fifo::Bytes(buf)
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Fifo::Empty,
        Err(e) => panic!("cannot read the contract FIFO: {e}"),
    }
}

/// A log line of the span of run `run` (`run=ID` as the span's last field or not).
fn of_run(line: &str, run: &str) -> bool {
    line.contains(&format!("run={run}}}")) || line.contains(&format!("run={run} "))
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn a_host_frozen_between_recording_a_run_and_its_spawn_never_starts_that_sister() {
    let db = TestDb::new(Engine::Postgres, "frozen-spawn").await;
    let dir = TempDir::new("frozen-spawn");
    let workdir = dir.path().join("p1");
    std::fs::create_dir_all(&workdir).expect("a workdir");
    let store = Store::open(&db.url).await.expect("set up the database");
    // The first sprint is the one whose host freezes; the second shows the queue goes on.
    // Its goal (which the contract quotes) is long: the contract is far more than a pipe.
    let mut queued = Vec::new();
    for goal in ["a goal. ".repeat(1024), "goal 1".to_string()] {
        let s = store
            .create_sprint(
                "p1",
                &goal,
                None,
                "cli:tester@test",
                "feature/{sprint_lower}",
                hanarang::clock::now_ms(),
            )
            .await
            .expect("queue a sprint");
        queued.push(s.id);
    }
    let sprint = queued[0].clone();

    // Its contract file (the hosts share this machine's runs folder) is a FIFO, opened by
    // the test before any host starts, so a host's open of it never waits: its write does.
    let contract = store.contract_path(&sprint);
    std::fs::create_dir_all(contract.parent().expect("a runs folder")).expect("the runs folder");
    nix::unistd::mkfifo(contract.as_path(), Mode::S_IRUSR | Mode::S_IWUSR)
        .expect("a FIFO as the contract file");
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(&contract)
        .expect("open the contract FIFO");
    fcntl(&reader, FcntlArg::F_SETPIPE_SZ(PIPE_BYTES)).expect("shrink the FIFO's pipe");
    let pipe_bytes = fcntl(&reader, FcntlArg::F_GETPIPE_SZ).expect("the FIFO's pipe size");
    let pipe_bytes = usize::try_from(pipe_bytes).expect("a size");

    // h1, alone, claims the sprint and records its planner run, then writes the run's
    // contract until the pipe is full. The test reads a few bytes of it: h1 cannot finish
    // its write (checked below once it has).
    let h1 = start(dir.path(), &db.url, "h1");
    // Dropped before h1 (declared after it), should the test fail: a host held in its
    // write is let go (`EPIPE`) and can stop, where dropping h1 first would wait forever.
    let fifo = reader;
    let head = until("h1 writes the first run's contract", &[&h1], || {
        std::future::ready(match read_fifo(&fifo, 64) {
            Fifo::Bytes(bytes) => Some(bytes),
            Fifo::Empty | Fifo::NoWriter => None,
        })
    })
    .await;
    let claimed = store
        .sprint(&sprint)
        .await
        .expect("read the sprint")
        .expect("the sprint");
    assert_eq!(claimed.host.as_deref(), Some("h1"), "{claimed:?}");
    assert_eq!(claimed.state, State::Planning, "{claimed:?}");
    let runs = store.runs(&sprint).await.expect("the sprint's runs");
    let [recorded] = &runs[..] else {
        panic!("h1 recorded one run before writing its contract: {runs:#?}");
    };
    assert_eq!(recorded.outcome, None, "{recorded:?}");
    let frozen_run = recorded.run_id.clone();

    h1.signal(Signal::SIGSTOP);
    // The FIFO's name goes (h1 keeps the pipe it opened): the next host writes a file of
    // its own there.
    std::fs::remove_file(&contract).expect("unlink the contract FIFO");
    // h2 takes the sprint over once h1's lease ran out; its sister then holds in the
    // workdir (`timed.sh`, while HOLD is there) for as long as the test needs.
    std::fs::write(workdir.join("HOLD"), "").expect("hold the next sister");
    let h2 = start(dir.path(), &db.url, "h2");
    let hosts = [&h1, &h2];
    let taker_run = until(
        &format!("h2 takes {sprint} over and runs its sister"),
        &hosts,
        || async {
            let held = std::fs::read_to_string(workdir.join("HELD")).ok()?;
            let (held_sprint, run) = held.trim().split_once(' ')?;
            let owner = store.sprint(held_sprint).await.ok()??.host;
            (held_sprint == sprint && owner.as_deref() == Some("h2")).then(|| run.to_string())
        },
    )
    .await;
    assert_ne!(taker_run, frozen_run);

    // Woken, h1 writes the rest of its contract and goes on towards the spawn.
    h1.signal(Signal::SIGCONT);
    let mut rest = Vec::new();
    until("h1 finishes writing the contract", &hosts, || {
        std::future::ready(match read_fifo(&fifo, 64 * 1024) {
            Fifo::Bytes(bytes) => {
                rest.extend(bytes);
                None
            }
            Fifo::Empty => None,
            Fifo::NoWriter => Some(()),
        })
    })
    .await;
    let written = [head.as_slice(), rest.as_slice()].concat();
    assert!(
        written.len() > head.len() + pipe_bytes,
        "the contract ({} bytes) fits the pipe ({pipe_bytes}) beside what was read ({}): h1 was not held in its write",
        written.len(),
        head.len()
    );
    let written: ContractFile = serde_json::from_slice(&written).expect("the contract h1 wrote");
    assert_eq!(written.run_id, frozen_run);

    // h1 ends that run without its sister, which never started. The supervisor's line is
    // what tells: a sister's own line in `runs.log` may never be written if it is stopped
    // (h1's lease ran out) before it gets there.
    let ended = until(&format!("h1 ends {frozen_run}"), &hosts, || {
        std::future::ready(
            h1.log()
                .lines()
                .find(|l| of_run(l, &frozen_run) && l.contains("run ended"))
                .map(str::to_string),
        )
    })
    .await;
    assert!(
        ended.contains("outcome=interrupted") && ended.contains("not started"),
        "{ended}"
    );
    let spawned = |host: &Host, run: &str| {
        host.log()
            .lines()
            .any(|l| of_run(l, run) && l.contains("sister spawned"))
    };
    assert!(
        spawned(&h2, &taker_run),
        "h2's log names the sister it spawned:\n{}",
        h2.log()
    );
    assert!(
        !spawned(&h1, &frozen_run),
        "h1 spawned {frozen_run}'s sister after it lost {sprint}:\n{}",
        h1.log()
    );
    let sisters = dir.path().join("sisters");
    assert!(
        !run_times(&sisters)
            .get(&sprint)
            .is_some_and(|runs| runs.iter().any(|(run, ..)| *run == frozen_run)),
        "{frozen_run}'s sister ran: {:?}",
        run_times(&sisters)
    );

    // The sprint ends on h2, and the queue goes on.
    std::fs::remove_file(workdir.join("HOLD")).expect("release the held sister");
    match tokio::time::timeout(PATIENCE, approve_until_deployed(store.clone())).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => panic!("{e}"),
        Ok(Err(e)) => panic!("the human's task failed: {e}"),
        Err(_) => panic!(
            "not every sprint was deployed\n--- h1 ---\n{}\n--- h2 ---\n{}",
            h1.log(),
            h2.log()
        ),
    }
    let done = store
        .sprint(&sprint)
        .await
        .expect("read the sprint")
        .expect("the sprint");
    assert_eq!(
        (done.state, done.host.as_deref()),
        (State::Deployed, Some("h2"))
    );
    for id in &queued {
        assert_log_is_whole(&store.transitions(id).await.expect("a sprint's log"));
        for run in store.runs(id).await.expect("a sprint's runs") {
            let expected = (run.run_id == frozen_run).then_some(RunOutcome::Interrupted);
            assert!(
                run.outcome.is_some() && expected.is_none_or(|o| run.outcome == Some(o)),
                "{run:?}"
            );
        }
    }
    assert!(
        store
            .pending_commands()
            .await
            .expect("the commands")
            .is_empty(),
        "every command answered"
    );
    for (id, mut runs) in run_times(&sisters) {
        assert_one_at_a_time(&id, &mut runs);
    }
    let log = h1.log();
    assert!(
        log.contains(&format!("{sprint} was taken over by another host")),
        "{log}"
    );
}
