//! What the store hands out: typed records of sprints, transitions, runs and commands.
//! Everything read from the database is parsed here, and bad data is an error that
//! names the table and the row, never a panic.

use serde::Serialize;

use super::{NewRun, RunEnd, StoreError};
use crate::domain::RunOutcome;
use crate::domain::run_id;
use crate::domain::{Actor, Stage};
use crate::handoff::HandoffDocument;
use crate::pipeline::fsm::{Note, ResumePoint};
use crate::pipeline::{Event, Position, State};

/// A sprint as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sprint {
    pub id: String,
    #[serde(skip)]
    pub number: i64,
    pub project: String,
    pub goal: String,
    pub state: State,
    pub round: u32,
    pub attempt: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<ResumePoint>,
    pub contract_id: String,
    pub branch: String,
    /// When the stage's sister may next be spawned (unix ms), after a failure's backoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<i64>,
    /// Focus instructions waiting for the next run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub focus: Option<String>,
    /// The spending limit a human raised by resuming past `pipeline.max_cost_usd`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    #[serde(skip)]
    pub last_seq: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// The host that owns it, with several hosts on one PostgreSQL database.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// How many times it was claimed or taken over: a write for it is guarded by this.
    #[serde(skip)]
    pub epoch: i64,
    /// Who queued it: `discord:<id>` or `cli:<user>@<host>` (`None` for sprints recorded
    /// before hanarang kept it).
    #[serde(skip)]
    pub started_by: Option<String>,
    /// Who gave `focus`.
    #[serde(skip)]
    pub focus_by: Option<String>,
    /// The branch the sprint's branch was created from, and its commit then; recorded
    /// before the planner's first run in a git workdir.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
}

impl Sprint {
    pub fn position(&self) -> Position {
        Position {
            state: self.state,
            round: self.round,
            attempt: self.attempt,
            resume: self.resume,
        }
    }
}

#[cfg(test)]
impl Sprint {
    /// SPRINT-001 in `state`, round 1, on `feature/sprint-001`: for the unit tests of what
    /// shows a sprint.
    pub(crate) fn sample(state: State) -> Sprint {
        Sprint {
            id: "SPRINT-001".into(),
            number: 1,
            project: "app".into(),
            goal: "Add a login page".into(),
            state,
            round: 1,
            attempt: 1,
            resume: None,
            contract_id: "C-1".into(),
            branch: "feature/sprint-001".into(),
            next_run_at: None,
            focus: None,
            budget_usd: None,
            last_seq: 0,
            created_at: 0,
            updated_at: 0,
            host: None,
            epoch: 0,
            started_by: None,
            focus_by: None,
            base_branch: None,
            base_commit: None,
        }
    }
}

/// A sprint row; SQLite's `sprints_with_spend` hands it over as a JSON array of these
/// fields, in this order.
#[derive(sqlx::FromRow, serde::Deserialize)]
pub(super) struct SprintRaw {
    id: String,
    number: i64,
    project: String,
    goal: String,
    state: String,
    round: i64,
    attempt: i64,
    resume_stage: Option<String>,
    resume_round: Option<i64>,
    contract_id: String,
    branch: String,
    next_run_at: Option<i64>,
    focus: Option<String>,
    budget_usd: Option<f64>,
    last_seq: i64,
    created_at: i64,
    updated_at: i64,
    owner: Option<String>,
    epoch: i64,
    started_by: Option<String>,
    focus_by: Option<String>,
    #[serde(default)]
    base_branch: Option<String>,
    #[serde(default)]
    base_commit: Option<String>,
}

impl TryFrom<SprintRaw> for Sprint {
    type Error = StoreError;

    fn try_from(r: SprintRaw) -> Result<Self, StoreError> {
        let bad = |what: &str| StoreError::corrupt("sprints", &r.id, what);
        let state = r.state.parse::<State>().map_err(|e| bad(&e))?;
        let resume = match (&r.resume_stage, r.resume_round) {
            (Some(stage), Some(round)) => Some(ResumePoint {
                stage: stage.parse().map_err(|_| bad("resume_stage"))?,
                round: u32::try_from(round).map_err(|_| bad("resume_round"))?,
            }),
            _ => None,
        };
        Ok(Sprint {
            number: r.number,
            project: r.project,
            goal: r.goal,
            state,
            round: u32::try_from(r.round).map_err(|_| bad("round"))?,
            attempt: u32::try_from(r.attempt).map_err(|_| bad("attempt"))?,
            resume,
            contract_id: r.contract_id,
            branch: r.branch,
            next_run_at: r.next_run_at,
            focus: r.focus,
            budget_usd: r.budget_usd,
            last_seq: r.last_seq,
            created_at: r.created_at,
            updated_at: r.updated_at,
            host: r.owner,
            epoch: r.epoch,
            started_by: r.started_by,
            focus_by: r.focus_by,
            base_branch: r.base_branch,
            base_commit: r.base_commit,
            id: r.id,
        })
    }
}

/// One entry of a sprint's append-only transitions log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransitionRecord {
    /// Order across all sprints: what delivery cursors count.
    pub global_seq: i64,
    pub sprint_id: String,
    /// Contiguous per sprint, from 1.
    pub seq: i64,
    pub from: State,
    pub to: State,
    /// Short name of the event (`darang:APPROVE`, `failed:timeout`, `approve`, ...).
    pub event: String,
    pub round: u32,
    pub attempt: u32,
    pub at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The sprint's branch at that moment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Who gave the command that caused it, when a person did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The whole event, with who gave it and what they said.
    pub detail: Event,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<Note>,
}

impl TransitionRecord {
    /// What a person asked of the implementation this transition starts, `(by, text)`:
    /// a request for changes' note, or the focus of a resume or handoff into
    /// `implementing`.
    pub fn request(&self) -> Option<(&str, &str)> {
        if self.to != State::Implementing {
            return None;
        }
        self.detail.focus()
    }
}

/// The commit the sprint's latest approving review saw: what an approval of it deploys.
/// Noted with the move into `done`; for a sprint recorded before hanarang noted it, the
/// head its last review of that round was given. `None` outside git, or before a review
/// approved.
pub fn approved_head(log: &[TransitionRecord], runs: &[Run]) -> Option<String> {
    let done = log.iter().rev().find(|t| t.to == State::Done)?;
    if let Some(Note::Approved { head }) = &done.note {
        return Some(head.clone());
    }
    runs.iter()
        .rev()
        .filter(|r| r.actor.stage() == Stage::Reviewing && r.round == done.round)
        .find(|r| r.outcome == Some(RunOutcome::Handoff))
        .and_then(|r| r.git_head.clone())
}

/// What a sprint resting in its state waits for from a person besides the obvious
/// (`done`: an approval): `ci_files` when its reviewed head touches the files the forge
/// runs and is held until someone lets them run (`sprint approve-ci`).
pub fn waiting_for(log: &[TransitionRecord]) -> Option<&'static str> {
    ci_files_held(log).map(|_| "ci_files")
}

/// The reviewed head held for its CI files, while it waits for a person: the sprint's
/// last move held it (`verifying`, nothing since).
pub fn ci_files_held(log: &[TransitionRecord]) -> Option<&str> {
    match &log.last()?.note {
        Some(Note::CiFilesHeld { head, .. }) => Some(head),
        _ => None,
    }
}

/// The last thing a person asked of round `round`'s implementation, `(by, text)`.
pub fn round_request(log: &[TransitionRecord], round: u32) -> Option<(&str, &str)> {
    log.iter()
        .rev()
        .filter(|t| t.round == round)
        .find_map(TransitionRecord::request)
}

#[derive(sqlx::FromRow)]
pub(super) struct TransitionRaw {
    global_seq: i64,
    sprint_id: String,
    seq: i64,
    from_state: String,
    to_state: String,
    event: String,
    event_json: String,
    note_json: Option<String>,
    round: i64,
    attempt: i64,
    run_id: Option<String>,
    branch: Option<String>,
    at: i64,
}

impl TryFrom<TransitionRaw> for TransitionRecord {
    type Error = StoreError;

    fn try_from(r: TransitionRaw) -> Result<Self, StoreError> {
        let key = format!("{}#{}", r.sprint_id, r.seq);
        let bad = |what: &str| StoreError::corrupt("transitions", &key, what);
        let detail: Event =
            serde_json::from_str(&r.event_json).map_err(|e| bad(&format!("event_json: {e}")))?;
        Ok(TransitionRecord {
            global_seq: r.global_seq,
            seq: r.seq,
            from: r.from_state.parse().map_err(|e: String| bad(&e))?,
            to: r.to_state.parse().map_err(|e: String| bad(&e))?,
            event: r.event,
            round: u32::try_from(r.round).map_err(|_| bad("round"))?,
            attempt: u32::try_from(r.attempt).map_err(|_| bad("attempt"))?,
            at: r.at,
            run_id: r.run_id,
            branch: r.branch,
            by: detail.by().map(str::to_string),
            detail,
            note: match r.note_json {
                Some(n) => {
                    Some(serde_json::from_str(&n).map_err(|e| bad(&format!("note_json: {e}")))?)
                }
                None => None,
            },
            sprint_id: r.sprint_id,
        })
    }
}

/// One sister run: in flight while `outcome` is `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub run_id: String,
    pub sprint_id: String,
    #[serde(skip)]
    pub number: i64,
    pub actor: Actor,
    /// Which of the reviewer's parallel reviewers it is, when it has several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
    pub round: u32,
    pub attempt: u32,
    pub parent_run_id: Option<String>,
    pub handoff: HandoffDocument,
    pub synthesized: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub focus: Option<String>,
    #[serde(skip)]
    pub git_head: Option<String>,
    pub started_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    pub outcome: Option<RunOutcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(skip)]
    pub rejection: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// The last 64 KiB of what the sister printed on each stream (`null` while it runs).
    pub stdout_tail: Option<String>,
    pub stderr_tail: Option<String>,
    /// The validated message as the sister sent it (unknown fields kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The agent's session, as its CLI named it (`session_pointer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The run whose session this one continued (`resume_args`), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumes: Option<String>,
    /// The agent that ran it (a preset or profile name); `null` for runs recorded before
    /// hanarang named them.
    pub agent: Option<String>,
    /// A run that stopped at its agent's usage limit: until when (unix ms) that agent is
    /// paused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_until: Option<i64>,
    /// Its latest step and the tokens and cost so far, from its CLI's event stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<super::live::RunLive>,
}

#[derive(sqlx::FromRow)]
pub(super) struct RunRaw {
    id: String,
    sprint_id: String,
    number: i64,
    actor: String,
    round: i64,
    attempt: i64,
    parent_run_id: Option<String>,
    handoff_json: String,
    synthesized: i64,
    focus: Option<String>,
    git_head: Option<String>,
    started_at: i64,
    ended_at: Option<i64>,
    outcome: Option<String>,
    detail: Option<String>,
    rejection: Option<String>,
    exit_code: Option<i64>,
    signal: Option<i64>,
    duration_ms: Option<i64>,
    stdout_tail: Option<String>,
    stderr_tail: Option<String>,
    message_json: Option<String>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cost_usd: Option<f64>,
    reviewer: Option<String>,
    session_id: Option<String>,
    resumes: Option<String>,
    agent: Option<String>,
    paused_until: Option<i64>,
    live_step: Option<String>,
    live_step_at: Option<i64>,
    live_input_tokens: Option<i64>,
    live_output_tokens: Option<i64>,
    live_cost_usd: Option<f64>,
}

#[cfg(test)]
impl Run {
    /// Run `number` of SPRINT-001, first attempt, started at `started_at`: for the unit
    /// tests of what reads a sprint's runs.
    pub(crate) fn sample(
        actor: Actor,
        reviewer: Option<&str>,
        number: i64,
        round: u32,
        started_at: i64,
    ) -> Run {
        Run::started(&NewRun {
            sprint_id: "SPRINT-001",
            number,
            actor,
            round,
            attempt: 1,
            parent_run_id: None,
            handoff: &HandoffDocument::default(),
            synthesized: false,
            focus: None,
            git_head: None,
            started_at,
            reviewer,
            resumes: None,
            notes_upto: None,
            agent: None,
        })
    }
}

impl Run {
    /// The run as `start_run` (or a commit that starts it) records it: what the loop keeps
    /// of a sprint's runs without reading them back.
    pub fn started(new: &NewRun<'_>) -> Run {
        Run {
            run_id: run_id(new.sprint_id, new.number),
            sprint_id: new.sprint_id.to_string(),
            number: new.number,
            actor: new.actor,
            reviewer: new.reviewer.map(str::to_string),
            round: new.round,
            attempt: new.attempt,
            parent_run_id: new.parent_run_id.map(str::to_string),
            handoff: new.handoff.clone(),
            synthesized: new.synthesized,
            focus: new.focus.map(str::to_string),
            git_head: new.git_head.map(str::to_string),
            started_at: new.started_at,
            ended_at: None,
            outcome: None,
            detail: None,
            rejection: None,
            exit_code: None,
            signal: None,
            duration_ms: None,
            stdout_tail: None,
            stderr_tail: None,
            message: None,
            input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            session_id: None,
            resumes: new.resumes.map(str::to_string),
            agent: new.agent.map(str::to_string),
            paused_until: None,
            live: None,
        }
    }

    /// The run once its end is recorded (`end_run`, or the commit of what it caused).
    pub fn end(&mut self, end: &RunEnd) {
        self.ended_at = Some(end.ended_at);
        self.outcome = Some(end.outcome);
        self.detail = Some(end.detail.clone());
        self.rejection.clone_from(&end.rejection);
        self.exit_code = end.exit_code;
        self.signal = end.signal;
        self.duration_ms = Some(end.duration_ms);
        self.stdout_tail = Some(end.stdout_tail.clone());
        self.stderr_tail = Some(end.stderr_tail.clone());
        self.message.clone_from(&end.message);
        self.input_tokens = end.input_tokens;
        self.output_tokens = end.output_tokens;
        self.cost_usd = end.cost_usd;
        self.session_id.clone_from(&end.session_id);
        self.paused_until = end.paused_until;
    }
}

/// The runs of the review round now (or last) under way: those after the implementer's
/// last run. With several reviewers, each one's latest run there is where it stands.
pub fn review_round(runs: &[Run]) -> &[Run] {
    let since = runs
        .iter()
        .rposition(|r| r.actor.stage() == Stage::Implementing)
        .map_or(0, |i| i + 1);
    &runs[since..]
}

impl TryFrom<RunRaw> for Run {
    type Error = StoreError;

    fn try_from(r: RunRaw) -> Result<Self, StoreError> {
        let bad = |what: &str| StoreError::corrupt("runs", &r.id, what);
        let outcome = match &r.outcome {
            Some(o) => Some(
                serde_json::from_value::<RunOutcome>(serde_json::Value::String(o.clone()))
                    .map_err(|_| bad("outcome"))?,
            ),
            None => None,
        };
        Ok(Run {
            sprint_id: r.sprint_id,
            number: r.number,
            actor: r.actor.parse().map_err(|e: String| bad(&e))?,
            reviewer: r.reviewer,
            round: u32::try_from(r.round).map_err(|_| bad("round"))?,
            attempt: u32::try_from(r.attempt).map_err(|_| bad("attempt"))?,
            parent_run_id: r.parent_run_id,
            handoff: serde_json::from_str(&r.handoff_json)
                .map_err(|e| bad(&format!("handoff_json: {e}")))?,
            synthesized: r.synthesized != 0,
            focus: r.focus,
            git_head: r.git_head,
            started_at: r.started_at,
            ended_at: r.ended_at,
            outcome,
            detail: r.detail,
            rejection: r.rejection,
            exit_code: r.exit_code.and_then(|c| i32::try_from(c).ok()),
            signal: r.signal.and_then(|s| i32::try_from(s).ok()),
            duration_ms: r.duration_ms,
            stdout_tail: r.stdout_tail,
            stderr_tail: r.stderr_tail,
            message: match r.message_json {
                Some(m) => {
                    Some(serde_json::from_str(&m).map_err(|e| bad(&format!("message_json: {e}")))?)
                }
                None => None,
            },
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            cost_usd: r.cost_usd,
            session_id: r.session_id,
            resumes: r.resumes,
            agent: r.agent,
            paused_until: r.paused_until,
            live: super::live::RunLive::from_columns(
                r.live_step,
                r.live_step_at,
                r.live_input_tokens,
                r.live_output_tokens,
                r.live_cost_usd,
            ),
            run_id: r.id,
        })
    }
}

/// Tokens and dollars, summed over runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct Spend {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
}

impl Spend {
    pub fn add(&mut self, other: &Spend) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
    }
}

/// A spend summed per sister or per sprint, as the store reads it.
#[derive(sqlx::FromRow)]
pub(super) struct KeyedSpend {
    pub key: String,
    #[sqlx(flatten)]
    pub spend: Spend,
}

/// A sprint's spend, in all and per sister.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    pub total: Spend,
    pub by_sister: std::collections::BTreeMap<String, Spend>,
}

/// A sprint's forum post in Discord. Ids are Discord snowflakes (they fit in i64).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ForumPost {
    pub sprint_id: String,
    pub thread_id: i64,
    pub board_message_id: i64,
    /// The `done` line with the approval buttons, while it has them.
    pub done_message_id: Option<i64>,
}

/// A host sharing a PostgreSQL database (`hanarang hosts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostRecord {
    pub name: String,
    pub pid: i64,
    /// The machine it runs on (its hostname).
    pub machine: String,
    pub projects: Vec<String>,
    pub lease_ttl_ms: i64,
    pub started_at: i64,
    /// The database server's clock, unix ms.
    pub heartbeat_at: i64,
    pub heartbeat_age_ms: i64,
    /// Its lease ran out: its sprints go to the other hosts that serve their projects.
    pub expired: bool,
    /// The open sprints it owns.
    pub sprints: Vec<String>,
}

/// Who holds the database.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Lease {
    pub token: String,
    pub pid: i64,
    pub host: String,
    pub started_at: i64,
    pub heartbeat_at: i64,
}
