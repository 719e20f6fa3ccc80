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
    let exit = hanarang::cli::run(cli);
    // Output that could not be written (a full disk; a closed pipe is fine) fails the
    // command, whatever it did.
    if hanarang::output::failed() && exit == hanarang::output::Exit::Success {
        return hanarang::output::Exit::Failure.into();
    }
    exit.into()
}
