//! Notes on record, on each engine: given to the run that starts after them, in the same
//! write as that run (through a transition's commit, or a run started alone), given once,
//! then marked where they were written; a thread finds its sprint.

use hanarang::handoff::HandoffDocument;
use hanarang::pipeline::Event;
use hanarang::sister::RunOutcome;
use hanarang::store::{CommandKind, ForumPost, NewRun, RunEnd, Store};

use crate::support::db::{TestDb, on_each_engine};
use crate::support::{commit_event, planner_run};

on_each_engine! {
async fn a_note_is_given_once_with_the_run_that_starts_after_it(engine) {
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let queued = store
        .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    let from_discord = store
        .submit_note(&queued.id, "keep it small", "discord:500", 0, 2, Some("10/11"))
        .await
        .unwrap();
    let from_cli = store
        .submit_note(&queued.id, "mind the theme", "cli:me@host", 0, 2, None)
        .await
        .unwrap();
    let handoff = HandoffDocument::default();
    // Waiting for a run: listed to be marked later (only the one written in Discord).
    let waiting = store.notes_to_mark().await.unwrap();
    assert_eq!(waiting.iter().map(|n| n.id).collect::<Vec<_>>(), vec![from_discord]);
    assert_eq!(waiting[0].delivered_run, None);

    // Through a transition's commit: the planner's run is given both.
    let first = NewRun { notes_upto: Some(from_cli), ..planner_run(&queued.id, &handoff) };
    let (running, _) = commit_event(&store, &queued, &Event::LockAcquired, None, Some(first), 3)
        .await
        .unwrap();
    let run_id = format!("{}-R01", queued.id);
    let notes: Vec<_> = store
        .commands_of(&queued.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.kind == CommandKind::Note)
        .collect();
    assert_eq!(notes.len(), 2);
    assert!(notes.iter().all(|n| n.delivered_run.as_deref() == Some(run_id.as_str())), "{notes:?}");
    assert_eq!(notes[0].message.as_deref(), Some("10/11"));

    // A later note, and a run started alone: it is given only the new one.
    let later = store
        .submit_note(&queued.id, "one more", "discord:500", running.last_seq, 4, Some("10/12"))
        .await
        .unwrap();
    let mut second = planner_run(&queued.id, &handoff);
    second.number = 2;
    second.notes_upto = Some(later);
    let second_id = store.start_run(second, 0).await.unwrap();
    let given = store.command(later).await.unwrap().unwrap();
    assert_eq!(given.delivered_run.as_deref(), Some(second_id.as_str()));
    let first_note = store.command(from_discord).await.unwrap().unwrap();
    assert_eq!(first_note.delivered_run.as_deref(), Some(run_id.as_str()), "given once");

    // Marked where written: no longer listed.
    assert_eq!(store.notes_to_mark().await.unwrap().len(), 2);
    store.mark_note(from_discord, 5).await.unwrap();
    let left = store.notes_to_mark().await.unwrap();
    assert_eq!(left.iter().map(|n| n.id).collect::<Vec<_>>(), vec![later]);
}
}

on_each_engine! {
async fn a_thread_finds_its_sprint(engine) {
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let sprint = store
        .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    let post = ForumPost {
        sprint_id: sprint.id.clone(),
        thread_id: 1_200_000_000_000_000_123,
        board_message_id: 1_200_000_000_000_000_123,
        done_message_id: None,
    };
    store.save_forum_post(&post).await.unwrap();
    assert_eq!(store.forum_post_of_thread(post.thread_id).await.unwrap(), Some(post));
    assert_eq!(store.forum_post_of_thread(42).await.unwrap(), None);
}
}

on_each_engine! {
async fn a_note_given_to_a_run_that_ended_without_an_answer_is_given_again(engine) {
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let queued = store
        .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    let note = store
        .submit_note(&queued.id, "keep it small", "discord:500", 0, 2, None)
        .await
        .unwrap();
    let handoff = HandoffDocument::default();
    let given_to = |store: &Store| {
        let store = store.clone();
        async move { store.command(note).await.unwrap().unwrap().delivered_run }
    };
    let start = |number: i64| NewRun {
        number,
        notes_upto: Some(note),
        ..planner_run(&queued.id, &handoff)
    };
    let first = store.start_run(start(1), 0).await.unwrap();
    assert_eq!(given_to(&store).await.as_deref(), Some(first.as_str()));
    // Still running: a run started beside it (a reviewer) is not given it again.
    let beside = store.start_run(start(2), 0).await.unwrap();
    assert_eq!(given_to(&store).await.as_deref(), Some(first.as_str()));
    store.end_run(&end(&first, RunOutcome::ExitNonzero)).await.unwrap();
    store.end_run(&end(&beside, RunOutcome::Handoff)).await.unwrap();
    // The run it was given failed: the next run is given it.
    let retry = store.start_run(start(3), 0).await.unwrap();
    assert_eq!(given_to(&store).await.as_deref(), Some(retry.as_str()));
    // That one answered: the run after it is not.
    store.end_run(&end(&retry, RunOutcome::Handoff)).await.unwrap();
    store.start_run(start(4), 0).await.unwrap();
    assert_eq!(given_to(&store).await.as_deref(), Some(retry.as_str()));
}
}

fn end(run_id: &str, outcome: RunOutcome) -> RunEnd {
    RunEnd {
        run_id: run_id.to_string(),
        outcome,
        detail: String::new(),
        rejection: None,
        exit_code: Some(0),
        signal: None,
        duration_ms: 5,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        message: None,
        input_tokens: None,
        output_tokens: None,
        cost_usd: None,
        ended_at: 8,
        session_id: None,
        check: None,
        paused_until: None,
    }
}
