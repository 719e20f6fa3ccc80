//! What every part starts from: the release binary, a config as an operator would write
//! it with the simulated sister in every role, and queued sprints.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hanarang::clock::now_ms;
use hanarang::config::Config;
use hanarang::store::Store;

use crate::support::TempDir;

pub const PROJECT: &str = "app";

pub use crate::common::hanarang_binary;

/// A config as an operator would write it: one project, the simulated sister for every
/// role, a short backoff.
pub struct Setup {
    pub dir: TempDir,
    pub config_path: PathBuf,
    pub db: PathBuf,
    /// Where the database (and the runs folder beside it) lives when not in `dir`.
    _db_dir: Option<TempDir>,
}

impl Setup {
    pub fn new(label: &str, bin: &Path) -> Setup {
        Setup::with_db_in(label, bin, None, None)
    }

    /// The database (and so the contract files, beside it) under `db_root` when given.
    /// With `keep_contracts`, the sister is started through `sh`, which first copies its
    /// contract file (one per sprint, rewritten for each run) to `<run id>.contract.json`
    /// in that folder: the warm-up keeps each run's contract for the baseline that way.
    pub fn with_db_in(
        label: &str,
        bin: &Path,
        db_root: Option<&Path>,
        keep_contracts: Option<&Path>,
    ) -> Setup {
        let dir = TempDir::new(label);
        let db_dir = db_root.map(|root| TempDir::new_in(root, label));
        let db = db_dir
            .as_ref()
            .map_or_else(|| dir.path().to_path_buf(), |d| d.path().to_path_buf())
            .join("hanarang.db");
        let workdir = dir.path().join(PROJECT);
        std::fs::create_dir_all(&workdir).expect("create the workdir");
        let (program, args) = match keep_contracts {
            None => (
                bin.display().to_string(),
                r#"["simulate-sister"]"#.to_string(),
            ),
            Some(keep) => (
                "/bin/sh".to_string(),
                format!(
                    r#"["-c", "cp \"$HANARANG_CONTRACT_FILE\" \"{}/$HANARANG_RUN_ID.contract.json\" && exec \"$0\" simulate-sister", "{}"]"#,
                    keep.display(),
                    bin.display()
                ),
            ),
        };
        let toml = format!(
            r#"[database]
url = "sqlite://{db}"

[pipeline]
backoff = {{ initial = "10ms", factor = 2.0, max = "50ms" }}

[agent]
program = "{program}"
args = {args}
kill_grace = "2s"
env = {{ SIMULATE_DELAY_MS = "0" }}

[projects.{PROJECT}]
workdir = "{workdir}"
"#,
            db = db.display(),
            workdir = workdir.display(),
        );
        let config_path = dir.path().join("config.toml");
        std::fs::write(&config_path, toml).expect("write the config");
        Setup {
            dir,
            config_path,
            db,
            _db_dir: db_dir,
        }
    }

    pub fn config(&self) -> Arc<Config> {
        Arc::new(Config::load(&self.config_path).expect("the bench config is valid"))
    }

    pub fn url(&self) -> String {
        format!("sqlite://{}", self.db.display())
    }
}

pub fn goal(i: usize) -> String {
    format!(
        "Add a greeting page to the demo app (bench sprint {})",
        i + 1
    )
}

pub async fn create_sprints(store: &Store, config: &Config, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let sprint = store
            .create_sprint(
                PROJECT,
                &goal(i),
                None,
                "cli:bench@bench",
                &config.pipeline.branch_template,
                now_ms(),
            )
            .await
            .expect("create a sprint");
        ids.push(sprint.id);
    }
    ids
}
