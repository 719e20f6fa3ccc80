//! `hanarang`: parse the command line, set up logging, hand off to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = hanarang::cli::Cli::parse();
    hanarang::logging::init(if cli.command.is_service() {
        "info"
    } else {
        "warn"
    });
    hanarang::cli::run(cli).into()
}
