//! The project's recipe and the sprint contract through the real
//! orchestrator and scripted sisters: the recipe keys and their config errors, what each
//! sister's prompt and contract file carry, a project's own role text, and an APPROVE
//! that leaves a contract item out being sent back for repair.

use hanarang::handoff::validate::validate_value;
use hanarang::pipeline::State;
use hanarang::sister::RunOutcome;
use hanarang::store::{CommandKind, Run};
use serde_json::json;

use crate::reviewers::two_reviewers;
use crate::support::pipeline::{Files, Pipeline, Setup, workdir};

/// The recipe every test here gives `[projects.app]` (appended to its table). Its check
/// is one that passes (`true` ignores its arguments): the orchestrator runs it.
const RECIPE: &str = r#"base_branch = "main"
plan_dir = "docs/plans/{sprint_lower}"
check = ["true", "test", "--quiet"]
check_timeout = "10m"
instructions = "AGENTS.md"
deploy = "Run scripts/release.sh, then curl the health endpoint of the staging host."
"#;

const INSTRUCTIONS: &str = "Keep every public function documented. Never touch vendor/.";

/// The files of a pipeline whose project has the recipe above (and its instructions file).
fn with_recipe(setup: &Setup, more: &str) -> Files {
    let files = Files::new(setup);
    std::fs::write(workdir(&files, "app").join("AGENTS.md"), INSTRUCTIONS).expect("instructions");
    files.append_config(&format!("{RECIPE}{more}"));
    files
}

fn of(runs: &[Run], actor: &str) -> Vec<Run> {
    runs.iter()
        .filter(|r| r.actor.as_str() == actor)
        .cloned()
        .collect()
}

#[test]
fn a_missing_instructions_file_or_prompts_folder_is_a_config_error_naming_its_key() {
    let files = Files::new(&Setup::default());
    files.append_config("instructions = \"AGENTS.md\"\nprompts = \"my-prompts\"\n");
    let app = workdir(&files, "app");
    let instructions = format!(
        "projects.app.instructions: no file {}",
        std::fs::canonicalize(&app)
            .expect("workdir")
            .join("AGENTS.md")
            .display()
    );
    let prompts = format!(
        "projects.app.prompts: no folder {}",
        files.dir.path().join("my-prompts").display()
    );

    let check = files.hanarang(&["config", "check"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(check.status.code(), Some(2), "{said}");
    assert!(said.contains(&instructions), "{said}");
    assert!(said.contains(&prompts), "{said}");

    let doctor = files.hanarang(&["doctor"]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert_ne!(doctor.status.code(), Some(0), "{said}");
    assert!(said.contains(&instructions), "{said}");
    assert!(said.contains(&prompts), "{said}");
}

#[test]
fn recipe_keys_are_checked_and_shown_resolved() {
    let files = Files::new(&Setup::default());
    files.append_config(
        "plan_dir = \"/abs/{nope}\"\ncheck = [\"\"]\ncheck_timeout = \"soon\"\nbase_branch = \"\"\n",
    );
    let out = files.hanarang(&["config", "check"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{said}");
    for key in [
        "projects.app.check_timeout",
        "projects.app.plan_dir",
        "projects.app.check",
        "projects.app.base_branch",
    ] {
        assert!(said.contains(key), "{key} not named: {said}");
    }

    let files = with_recipe(&Setup::default(), "");
    let out = files.hanarang(&["config", "check"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("plan_dir = \"docs/plans/{sprint_lower}\""),
        "{said}"
    );
    assert!(said.contains("check_timeout = \"10m\""), "{said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_prompt_says_the_role_with_the_projects_recipe() {
    let setup = Setup {
        harang: "plan-checklist login-form,tests",
        narang: "ok {plan_dir}",
        darang: "omit-first 0 login-form,tests",
        ..Setup::default()
    };
    let p = Pipeline::start_with(with_recipe(&setup, "")).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    p.command(&s.id, CommandKind::Approve, None).await;
    p.wait_for(&s.id, State::Deployed).await;

    let runs = p.runs(&s.id).await;
    let app = std::fs::canonicalize(workdir(&p.files, "app")).expect("workdir");
    let plan_dir = app.join("docs/plans/sprint-001").display().to_string();
    for run in &runs {
        let prompt = p.files.stdin_of(&run.run_id);
        let actor = run.actor.as_str();
        for needle in [
            plan_dir.as_str(),
            "from main at",
            INSTRUCTIONS,
            "`true test --quiet`",
        ] {
            assert!(
                prompt.contains(needle),
                "{actor}: no {needle:?} in\n{prompt}"
            );
        }
        let contract = p.files.contract_of(&run.run_id);
        assert_eq!(contract["planDir"], json!(plan_dir), "{actor}");
        assert_eq!(contract["baseBranch"], json!("main"), "{actor}");
        assert_eq!(contract["check"], json!(["true", "test", "--quiet"]));
        assert_eq!(contract["instructions"], json!(INSTRUCTIONS));
    }
    // `{plan_dir}` is an argument placeholder too (the scripted sister logs its arguments).
    let narang = &of(&runs, "narang")[0];
    let log = narang.stderr_tail.clone().unwrap_or_default();
    assert!(log.contains(&format!("ok {plan_dir}")), "{log}");
    // The branch as the sprint knows it (later ones, as narang reported it).
    for actor in ["harang", "narang"] {
        let prompt = p.files.stdin_of(&of(&runs, actor)[0].run_id);
        assert!(
            prompt.contains("on the branch feature/sprint-001"),
            "{prompt}"
        );
    }
    let harang = &of(&runs, "harang")[0];
    let prompt = p.files.stdin_of(&harang.run_id);
    assert!(prompt.contains("Write the plan as markdown in"), "{prompt}");
    assert!(
        prompt.contains("the project keeps its plans in its tree): commit the plan there"),
        "the project's plan_dir is in its tree: {prompt}"
    );

    // The contract goes to the implementer and the reviewer, as the planner wrote it.
    let items = json!([
        { "id": "login-form", "text": "login-form is done" },
        { "id": "tests", "text": "tests is done" },
    ]);
    for actor in ["narang", "darang"] {
        let run = &of(&runs, actor)[0];
        let prompt = p.files.stdin_of(&run.run_id);
        assert!(
            prompt.contains(concat!(
                "<checklist from=\"harang\">\n",
                "- login-form: login-form is done\n",
                "- tests: tests is done\n",
                "</checklist>"
            )),
            "{actor}:\n{prompt}"
        );
        assert_eq!(p.files.contract_of(&run.run_id)["checklist"], items);
    }
    let darang = p.files.stdin_of(&of(&runs, "darang")[0].run_id);
    assert!(darang.contains("Report EVERY contract item"), "{darang}");
    assert!(
        darang.contains("You read; you do not write. Do not commit"),
        "{darang}"
    );
    let erang = p.files.stdin_of(&of(&runs, "erang")[0].run_id);
    assert!(
        erang.contains("Run scripts/release.sh, then curl the health endpoint"),
        "{erang}"
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_projects_prompt_replaces_the_built_in_role_text() {
    let files = with_recipe(&Setup::default(), "prompts = \"prompts\"\n");
    let folder = files.dir.path().join("prompts");
    std::fs::create_dir_all(&folder).expect("prompts folder");
    std::fs::write(
        folder.join("narang.md"),
        "OUR WAY: build {sprint} on {branch} from {base_branch}; plan in {plan_dir}; check {check}; {instructions}\n",
    )
    .expect("narang.md");
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;

    let runs = p.runs(&s.id).await;
    let plan_dir = std::fs::canonicalize(workdir(&p.files, "app"))
        .expect("workdir")
        .join("docs/plans/sprint-001");
    let narang = p.files.stdin_of(&of(&runs, "narang")[0].run_id);
    let expected = format!(
        "OUR WAY: build SPRINT-001 on feature/sprint-001 from main; plan in {}; check `true test --quiet` in {} must exit 0; {INSTRUCTIONS}\n",
        plan_dir.display(),
        plan_dir
            .parent()
            .and_then(|d| d.parent())
            .and_then(|d| d.parent())
            .expect("workdir")
            .display()
    );
    assert!(narang.contains(&expected), "{narang}");
    assert!(!narang.contains("Your job: implement"), "{narang}");
    // The frame around it is the orchestrator's, as always.
    assert!(narang.contains("<handoff-context>"), "{narang}");
    // Sisters without a file of the project's keep the built-in text.
    let darang = p.files.stdin_of(&of(&runs, "darang")[0].run_id);
    assert!(darang.contains("Your job: review"), "{darang}");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approve_that_leaves_a_contract_item_out_is_sent_back_to_be_repaired() {
    let p = Pipeline::start(Setup {
        harang: "plan-checklist tests,docs,a11y",
        darang: "omit-first 1 tests,docs,a11y",
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let done = p.wait_for(&s.id, State::Done).await;
    assert_eq!(done.round, 1, "a repair is an attempt, not a round");

    let darang = of(&p.runs(&s.id).await, "darang");
    assert_eq!(darang.len(), 2, "{darang:?}");
    assert_eq!(darang[0].outcome, Some(RunOutcome::BadOutput));
    let detail = darang[0].detail.clone().unwrap_or_default();
    assert!(
        detail.contains("APPROVE leaves contract items out of checklistResults: docs, a11y"),
        "{detail}"
    );
    assert_eq!(darang[1].outcome, Some(RunOutcome::Handoff));
    let repair = p.files.stdin_of(&darang[1].run_id);
    assert!(
        repair.contains("Your previous answer was rejected: <rejection from=\"validator\">"),
        "{repair}"
    );
    assert!(
        repair.contains("out of checklistResults: docs, a11y"),
        "{repair}"
    );
    let files = p.stop().await;

    // The contract is the sprint's: `sprint log` shows it with the review's result.
    let log = files.hanarang(&["sprint", "log", &s.id, "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log --json");
    assert_eq!(
        log["checklist"],
        json!([
            { "id": "tests", "text": "tests is done", "passed": true },
            { "id": "docs", "text": "docs is done", "passed": true },
            { "id": "a11y", "text": "a11y is done", "passed": true },
        ])
    );
    let text = files.hanarang(&["sprint", "log", &s.id]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("  ✅ docs: docs is done\n"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn each_parallel_reviewer_is_held_to_the_contract() {
    let p = Pipeline::start(Setup {
        harang: "plan-checklist tests,docs",
        extra: two_reviewers("omit-first 1 tests,docs", "omit-first 0 tests,docs"),
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;

    let runs = p.runs(&s.id).await;
    let by = |name: &str| -> Vec<&Run> {
        runs.iter()
            .filter(|r| r.reviewer.as_deref() == Some(name))
            .collect()
    };
    let (fixed, clean) = (by("static"), by("runtime"));
    assert_eq!(fixed.len(), 2, "{fixed:?}");
    assert_eq!(fixed[0].outcome, Some(RunOutcome::BadOutput));
    assert!(
        fixed[0].detail.as_deref().is_some_and(
            |d| d.contains("APPROVE leaves contract items out of checklistResults: docs")
        ),
        "{fixed:?}"
    );
    assert_eq!(fixed[1].outcome, Some(RunOutcome::Handoff));
    assert_eq!(clean.len(), 1, "{clean:?}");
    // Each knows it is one of several, and is given the contract.
    let prompt = p.files.stdin_of(&clean[0].run_id);
    assert!(
        prompt.contains("You are the reviewer named \"runtime\""),
        "{prompt}"
    );
    assert!(prompt.contains("- docs: docs is done"), "{prompt}");
    assert_eq!(
        p.files.contract_of(&clean[0].run_id)["reviewer"],
        json!("runtime")
    );
    p.stop().await;
}

#[test]
fn a_plans_checklist_is_in_both_schemas_and_checked() {
    let files = Files::new(&Setup::default());
    for dialect in ["draft-07", "openai-strict"] {
        let out = files.hanarang(&["schema", "--actor", "harang", "--dialect", dialect]);
        let schema = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{schema}");
        assert!(schema.contains("\"checklist\""), "{dialect}: {schema}");
    }
    let plan = |checklist: serde_json::Value| {
        json!({ "actor": "harang", "verdict": "PLAN_READY",
                "payload": { "planDir": "/w/p", "sprintId": "SPRINT-001",
                             "contractId": "C", "checklist": checklist } })
    };
    assert!(validate_value(plan(json!([{ "id": "a", "text": "t" }])), None).is_ok());
    let problems = validate_value(
        plan(json!([
            { "id": "a", "text": "t" }, { "id": "a", "text": "u" }, { "id": " ", "text": "" }
        ])),
        None,
    )
    .expect_err("a duplicate and an empty item");
    let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        [
            "/payload/checklist/1/id: duplicate id \"a\" (also item 0)",
            "/payload/checklist/2/id: must not be empty",
            "/payload/checklist/2/text: must not be empty",
        ],
        "{said:?}"
    );
    let many: Vec<serde_json::Value> = (0..101)
        .map(|i| json!({ "id": format!("c{i}"), "text": "t" }))
        .collect();
    let problems = validate_value(plan(json!(many)), None).expect_err("too many items");
    assert_eq!(problems[0].path, "/payload/checklist", "{problems:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn each_run_has_an_artifact_folder_outside_the_repository_listed_by_sprint_log() {
    let p = Pipeline::start(Setup {
        darang: "notes",
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let runs = p.runs(&s.id).await;
    let darang = &of(&runs, "darang")[0];
    let dir = p.files.contract_of(&darang.run_id)["artifactDir"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        dir.starts_with('/') && dir.ends_with(&darang.run_id),
        "{dir}"
    );
    assert!(!dir.starts_with(&workdir(&p.files, "app").display().to_string()));
    let prompt = p.files.stdin_of(&darang.run_id);
    assert!(
        prompt.contains(&format!(
            "Write your review notes (and anything else you make) in {dir}"
        )),
        "{prompt}"
    );
    let files = p.stop().await;

    let log = files.hanarang(&["sprint", "log", &s.id, "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log --json");
    assert_eq!(
        log["artifacts"],
        json!([{ "run": darang.run_id, "dir": dir, "files": ["notes.md"] }])
    );
    let text = files.hanarang(&["sprint", "log", &s.id]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&format!("{dir}: notes.md")), "{text}");
    // Outside git there is no base, so no diff: said, not an empty patch.
    let diff = files.hanarang(&["sprint", "diff", &s.id]);
    assert_eq!(diff.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&diff.stderr).contains("SPRINT-001: no base recorded"));
}
