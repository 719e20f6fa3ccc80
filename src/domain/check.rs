//! Where one of the forge's checks on a commit stands.

/// A check run's or commit status's state, as the pipeline reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    Pending,
    Passed,
    Failed,
}
