//! The retry policy: how often a stage may fail, how many review rounds a sprint gets, and
//! how long to wait before the next try.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Tries of one stage before it escalates (the first try counts).
    pub max_attempts: u32,
    /// Review rounds a sister's REQUEST_CHANGES may start before a human is asked.
    pub max_review_rounds: u32,
    pub backoff: Backoff,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    pub factor: f64,
    pub max: Duration,
}

impl Backoff {
    /// A wait that doubles each time, from `initial` up to `max`.
    pub const fn doubling(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial,
            factor: 2.0,
            max,
        }
    }

    /// The wait before retry `n` (n = 1 is the first retry):
    /// `min(initial × factor^(n-1), max)`.
    pub fn delay(&self, n: u32) -> Duration {
        let exponent = i32::try_from(n.saturating_sub(1)).unwrap_or(i32::MAX);
        let secs = self.initial.as_secs_f64() * self.factor.powi(exponent);
        Duration::try_from_secs_f64(secs)
            .unwrap_or(self.max)
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_by_the_factor_and_stops_at_the_max() {
        let b = Backoff {
            initial: Duration::from_secs(5),
            factor: 2.0,
            max: Duration::from_secs(300),
        };
        let delays: Vec<u64> = (1..=8).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, vec![5, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(300));
    }
}
