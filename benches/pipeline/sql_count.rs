//! Counts the SQL statements the store runs (its `SQL_EVENTS` debug events), and the time
//! each spent in SQLite, in the `count` child. `BEGIN` and `COMMIT` are not among them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hanarang::store::testing::SQL_EVENTS;

static STATEMENTS: AtomicU64 = AtomicU64::new(0);
static NANOS: AtomicU64 = AtomicU64::new(0);
/// By statement text: how many, and their time in SQLite (ns).
static BY_SQL: Mutex<Option<HashMap<String, (u64, u64)>>> = Mutex::new(None);

struct Counter;

#[derive(Default)]
struct Fields {
    elapsed: f64,
    summary: String,
    statement: String,
}

impl tracing::field::Visit for Fields {
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        if field.name() == "elapsed_secs" {
            self.elapsed = value;
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "summary" => self.summary = value.to_string(),
            "db.statement" => self.statement = value.to_string(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "summary" && self.summary.is_empty() {
            self.summary = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Counter {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != SQL_EVENTS {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let nanos = (fields.elapsed * 1e9) as u64;
        STATEMENTS.fetch_add(1, Ordering::Relaxed);
        NANOS.fetch_add(nanos, Ordering::Relaxed);
        let text = if fields.statement.trim().is_empty() {
            fields.summary
        } else {
            fields.statement
        };
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut by_sql = BY_SQL.lock().unwrap_or_else(|p| p.into_inner());
        let entry = by_sql
            .get_or_insert_with(HashMap::new)
            .entry(text)
            .or_default();
        entry.0 += 1;
        entry.1 += nanos;
    }
}

pub fn install() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::new(format!("{SQL_EVENTS}=debug"));
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::Layer::with_filter(Counter, filter))
        .try_init();
}

/// Statements so far, and their time in SQLite.
pub fn now() -> (u64, Duration) {
    (
        STATEMENTS.load(Ordering::Relaxed),
        Duration::from_nanos(NANOS.load(Ordering::Relaxed)),
    )
}

/// Forgets the statements by text counted so far.
pub fn reset_by_sql() {
    *BY_SQL.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

/// The statements by text: (count, ns in SQLite, text), most time first.
pub fn by_sql() -> Vec<(u64, u64, String)> {
    let by_sql = BY_SQL.lock().unwrap_or_else(|p| p.into_inner());
    let mut rows: Vec<_> = by_sql
        .iter()
        .flatten()
        .map(|(text, (n, ns))| (*n, *ns, text.clone()))
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    rows
}
