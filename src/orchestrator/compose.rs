//! Composing a stage's next run from the sprint's history: the chain of handoff
//! documents, the reviewers' findings, the reason of the last rejection, the focus, and
//! the record the run is started with.

use super::findings::{review_issues, round_findings};
use super::{Orchestrator, now_ms};
use crate::domain::{Stage, run_id};
use crate::handoff::message::{HandoffMessage, ReviewIssue};
use crate::handoff::schema::{self, Dialect};
use crate::handoff::synthesize::{Known, Observed, after_handoff, synthesize};
use crate::sister::{self, ContractFile, RunOutcome, RunRequest};
use crate::store::{NewRun, Run, Sprint};

/// A stage's next run, composed from the sprint and its history: its record and what
/// its sister is given.
pub(super) struct Composed {
    pub(super) request: RunRequest,
    pub(super) number: i64,
    pub(super) parent_run_id: Option<String>,
    pub(super) git_head: Option<String>,
    /// Why the run cannot start (its project left the config, a recipe file cannot be
    /// read): its `spawn_failed` detail.
    pub(super) unpreparable: Option<String>,
    pub(super) started_at: i64,
    /// The sprint's runs, this one included (as it starts).
    pub(super) runs: Vec<Run>,
    /// Which of the reviewer's parallel reviewers it is, when it has several.
    pub(super) reviewer: Option<String>,
    /// The run whose agent session it continues.
    pub(super) resumes: Option<String>,
    /// The sprint's notes it is given: those up to this command id (`NewRun::notes_upto`).
    pub(super) notes_upto: Option<i64>,
    /// The agent of the sister's chain that runs it (a preset or profile name).
    pub(super) agent: String,
}

impl Composed {
    /// The run's record, for `start_run` or the commit that starts it.
    pub(super) fn record(&self) -> NewRun<'_> {
        let c = &self.request.contract;
        NewRun {
            sprint_id: &c.sprint_id,
            number: self.number,
            actor: c.role,
            round: c.round,
            attempt: c.attempt,
            parent_run_id: self.parent_run_id.as_deref(),
            handoff: &c.handoff,
            synthesized: c.handoff_synthesized,
            focus: c.focus.as_deref(),
            git_head: self.git_head.as_deref(),
            started_at: self.started_at,
            reviewer: self.reviewer.as_deref(),
            resumes: self.resumes.as_deref(),
            notes_upto: self.notes_upto,
            agent: Some(&self.agent),
        }
    }

    /// Writes the run's files (see `sister::prepare`); the error is its report.
    pub(super) fn prepare(&self) -> Result<sister::Prepared, Box<sister::RunReport>> {
        match &self.unpreparable {
            Some(detail) => Err(Box::new(sister::RunReport::spawn_failed(detail.clone()))),
            None => sister::prepare(&self.request),
        }
    }
}

impl Orchestrator {
    /// The next run of the sprint's stage (`None` when it is in no stage): the chain of
    /// documents, the reviewer's issues, the reason of the last rejection, the focus.
    pub(super) async fn compose(&self, sprint: &Sprint, runs: Vec<Run>) -> Option<Composed> {
        self.compose_as(sprint, runs, None).await
    }

    /// Where a run's contract file is written: one per sprint, rewritten for each run,
    /// and one per parallel reviewer, since reviewers of a round run at once.
    pub(super) fn contract_path(
        &self,
        sprint_id: &str,
        reviewer: Option<&str>,
    ) -> std::path::PathBuf {
        let path = self.store.contract_path(sprint_id);
        match reviewer {
            Some(name) => path.with_file_name(format!("{sprint_id}.{name}.contract.json")),
            None => path,
        }
    }

    /// The next run of one of the reviewer's parallel reviewers, its `attempt`-th of the round.
    pub(super) async fn compose_reviewer(
        &self,
        sprint: &Sprint,
        runs: Vec<Run>,
        reviewer: &str,
        attempt: u32,
    ) -> Option<Composed> {
        self.compose_as(sprint, runs, Some((reviewer, attempt)))
            .await
    }

    async fn compose_as(
        &self,
        sprint: &Sprint,
        mut runs: Vec<Run>,
        reviewer: Option<(&str, u32)>,
    ) -> Option<Composed> {
        let stage = sprint.state.stage()?;
        let actor = stage.actor();
        let project = self.config.projects.get(&sprint.project);
        let workdir = project.map(|p| p.workdir.clone()).unwrap_or_default();
        let lineage = Lineage::of(&runs, stage, reviewer.is_some());
        let (handoff, synthesized, handoff_by) =
            self.handoff_for(sprint, &lineage, stage, &workdir).await;
        let attempt = reviewer.map_or(sprint.attempt, |(_, attempt)| attempt);
        let previous_rejection = match reviewer {
            Some((name, _)) => {
                let mine: Vec<Run> = runs
                    .iter()
                    .filter(|r| r.reviewer.as_deref() == Some(name))
                    .cloned()
                    .collect();
                previous_rejection(&mine, sprint, attempt)
            }
            None => previous_rejection(&runs, sprint, attempt),
        };
        let check_result = self
            .check_result(sprint, &runs, lineage.previous_run.as_ref(), attempt)
            .await;
        let workspace = self
            .workspace(sprint, &runs, project, actor, &workdir)
            .await;
        // The next number: this loop is the only one that adds runs to its sprints.
        let number = runs.iter().map(|r| r.number).max().unwrap_or(0) + 1;
        let (texts, unpreparable) = match self.recipe_texts(sprint, project, actor) {
            Ok(texts) => (texts, workspace.not_checked_out.clone()),
            Err(detail) => (RecipeTexts::default(), Some(detail)),
        };
        let asked = self.asked(sprint, actor, &runs).await;
        let parent_run_id = lineage.parent.as_ref().map(|r| r.run_id.clone());
        let (review_issues, review_issues_by) = lineage.review_issues(stage);
        let checkout = workspace.checkout.as_ref();
        // Where the plan is, and whether it is a file of the tree; the folder outside the
        // tree is made now, as the fence grants only what exists.
        let plan_dir = project.map(|p| {
            let dir = p.plan_dir_of(&sprint.id, &sprint.project, self.store.runs_dir());
            (dir, p.plans_in_tree())
        });
        let unpreparable = match &plan_dir {
            Some((dir, false)) => match std::fs::create_dir_all(dir) {
                Ok(()) => unpreparable,
                Err(e) => unpreparable.or(Some(format!(
                    "cannot make the sprint's plan folder {}: {e}",
                    dir.display()
                ))),
            },
            _ => unpreparable,
        };
        let contract = ContractFile {
            sprint_id: sprint.id.clone(),
            goal: sprint.goal.clone(),
            project: sprint.project.clone(),
            role: actor,
            round: sprint.round,
            attempt,
            branch: sprint.branch.clone(),
            contract_id: sprint.contract_id.clone(),
            run_id: run_id(&sprint.id, number),
            workdir: workdir.display().to_string(),
            previous_message: lineage.previous_message,
            review_issues,
            handoff,
            handoff_synthesized: synthesized,
            focus: sprint.focus.clone(),
            request: asked.request,
            notes: asked.notes,
            previous_rejection,
            schema: schema::schema(Some(actor), Dialect::Draft07).unwrap_or_default(),
            goal_by: sprint.started_by.clone(),
            focus_by: sprint.focus_by.clone(),
            review_issues_by,
            handoff_by: Some(handoff_by),
            plan_dir: plan_dir
                .as_ref()
                .map(|(dir, _)| dir.display().to_string())
                .unwrap_or_default(),
            plan_in_tree: plan_dir.as_ref().is_some_and(|(_, in_tree)| *in_tree),
            base_branch: checkout
                .map(|c| c.base_branch.clone())
                .or_else(|| project.and_then(|p| p.base_branch.clone())),
            base_commit: checkout.map(|c| c.base_commit.clone()),
            head: checkout.map(|c| c.head.clone()),
            artifact_dir: self
                .store
                .artifact_dir(&run_id(&sprint.id, number))
                .display()
                .to_string(),
            checklist: asked.checklist,
            checklist_by: asked.checklist_by,
            check: project.map(|p| p.check.clone()).unwrap_or_default(),
            instructions: texts.instructions,
            deploy: project.and_then(|p| p.deploy.clone()),
            reviewer: reviewer.map(|(name, _)| name.to_string()),
            check_result,
            base_check: workspace.at_base.told,
            forge_checks: match stage {
                Stage::Implementing => self.forge_checks(sprint).await,
                _ => Vec::new(),
            },
            merged: None,
            forge: self
                .forge_route(sprint, checkout.map(|c| c.base_commit.as_str()))
                .await,
        };
        if let Some((name, _)) = reviewer {
            self.config.agent.reviewer_spec(name)?;
        }
        let reviewer_name = reviewer.map(|(name, _)| name);
        let (agent, spec, resumes) = self.agent_for(sprint, &runs, actor, reviewer_name).await?;
        let fence = self.fence(
            std::path::Path::new(&contract.artifact_dir),
            &workdir,
            plan_dir
                .as_ref()
                .filter(|(_, in_tree)| !in_tree)
                .map(|(dir, _)| (dir.as_path(), stage == Stage::Planning)),
            &spec.writable,
            &spec.env,
        );
        let mut request = RunRequest {
            spec,
            contract,
            contract_path: self.contract_path(&sprint.id, reviewer_name),
            repo: self.repo(&workdir),
            workdir,
            token_env: self.config.token_env().to_string(),
            role_text: texts.role_text,
            check: super::check::for_run(project, actor),
            base_check: workspace.at_base.run,
            fence: Some(fence),
            containers: self.containers.clone(),
            git_identity: crate::config::git_identity(
                &self.config.agent.git_author,
                actor,
                &self.config.host.name,
            ),
        };
        let mut unpreparable = unpreparable;
        if stage == Stage::Deploying
            && unpreparable.is_none()
            && let Some(commit) = self.merged_commit(sprint).await
            && let Err(why) = self.deploy_merged(sprint, &mut request, &commit).await
        {
            unpreparable = Some(why);
        }
        let mut composed = Composed {
            request,
            number,
            parent_run_id,
            git_head: workspace.git_head,
            unpreparable,
            started_at: now_ms(),
            runs: Vec::new(),
            reviewer: reviewer_name.map(str::to_string),
            resumes: resumes.map(|(run, _)| run),
            notes_upto: asked.notes_upto,
            agent,
        };
        runs.push(Run::started(&composed.record()));
        composed.runs = runs;
        Some(composed)
    }

    /// The run's handoff document, whether the orchestrator composed it, and where it
    /// comes from for the prompt (the run that wrote it, or the orchestrator).
    async fn handoff_for(
        &self,
        sprint: &Sprint,
        lineage: &Lineage,
        stage: Stage,
        workdir: &std::path::Path,
    ) -> (crate::handoff::HandoffDocument, bool, String) {
        if let Some(stopped) = &lineage.parent
            && stopped.outcome == Some(RunOutcome::HandedOff)
        {
            let observed = observe(stopped, &self.repo(workdir)).await;
            let sister = crate::handoff::synthesize::sister_name(stage.actor());
            let by = format!("{SYNTHESIZED} from {}", run_label(stopped));
            return (
                after_handoff(&stopped.handoff, &sister, &observed),
                true,
                by,
            );
        }
        if let Some((doc, by)) = lineage.findings.as_ref().and_then(|f| f.handoff.clone()) {
            return (doc, false, by);
        }
        let written = lineage.previous_message.as_ref();
        match (
            written.and_then(|m| m.common().handoff.clone()),
            &lineage.previous_run,
        ) {
            (Some(doc), Some(run)) => (doc, false, run_label(run)),
            _ => {
                let known = Known {
                    goal: &sprint.goal,
                    branch: &sprint.branch,
                    contract_id: &sprint.contract_id,
                    round: sprint.round,
                };
                let doc = synthesize(known, written, stage);
                (doc, true, SYNTHESIZED.to_string())
            }
        }
    }

    /// The sprint's branch checked out for the run, the check at its base, and the head
    /// the run starts from.
    async fn workspace(
        &self,
        sprint: &Sprint,
        runs: &[Run],
        project: Option<&crate::config::ProjectConfig>,
        actor: crate::domain::Actor,
        workdir: &std::path::Path,
    ) -> Workspace {
        let checkout = match project {
            Some(p) => self.checkout(sprint, runs, p).await,
            None => Ok(None),
        };
        let (checkout, not_checked_out) = match checkout {
            Ok(c) => (c, None),
            Err(detail) => (None, Some(detail)),
        };
        let at_base = self
            .at_base(sprint, runs, project, checkout.as_ref(), actor)
            .await;
        let git_head = match &checkout {
            Some(c) => Some(c.head.clone()),
            None => crate::git::facts::head(&self.repo(workdir)).await,
        };
        Workspace {
            checkout,
            not_checked_out,
            at_base,
            git_head,
        }
    }

    /// The project's texts for the run (its instructions, the sister's role text); the
    /// error says why they cannot be read.
    fn recipe_texts(
        &self,
        sprint: &Sprint,
        project: Option<&crate::config::ProjectConfig>,
        actor: crate::domain::Actor,
    ) -> Result<RecipeTexts, String> {
        let Some(p) = project else {
            return Err(format!(
                "project {:?} is no longer configured ([projects.{}])",
                sprint.project, sprint.project
            ));
        };
        let own = crate::fence::Own::of(&self.config, self.store.runs_dir());
        recipe(
            p,
            &sprint.project,
            actor,
            &own.files,
            &self.config.workdirs(),
        )
    }

    /// What people asked that the run is told: the request of its round, the contract
    /// with what they added to it, and their notes no run acted on yet.
    async fn asked(&self, sprint: &Sprint, actor: crate::domain::Actor, runs: &[Run]) -> Asked {
        let log = match self.store.transitions(&sprint.id).await {
            Ok(log) => log,
            Err(e) => {
                tracing::warn!(sprint = %sprint.id, error = %e, "cannot read the log: the run is not told what people asked of the rounds");
                Vec::new()
            }
        };
        let request = request(sprint, actor, &log);
        let asking = request
            .as_ref()
            .map(|r| (sprint.round, r.by.as_str(), r.text.as_str()));
        let (checklist, checklist_by) = crate::store::sourced(runs, &log, asking)
            .into_iter()
            .unzip();
        let (notes, notes_upto) = self.notes(sprint, runs, request.as_ref()).await;
        Asked {
            request,
            checklist,
            checklist_by,
            notes,
            notes_upto,
        }
    }

    /// The agent of the sister's chain that runs (none at a usage limit), its spawn
    /// settings, and the run whose session it resumes, with that session's id.
    async fn agent_for(
        &self,
        sprint: &Sprint,
        runs: &[Run],
        actor: crate::domain::Actor,
        reviewer: Option<&str>,
    ) -> Option<(String, crate::config::SisterSpec, Option<(String, String)>)> {
        let now = now_ms();
        let paused = self.paused_agents(runs, now).await;
        let (agent, mut spec) =
            super::session::agent_for(&self.config, &paused, actor, reviewer, now)?;
        let resumes = super::session::resumable(runs, sprint.round, actor, reviewer, &agent, &spec);
        if let (Some((_, session)), Some(args)) = (&resumes, &spec.resume_args) {
            spec.args = args
                .iter()
                .map(|a| a.replace(&format!("{{{}}}", crate::placeholder::SESSION), session))
                .collect();
        }
        Some((agent, spec, resumes))
    }
}

/// What a run comes after: the run whose document it continues (its parent), the last
/// answer before it and that answer's message, and, after a round of several reviewers,
/// what they found.
struct Lineage {
    parent: Option<Run>,
    previous_run: Option<Run>,
    previous_message: Option<HandoffMessage>,
    findings: Option<super::findings::RoundFindings>,
}

impl Lineage {
    /// This run's parent is the last run that handed off a valid message, or that a user
    /// handed off to a fresh session. After a round of several reviewers: the one that
    /// finished last. A reviewer's parent is the implementer's run, never another
    /// reviewer's.
    fn of(runs: &[Run], stage: Stage, reviewer: bool) -> Lineage {
        let findings = (stage == Stage::Implementing)
            .then(|| round_findings(runs))
            .flatten();
        let counts = |r: &&Run| !reviewer || r.actor.stage() == Stage::Implementing;
        let (parent, previous_run) = match &findings {
            Some(f) => (Some(f.parent.clone()), Some(f.parent.clone())),
            None => (
                runs.iter()
                    .rev()
                    .filter(counts)
                    .find(|r| {
                        matches!(r.outcome, Some(RunOutcome::Handoff | RunOutcome::HandedOff))
                    })
                    .cloned(),
                runs.iter()
                    .rev()
                    .filter(counts)
                    .find(|r| r.outcome == Some(RunOutcome::Handoff))
                    .cloned(),
            ),
        };
        let previous_message = previous_run
            .as_ref()
            .and_then(|r| r.message.clone())
            .and_then(|m| serde_json::from_value(m).ok());
        Lineage {
            parent,
            previous_run,
            previous_message,
            findings,
        }
    }

    /// What the reviewers want fixed, each with who raised it: the round's findings, or
    /// the last review's issues when the implementer runs after it.
    fn review_issues(&self, stage: Stage) -> (Vec<ReviewIssue>, Vec<String>) {
        if let Some(f) = &self.findings {
            return f.issues.iter().cloned().unzip();
        }
        match (&self.previous_message, stage) {
            (Some(m), Stage::Implementing) => {
                let issues = m.review().map(review_issues).unwrap_or_default();
                let by = vec![Stage::Reviewing.actor().to_string(); issues.len()];
                (issues, by)
            }
            _ => (Vec::new(), Vec::new()),
        }
    }
}

/// Where the run works: the checkout (none outside git, or when it failed: why), the check
/// at the base, the head it starts from.
struct Workspace {
    checkout: Option<crate::git::branch::Checkout>,
    not_checked_out: Option<String>,
    at_base: super::check::AtBase,
    git_head: Option<String>,
}

/// What people asked that a run is told.
struct Asked {
    request: Option<sister::contract::PersonRequest>,
    checklist: Vec<crate::handoff::message::ChecklistItem>,
    checklist_by: Vec<String>,
    notes: Vec<sister::contract::PersonNote>,
    notes_upto: Option<i64>,
}

impl Orchestrator {
    /// What a person asked of the sprint's round, for its implementer and reviewers: the
    /// focus a request for changes (a resume, a handoff) has just given the implementer,
    /// else the last the log holds for this round.
    /// The merge commit the deploy that is running is for, when a merge on the forge
    /// started it.
    async fn merged_commit(&self, sprint: &Sprint) -> Option<String> {
        let log = self.store.transitions(&sprint.id).await.ok()?;
        let into = log
            .iter()
            .rev()
            .find(|t| t.to == crate::pipeline::State::Deploying && t.from != t.to)?;
        match (&into.note, &into.detail) {
            (Some(crate::pipeline::fsm::Note::Merged { commit, .. }), _)
            | (_, crate::pipeline::Event::ForgeMerged { commit, .. }) => commit.clone(),
            _ => None,
        }
    }

    /// The forge's failed checks that started this implementation round, if they did.
    async fn forge_checks(&self, sprint: &Sprint) -> Vec<crate::pipeline::fsm::FailedCheck> {
        let Ok(log) = self.store.transitions(&sprint.id).await else {
            return Vec::new();
        };
        log.iter()
            .rev()
            .find(|t| t.to == crate::pipeline::State::Implementing && t.from != t.to)
            .filter(|t| t.round == sprint.round)
            .and_then(|t| match &t.detail {
                crate::pipeline::Event::ChecksFailed { failed, .. } => Some(failed.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The notes people left for the sprint that no run acted on yet, and the last one's
    /// command id: those given to no run, and those given to a run that ended without an
    /// answer (it failed, paused at a usage limit, was interrupted or handed off), which
    /// the next run is given again. One whose signature does not verify is not given (the
    /// loop refuses it); one that only says what this round's request says is not given
    /// twice.
    async fn notes(
        &self,
        sprint: &Sprint,
        runs: &[Run],
        request: Option<&sister::contract::PersonRequest>,
    ) -> (Vec<sister::contract::PersonNote>, Option<i64>) {
        use crate::store::{CommandKind, CommandStatus};
        let commands = match self.store.commands_of(&sprint.id).await {
            Ok(commands) => commands,
            Err(e) => {
                tracing::warn!(sprint = %sprint.id, error = %e, "cannot read the sprint's notes: this run is not given them (the next one is)");
                return (Vec::new(), None);
            }
        };
        let mut notes = Vec::new();
        let mut upto = None;
        for c in commands.iter().filter(|c| {
            c.kind == CommandKind::Note
                && c.status != CommandStatus::Refused
                && crate::pipeline::note_due(match c.delivered_run.as_deref() {
                    None => crate::pipeline::NoteGiven::ToNone,
                    Some(given) => crate::pipeline::NoteGiven::To(
                        runs.iter()
                            .find(|r| r.run_id == given)
                            .and_then(|r| r.outcome),
                    ),
                })
        }) {
            if !self.store.written_by_hanarang(c).await.unwrap_or(false) {
                continue;
            }
            upto = Some(c.id);
            let text = c.text.as_deref().unwrap_or_default().trim();
            if request.is_some_and(|r| r.text.trim() == text) {
                continue;
            }
            notes.push(sister::contract::PersonNote {
                by: c.by.clone(),
                text: text.to_string(),
                at: c.created_at,
            });
        }
        (notes, upto)
    }

    /// What a run may touch: nothing of hanarang's (`Own`); written, only its workdir,
    /// its artifact folder, the temporary folder, the usual devices and the sister's
    /// `writable` (never `/proc` or `/sys`); no variable (of hanarang's environment or the
    /// sister's `env`) that carries the database's URL or password.
    pub(super) fn fence(
        &self,
        artifact_dir: &std::path::Path,
        workdir: &std::path::Path,
        plan: Option<(&std::path::Path, bool)>,
        writable: &[String],
        env: &std::collections::BTreeMap<String, String>,
    ) -> crate::fence::Fence {
        let own = crate::fence::Own::of(&self.config, self.store.runs_dir());
        let hidden_env = own.hidden_env(env);
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let base = self
            .config
            .source
            .as_deref()
            .and_then(std::path::Path::parent)
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        let own_writable = writable.iter().filter_map(|w| {
            let path = match w.strip_prefix("~/") {
                Some(rest) => home.as_ref().map(|h| h.join(rest))?,
                None if w == "~" => home.clone()?,
                None => base.join(w),
            };
            // A folder (named with a trailing "/") the CLI makes on its first run is made
            // now: the fence grants only what exists.
            if w.ends_with('/') && !path.exists() {
                let _ = std::fs::create_dir_all(&path);
            }
            Some(path)
        });
        // The sprint's plan folder outside the tree: the planner's to write, the others'
        // to read.
        let (plan_read, plan_written) = match plan {
            Some((dir, true)) => (None, Some(dir.to_path_buf())),
            Some((dir, false)) => (Some(dir.to_path_buf()), None),
            None => (None, None),
        };
        let writable = [
            workdir.to_path_buf(),
            artifact_dir.to_path_buf(),
            std::env::temp_dir(),
            // SQLite's own temporary files go here before /tmp when TMPDIR is unset.
            std::path::PathBuf::from("/var/tmp"),
        ]
        .into_iter()
        .chain(crate::fence::DEVICES.iter().map(std::path::PathBuf::from))
        .chain(plan_written)
        .chain(own_writable)
        .collect();
        crate::fence::Fence {
            plan: crate::fence::Plan {
                protected: own.files,
                readable: plan_read.into_iter().collect(),
                writable,
                exec: None,
                tcp: own
                    .db_port
                    .map_or(crate::fence::Tcp::Open, crate::fence::Tcp::ClosedPort),
            },
            required: own.required,
            hidden_env,
        }
    }
}

/// The project's texts a run carries, read when it starts so an edit counts at once.
#[derive(Default)]
struct RecipeTexts {
    instructions: Option<String>,
    role_text: Option<String>,
}

/// Reads the project's instructions file and its text for `actor`'s job, a file of the
/// workdir as a sister could open it, never one of `own` (hanarang's files) nor, for an
/// operator's prompt, a link into one of `workdirs`; the error is the run's `spawn_failed`
/// detail, naming the key.
fn recipe(
    project: &crate::config::ProjectConfig,
    name: &str,
    actor: crate::domain::Actor,
    own: &[std::path::PathBuf],
    workdirs: &[&std::path::Path],
) -> Result<RecipeTexts, String> {
    let instructions = project
        .read_instructions(&format!("projects.{name}.instructions"), own)
        .transpose()
        .map_err(|e| e.to_string())?;
    let role_text = match project.prompt_file(actor) {
        Some(path) => Some(
            project
                .read_prompt(&path, &format!("projects.{name}.prompts"), own, workdirs)
                .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    Ok(RecipeTexts {
        instructions,
        role_text,
    })
}

/// What can be seen of a run a user handed off: how long it ran, the end of its log, and
/// in a git workdir what it changed and committed.
async fn observe(stopped: &Run, repo: &crate::git::Repo) -> Observed {
    let (files_changed, commits) = match &stopped.git_head {
        Some(head) => crate::git::facts::changes_since(repo, head).await,
        None => (Vec::new(), Vec::new()),
    };
    Observed {
        duration: std::time::Duration::from_millis(
            u64::try_from(stopped.duration_ms.unwrap_or(0)).unwrap_or(0),
        ),
        log_tail: stopped.stderr_tail.clone().unwrap_or_default(),
        files_changed,
        commits,
    }
}

/// The source of a document the orchestrator composed, as a prompt names it.
const SYNTHESIZED: &str = "synthesized by the orchestrator";

/// A run as the source of a text in a prompt: `narang run SPRINT-001-R02`, with a
/// reviewer's name as `darang/static`.
pub(super) fn run_label(run: &Run) -> String {
    match &run.reviewer {
        Some(reviewer) => format!("{}/{reviewer} run {}", run.actor, run.run_id),
        None => format!("{} run {}", run.actor, run.run_id),
    }
}

/// After a bad output of this stage's sister, the next attempt is told exactly why.
fn previous_rejection(runs: &[Run], sprint: &Sprint, attempt: u32) -> Option<String> {
    let last = runs.last()?;
    let same_stage = sprint.state.stage().map(|s| s.actor()) == Some(last.actor)
        && last.round == sprint.round
        && attempt > last.attempt;
    (same_stage && last.outcome == Some(RunOutcome::BadOutput)).then(|| {
        last.rejection
            .clone()
            .or_else(|| last.detail.clone())
            .unwrap_or_else(|| "the output was not a valid HandoffMessage".into())
    })
}

/// What a person asked of the round `actor`'s run works in: the focus it takes, or the
/// request the round began with (the implementer's and the reviewer's only).
fn request(
    sprint: &Sprint,
    actor: crate::domain::Actor,
    log: &[crate::store::TransitionRecord],
) -> Option<sister::contract::PersonRequest> {
    if let (Stage::Implementing, Some(focus)) = (actor.stage(), &sprint.focus) {
        return Some(sister::contract::PersonRequest {
            by: sprint
                .focus_by
                .clone()
                .unwrap_or_else(|| sister::contract::UNKNOWN.to_string()),
            text: focus.clone(),
        });
    }
    if !matches!(actor.stage(), Stage::Implementing | Stage::Reviewing) {
        return None;
    }
    crate::store::round_request(log, sprint.round).map(|(by, text)| {
        sister::contract::PersonRequest {
            by: by.to_string(),
            text: text.to_string(),
        }
    })
}
