//! The rules the loop asks about besides a transition: what a run's end means (its event),
//! when the stage's sister may run next, and whether a sprint may spend more. Pure: the
//! clock is passed in.

use std::time::Duration;

use super::fsm::{Event, Failure, Note, Position, Transition};
use super::review_round::is_review;
use crate::domain::{Actor, FailureKind, RunOutcome, Verdict};

/// What a sister's valid message said, as the rules need it.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub actor: Actor,
    pub verdict: Verdict,
    /// The sprint the message says it is about (the planner's `payload.sprintId`).
    pub sprint_id: Option<&'a str>,
    /// The sister's reason, for ERROR, DEPLOY_FAILED and ABORT.
    pub reason: Option<&'a str>,
}

/// How a sister's run ended, as the rules need it.
#[derive(Debug, Clone, Copy)]
pub struct RunResult<'a> {
    pub outcome: RunOutcome,
    /// What its valid message said, when the run gave one.
    pub answer: Option<Answer<'a>>,
    /// What the runner said of it (the failure's reason).
    pub detail: &'a str,
    /// When a paused agent's usage limit resets (unix ms), if it said.
    pub resume_at_ms: Option<i64>,
    /// One of the reviewer's parallel reviewers: its name and which attempt of the round this was.
    pub reviewer: Option<(&'a str, u32)>,
}

/// The event a run's end is for the state machine.
pub fn event_of(run: RunResult<'_>, now_ms: i64) -> Event {
    let failure = |outcome: RunOutcome| Failure {
        kind: outcome.failure_kind().unwrap_or(FailureKind::Interrupted),
        detail: run.detail.to_string(),
    };
    match (run.outcome, run.answer, run.reviewer) {
        // One of several reviewers: its answer, or its failure, is its own.
        (RunOutcome::Handoff, Some(answer), Some((reviewer, _))) if is_review(answer.verdict) => {
            Event::Reviewed {
                reviewer: reviewer.to_string(),
                verdict: answer.verdict,
            }
        }
        (outcome, _, Some((reviewer, attempt)))
            if !matches!(outcome, RunOutcome::Handoff | RunOutcome::Paused) =>
        {
            Event::ReviewerFailed {
                reviewer: reviewer.to_string(),
                attempt,
                failure: failure(outcome),
            }
        }
        (RunOutcome::Handoff, Some(answer), _) => Event::Reported {
            actor: answer.actor,
            verdict: answer.verdict,
            sprint_id: answer.sprint_id.map(str::to_string),
            reason: answer.reason.map(str::to_string),
        },
        // A usage limit: the stage waits for its reset, using no attempt.
        (RunOutcome::Paused, _, _) => {
            let resume_at_ms = run.resume_at_ms.unwrap_or(now_ms).max(now_ms);
            Event::Paused {
                resume_at_ms,
                delay_ms: u64::try_from(resume_at_ms - now_ms).unwrap_or(0),
                detail: run.detail.to_string(),
            }
        }
        (outcome, _, _) => Event::Failed {
            failure: failure(outcome),
        },
    }
}

/// A command given against the sprint's transition `seq` applies only while the sprint
/// is still there: the reason to refuse one that comes too late. An
/// abort applies whatever happened since; a command recorded without a `seq` (by an
/// older hanarang) is judged by the state alone.
pub fn stale_command(
    sprint_id: &str,
    seq: Option<i64>,
    last_seq: i64,
    at: super::Position,
    event: &Event,
) -> Option<String> {
    let given_at = seq?;
    if given_at == last_seq || matches!(event, Event::Abort { .. }) {
        return None;
    }
    let now = match at.state {
        super::State::Done => format!(
            "round {}'s done; look at the new summary and answer its card",
            at.round
        ),
        state => format!("{state} (round {})", at.round),
    };
    Some(format!(
        "{sprint_id} moved on since: it is now in {now} (`hanarang sprint status {sprint_id}`)"
    ))
}

/// A note is for a sister run to come: the reason to refuse one for a
/// sprint that has ended, where none will read it.
pub fn ended_for_notes(sprint_id: &str, state: super::State) -> Option<String> {
    state.is_terminal().then(|| {
        format!("{sprint_id} has ended ({state}): no sister will read a note; start a new sprint for more work")
    })
}

/// When the stage's sister may run next after `t` (unix ms), `None` for at once. A pause
/// waits for its reset; one reviewer's verdict leaves another's retry where it was
/// (`due_before`); a retry waits its backoff from `now_ms`.
pub fn next_run_at(
    t: &Transition,
    event: &Event,
    due_before: Option<i64>,
    now_ms: i64,
) -> Option<i64> {
    match (&t.note, event) {
        (Some(Note::Paused { resume_at_ms, .. }), _) => Some(*resume_at_ms),
        (None, Event::Reviewed { .. }) => due_before,
        _ => t.retry_delay().map(|d| now_ms.saturating_add(millis(d))),
    }
}

/// Which agent of a sister's chain runs its stage next: the first that
/// is not known to be at its usage limit at `now_ms`. When every one is, the one whose
/// limit resets first, and `wait_until` that reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// Its index in the chain.
    pub index: usize,
    /// When every agent is paused: the earliest reset among them (unix ms).
    pub wait_until: Option<i64>,
}

/// `chain`: the sister's agents in order; `paused_until`: each agent's known reset.
pub fn pick_agent(
    chain: &[&str],
    paused_until: &std::collections::BTreeMap<String, i64>,
    now_ms: i64,
) -> Pick {
    let until = |name: &str| paused_until.get(name).copied().filter(|&at| at > now_ms);
    if let Some(index) = chain.iter().position(|name| until(name).is_none()) {
        return Pick {
            index,
            wait_until: None,
        };
    }
    let earliest = chain
        .iter()
        .enumerate()
        .filter_map(|(i, name)| until(name).map(|at| (at, i)))
        .min();
    Pick {
        index: earliest.map_or(0, |(_, i)| i),
        wait_until: earliest.map(|(at, _)| at),
    }
}

/// Each agent's latest known reset still ahead of `now_ms`, from runs that stopped at a
/// usage limit: `(agent, paused_until)`.
pub fn paused_agents<'a>(
    pauses: impl IntoIterator<Item = (&'a str, i64)>,
    now_ms: i64,
) -> std::collections::BTreeMap<String, i64> {
    let mut paused = std::collections::BTreeMap::new();
    for (agent, until) in pauses.into_iter().filter(|&(_, at)| at > now_ms) {
        let at = paused.entry(agent.to_string()).or_insert(until);
        *at = (*at).max(until);
    }
    paused
}

/// A run of `agent` paused at its usage limit, for a sister whose chain is `chain`: the
/// next agent free of its limit takes over at once (`FellBack`); when none is, the stage
/// waits for the earliest reset among them (`Paused`). Any other event is as it was.
/// `paused_until` holds this run's own reset.
pub fn after_pause(
    event: Event,
    agent: &str,
    chain: &[&str],
    paused_until: &std::collections::BTreeMap<String, i64>,
    now_ms: i64,
) -> Event {
    let Event::Paused {
        resume_at_ms,
        detail,
        ..
    } = event
    else {
        return event;
    };
    let pick = pick_agent(chain, paused_until, now_ms);
    match (pick.wait_until, chain.get(pick.index)) {
        (None, Some(next)) if *next != agent => Event::FellBack {
            agent: agent.to_string(),
            until_ms: resume_at_ms,
            next: (*next).to_string(),
            detail,
        },
        (wait, _) => {
            let at = wait.unwrap_or(resume_at_ms).max(now_ms);
            Event::Paused {
                resume_at_ms: at,
                delay_ms: u64::try_from(at - now_ms).unwrap_or(0),
                detail,
            }
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A sprint's spending limit: `pipeline.max_cost_usd`, or what a human raised it to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// `pipeline.max_cost_usd`; `None`: no limit.
    pub limit_usd: Option<f64>,
    /// What a resume past the limit raised it to.
    pub raised_usd: Option<f64>,
}

impl Budget {
    /// `Some((spent, limit))` when the sprint has spent more than it may: nothing more is
    /// spent without a human's word.
    pub fn exceeded(self, spent_usd: f64) -> Option<(f64, f64)> {
        let limit = self.raised_usd.unwrap_or(self.limit_usd?);
        (spent_usd > limit).then_some((spent_usd, limit))
    }

    /// The raised limit after a human's resume: their word to spend another
    /// `max_cost_usd` from what is spent now, when the limit is reached; else as it was.
    pub fn after_resume(self, spent_usd: f64) -> Option<f64> {
        match self.limit_usd {
            Some(limit) if spent_usd >= self.raised_usd.unwrap_or(limit) => Some(spent_usd + limit),
            _ => self.raised_usd,
        }
    }
}

/// How long a sprint's stage still waits before its sister may run (a retry's backoff, a
/// pause until a usage limit resets); `None` when it is due now.
pub fn waits(next_run_at: Option<i64>, now_ms: i64) -> Option<Duration> {
    let at = next_run_at.filter(|at| *at > now_ms)?;
    Some(Duration::from_millis(
        u64::try_from(at - now_ms).unwrap_or(0),
    ))
}

/// Whether a host running `running` sisters may start another: not at its cap
/// (`[host] max_sisters`; none: no cap). At its cap it claims and starts nothing; the end
/// of one of its runs wakes the loop.
pub fn at_cap(max_sisters: Option<u32>, running: usize) -> bool {
    max_sisters.is_some_and(|cap| running >= cap as usize)
}

/// Whether the sister a command would start waits: a later command of the same batch for
/// the same sprint (an abort right after an approval) is applied before it starts.
/// `later`: the sprints of the commands after this one.
pub fn holds_spawn<'a>(sprint_id: &str, mut later: impl Iterator<Item = &'a str>) -> bool {
    later.any(|id| id == sprint_id)
}

/// The stage's last run, as the rule for resuming its session reads it.
#[derive(Debug, Clone, Copy)]
pub struct LastRun<'a> {
    pub round: u32,
    pub outcome: Option<RunOutcome>,
    /// The agent of its chain that ran it (`None` for a run recorded before it was kept).
    pub agent: Option<&'a str>,
    /// The session its CLI named.
    pub session: Option<&'a str>,
}

/// The session the stage's next run of `agent` in `round` continues: the last run's, when
/// it stopped without finishing its work (paused at a usage limit, interrupted, timed out,
/// or its answer rejected), in the same round, by the same agent, and its CLI named one.
/// A new round, a handoff to a fresh session, a failed start and another agent all begin
/// afresh.
pub fn resumed_session<'a>(last: LastRun<'a>, round: u32, agent: &str) -> Option<&'a str> {
    let unfinished = matches!(
        last.outcome,
        Some(
            RunOutcome::Paused
                | RunOutcome::Interrupted
                | RunOutcome::Timeout
                | RunOutcome::BadOutput
        )
    );
    let same_agent = last.agent.is_none_or(|a| a == agent);
    (last.round == round && unfinished && same_agent)
        .then_some(last.session)
        .flatten()
}

/// What a run's end is, read before its own answer: the person's command that waited for
/// the sister, a handoff that came too late, a reviewer this loop stopped, or the run's
/// own result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEndIs {
    /// The abort or handoff that stopped it is what happened, whatever the sister printed
    /// on its way out.
    TheCommand,
    /// The handoff came too late (the sister finished first): it is refused, and the run's
    /// own result stands.
    ALateHandoffThenItsOwn,
    /// A reviewer stopped by the loop (an abort, another reviewer's ABORT, an escalation):
    /// its end is recorded, and it is no failure of its own.
    OnlyRecorded,
    /// Its own result: the event its answer (or failure) makes.
    ItsOwn,
}

/// What a run's end is (`RunEndIs`): `waiting`, the interrupt of a command that waited
/// for it; `reviewer`, whether it is one of several reviewers.
pub fn run_end_is(waiting: Option<Interrupt>, outcome: RunOutcome, reviewer: bool) -> RunEndIs {
    match waiting {
        Some(Interrupt::Handoff) if outcome != RunOutcome::HandedOff => {
            RunEndIs::ALateHandoffThenItsOwn
        }
        Some(_) => RunEndIs::TheCommand,
        None if reviewer && outcome == RunOutcome::Cancelled => RunEndIs::OnlyRecorded,
        None => RunEndIs::ItsOwn,
    }
}

/// The reason a run's event breaks the protocol at `at` (a verdict its stage has no rule
/// for, a plan for another sprint): its run is then recorded `protocol_violation`.
pub fn protocol_violation(
    at: Position,
    event: &Event,
    facts: super::Facts<'_>,
    policy: &super::Policy,
) -> Option<String> {
    match super::apply(at, event, facts, policy).ok()?.note {
        Some(Note::ProtocolViolation { reason }) => Some(reason),
        _ => None,
    }
}

/// How a person's command stops the sister that runs when it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// The sprint is aborted: the run ends `cancelled`.
    Abort,
    /// A fresh session takes over: the run ends `handed_off`.
    Handoff,
}

/// What a command does while a sister of its sprint runs: `Some` for one that must stop
/// the sister first (an abort, a handoff) — once the rules accept it, so a refused one
/// stops nothing — and `None` for one applied as it is (its transition decides).
pub fn interrupts(
    at: Position,
    event: &Event,
    facts: super::Facts<'_>,
    policy: &super::Policy,
) -> Result<Option<Interrupt>, super::Refusal> {
    let Some(interrupt) = interrupt_of(event) else {
        return Ok(None);
    };
    super::apply(at, event, facts, policy).map(|_| Some(interrupt))
}

/// How `event`, given while a sister runs, stops it: an abort or a handoff; `None` for
/// any other.
pub fn interrupt_of(event: &Event) -> Option<Interrupt> {
    match event {
        Event::Abort { .. } => Some(Interrupt::Abort),
        Event::Handoff { .. } => Some(Interrupt::Handoff),
        _ => None,
    }
}

/// What must be found out before an event is decided so that a round which changes
/// nothing is stopped (`Escalation::NoProgress`, `SameFindings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressCheck {
    /// The implementer's `IMPL_DONE`: is the branch's head where the round before's review saw it?
    BranchMoved,
    /// A review asking for changes (the reviewer's, or the reviewers' merged): are its findings
    /// the round before's?
    FindingsRepeated,
}

/// The check `event` at `round` calls for, if any. From round 2 only: a first round has
/// no round before it to compare with.
pub fn progress_check(round: u32, event: &Event) -> Option<ProgressCheck> {
    if round < 2 {
        return None;
    }
    match event {
        Event::Reported {
            verdict: Verdict::ImplDone,
            ..
        } => Some(ProgressCheck::BranchMoved),
        Event::Reported {
            verdict: Verdict::RequestChanges,
            ..
        } => Some(ProgressCheck::FindingsRepeated),
        Event::ReviewMerged { verdicts }
            if super::merged_verdict(verdicts).verdict() == Verdict::RequestChanges =>
        {
            Some(ProgressCheck::FindingsRepeated)
        }
        _ => None,
    }
}

/// Where a person's note stands toward the runs: given to none yet, or to a run, with its
/// outcome once it ended (`None` while it works, or when it cannot be found).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteGiven {
    ToNone,
    To(Option<RunOutcome>),
}

/// Whether a note goes to the next run: one given to no run yet, or to a run that ended
/// without an answer (failed, paused, interrupted, handed off), which the next run is given
/// again; never again once a run answered, nor while the run it was given to works.
pub fn note_due(given: NoteGiven) -> bool {
    match given {
        NoteGiven::ToNone => true,
        NoteGiven::To(outcome) => outcome.is_some_and(|o| o != RunOutcome::Handoff),
    }
}

/// A review round's findings as `same_findings` compares them: each issue's file and
/// message (white space collapsed), from the round's valid review messages.
pub fn findings<'a>(
    messages: impl IntoIterator<Item = &'a serde_json::Value>,
) -> std::collections::BTreeSet<(String, String)> {
    let flat = |v: &serde_json::Value| {
        v.as_str()
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    messages
        .into_iter()
        .flat_map(|m| m["payload"]["issues"].as_array().into_iter().flatten())
        .map(|issue| (flat(&issue["file"]), flat(&issue["message"])))
        .collect()
}

/// A round that asks for changes with the same findings as the round before
/// (`same_findings`): another round would be paid for nothing.
pub fn same_findings(
    before: &std::collections::BTreeSet<(String, String)>,
    now: &std::collections::BTreeSet<(String, String)>,
) -> bool {
    !now.is_empty() && before == now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Stage;

    #[test]
    fn a_host_at_its_cap_starts_nothing_and_one_without_a_cap_is_never_at_it() {
        assert!(!at_cap(None, 1_000));
        assert!(!at_cap(Some(2), 1));
        assert!(at_cap(Some(2), 2));
        assert!(at_cap(Some(2), 3));
    }

    #[test]
    fn a_later_command_for_the_same_sprint_holds_its_spawn() {
        let later = ["SPRINT-002", "SPRINT-001"];
        assert!(holds_spawn("SPRINT-001", later.into_iter()));
        assert!(!holds_spawn("SPRINT-003", later.into_iter()));
        assert!(!holds_spawn("SPRINT-001", std::iter::empty()));
    }

    fn reported(actor: Actor, verdict: Verdict) -> Event {
        Event::Reported {
            actor,
            verdict,
            sprint_id: None,
            reason: None,
        }
    }

    #[test]
    fn a_round_is_checked_for_progress_from_round_2_at_impl_done_and_a_request_for_changes() {
        let implemented = reported(Stage::Implementing.actor(), Verdict::ImplDone);
        let asked = reported(Stage::Reviewing.actor(), Verdict::RequestChanges);
        assert_eq!(
            progress_check(1, &implemented),
            None,
            "round 1 has nothing before it"
        );
        assert_eq!(progress_check(1, &asked), None);
        assert_eq!(
            progress_check(2, &implemented),
            Some(ProgressCheck::BranchMoved)
        );
        assert_eq!(
            progress_check(3, &asked),
            Some(ProgressCheck::FindingsRepeated)
        );
        assert_eq!(
            progress_check(2, &reported(Stage::Reviewing.actor(), Verdict::Approve)),
            None
        );
        assert_eq!(
            progress_check(2, &reported(Stage::Implementing.actor(), Verdict::Error)),
            None
        );
        let merged = |pairs: &[(&str, Verdict)]| Event::ReviewMerged {
            verdicts: pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        };
        let one_asks = merged(&[("a", Verdict::Approve), ("b", Verdict::RequestChanges)]);
        assert_eq!(
            progress_check(2, &one_asks),
            Some(ProgressCheck::FindingsRepeated)
        );
        let all_approve = merged(&[("a", Verdict::Approve), ("b", Verdict::Approve)]);
        assert_eq!(progress_check(2, &all_approve), None);
    }

    #[test]
    fn an_abort_or_a_handoff_stops_the_running_sister_once_the_rules_accept_it() {
        use crate::pipeline::{Facts, Policy, State};
        let policy = Policy::default();
        let at = |state| Position {
            state,
            round: 1,
            attempt: 1,
            resume: None,
        };
        let running = Facts::of("SPRINT-001", true);
        let abort = Event::Abort {
            by: "cli".into(),
            reason: None,
        };
        let handoff = Event::Handoff {
            by: "cli".into(),
            focus: None,
        };
        assert_eq!(
            interrupts(at(State::Implementing), &abort, running, &policy),
            Ok(Some(Interrupt::Abort))
        );
        assert_eq!(
            interrupts(at(State::Implementing), &handoff, running, &policy),
            Ok(Some(Interrupt::Handoff))
        );
        // Several reviewers at once: a handoff is refused, and stops none of them.
        let reviewers = Facts {
            several_reviewers: true,
            ..running
        };
        assert!(interrupts(at(State::Reviewing), &handoff, reviewers, &policy).is_err());
        // Any other command is applied as it is: its transition decides.
        let approve = Event::Approve { by: "cli".into() };
        assert_eq!(
            interrupts(at(State::Implementing), &approve, running, &policy),
            Ok(None)
        );
    }

    #[test]
    fn a_runs_end_is_the_command_that_waited_for_it_unless_a_handoff_came_too_late() {
        use RunEndIs::*;
        let abort = Some(Interrupt::Abort);
        let handoff = Some(Interrupt::Handoff);
        assert_eq!(run_end_is(abort, RunOutcome::Cancelled, false), TheCommand);
        assert_eq!(
            run_end_is(abort, RunOutcome::Handoff, false),
            TheCommand,
            "an abort wins over what it printed"
        );
        assert_eq!(
            run_end_is(handoff, RunOutcome::HandedOff, false),
            TheCommand
        );
        assert_eq!(
            run_end_is(handoff, RunOutcome::Handoff, false),
            ALateHandoffThenItsOwn
        );
        assert_eq!(
            run_end_is(handoff, RunOutcome::ExitNonzero, true),
            ALateHandoffThenItsOwn
        );
        assert_eq!(run_end_is(None, RunOutcome::Cancelled, true), OnlyRecorded);
        assert_eq!(
            run_end_is(None, RunOutcome::Cancelled, false),
            ItsOwn,
            "not a reviewer: its own result decides"
        );
        assert_eq!(run_end_is(None, RunOutcome::Handoff, true), ItsOwn);
    }

    #[test]
    fn a_stage_is_due_once_its_time_has_come() {
        assert_eq!(waits(None, 1_000), None);
        assert_eq!(waits(Some(1_000), 1_000), None, "at its time it is due");
        assert_eq!(waits(Some(900), 1_000), None);
        assert_eq!(waits(Some(1_250), 1_000), Some(Duration::from_millis(250)));
    }

    #[test]
    fn a_note_goes_to_the_next_run_until_a_run_answers() {
        assert!(note_due(NoteGiven::ToNone));
        assert!(!note_due(NoteGiven::To(None)), "its run still works");
        assert!(
            !note_due(NoteGiven::To(Some(RunOutcome::Handoff))),
            "a run answered"
        );
        for ended in [
            RunOutcome::ExitNonzero,
            RunOutcome::Paused,
            RunOutcome::Interrupted,
            RunOutcome::HandedOff,
            RunOutcome::BadOutput,
        ] {
            assert!(note_due(NoteGiven::To(Some(ended))), "{ended:?}");
        }
    }

    #[test]
    fn a_budget_is_exceeded_past_its_limit_or_the_raised_one() {
        let budget = Budget {
            limit_usd: Some(5.0),
            raised_usd: None,
        };
        assert_eq!(budget.exceeded(5.0), None, "at the limit is not past it");
        assert_eq!(budget.exceeded(5.5), Some((5.5, 5.0)));
        let raised = Budget {
            raised_usd: budget.after_resume(5.5),
            ..budget
        };
        assert_eq!(raised.raised_usd, Some(10.5));
        assert_eq!(raised.exceeded(7.0), None);
        assert_eq!(
            Budget {
                limit_usd: None,
                raised_usd: None
            }
            .exceeded(1e9),
            None
        );
        // A resume under the limit leaves it where it was.
        assert_eq!(budget.after_resume(1.0), None);
    }

    #[test]
    fn a_pause_waits_for_its_reset_never_before_now() {
        let run = RunResult {
            outcome: RunOutcome::Paused,
            answer: None,
            detail: "usage limit",
            resume_at_ms: Some(500),
            reviewer: None,
        };
        match event_of(run, 1_000) {
            Event::Paused {
                resume_at_ms,
                delay_ms,
                ..
            } => assert_eq!((resume_at_ms, delay_ms), (1_000, 0)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_first_agent_free_of_its_limit_runs_else_the_earliest_reset_waits() {
        let chain = ["claude-code", "codex", "openclaw"];
        let paused = |pairs: &[(&str, i64)]| paused_agents(pairs.iter().copied(), 1_000);
        let free = |index| Pick {
            index,
            wait_until: None,
        };
        assert_eq!(pick_agent(&chain, &paused(&[]), 1_000), free(0));
        assert_eq!(
            pick_agent(&chain, &paused(&[("claude-code", 9_000)]), 1_000),
            free(1)
        );
        // A reset that has passed frees its agent again.
        assert_eq!(
            pick_agent(&chain, &paused(&[("claude-code", 900)]), 1_000),
            free(0)
        );
        let all = paused(&[
            ("claude-code", 9_000),
            ("codex", 5_000),
            ("openclaw", 7_000),
        ]);
        assert_eq!(
            pick_agent(&chain, &all, 1_000),
            Pick {
                index: 1,
                wait_until: Some(5_000)
            }
        );
        // The latest reset an agent reported is the one that counts.
        assert_eq!(
            paused(&[("codex", 3_000), ("codex", 8_000), ("codex", 500)]).get("codex"),
            Some(&8_000)
        );
    }

    #[test]
    fn a_pause_falls_back_to_the_next_free_agent_else_waits_for_the_earliest_reset() {
        let chain = ["claude-code", "codex"];
        let paused = |pairs: &[(&str, i64)]| paused_agents(pairs.iter().copied(), 1_000);
        let pause = Event::Paused {
            resume_at_ms: 9_000,
            delay_ms: 8_000,
            detail: "limit".into(),
        };
        assert_eq!(
            after_pause(
                pause.clone(),
                "claude-code",
                &chain,
                &paused(&[("claude-code", 9_000)]),
                1_000
            ),
            Event::FellBack {
                agent: "claude-code".into(),
                until_ms: 9_000,
                next: "codex".into(),
                detail: "limit".into(),
            }
        );
        let both = paused(&[("claude-code", 9_000), ("codex", 4_000)]);
        assert!(matches!(
            after_pause(pause.clone(), "codex", &chain, &both, 1_000),
            Event::Paused {
                resume_at_ms: 4_000,
                delay_ms: 3_000,
                ..
            }
        ));
        // Alone in its chain, a pause is the agent's own.
        assert!(matches!(
            after_pause(
                pause,
                "claude-code",
                &chain[..1],
                &paused(&[("claude-code", 9_000)]),
                1_000
            ),
            Event::Paused {
                resume_at_ms: 9_000,
                ..
            }
        ));
    }

    #[test]
    fn a_reviewers_failure_is_its_own_and_a_sisters_is_the_stages() {
        let run = RunResult {
            outcome: RunOutcome::Timeout,
            answer: None,
            detail: "took too long",
            resume_at_ms: None,
            reviewer: Some(("static", 2)),
        };
        assert!(matches!(
            event_of(run, 0),
            Event::ReviewerFailed { ref reviewer, attempt: 2, .. } if reviewer == "static"
        ));
        let alone = RunResult {
            reviewer: None,
            ..run
        };
        assert!(matches!(
            event_of(alone, 0),
            Event::Failed { failure } if failure.kind == FailureKind::Timeout
        ));
    }
}
