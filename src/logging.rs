//! Logging setup: `tracing` to stderr, filtered by `RUST_LOG` (default: `default_level`),
//! as text for people or JSON lines for a log collector. Spans carry the sprint and run
//! ids. The Discord token never appears: it is not in any field this program logs.

/// How log lines look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    /// One JSON object per line, with the span fields (sprint, run) included.
    Json,
}

/// Without `RUST_LOG`, serenity says only what is wrong for good: while Discord is down
/// its shard queuer warns on every reconnect try (every few seconds), and the bot's own
/// line about it comes once a minute.
const QUIET_DEPENDENCIES: &str = "serenity=error";

pub fn init(default_level: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{default_level},{QUIET_DEPENDENCIES}"))
    });
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().with_current_span(true).try_init(),
    };
}
