//! `hanarang`: parse the command line, set up logging, hand off to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = hanarang::cli::Cli::parse();
    let level = if cli.command.is_service() {
        "info"
    } else {
        "warn"
    };
    hanarang::logging::init(level, cli.log_format);
    hanarang::cli::run(cli).into()
}
