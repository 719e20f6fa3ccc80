//! Databases made by an older hanarang (commit 9ae7f17, before the authors migration and
//! while SQLite still stored the status texts), opened by this one: migrated (a SQLite
//! file backed up first), and every sprint read back as that build printed it
//! (`sprint status --json`, kept beside each database in `tests/fixtures/databases/`).

use std::path::PathBuf;

use hanarang::store::testing;
use hanarang::store::{MigrationStatus, Store};

use crate::support::db::{Engine, TestDb};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/databases")
        .join(name)
}

fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("the fixture")
}

/// Two JSON documents alike but for the digits of a float past the 15th: 9ae7f17 on
/// PostgreSQL wrote a rolled-up `0.11000000000000001` where its SQLite, and now both
/// engines, write `0.11`.
fn alike(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| alike(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.keys().eq(y.keys()) && x.values().zip(y.values()).all(|(x, y)| alike(x, y))
        }
        _ => a == b,
    }
}

/// What a database made by 9ae7f17 holds, read through every kind of record.
async fn reads_back(store: &Store, printed_by_9ae7f17: &str, engine: Engine) {
    let printed = store.status_json().await.unwrap();
    if engine == Engine::Sqlite {
        assert_eq!(
            printed,
            printed_by_9ae7f17.trim_end(),
            "`sprint status --json` as 9ae7f17 printed it"
        );
    } else {
        let parse = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        assert!(
            alike(&parse(&printed), &parse(printed_by_9ae7f17)),
            "`sprint status --json` as 9ae7f17 printed it:\n{printed}\n{printed_by_9ae7f17}"
        );
    }
    let sprints = store.sprints().await.unwrap();
    assert!(sprints.len() >= 3, "{sprints:?}");
    let mut transitions = 0;
    let mut runs = 0;
    let mut commands = 0;
    for sprint in &sprints {
        assert_eq!(sprint.started_by, None, "no author on record before 0011");
        transitions += store.transitions(&sprint.id).await.unwrap().len();
        runs += store.runs(&sprint.id).await.unwrap().len();
        commands += store.commands_of(&sprint.id).await.unwrap().len();
    }
    assert!(
        transitions > 0 && runs > 0 && commands > 0,
        "{transitions} transitions, {runs} runs, {commands} commands"
    );
}

/// The engine's migrations after `applied`: what a database made by 9ae7f17 still lacks.
fn since(engine: Engine, applied: u64) -> Vec<i64> {
    engine
        .migrations()
        .into_iter()
        .filter(|v| *v > applied)
        .map(|v| v as i64)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sqlite_database_from_9ae7f17_is_backed_up_migrated_and_read_back() {
    let db = TestDb::new(Engine::Sqlite, "upgrade").await;
    std::fs::copy(fixture("9ae7f17.sqlite"), db.dir.path().join("hanarang.db")).unwrap();
    assert_eq!(
        Store::migration_status(&db.url).await.unwrap(),
        MigrationStatus::Pending(since(Engine::Sqlite, 10))
    );

    let store = Store::open(&db.url).await.unwrap();
    reads_back(
        &store,
        &fixture_text("9ae7f17.sqlite.status.json"),
        Engine::Sqlite,
    )
    .await;
    store.close().await;

    let backups: Vec<_> = std::fs::read_dir(db.dir.path())
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
        MigrationStatus::Pending(since(Engine::Sqlite, 10))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_postgres_database_from_9ae7f17_is_migrated_and_read_back() {
    let db = TestDb::new(Engine::Postgres, "upgrade").await;
    testing::restore_postgres(&db.url, &fixture_text("9ae7f17.postgres.sql"))
        .await
        .unwrap();
    assert_eq!(
        Store::migration_status(&db.url).await.unwrap(),
        MigrationStatus::Pending(since(Engine::Postgres, 4))
    );

    let store = Store::open(&db.url).await.unwrap();
    reads_back(
        &store,
        &fixture_text("9ae7f17.postgres.status.json"),
        Engine::Postgres,
    )
    .await;
    store.close().await;
}
