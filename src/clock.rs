//! The one wall clock: milliseconds since the Unix epoch, as stored in the database. The
//! state machine never reads it; the orchestrator passes times in.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
