//! What the pipeline reads of a forge's answers: where a check stands, what a review says,
//! and what kind of trouble a failed call was.

/// A check run's or commit status's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    Pending,
    Passed,
    Failed,
}

/// A review's verdict on a pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewState {
    Approved,
    ChangesRequested,
    Commented,
    /// Dismissed, pending, or a state this version does not know: not a person's word.
    Other,
}

/// Why a call to the forge gave no answer, as far as what to do next depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeFault {
    /// The forge said no and will say it again (the token, a missing repository, a
    /// refusal in its words): a person must act.
    Refused,
    /// Its rate limit, until a reset it named.
    RateLimited,
    /// Down, a timeout, an answer this client cannot read: the same call may work later.
    Unreachable,
}
