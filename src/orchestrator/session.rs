//! Which run a retry continues the agent session of (`SPEC.md` §14).

use crate::config::SisterSpec;
use crate::domain::{Actor, RunOutcome};
use crate::store::Run;

/// The run whose session the next run of `actor` (or of one of darang's reviewers)
/// continues, and that session: its last run in this round, when that one stopped without
/// finishing its work (paused at a usage limit, interrupted, timed out, or its answer
/// rejected) and its CLI named a session, and the sister's CLI can resume one. A new
/// round, a handoff to a fresh session, and a resumed run that failed to start all begin
/// afresh (`SPEC.md` §14).
pub(super) fn resumable(
    runs: &[Run],
    round: u32,
    actor: Actor,
    reviewer: Option<&str>,
    spec: &SisterSpec,
) -> Option<(String, String)> {
    spec.resume_args.as_ref()?;
    let last = runs
        .iter()
        .rev()
        .find(|r| r.actor == actor && r.reviewer.as_deref() == reviewer)?;
    let unfinished = matches!(
        last.outcome,
        Some(
            RunOutcome::Paused
                | RunOutcome::Interrupted
                | RunOutcome::Timeout
                | RunOutcome::BadOutput
        )
    );
    (last.round == round && unfinished)
        .then(|| Some((last.run_id.clone(), last.session_id.clone()?)))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(number: i64, round: u32, outcome: RunOutcome, session: Option<&str>) -> Run {
        let mut run = Run::sample(Actor::Narang, None, number, round, number);
        run.outcome = Some(outcome);
        run.session_id = session.map(str::to_string);
        run
    }

    fn spec(resume: bool) -> SisterSpec {
        let mut config = crate::config::Config::default();
        if resume {
            config.agent.resume_args = Some(vec!["--resume".into(), "{session}".into()]);
        }
        config.agent.spec(Actor::Narang)
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
                resumable(&runs, 1, Actor::Narang, None, &spec(true)),
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
                Actor::Narang,
                None,
                &spec(true)
            ),
            None
        );
        assert_eq!(
            resumable(
                std::slice::from_ref(&paused),
                1,
                Actor::Narang,
                None,
                &spec(false)
            ),
            None
        );
        assert_eq!(
            resumable(
                std::slice::from_ref(&paused),
                1,
                Actor::Darang,
                None,
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
                resumable(&runs, 1, Actor::Narang, None, &spec(true)),
                None,
                "{outcome:?}"
            );
        }
        let no_session = [run(2, 1, RunOutcome::Interrupted, None)];
        assert_eq!(
            resumable(&no_session, 1, Actor::Narang, None, &spec(true)),
            None
        );
    }
}
