//! Which agent of its chain runs a sister's stage (a usage limit hands it to the next),
//! and which run a retry continues the agent session of.

use std::collections::BTreeMap;

use super::Orchestrator;
use crate::config::{Config, SisterSpec};
use crate::domain::Actor;
use crate::store::Run;

/// The agent that runs the next run of `actor` (or of one of the reviewer's parallel reviewers), and how:
/// the first of its chain not known (`paused`) to be at its usage limit now; when every
/// one is (a person started the stage early), the one whose limit resets first.
pub(super) fn agent_for(
    config: &Config,
    paused: &BTreeMap<String, i64>,
    actor: Actor,
    reviewer: Option<&str>,
    now_ms: i64,
) -> Option<(String, SisterSpec)> {
    let chain = config.chain(actor, reviewer);
    let names: Vec<&str> = chain.iter().map(|c| c.name.as_str()).collect();
    let pick = crate::pipeline::pick_agent(&names, paused, now_ms);
    chain
        .into_iter()
        .nth(pick.index)
        .map(|choice| (choice.name, choice.spec))
}

impl Orchestrator {
    /// The agents known to be at their usage limit at `now_ms`: from every run on record
    /// (another sprint's, another host's), and from `runs`, the sprint's own as the loop
    /// knows them (a pause this commit records is not in the database yet).
    pub(super) async fn paused_agents(&self, runs: &[Run], now_ms: i64) -> BTreeMap<String, i64> {
        let stored = self.store.paused_agents(now_ms).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read which agents are at their usage limit: only this sprint's runs say");
            Vec::new()
        });
        let own = runs
            .iter()
            .filter_map(|r| Some((r.agent.as_deref()?, r.paused_until?)));
        let stored = stored.iter().map(|(agent, at)| (agent.as_str(), *at));
        crate::pipeline::paused_agents(stored.chain(own), now_ms)
    }
}

/// The run whose session the next run of `actor` (or of one of the reviewer's parallel reviewers)
/// continues, and that session: its last run in this round, when that one stopped without
/// finishing its work (paused at a usage limit, interrupted, timed out, or its answer
/// rejected) and its CLI named a session, and the sister's CLI can resume one. A new
/// round, a handoff to a fresh session, a resumed run that failed to start, and another
/// agent taking over (`agent`: a session is its own CLI's) all begin afresh.
pub(super) fn resumable(
    runs: &[Run],
    round: u32,
    actor: Actor,
    reviewer: Option<&str>,
    agent: &str,
    spec: &SisterSpec,
) -> Option<(String, String)> {
    spec.resume_args.as_ref()?;
    let last = runs
        .iter()
        .rev()
        .find(|r| r.actor == actor && r.reviewer.as_deref() == reviewer)?;
    let read = crate::pipeline::LastRun {
        round: last.round,
        outcome: last.outcome,
        agent: last.agent.as_deref(),
        session: last.session_id.as_deref(),
    };
    let session = crate::pipeline::resumed_session(read, round, agent)?;
    Some((last.run_id.clone(), session.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::RunOutcome;
    use crate::domain::Stage;

    const IMPLEMENTER: crate::domain::Actor = Stage::Implementing.actor();
    const REVIEWER: crate::domain::Actor = Stage::Reviewing.actor();

    fn run(number: i64, round: u32, outcome: RunOutcome, session: Option<&str>) -> Run {
        let mut run = Run::sample(IMPLEMENTER, None, number, round, number);
        run.outcome = Some(outcome);
        run.session_id = session.map(str::to_string);
        run
    }

    fn spec(resume: bool) -> SisterSpec {
        let mut config = crate::config::Config::default();
        if resume {
            config.agent.resume_args = Some(vec!["--resume".into(), "{session}".into()]);
        }
        config.agent.spec(IMPLEMENTER)
    }

    #[test]
    fn a_paused_or_rejected_run_with_a_session_is_continued() {
        for outcome in [
            RunOutcome::Paused,
            RunOutcome::BadOutput,
            RunOutcome::Timeout,
        ] {
            let runs = [run(2, 1, outcome, Some("s-1"))];
            assert_eq!(
                resumable(&runs, 1, IMPLEMENTER, None, "x", &spec(true)),
                Some(("SPRINT-001-R02".to_string(), "s-1".to_string())),
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn a_new_round_a_handoff_a_failed_start_or_a_cli_without_resume_start_afresh() {
        let paused = run(2, 1, RunOutcome::Paused, Some("s-1"));
        assert_eq!(
            resumable(
                std::slice::from_ref(&paused),
                2,
                IMPLEMENTER,
                None,
                "x",
                &spec(true)
            ),
            None
        );
        assert_eq!(
            resumable(
                std::slice::from_ref(&paused),
                1,
                IMPLEMENTER,
                None,
                "x",
                &spec(false)
            ),
            None
        );
        assert_eq!(
            resumable(
                std::slice::from_ref(&paused),
                1,
                REVIEWER,
                None,
                "x",
                &spec(true)
            ),
            None
        );
        for outcome in [
            RunOutcome::HandedOff,
            RunOutcome::SpawnFailed,
            RunOutcome::Handoff,
        ] {
            let runs = [paused.clone(), run(3, 1, outcome, Some("s-2"))];
            assert_eq!(
                resumable(&runs, 1, IMPLEMENTER, None, "x", &spec(true)),
                None,
                "{outcome:?}"
            );
        }
        // Another agent of the chain takes over: a session is its own CLI's.
        let mut by_claude = paused.clone();
        by_claude.agent = Some("claude-code".into());
        let by_claude = [by_claude];
        assert_eq!(
            resumable(&by_claude, 1, IMPLEMENTER, None, "codex", &spec(true)),
            None
        );
        assert!(resumable(&by_claude, 1, IMPLEMENTER, None, "claude-code", &spec(true)).is_some());
        let no_session = [run(2, 1, RunOutcome::Interrupted, None)];
        assert_eq!(
            resumable(&no_session, 1, IMPLEMENTER, None, "x", &spec(true)),
            None
        );
    }
}
