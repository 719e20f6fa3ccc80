//! The team's CI's verdict on a pushed head: from the forge's checks on it and how long
//! they have had, what the sprint does next. Pure: the loop reads the checks, asks this,
//! and only then reads the failed ones' logs.

use std::time::Duration;

use crate::domain::CheckState;

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
}

/// How long the checks have had, and the project's two waits (`ci_absent_after`,
/// `ci_timeout`).
#[derive(Debug, Clone, Copy)]
pub struct CiWait {
    pub waited: Duration,
    pub absent_after: Duration,
    pub timeout: Duration,
}

/// The verdict of `checks` after `wait`: a failure counts at once, whatever is still
/// pending; all passed is done; none at all is done once the wait for one is over.
pub fn ci_verdict(checks: &[CheckState], wait: CiWait) -> CiVerdict {
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

#[cfg(test)]
mod tests {
    use super::*;
    use CheckState::{Failed, Passed, Pending};

    #[test]
    fn the_verdict_of_every_kind_of_check_list_and_wait() {
        let minutes = |m: u64| Duration::from_secs(60 * m);
        let wait = |waited: u64| CiWait {
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
        for (checks, waited, expected) in table {
            assert_eq!(
                &ci_verdict(checks, wait(*waited)),
                expected,
                "{checks:?} after {waited} min"
            );
        }
    }
}
