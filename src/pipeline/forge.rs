//! What the forge's answers mean for a sprint: the team's CI's verdict on a pushed head
//! (from its checks and how long they have had), what a person's review there is, and
//! what a failed visit leads to. Pure: the loop reads the forge, asks these, and only then
//! reads more (a failed check's log) or writes.

use std::time::Duration;

use super::State;
use crate::domain::{CheckState, ForgeFault, ReviewState};

/// What the checks on a pushed head say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CiVerdict {
    /// These checks (by their place in the list) failed: another round, with their logs.
    Failed(Vec<usize>),
    /// Every check passed.
    Passed,
    /// None was reported within the wait for one: done, saying no CI ran.
    NoneRan,
    /// These (by place) were still pending past the timeout: a person decides.
    TimedOut(Vec<usize>),
    /// Not yet: look again later.
    Waiting,
    /// The project waits for no CI (`ci = "none"`): done once the pull request is open.
    NotWaited,
}

/// Whether the project waits for its CI at all (`ci = "required"`), how long the checks
/// have had, and the project's two waits (`ci_absent_after`, `ci_timeout`).
#[derive(Debug, Clone, Copy)]
pub struct CiWait {
    pub waits: bool,
    pub waited: Duration,
    pub absent_after: Duration,
    pub timeout: Duration,
}

/// The verdict of `checks` after `wait`: a failure counts at once, whatever is still
/// pending; all passed is done; none at all is done once the wait for one is over.
pub fn ci_verdict(checks: &[CheckState], wait: CiWait) -> CiVerdict {
    if !wait.waits {
        return CiVerdict::NotWaited;
    }
    let with = |state: CheckState| -> Vec<usize> {
        (0..checks.len()).filter(|&i| checks[i] == state).collect()
    };
    let failed = with(CheckState::Failed);
    if !failed.is_empty() {
        return CiVerdict::Failed(failed);
    }
    match checks {
        [] if wait.waited >= wait.absent_after => CiVerdict::NoneRan,
        [] => CiVerdict::Waiting,
        _ if checks.iter().all(|c| *c == CheckState::Passed) => CiVerdict::Passed,
        _ if wait.waited >= wait.timeout => CiVerdict::TimedOut(with(CheckState::Pending)),
        _ => CiVerdict::Waiting,
    }
}

/// What the rules of who may do what (§11) let a forge login do on a sprint: leave a note,
/// steer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heard {
    pub note: bool,
    pub steer: bool,
}

/// What a person's words on the forge are for the sprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonsWord {
    /// A request for changes: the next round.
    RequestChanges,
    /// A note for the next run.
    Note,
    /// Nothing: not someone heard here, or not a person's word.
    Nothing,
}

/// What a review is: a "changes requested" at `done` by someone who may steer is a request
/// for changes; any other review by someone who may note is a note; a dismissed or
/// pending review, or anyone else's, is nothing. A comment is a review that requests
/// nothing (`ReviewState::Commented`).
pub fn review_word(review: ReviewState, at: State, heard: Heard) -> PersonsWord {
    match (review, at) {
        _ if !heard.note => PersonsWord::Nothing,
        (ReviewState::Other, _) => PersonsWord::Nothing,
        (ReviewState::ChangesRequested, State::Done) if heard.steer => PersonsWord::RequestChanges,
        _ => PersonsWord::Note,
    }
}

/// What a visit that got no answer leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFault {
    /// The forge refused: a person decides (escalated; a merge refused).
    Escalate,
    /// Its rate limit: look again after the reset it named.
    AfterReset,
    /// Down or unreadable: look again later; nothing is lost, nothing approved.
    Later,
}

pub fn after_fault(fault: ForgeFault) -> AfterFault {
    match fault {
        ForgeFault::Refused => AfterFault::Escalate,
        ForgeFault::RateLimited => AfterFault::AfterReset,
        ForgeFault::Unreachable => AfterFault::Later,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CheckState::{Failed, Passed, Pending};

    #[test]
    fn a_persons_review_is_a_request_a_note_or_nothing() {
        let (steers, notes, stranger) = (
            Heard {
                note: true,
                steer: true,
            },
            Heard {
                note: true,
                steer: false,
            },
            Heard {
                note: false,
                steer: false,
            },
        );
        use ReviewState::{Approved, ChangesRequested, Commented, Other};
        let table = [
            (
                ChangesRequested,
                State::Done,
                steers,
                PersonsWord::RequestChanges,
            ),
            (ChangesRequested, State::Done, notes, PersonsWord::Note),
            (
                ChangesRequested,
                State::Verifying,
                steers,
                PersonsWord::Note,
            ),
            (ChangesRequested, State::Merging, steers, PersonsWord::Note),
            (Approved, State::Done, steers, PersonsWord::Note),
            (Commented, State::Done, notes, PersonsWord::Note),
            (Other, State::Done, steers, PersonsWord::Nothing),
            (
                ChangesRequested,
                State::Done,
                stranger,
                PersonsWord::Nothing,
            ),
            (Commented, State::Verifying, stranger, PersonsWord::Nothing),
        ];
        for (review, at, heard, expected) in table {
            assert_eq!(
                review_word(review, at, heard),
                expected,
                "{review:?} at {at} by {heard:?}"
            );
        }
    }

    #[test]
    fn a_refusal_escalates_a_limit_waits_its_reset_and_an_outage_tries_later() {
        assert_eq!(after_fault(ForgeFault::Refused), AfterFault::Escalate);
        assert_eq!(after_fault(ForgeFault::RateLimited), AfterFault::AfterReset);
        assert_eq!(after_fault(ForgeFault::Unreachable), AfterFault::Later);
    }

    #[test]
    fn the_verdict_of_every_kind_of_check_list_and_wait() {
        let minutes = |m: u64| Duration::from_secs(60 * m);
        let wait = |waited: u64| CiWait {
            waits: true,
            waited: minutes(waited),
            absent_after: minutes(10),
            timeout: minutes(60),
        };
        let table: &[(&[CheckState], u64, CiVerdict)] = &[
            (&[], 0, CiVerdict::Waiting),
            (&[], 9, CiVerdict::Waiting),
            (&[], 10, CiVerdict::NoneRan),
            (&[], 90, CiVerdict::NoneRan),
            (&[Passed], 0, CiVerdict::Passed),
            (&[Passed, Passed], 90, CiVerdict::Passed),
            (&[Passed, Pending], 0, CiVerdict::Waiting),
            (&[Passed, Pending], 59, CiVerdict::Waiting),
            (&[Passed, Pending], 60, CiVerdict::TimedOut(vec![1])),
            (&[Pending, Failed], 0, CiVerdict::Failed(vec![1])),
            (&[Failed, Passed, Failed], 90, CiVerdict::Failed(vec![0, 2])),
        ];
        let unwaited = CiWait {
            waits: false,
            ..wait(0)
        };
        assert_eq!(ci_verdict(&[], unwaited), CiVerdict::NotWaited);
        assert_eq!(
            ci_verdict(&[Failed], unwaited),
            CiVerdict::NotWaited,
            "ci = \"none\""
        );
        for (checks, waited, expected) in table {
            assert_eq!(
                &ci_verdict(checks, wait(*waited)),
                expected,
                "{checks:?} after {waited} min"
            );
        }
    }
}
