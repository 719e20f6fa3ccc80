//! Telling people what happened: the message texts (ko/en) the console and the Discord
//! bridge both print.

pub mod messages;

pub use messages::{Context, Line, render};

/// A sprint's forum thread, as a link people follow from the forge or a commit.
pub fn thread_url(guild_id: u64, thread_id: i64) -> String {
    format!("https://discord.com/channels/{guild_id}/{thread_id}")
}
