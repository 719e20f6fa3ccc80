//! `kill -9` of a real `hanarang serve` in the middle of a stage, then a restart: the
//! in-flight run is recorded as interrupted, its sister's process group is killed, and the
//! sprint goes on — re-run for planning and reviewing, escalated for a deploy. The
//! transitions log has no gap and no duplicate. On each engine: with PostgreSQL the
//! restarted host takes its name back from the dead process and recovers its sprints.

use std::process::{Child, Command};
use std::time::Duration;

use hanarang::handoff::message::Actor;
use hanarang::pipeline::State;
use hanarang::pipeline::fsm::{Escalation, Note};
use hanarang::sister::RunOutcome;
use hanarang::store::Store;

use crate::support::db::on_each_engine;
use crate::support::pipeline::{Files, PATIENCE, Setup, assert_log_is_whole, wait_for};
use crate::support::{alive, commit_event, record_planner_run};

pub(crate) struct Serve {
    child: Child,
}

impl Serve {
    pub(crate) fn start(files: &Files, log: &str) -> Serve {
        let log = std::fs::File::create(files.dir.path().join(log)).expect("log file");
        let child = files
            .serve()
            .stderr(log)
            .spawn()
            .expect("start hanarang serve");
        Serve { child }
    }

    /// SIGKILL: no cleanup of any kind.
    pub(crate) fn kill_9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and the exit code.
    fn stop(mut self) -> Option<i32> {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        self.child.wait().ok().and_then(|s| s.code())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the sister of `actor` hangs, with its run recorded in the database.
async fn hanging(files: &Files, store: &Store, actor: Actor) -> u32 {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let recorded = store
            .runs_in_flight()
            .await
            .unwrap()
            .iter()
            .any(|r| r.actor == actor);
        if recorded && let Some(pid) = files.hanging_pid(actor) {
            return pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{actor} never started hanging; serve said:\n{}\nruns: {:#?}",
            std::fs::read_to_string(files.dir.path().join("serve-1.log")).unwrap_or_default(),
            store.runs("SPRINT-001").await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn cli(files: &Files, args: &[&str]) -> String {
    let out = files.hanarang(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Kills serve while `actor` runs, restarts it, and returns the store and the sister's pid.
async fn crash_during(files: &Files, actor: Actor, approve_first: bool) -> (Store, u32) {
    let serve = Serve::start(files, "serve-1.log");
    let store = Store::open(&files.config().database.url).await.unwrap();
    let id = cli(files, &["sprint", "start", "Add a login page"]);
    assert_eq!(id, "SPRINT-001");
    if approve_first {
        wait_for(&store, &id, |s| s.state == State::Done, "done").await;
        assert!(cli(files, &["sprint", "approve", &id]).contains("done → deploying"));
    }
    let pid = hanging(files, &store, actor).await;
    serve.kill_9();
    assert_eq!(
        alive(&[pid]),
        vec![pid],
        "the sister outlives the killed orchestrator"
    );
    (store, pid)
}

on_each_engine! {
async fn a_crash_while_planning_reruns_the_planner(engine) {
    let files = Files::new(&Setup {
        harang: "hang-first 1",
        engine,
        ..Setup::default()
    });
    let (store, pid) = crash_during(&files, Actor::Harang, false).await;
    let serve = Serve::start(&files, "serve-2.log");
    wait_for(&store, "SPRINT-001", |s| s.state == State::Done, "done").await;
    assert_eq!(
        alive(&[pid]),
        Vec::<u32>::new(),
        "the restart killed the orphaned sister"
    );
    let runs = store.runs("SPRINT-001").await.unwrap();
    assert_eq!(runs[0].outcome, Some(RunOutcome::Interrupted));
    assert_eq!(
        (runs[1].actor, runs[1].attempt),
        (Actor::Harang, 2),
        "planning re-ran as a new attempt"
    );
    let log = store.transitions("SPRINT-001").await.unwrap();
    assert_log_is_whole(&log);
    assert_eq!(
        log.iter()
            .filter(|t| t.event == "failed:interrupted")
            .count(),
        1
    );
    assert_eq!(serve.stop(), Some(0));
}
}

on_each_engine! {
async fn a_crash_while_reviewing_reruns_the_reviewer(engine) {
    let files = Files::new(&Setup {
        darang: "hang-first 1",
        engine,
        ..Setup::default()
    });
    let (store, pid) = crash_during(&files, Actor::Darang, false).await;
    let serve = Serve::start(&files, "serve-2.log");
    wait_for(&store, "SPRINT-001", |s| s.state == State::Done, "done").await;
    assert_eq!(alive(&[pid]), Vec::<u32>::new());
    let runs = store.runs("SPRINT-001").await.unwrap();
    let reviews: Vec<_> = runs.iter().filter(|r| r.actor == Actor::Darang).collect();
    assert_eq!(reviews.len(), 2);
    assert_eq!(reviews[0].outcome, Some(RunOutcome::Interrupted));
    assert_eq!(reviews[1].outcome, Some(RunOutcome::Handoff));
    assert_log_is_whole(&store.transitions("SPRINT-001").await.unwrap());
    assert_eq!(serve.stop(), Some(0));
}
}

on_each_engine! {
async fn a_crash_while_deploying_escalates_and_never_redeploys_without_a_human(engine) {
    let files = Files::new(&Setup {
        erang: "hang-first 1",
        engine,
        ..Setup::default()
    });
    let (store, pid) = crash_during(&files, Actor::Erang, true).await;
    let serve = Serve::start(&files, "serve-2.log");
    let escalated = wait_for(
        &store,
        "SPRINT-001",
        |s| s.state == State::Escalated,
        "escalated",
    )
    .await;
    assert_eq!(alive(&[pid]), Vec::<u32>::new());
    let log = store.transitions("SPRINT-001").await.unwrap();
    assert_log_is_whole(&log);
    assert!(matches!(
        log.last().unwrap().note,
        Some(Note::Escalated {
            escalation: Escalation::DeployInterrupted { .. }
        })
    ));
    let deploys =
        |runs: &[hanarang::store::Run]| runs.iter().filter(|r| r.actor == Actor::Erang).count();
    assert_eq!(
        deploys(&store.runs("SPRINT-001").await.unwrap()),
        1,
        "no second deploy on its own"
    );
    assert_eq!(
        escalated.resume.map(|r| r.stage.to_string()),
        Some("deploying".into())
    );

    // A human's word re-runs it.
    assert!(cli(&files, &["sprint", "resume", "SPRINT-001"]).contains("escalated → deploying"));
    wait_for(
        &store,
        "SPRINT-001",
        |s| s.state == State::Deployed,
        "deployed",
    )
    .await;
    assert_eq!(deploys(&store.runs("SPRINT-001").await.unwrap()), 2);
    assert_log_is_whole(&store.transitions("SPRINT-001").await.unwrap());
    assert_eq!(serve.stop(), Some(0));
}
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_serve_is_refused_with_the_holders_pid() {
    let files = Files::new(&Setup::default());
    let first = Serve::start(&files, "serve-1.log");
    let store = Store::open(&files.config().database.url).await.unwrap();
    // Wait until the first holds the lease.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while store.lease().await.unwrap().is_none() {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = files.hanarang(&["serve"]);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "another orchestrator already runs on this database: pid {}",
            first.child.id()
        )),
        "{stderr}"
    );
    assert_eq!(first.stop(), Some(0));
}

/// On a host with no cgroup v2 (`HANARANG_CGROUP=off`), the next start finds an
/// interrupted run's sister by its environment (its run, and this database's contract
/// file) and kills its group. A process that carries the same run id for another database
/// is left alone.
#[tokio::test(flavor = "multi_thread")]
async fn without_cgroups_a_sister_is_found_by_its_environment_and_another_databases_is_not() {
    use hanarang::pipeline::Event;
    use std::os::unix::process::CommandExt;

    let files = Files::new(&Setup::default());
    let config = std::sync::Arc::new(files.config());
    let store = Store::open(&config.database.url).await.unwrap();
    // SPRINT-001 in planning, its planner's run on record.
    let queued = store
        .create_sprint(
            "app",
            "goal",
            None,
            "cli:tester@test",
            &config.pipeline.branch_template,
            1,
        )
        .await
        .unwrap();
    commit_event(&store, &queued, &Event::LockAcquired, None, None, 2)
        .await
        .unwrap();
    let run_id = record_planner_run(&store, &queued.id).await;
    let ours = store.contract_path(&queued.id).display().to_string();
    let theirs = files
        .dir
        .path()
        .join("elsewhere.db.runs/SPRINT-001.contract.json");
    let sister = |contract_file: &str| {
        Command::new("sleep")
            .arg("600")
            .env("HANARANG_RUN_ID", &run_id)
            .env("HANARANG_CONTRACT_FILE", contract_file)
            .process_group(0)
            .spawn()
            .expect("spawn sleep")
    };
    let mut orphan = sister(&ours);
    let mut stranger = sister(&theirs.display().to_string());

    let log = std::fs::File::create(files.dir.path().join("serve.log")).expect("log file");
    let mut serve = files
        .serve()
        .env("HANARANG_CGROUP", "off")
        .stderr(log)
        .spawn()
        .expect("start hanarang serve");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while orphan.try_wait().unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the orphaned sister was not killed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its run is recorded as interrupted right after.
    while store.runs(&queued.id).await.unwrap()[0].outcome != Some(RunOutcome::Interrupted) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run was not recorded as interrupted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(
        stranger.try_wait().unwrap().is_none(),
        "another database's process was killed"
    );
    let _ = stranger.kill();
    let _ = stranger.wait();
}

on_each_engine! {
    /// A crash leaves a run's processes behind, a daemon hidden from every marker among
    /// them; the next start kills all that is left in the run's cgroup.
    async fn a_crashed_runs_hidden_daemon_is_killed_at_the_next_start(engine) {
        if hanarang::sister::container::available().is_err() {
            eprintln!("no cgroup v2 here: nothing to test");
            return;
        }
        let files = Files::new(&Setup {
            narang: "daemon hang",
            engine,
            ..Setup::default()
        });
        let serve = Serve::start(&files, "serve-1.log");
        cli(&files, &["sprint", "start", "Add a login page"]);
        let sister = files.wait_hanging(Actor::Narang).await;
        let daemon: u32 = std::fs::read_to_string(files.state_dir.join("daemon-narang.pid"))
            .expect("the daemon's pid")
            .trim()
            .parse()
            .expect("a pid");
        serve.kill_9();
        assert_eq!(alive(&[sister, daemon]), vec![sister, daemon], "a crash stops nothing");
        std::fs::remove_file(files.state_dir.join("narang.hanging")).expect("the hanging mark");

        let serve = Serve::start(&files, "serve-2.log");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !alive(&[sister, daemon]).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "left running after the restart: {:?}",
                alive(&[sister, daemon])
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The retry hangs with a daemon of its own: a clean stop ends both.
        files.wait_hanging(Actor::Narang).await;
        assert_eq!(serve.stop(), Some(0));
    }
}

on_each_engine! {
async fn a_crash_with_two_reviewers_reruns_only_the_one_without_a_verdict(engine) {
    let files = Files::new(&Setup {
        extra: crate::reviewers::two_reviewers("hang-first 1", "ok"),
        engine,
        ..Setup::default()
    });
    let serve = Serve::start(&files, "serve-1.log");
    let store = Store::open(&files.config().database.url).await.unwrap();
    let id = cli(&files, &["sprint", "start", "Add a login page"]);
    // Both reviewers started: one has answered, the other hangs.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let pid = loop {
        let runs = store.runs(&id).await.unwrap();
        let of = |name: &str| -> Vec<Option<RunOutcome>> {
            runs.iter()
                .filter(|r| r.reviewer.as_deref() == Some(name))
                .map(|r| r.outcome)
                .collect()
        };
        if of("runtime") == [Some(RunOutcome::Handoff)]
            && of("static") == [None]
            && let Some(pid) = files.hanging_pid(Actor::Darang)
        {
            break pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reviewers never stood so: {runs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    serve.kill_9();
    let serve = Serve::start(&files, "serve-2.log");
    wait_for(&store, &id, |s| s.state == State::Done, "done").await;
    assert_eq!(alive(&[pid]), Vec::<u32>::new(), "the hanging reviewer was killed");
    let runs = store.runs(&id).await.unwrap();
    let of = |name: &str| -> Vec<(u32, Option<RunOutcome>)> {
        runs.iter()
            .filter(|r| r.reviewer.as_deref() == Some(name))
            .map(|r| (r.attempt, r.outcome))
            .collect()
    };
    assert_eq!(
        of("static"),
        [(1, Some(RunOutcome::Interrupted)), (2, Some(RunOutcome::Handoff))],
        "the reviewer without a verdict ran again"
    );
    assert_eq!(
        of("runtime"),
        [(1, Some(RunOutcome::Handoff))],
        "the one that had answered did not"
    );
    let log = store.transitions(&id).await.unwrap();
    assert_log_is_whole(&log);
    assert!(
        log.iter().any(|t| t.event == "failed/static:interrupted"),
        "{log:#?}"
    );
    assert_eq!(serve.stop(), Some(0));
}
}
