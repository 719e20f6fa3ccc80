//! The whole decision on one event: the transition `fsm::apply` gives, and everything the
//! sprint becomes around it — when its sister may run next, the person's words waiting
//! for that run, the budget a resume raised, the contract and branch a sister named —
//! and what the loop starts with the commit. The loop reads, asks `decide`, commits what
//! it says, broadcasts, and launches what it names; it adds no rule of its own.

use super::fsm::{Event, Facts, Refusal, Transition, apply};
use super::policy::Policy;
use super::rules::{Budget, next_run_at};
use super::{Position, Stage, State};

/// A person's words for the next run of the stage, until one takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Focus {
    pub text: String,
    /// Who gave them (`None` in sprints recorded before hanarang kept it).
    pub by: Option<String>,
}

/// The sprint as the loop read it, and what the loop knows around the event.
#[derive(Debug, Clone, Copy)]
pub struct Before<'a> {
    pub position: Position,
    /// When the stage's sister may run next (unix ms), as recorded.
    pub next_run_at: Option<i64>,
    /// The focus waiting for the next run, as recorded.
    pub focus: Option<(&'a str, Option<&'a str>)>,
    /// `pipeline.max_cost_usd` and what a person raised it to.
    pub budget: Budget,
    /// What the sprint's runs cost so far (USD). Read only when there is a limit; 0 else.
    pub spent_usd: f64,
    /// What the ended run's valid message named: the planner's contract id, the
    /// implementer's branch.
    pub named_contract: Option<&'a str>,
    pub named_branch: Option<&'a str>,
    /// This host may start a sister with this commit: it drives the sprint, is below its
    /// cap, and is not holding spawns (recovering, a later command for the sprint waits,
    /// shutting down).
    pub may_start: bool,
}

/// What the loop starts with the commit.
#[derive(Debug, Clone, PartialEq)]
pub enum Launch {
    /// Nothing: no stage, a wait (a retry's backoff, a pause), a sister still running, a
    /// spent budget (the next pass escalates it), or no room on this host (a pass starts
    /// it).
    Nothing,
    /// The stage's sister: its run is composed, recorded in the same commit, given the
    /// focus, and started after it.
    Stage {
        stage: Stage,
        attempt: u32,
        focus: Option<Focus>,
    },
    /// Several reviewers: the next pass starts each one due.
    Reviewers,
}

/// The decision on one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The log entry's transition: the new position and what it tells.
    pub transition: Transition,
    /// When the stage's sister may run next (unix ms); `None`: at once.
    pub next_run_at: Option<i64>,
    /// The focus the sprint keeps after the commit: what a person said, until a run takes it.
    pub focus: Option<Focus>,
    /// The spending limit a person raised (resuming past `max_cost_usd`).
    pub budget_usd: Option<f64>,
    /// The contract id and the branch the sprint now has, when the run's message named them.
    pub contract_id: Option<String>,
    pub branch: Option<String>,
    pub launch: Launch,
    /// The sprint ended: its project's pipeline lock is free (or, for a queued sprint
    /// aborted, the queue's head changed).
    pub frees_lock: bool,
    /// It left a stage of several reviewers (escalated, aborted): those still running stop.
    pub stops_reviewers: bool,
}

/// What a pass does with a sprint whose stage is due and no sister of it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Due {
    /// The budget is spent: nothing more is spent without a person's word.
    Exceeded(Event),
    /// Several reviewers: each one without a verdict or a run is started.
    Reviewers,
    /// The stage's sister.
    Stage,
}

/// The rule for a stage whose time has come.
pub fn due(budget: Budget, spent_usd: f64, several_reviewers: bool, state: State) -> Due {
    if let Some((spent_usd, limit_usd)) = budget.exceeded(spent_usd) {
        return Due::Exceeded(Event::BudgetExceeded {
            spent_usd,
            limit_usd,
        });
    }
    if several_reviewers && state == State::Reviewing {
        Due::Reviewers
    } else {
        Due::Stage
    }
}

/// The rules on one event: `Err` when `fsm::apply` refuses it (nothing changes).
pub fn decide(
    before: Before<'_>,
    event: &Event,
    facts: Facts<'_>,
    policy: &Policy,
    now_ms: i64,
) -> Result<Decision, Refusal> {
    let from = before.position;
    let t = apply(from, event, facts, policy)?;
    let to = t.to;
    let next_run_at = next_run_at(&t, event, before.next_run_at, now_ms);
    // What a sprint aborted named is not its any more.
    let named = |name: Option<&str>| {
        name.filter(|_| to.state != State::Aborted)
            .map(str::to_string)
    };
    let mut focus = match event.focus() {
        Some((by, text)) => Some(Focus {
            text: text.to_string(),
            by: Some(by.to_string()),
        }),
        None => before.focus.map(|(text, by)| Focus {
            text: text.to_string(),
            by: by.map(str::to_string),
        }),
    };
    let mut budget = before.budget;
    if matches!(event, Event::Resume { .. }) && budget.limit_usd.is_some() {
        // A person's resume is their word to spend more.
        budget.raised_usd = budget.after_resume(before.spent_usd);
    }
    let several_reviewers = |state: State| facts.several_reviewers && state == State::Reviewing;
    let launch = match to.state.stage() {
        Some(_) if several_reviewers(to.state) => Launch::Reviewers,
        Some(stage)
            if next_run_at.is_none()
                && !facts.sister_running
                && before.may_start
                && due(budget, before.spent_usd, false, to.state) == Due::Stage =>
        {
            Launch::Stage {
                stage,
                attempt: to.attempt,
                // The run takes the focus with it.
                focus: focus.take(),
            }
        }
        _ => Launch::Nothing,
    };
    Ok(Decision {
        next_run_at,
        focus,
        budget_usd: budget.raised_usd,
        contract_id: named(before.named_contract),
        branch: named(before.named_branch),
        launch,
        frees_lock: to.state.is_terminal(),
        stops_reviewers: several_reviewers(from.state) && !several_reviewers(to.state),
        transition: t,
    })
}
