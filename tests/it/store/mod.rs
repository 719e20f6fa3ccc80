//! The database as operators meet it, on each engine (`on_each_engine!`): several
//! processes opening a fresh database at once, bad rows reported, not panicked on, a
//! database from a newer hanarang refused, a transition prepared on a stale read refused
//! whole. Databases made by an older hanarang: `upgrade`.

mod checks;
mod live;
mod notes;
mod upgrade;

use hanarang::handoff::HandoffDocument;
use hanarang::handoff::{Actor, Verdict};
use hanarang::pipeline::{Event, State};
use hanarang::sister::RunOutcome;
use hanarang::store::testing;
use hanarang::store::{MigrationStatus, Run, RunEnd, Sprint, Store, StoreError};

use crate::support::db::{Engine, TestDb, on_each_engine};
use crate::support::{commit_event, planner_run, transition_of};

/// How many migrations a current database of `engine` has applied.
fn migrations(engine: Engine) -> usize {
    engine.migrations().len()
}

on_each_engine! {
async fn many_openers_of_a_fresh_database_all_succeed(engine) {
    let db = TestDb::new(engine, "store").await;
    let url = db.url.clone();
    let opens = (0..6).map(|_| {
        let url = url.clone();
        tokio::spawn(async move { Store::open(&url).await.map(|_| ()) })
    });
    for open in opens {
        open.await
            .expect("task")
            .expect("every opener migrates or waits");
    }
    assert_eq!(
        Store::migration_status(&url).await.unwrap(),
        MigrationStatus::Current { applied: migrations(db.engine) }
    );
}
}

on_each_engine! {
/// A database whose tables a newer hanarang migrated is refused whole, naming both
/// versions; the commands that only read never set one up.
async fn a_database_from_a_newer_hanarang_is_refused(engine) {
    let db = TestDb::new(engine, "store").await;
    if db.engine == Engine::Postgres {
        match Store::open_existing(&db.url).await {
            Err(e @ StoreError::NotSetUp(_)) => assert!(e.to_string().contains("no hanarang tables yet"), "{e}"),
            other => panic!("expected a database with no tables to be refused, got {other:?}"),
        }
        assert_eq!(Store::migration_status(&db.url).await.unwrap(), MigrationStatus::NotCreated);
    }
    let store = Store::open(&db.url).await.unwrap();
    testing::record_newer_migration(&store, 20991231000000).await.unwrap();
    store.close().await;
    match Store::open(&db.url).await {
        Err(e @ StoreError::TooNew { .. }) => assert!(
            e.to_string().contains("it has migration 20991231000000, this binary knows migrations up to"),
            "{e}"
        ),
        other => panic!("expected a newer database to be refused, got {other:?}"),
    }
}
}

on_each_engine! {
async fn a_bad_row_is_an_error_that_names_it(engine) {
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    store
        .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    testing::overwrite_sprint_state(&store, "SPRINT-001", "sleeping")
        .await
        .unwrap();
    match store.sprint("SPRINT-001").await {
        Err(StoreError::Corrupt { table, key, what }) => {
            assert_eq!((table, key.as_str()), ("sprints", "SPRINT-001"));
            assert!(what.contains("sleeping"), "{what}");
        }
        other => panic!("expected a corrupt-row error, got {other:?}"),
    }
}
}

on_each_engine! {
async fn a_transition_from_a_stale_read_is_refused_and_writes_nothing(engine) {
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let sprint = store
        .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    let lock = Event::LockAcquired;
    let (now, first) = commit_event(&store, &sprint, &lock, None, None, 2)
        .await
        .unwrap();
    assert_eq!((first.seq, first.to), (1, State::Planning));
    // The same transition again, from the read taken before the first one.
    match commit_event(&store, &sprint, &lock, None, None, 3).await {
        Err(StoreError::Conflict(id)) => assert_eq!(id, sprint.id),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let log = store.transitions(&sprint.id).await.unwrap();
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0], first, "what commit returned is what the log holds");
    assert_eq!(store.sprint(&sprint.id).await.unwrap(), Some(now.clone()));
    assert_eq!(
        (now.state, now.last_seq, now.updated_at),
        (State::Planning, 1, 2)
    );
    // Further behind: the sprint is at seq 2 and the read said 0. The entry's seq comes
    // from the sprint row only where the update matched, so it is NULL: refused too.
    let abort = Event::Abort {
        by: "ops".into(),
        reason: None,
    };
    commit_event(&store, &now, &abort, None, None, 4)
        .await
        .unwrap();
    let older = Sprint {
        last_seq: 0,
        ..now.clone()
    };
    match commit_event(&store, &older, &abort, None, None, 5).await {
        Err(StoreError::Conflict(id)) => assert_eq!(id, sprint.id),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(store.transitions(&sprint.id).await.unwrap().len(), 2);

    // A refused commit leaves no transaction open on a pooled connection: writes on
    // every connection of the pool still go through.
    for n in 0..6 {
        let queued = store
            .create_sprint("app", &format!("after {n}"), None, "cli:tester@test", "b", 6)
            .await
            .unwrap();
        commit_event(&store, &queued, &lock, None, None, 7)
            .await
            .expect("a later commit goes through");
    }
}
}

on_each_engine! {
async fn the_runs_the_loop_keeps_are_the_runs_the_database_holds(engine) {
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let queued = store
        .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    // The move into planning records the planner's run in the same commit.
    let handoff = HandoffDocument::default();
    let mut start = planner_run(&queued.id, &handoff);
    start.focus = Some("look at the tests first");
    let (planning, _) = commit_event(
        &store,
        &queued,
        &Event::LockAcquired,
        None,
        Some(start.clone()),
        2,
    )
    .await
    .unwrap();
    let mut kept = vec![Run::started(&start)];
    let held = store.runs(&planning.id).await.unwrap();
    assert_eq!(held, kept, "as started");
    assert_eq!(held[0].run_id, format!("{}-R01", planning.id));
    assert_eq!(held[0].focus.as_deref(), Some("look at the tests first"));

    let end = RunEnd {
        run_id: held[0].run_id.clone(),
        outcome: RunOutcome::Handoff,
        detail: "harang PLAN_READY".into(),
        rejection: Some("none".into()),
        exit_code: Some(0),
        signal: None,
        duration_ms: 5,
        stdout_tail: "{}".into(),
        stderr_tail: "log".into(),
        message: Some(serde_json::json!({"actor": "harang"})),
        input_tokens: Some(10),
        output_tokens: Some(20),
        cost_usd: Some(0.5),
        ended_at: 8,
        session_id: Some("5f1c-session".into()),
        paused_until: None,
        check: None,
    };
    let ready = Event::Reported {
        actor: Actor::Harang,
        verdict: Verdict::PlanReady,
        sprint_id: None,
        reason: None,
    };
    let (implementing, _) = commit_event(&store, &planning, &ready, Some(&end), None, 8)
        .await
        .unwrap();
    kept[0].end(&end);
    assert_eq!(store.runs(&planning.id).await.unwrap(), kept, "as ended");
    let usage = store.usage(&planning.id).await.unwrap();
    assert_eq!(usage.total.cost_usd, 0.5);
    let rolled_up = hanarang::report::status_json(&store).await.unwrap();
    assert!(rolled_up.contains("\"cost_usd\":0.5"), "{rolled_up}");
    // The sprint's spend as `sprint status` reads it follows every commit too.
    let listed = store.sprints_with_spend().await.unwrap();
    let (sprint, spend) = &listed[0];
    assert_eq!((&sprint.id, sprint.state), (&implementing.id, State::Implementing));
    assert_eq!(spend.cost_usd, 0.5);

    // A run whose number is taken fails the whole commit: no log entry, no move.
    let done = Event::Reported {
        actor: Actor::Narang,
        verdict: Verdict::ImplDone,
        sprint_id: None,
        reason: None,
    };
    let taken = planner_run(&queued.id, &handoff);
    match commit_event(&store, &implementing, &done, None, Some(taken), 9).await {
        Err(e) => assert_eq!(
            e.to_string(),
            "run SPRINT-001-R01 is already on record (the orchestrator's copy of its sprint's runs is behind); the transition was not applied"
        ),
        Ok(_) => panic!("a taken run number was committed"),
    }
    assert_eq!(store.transitions(&planning.id).await.unwrap().len(), 2);
    assert_eq!(
        store.sprint(&planning.id).await.unwrap(),
        Some(implementing)
    );
    assert_eq!(store.runs(&planning.id).await.unwrap(), kept);
}
}

on_each_engine! {
/// `run`'s console acts on the state of the last line it printed: a sprint and its new log
/// entries are read in one snapshot, whatever commits meanwhile.
async fn a_sprint_and_its_log_are_read_in_one_snapshot(engine) {
    let db = TestDb::new(engine, "store").await;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let store = Store::open(&db.url).await.unwrap();
    let current = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (store, current, done) = (store.clone(), current.clone(), done.clone());
        tokio::spawn(async move {
            let mut reads = 0u32;
            while !done.load(Ordering::Relaxed) {
                let id = hanarang::domain::sprint_id(current.load(Ordering::Relaxed) as i64);
                if let Some((sprint, log)) = store.sprint_since(&id, 0).await.unwrap() {
                    let last = log.last().map_or(0, |t| t.seq);
                    assert_eq!(
                        last, sprint.last_seq,
                        "{id}: the log read ends where the sprint read is"
                    );
                    assert_eq!(log.last().map(|t| t.to), (last > 0).then_some(sprint.state));
                    reads += 1;
                }
            }
            reads
        })
    };
    let failed = || Event::Failed {
        failure: hanarang::pipeline::Failure {
            kind: hanarang::pipeline::FailureKind::ExitNonzero,
            detail: "exited with code 1".into(),
        },
    };
    for n in 1..=60 {
        let sprint = store
            .create_sprint("app", "goal", None, "cli:tester@test", "b", n)
            .await
            .unwrap();
        current.store(n as usize, Ordering::Relaxed);
        let (mut s, _) = commit_event(&store, &sprint, &Event::LockAcquired, None, None, n)
            .await
            .unwrap();
        for _ in 0..2 {
            s = commit_event(&store, &s, &failed(), None, None, n)
                .await
                .unwrap()
                .0;
        }
        assert_eq!(s.state, State::Planning);
    }
    done.store(true, Ordering::Relaxed);
    assert!(
        reader.await.unwrap() > 0,
        "the reader read while sprints moved"
    );
}
}

/// Several hosts on one PostgreSQL database: a host that lost a sprint (its lease ran
/// out, another host took the sprint over) can write nothing more for it, though nothing
/// else changed since it read the sprint.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn a_host_that_lost_a_sprint_can_write_nothing_for_it() {
    use hanarang::store::HostScope;
    let db = TestDb::new(Engine::Postgres, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let scope = |name: &str, lease_ttl_ms| HostScope {
        name: name.into(),
        projects: vec!["app".into()],
        lease_ttl_ms,
        max_sisters: None,
    };
    // Host a's lease has run out as soon as it is taken.
    let a = store.shared_by(scope("a", -1));
    let b = store.shared_by(scope("b", 60_000));
    take_host_lease(&a, "token-a").await;
    take_host_lease(&b, "token-b").await;
    store
        .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    let claimed = a.next_in_queues().await.unwrap();
    assert_eq!(claimed.len(), 1, "a claims the queued sprint");
    assert_eq!(claimed[0].host.as_deref(), Some("a"));
    assert!(
        b.next_in_queues().await.unwrap().is_empty(),
        "b does not claim it too"
    );
    let (planning, _) = commit_event(&a, &claimed[0], &Event::LockAcquired, None, None, 2)
        .await
        .unwrap();

    let taken = b.take_over().await.unwrap();
    assert_eq!(taken.len(), 1, "b takes the sprint of the expired a");
    assert_eq!(taken[0].host.as_deref(), Some("b"));
    assert!(taken[0].epoch > planning.epoch);
    // a's copy is what the database holds but for the owner: every write is refused.
    let failed = Event::Failed {
        failure: hanarang::pipeline::Failure {
            kind: hanarang::pipeline::FailureKind::ExitNonzero,
            detail: "exited with code 1".into(),
        },
    };
    match commit_event(&a, &planning, &failed, None, None, 3).await {
        Err(StoreError::Fenced(id)) => assert_eq!(id, planning.id),
        other => panic!("expected the late commit to be fenced, got {other:?}"),
    }
    let handoff = HandoffDocument::default();
    match a
        .start_run(planner_run(&planning.id, &handoff), planning.epoch)
        .await
    {
        Err(StoreError::Fenced(id)) => assert_eq!(id, planning.id),
        other => panic!("expected the late run start to be fenced, got {other:?}"),
    }
    assert_eq!(store.transitions(&planning.id).await.unwrap().len(), 1);
    assert!(store.runs(&planning.id).await.unwrap().is_empty());
    // b, the owner now, goes on from the same state.
    commit_event(&b, &taken[0], &failed, None, None, 4)
        .await
        .expect("the new owner's commit");
    assert_eq!(b.sprints_in_stages().await.unwrap().len(), 1);
    assert!(a.sprints_in_stages().await.unwrap().is_empty());
}

on_each_engine! {
/// Two bots (the one before a failover, still finishing its call, and the one after)
/// each made a post for one sprint: the first recorded is the sprint's, for both.
async fn a_sprint_keeps_the_first_forum_post_recorded(engine) {
    use hanarang::store::ForumPost;
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let sprint = store.create_sprint("app", "goal", None, "cli:tester@test", "b", 1).await.unwrap();
    let post = |thread: i64| ForumPost {
        sprint_id: sprint.id.clone(),
        thread_id: thread,
        board_message_id: thread,
        done_message_id: None,
    };
    assert_eq!(store.record_new_forum_post(&post(10), None).await.unwrap(), post(10));
    assert_eq!(
        store.record_new_forum_post(&post(11), None).await.unwrap(),
        post(10),
        "the second bot's post is not the sprint's"
    );
    // Someone deleted post 10: both bots replace it, the first one wins.
    assert_eq!(store.record_new_forum_post(&post(12), Some(10)).await.unwrap(), post(12));
    assert_eq!(
        store.record_new_forum_post(&post(13), Some(10)).await.unwrap(),
        post(12),
        "a replacement for a post already replaced is not the sprint's"
    );
    assert_eq!(store.forum_post(&sprint.id).await.unwrap(), Some(post(12)));
}
}

/// Several hosts commit at once on one PostgreSQL database: a reader of the log (the
/// Discord bot, `sprint log --follow`) that has seen a line has seen every line before it.
/// A line numbered first but committed last would be passed by the reader's cursor and
/// never posted.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn the_log_is_read_in_the_order_its_lines_were_numbered() {
    use hanarang::store::Commit;
    let db = TestDb::new(Engine::Postgres, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let first = store
        .create_sprint("a", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    let second = store
        .create_sprint("b", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    let lock = Event::LockAcquired;
    // One host is in the middle of its commit for the first sprint (or frozen there)...
    let (after, t) = transition_of(&first, &lock);
    let held = testing::hold_commit_open(
        &store,
        Commit {
            before: &first,
            after: &after,
            transition: &t,
            event: &lock,
            run: None,
            command: None,
            at: 2,
            start: None,
        },
    )
    .await
    .unwrap();
    // ...while another commits one for the second.
    let other = store.clone();
    let mut late = tokio::spawn(async move {
        commit_event(&other, &second, &Event::LockAcquired, None, None, 3).await
    });
    // It either goes through, or waits for the first one's end.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let finished = loop {
        if late.is_finished() {
            break true;
        }
        if testing::lock_waiters(&store).await.unwrap() > 0 {
            break false;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "neither committed nor waiting"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let seen = store.transitions_after(0, 100).await.unwrap();
    let held_seq = held.global_seq();
    held.finish().await.unwrap();
    let (_, second_line) = (&mut late).await.unwrap().unwrap();
    let all = store.transitions_after(0, 100).await.unwrap();
    assert_eq!(all.len(), 2, "{all:#?}");
    let seen_seqs: Vec<i64> = seen.iter().map(|r| r.global_seq).collect();
    let all_seqs: Vec<i64> = all.iter().map(|r| r.global_seq).collect();
    assert!(
        all_seqs.starts_with(&seen_seqs),
        "a reader saw {seen_seqs:?} of {all_seqs:?} (the commit held open was {held_seq}; the other {}finished): its cursor would pass a line for good",
        if finished { "" } else { "had not " }
    );
    assert!(
        held_seq < second_line.global_seq,
        "numbered in the order they committed"
    );
}

/// A host with `[host] max_sisters` claims no more sprints than it can run: another host
/// takes the rest.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn a_host_at_its_cap_leaves_the_queue_to_the_others() {
    use hanarang::store::HostScope;
    let db = TestDb::new(Engine::Postgres, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let host = |name: &str| {
        store.shared_by(HostScope {
            name: name.into(),
            projects: vec!["p1".into(), "p2".into(), "p3".into()],
            lease_ttl_ms: 60_000,
            max_sisters: Some(1),
        })
    };
    let (a, b) = (host("a"), host("b"));
    take_host_lease(&a, "token-a").await;
    take_host_lease(&b, "token-b").await;
    for project in ["p1", "p2", "p3"] {
        store
            .create_sprint(project, "goal", None, "cli:tester@test", "b", 1)
            .await
            .unwrap();
    }
    let mine = a.next_in_queues().await.unwrap();
    assert_eq!(
        mine.len(),
        1,
        "one sprint for a host that runs one sister: {mine:?}"
    );
    assert_eq!(mine[0].id, "SPRINT-001", "the oldest");
    assert_eq!(
        a.next_in_queues().await.unwrap().len(),
        1,
        "and no more on the next pass"
    );
    let theirs = b.next_in_queues().await.unwrap();
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert_eq!(theirs[0].id, "SPRINT-002");
    let left = store.sprint("SPRINT-003").await.unwrap().unwrap();
    assert_eq!(left.host, None, "nobody has room for the third");
}

/// Takes the lease of the host a shared store works for, under `token`.
async fn take_host_lease(host: &Store, token: &str) {
    let me = hanarang::store::Lease {
        token: token.into(),
        pid: 1,
        host: "machine".into(),
        started_at: 1,
        heartbeat_at: 1,
    };
    host.acquire_lease(&me, &|_| false)
        .await
        .expect("the database")
        .expect("a free host name");
}

on_each_engine! {
/// Orchestrators starting at once on one database (each its own process, here its own
/// pool): one takes the lease and the others are refused with its holder, none takes it
/// over while that holder is alive; once the holder is gone, one successor takes it.
async fn of_orchestrators_starting_at_once_one_takes_the_lease(engine) {
    let db = TestDb::new(engine, "store").await;
    Store::open(&db.url).await.unwrap().close().await;
    let lease = |n: usize| hanarang::store::Lease {
        token: format!("starter-{n}"),
        pid: i64::try_from(n).unwrap(),
        host: "machine".into(),
        started_at: 1,
        heartbeat_at: 1,
    };
    let starts = (0..6).map(|n| {
        let url = db.url.clone();
        tokio::spawn(async move {
            let store = Store::open(&url).await.expect("open");
            // Every holder is alive.
            let took = store.acquire_lease(&lease(n), &|_| false).await.expect("the database");
            store.close().await;
            took.map(|()| n).map_err(|holder| holder.token)
        })
    });
    let mut winners = Vec::new();
    let mut refused_by = Vec::new();
    for start in starts {
        match start.await.expect("task") {
            Ok(n) => winners.push(format!("starter-{n}")),
            Err(holder) => refused_by.push(holder),
        }
    }
    assert_eq!(winners.len(), 1, "one lease holder, not {winners:?}");
    assert!(
        refused_by.iter().all(|h| *h == winners[0]),
        "the others are refused with the holder's lease: {refused_by:?}, holder {winners:?}"
    );
    let store = Store::open(&db.url).await.unwrap();
    assert_eq!(store.lease().await.unwrap().map(|l| l.token).as_ref(), winners.first());

    // The holder died: successors, each on a thread of its own as processes would be,
    // judge it gone; each waits there until all have judged it, so that all of them try
    // to replace the same dead holder. One does.
    let judged = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let successors: Vec<_> = (10..14)
        .map(|n| {
            let url = db.url.clone();
            let judged = judged.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                rt.block_on(async move {
                    let store = Store::open(&url).await.expect("open");
                    let gone = |holder: &hanarang::store::Lease| {
                        if holder.pid >= 10 {
                            return false;
                        }
                        judged.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let patience = std::time::Instant::now();
                        while judged.load(std::sync::atomic::Ordering::SeqCst) < 4
                            && patience.elapsed() < std::time::Duration::from_secs(10)
                        {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        true
                    };
                    let took = store.acquire_lease(&lease(n), &gone).await.expect("the database");
                    store.close().await;
                    took.is_ok()
                })
            })
        })
        .collect();
    let mut took = 0;
    for s in successors {
        took += usize::from(s.join().expect("thread"));
    }
    assert_eq!(took, 1, "one successor takes the dead holder's lease");
    let holder = store.lease().await.unwrap().expect("a holder");
    assert!(holder.pid >= 10, "a successor holds it: {holder:?}");
    store.close().await;
}
}

on_each_engine! {
/// Sprints queued at once from several processes each get a number of their own, in one
/// gapless sequence, and nothing queued is lost.
async fn sprints_queued_at_once_get_numbers_of_their_own(engine) {
    let db = TestDb::new(engine, "store").await;
    Store::open(&db.url).await.unwrap().close().await;
    let queues = (0..8).map(|n| {
        let url = db.url.clone();
        tokio::spawn(async move {
            let store = Store::open(&url).await.expect("open");
            let sprint = store
                .create_sprint("app", &format!("goal {n}"), None, "cli:tester@test", "feature/{sprint}", 1)
                .await
                .expect("queued");
            store.close().await;
            (sprint.number, sprint.id, sprint.goal)
        })
    });
    let mut numbers = Vec::new();
    for q in queues {
        let (number, id, goal) = q.await.expect("task");
        assert_eq!(id, format!("SPRINT-{number:03}"));
        numbers.push((number, goal));
    }
    numbers.sort();
    assert_eq!(
        numbers.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<i64>>()
    );
    let store = Store::open(&db.url).await.unwrap();
    let all = store.sprints().await.unwrap();
    assert_eq!(all.len(), 8, "every sprint queued is there");
    for (number, goal) in &numbers {
        let sprint = all.iter().find(|s| s.number == *number).expect("its row");
        assert_eq!(&sprint.goal, goal);
        assert_eq!(sprint.state, State::Queued);
    }
    store.close().await;
}
}

on_each_engine! {
/// The sprints to start are the heads of the projects' queues whose lock is free: one a
/// project, the oldest first, whatever else is queued behind them.
async fn each_free_project_offers_the_head_of_its_queue(engine) {
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let mut queued = Vec::new();
    for project in ["app", "web", "app", "web", "cli"] {
        let sprint = store
            .create_sprint(project, "goal", None, "cli:tester@test", "feature/{sprint}", 1)
            .await
            .unwrap();
        queued.push(sprint);
    }
    let heads = |store: &Store| {
        let store = store.clone();
        async move {
            let heads = store.next_in_queues().await.unwrap();
            heads.into_iter().map(|s| s.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(heads(&store).await, ["SPRINT-001", "SPRINT-002", "SPRINT-005"]);
    // `app`'s first sprint starts: its project's lock is held, and what is queued behind
    // it waits.
    commit_event(&store, &queued[0], &Event::LockAcquired, None, None, 2)
        .await
        .unwrap();
    assert_eq!(heads(&store).await, ["SPRINT-002", "SPRINT-005"]);
    store.close().await;
}
}

/// The two engines hold the same tables and columns once migrated (but for the tables of
/// several hosts, which only share a PostgreSQL database): a column added to one and
/// forgotten in the other fails here, not in an operator's upgrade.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn both_engines_have_the_same_tables_and_columns() {
    const POSTGRES_ONLY: [&str; 2] = ["hosts", "leaders"];
    let mut schemas = Vec::new();
    for engine in [Engine::Sqlite, Engine::Postgres] {
        let db = TestDb::new(engine, "schema").await;
        Store::open(&db.url).await.unwrap().close().await;
        let mut columns = testing::columns(&db.url).await.unwrap();
        columns.retain(|(table, _)| !POSTGRES_ONLY.contains(&table.as_str()));
        schemas.push(columns);
    }
    let (sqlite, postgres) = (&schemas[0], &schemas[1]);
    let only = |a: &Vec<(String, String)>, b: &Vec<(String, String)>| {
        a.iter()
            .filter(|c| !b.contains(c))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(!sqlite.is_empty());
    assert_eq!(
        (only(sqlite, postgres), only(postgres, sqlite)),
        (vec![], vec![]),
        "(only in SQLite, only in PostgreSQL)"
    );
}
