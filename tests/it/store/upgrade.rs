//! Databases made by older builds of hanarang, opened by this one, every sprint read back as that
//! build printed it (kept beside each database in `tests/fixtures/databases/`):
//! - commit 9ae7f17, before the authors migration and while SQLite still stored the
//!   status texts: migrated (a SQLite file backed up first) and read back;
//! - commit bce22ca, the last build before the pure core made the loop's decisions (its
//!   schema is this one's): read back, then its sprints go on where it left them.

use std::path::PathBuf;

use hanarang::store::testing;
use hanarang::store::{MigrationStatus, Store};

use hanarang::handoff::Actor;
use hanarang::orchestrator::client::Answer;
use hanarang::pipeline::State;
use hanarang::store::CommandKind;

use crate::support::db::{Engine, TestDb};
use crate::support::pipeline::{Files, Pipeline, Setup};

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
    let printed = hanarang::report::status_json(store).await.unwrap();
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

/// The backups of `hanarang.db` made in `dir` before a migration.
fn backups(dir: &std::path::Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("hanarang.db.backup-"))
        })
        .collect()
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

    let backups = backups(db.dir.path());
    assert_eq!(backups.len(), 1, "one backup beside the database");
    let backup = format!("sqlite://{}", backups[0].display());
    assert_eq!(
        Store::migration_status(&backup).await.unwrap(),
        MigrationStatus::Pending(since(Engine::Sqlite, 10))
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
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

/// What the bce22ca build printed for `sprint status --json` and for each sprint's `sprint
/// log --json` (one object by sprint id), as this build prints them from its database.
fn prints_as_bce22ca(files: &Files, engine: &str) {
    let printed = |args: &[&str]| {
        let out = files.hanarang(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let status: serde_json::Value =
        serde_json::from_str(&fixture_text(&format!("bce22ca.{engine}.status.json"))).unwrap();
    assert_eq!(printed(&["sprint", "status", "--json"]), status);
    let logs: serde_json::Value =
        serde_json::from_str(&fixture_text(&format!("bce22ca.{engine}.log.json"))).unwrap();
    for id in ["SPRINT-001", "SPRINT-002", "SPRINT-003", "SPRINT-004"] {
        assert_eq!(
            printed(&["sprint", "log", id, "--json"]),
            logs[id],
            "`sprint log {id} --json` as bce22ca printed it"
        );
    }
}

/// bce22ca left SPRINT-001 deployed; SPRINT-002 (project app) waiting in `done` for
/// approval, with a note for its next run; SPRINT-003 (project site) escalated after its
/// implementer failed twice; SPRINT-004 queued behind SPRINT-002's lock. This build reads
/// them back as bce22ca printed them, with nothing but new tables to migrate; then deploys SPRINT-002 on
/// approval, its deployer given the note; resumes SPRINT-003 to `done`; and starts
/// SPRINT-004 only once SPRINT-002 has ended.
async fn goes_on_from_bce22ca(engine: Engine) {
    let files = Files::new(&Setup {
        projects: &["app", "site"],
        engine,
        ..Setup::default()
    });
    let url = files.config().database.url;
    let name = match engine {
        Engine::Sqlite => {
            std::fs::copy(
                fixture("bce22ca.sqlite"),
                files.dir.path().join("hanarang.db"),
            )
            .unwrap();
            "sqlite"
        }
        Engine::Postgres => {
            testing::restore_postgres(url.as_str(), &fixture_text("bce22ca.postgres.sql"))
                .await
                .unwrap();
            "postgres"
        }
    };
    // Since bce22ca, PostgreSQL's first migration drops a trigger (no data changes); both
    // engines then add the table of the forge's checks at a base (empty here).
    match (engine, Store::migration_status(url.as_str()).await.unwrap()) {
        (Engine::Sqlite, MigrationStatus::Pending(pending)) => {
            assert_eq!(pending, since(Engine::Sqlite, 20));
        }
        (Engine::Postgres, MigrationStatus::Pending(pending)) => {
            assert_eq!(pending, since(Engine::Postgres, 13));
        }
        (_, other) => panic!("{other:?}"),
    }
    prints_as_bce22ca(&files, name);
    // A SQLite database is copied aside before it is migrated, once.
    let expected = match engine {
        Engine::Sqlite => 1,
        Engine::Postgres => 0,
    };
    assert_eq!(
        backups(files.dir.path()).len(),
        expected,
        "{:?}",
        backups(files.dir.path())
    );

    let pipeline = Pipeline::start_with(files).await;
    let approved = pipeline
        .command("SPRINT-002", CommandKind::Approve, None)
        .await;
    assert!(matches!(approved, Answer::Applied(_)), "{approved:?}");
    pipeline.wait_for("SPRINT-002", State::Deployed).await;
    let runs = pipeline.runs("SPRINT-002").await;
    let deploy = runs.iter().find(|r| r.actor == Actor::Erang).unwrap();
    assert!(
        pipeline
            .files
            .stdin_of(&deploy.run_id)
            .contains("Deploy after the nightly backup; the database is busy until then."),
        "the deployer is given the note bce22ca recorded"
    );
    let resumed = pipeline
        .command("SPRINT-003", CommandKind::Resume, None)
        .await;
    assert!(matches!(resumed, Answer::Applied(_)), "{resumed:?}");
    pipeline.wait_for("SPRINT-003", State::Done).await;
    pipeline.wait_for("SPRINT-004", State::Done).await;
    let deployed = pipeline.transitions("SPRINT-002").await;
    let started = pipeline.transitions("SPRINT-004").await;
    assert!(
        started[0].global_seq > deployed.last().unwrap().global_seq,
        "SPRINT-004 waits for SPRINT-002's lock: {started:?}"
    );
    pipeline.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sqlite_database_from_bce22ca_reads_back_and_its_sprints_go_on() {
    goes_on_from_bce22ca(Engine::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn a_postgres_database_from_bce22ca_reads_back_and_its_sprints_go_on() {
    goes_on_from_bce22ca(Engine::Postgres).await;
}
