//! The database as operators meet it: several processes opening a fresh file at once, an
//! upgrade that backs the file up before migrating, bad rows reported, not panicked on, and
//! a transition prepared on a stale read refused whole.

mod support;

use hanarang::pipeline::{Event, Facts, Policy, State, apply};
use hanarang::store::{Commit, MigrationStatus, Store, StoreError};
use sqlx::sqlite::SqlitePoolOptions;
use support::TempDir;

fn url(dir: &TempDir) -> String {
    format!("sqlite://{}", dir.path().join("hanarang.db").display())
}

async fn raw(url: &str) -> sqlx::SqlitePool {
    SqlitePoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .expect("a raw connection")
}

#[tokio::test(flavor = "multi_thread")]
async fn many_openers_of_a_fresh_database_all_succeed() {
    let dir = TempDir::new("store");
    let url = url(&dir);
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
        MigrationStatus::Current { applied: 6 }
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upgrade_backs_the_database_up_before_migrating() {
    let dir = TempDir::new("store");
    let url = url(&dir);
    assert_eq!(
        Store::migration_status(&url).await.unwrap(),
        MigrationStatus::NotCreated
    );
    let store = Store::open(&url).await.unwrap();
    store
        .create_sprint("app", "keep me", None, "feature/{sprint_lower}", 1)
        .await
        .unwrap();
    store.close().await;
    // Make it look like a database from before the last migration.
    let pool = raw(&url).await;
    sqlx::query("ALTER TABLE sprints DROP COLUMN budget_usd")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 4")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert_eq!(
        Store::migration_status(&url).await.unwrap(),
        MigrationStatus::Pending(vec![4])
    );

    let store = Store::open(&url).await.unwrap();
    assert_eq!(
        store.sprint("SPRINT-001").await.unwrap().unwrap().goal,
        "keep me"
    );
    let backups: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("hanarang.db.backup-")
        })
        .collect();
    assert_eq!(backups.len(), 1, "one backup beside the database");
    let backup = format!("sqlite://{}", backups[0].path().display());
    assert_eq!(
        Store::migration_status(&backup).await.unwrap(),
        MigrationStatus::Pending(vec![4])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_row_is_an_error_that_names_it() {
    let dir = TempDir::new("store");
    let url = url(&dir);
    let store = Store::open(&url).await.unwrap();
    store
        .create_sprint("app", "goal", None, "b", 1)
        .await
        .unwrap();
    let pool = raw(&url).await;
    sqlx::query("UPDATE sprints SET state = 'sleeping'")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    match store.sprint("SPRINT-001").await {
        Err(StoreError::Corrupt { table, key, what }) => {
            assert_eq!((table, key.as_str()), ("sprints", "SPRINT-001"));
            assert!(what.contains("sleeping"), "{what}");
        }
        other => panic!("expected a corrupt-row error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transition_from_a_stale_read_is_refused_and_writes_nothing() {
    let dir = TempDir::new("store");
    let store = Store::open(&url(&dir)).await.unwrap();
    let sprint = store
        .create_sprint("app", "goal", None, "b", 1)
        .await
        .unwrap();
    let facts = Facts {
        sprint_id: &sprint.id,
        sister_running: false,
    };
    let event = Event::LockAcquired;
    let t = apply(sprint.position(), &event, facts, &Policy::default()).unwrap();
    let mut after = sprint.clone();
    after.state = t.to.state;
    let commit = |at| Commit {
        before: &sprint,
        after: &after,
        transition: &t,
        event: &event,
        run: None,
        command: None,
        at,
    };
    let first = store.commit(commit(2)).await.unwrap();
    assert_eq!((first.seq, first.to), (1, State::Planning));
    // The same transition again, from the read taken before the first one.
    match store.commit(commit(3)).await {
        Err(StoreError::Conflict(id)) => assert_eq!(id, sprint.id),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let log = store.transitions(&sprint.id).await.unwrap();
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0], first, "what commit returned is what the log holds");
    let now = store.sprint(&sprint.id).await.unwrap().unwrap();
    assert_eq!(
        (now.state, now.last_seq, now.updated_at),
        (State::Planning, 1, 2)
    );
}
