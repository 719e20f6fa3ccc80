//! A database for one test on either engine: a SQLite file in a temp folder, or a fresh
//! database on the PostgreSQL server the suite is pointed at (`HANARANG_TEST_POSTGRES`,
//! by default the machine's own on 127.0.0.1:5432; `scripts/test` makes sure it runs),
//! dropped with the test.

use hanarang::store::testing;

use super::TempDir;

/// Where the suite's PostgreSQL server is: a URL of a database to connect through.
pub const POSTGRES_VAR: &str = "HANARANG_TEST_POSTGRES";
const POSTGRES_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/postgres";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

impl Engine {
    /// The versions of the migrations this build ships for the engine, read from the
    /// repository's `migrations/` folder, in order.
    pub fn migrations(self) -> Vec<u64> {
        let folder = match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        };
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join(folder);
        let mut versions: Vec<u64> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|entry| {
                let name = entry.unwrap().file_name().into_string().unwrap();
                name.split('_').next()?.parse().ok()
            })
            .collect();
        versions.sort_unstable();
        versions
    }
}

pub struct TestDb {
    pub url: String,
    pub engine: Engine,
    /// The SQLite file's folder (and the one a test may use for files beside it).
    pub dir: TempDir,
}

impl TestDb {
    /// `new` for a caller outside a runtime (or one that may not block it): on a thread
    /// of its own.
    pub fn new_blocking(engine: Engine, label: &str) -> TestDb {
        let label = label.to_string();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(TestDb::new(engine, &label))
        })
        .join()
        .expect("create the test database")
    }

    pub async fn new(engine: Engine, label: &str) -> TestDb {
        let dir = TempDir::new(label);
        let url = match engine {
            Engine::Sqlite => format!("sqlite://{}", dir.path().join("hanarang.db").display()),
            Engine::Postgres => {
                let server =
                    std::env::var(POSTGRES_VAR).unwrap_or_else(|_| POSTGRES_DEFAULT.into());
                testing::fresh_database(&server).await.unwrap_or_else(|e| {
                    panic!(
                        "no PostgreSQL server for the tests at {server} ({e}); `scripts/test` starts one, or set {POSTGRES_VAR} to the URL of one"
                    )
                })
            }
        };
        TestDb { url, engine, dir }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.engine != Engine::Postgres {
            return;
        }
        // Drop runs outside any runtime's reach: a thread with a runtime of its own.
        let url = self.url.clone();
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(testing::drop_database(&url)).ok()
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("note: the test database {} was not dropped", self.url);
        }
    }
}

/// A test run once on each engine: `on_each_engine! { async fn name(engine) { … } }`
/// makes `name::sqlite` and `name::postgres`, each with `engine: Engine` set to its
/// engine. (The benchmarks include this support without using it.)
#[allow(unused_macros)]
macro_rules! on_each_engine {
    ($(#[$meta:meta])* async fn $name:ident($engine:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread")]
            async fn sqlite() {
                let $engine = $crate::support::db::Engine::Sqlite;
                $body
            }

            #[tokio::test(flavor = "multi_thread")]
            #[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
            async fn postgres() {
                let $engine = $crate::support::db::Engine::Postgres;
                $body
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_each_engine;
