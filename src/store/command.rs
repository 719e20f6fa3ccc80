//! A user's command as stored: what was asked, by whom, and the orchestrator's answer.

use serde::Serialize;

use super::StoreError;
use crate::pipeline::Event;

/// What a user asked for, durable until the orchestrator answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandKind {
    Approve,
    /// Let a held head's CI files be pushed and run.
    ApproveCi,
    RequestChanges,
    Resume,
    Abort,
    Handoff,
    /// A person's words for the sprint's next sister run: no transition.
    Note,
}

impl CommandKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandKind::Approve => "approve",
            CommandKind::ApproveCi => "approve_ci",
            CommandKind::RequestChanges => "request_changes",
            CommandKind::Resume => "resume",
            CommandKind::Abort => "abort",
            CommandKind::Handoff => "handoff",
            CommandKind::Note => "note",
        }
    }

    fn parse(s: &str) -> Option<CommandKind> {
        [
            CommandKind::Approve,
            CommandKind::ApproveCi,
            CommandKind::RequestChanges,
            CommandKind::Resume,
            CommandKind::Abort,
            CommandKind::Handoff,
            CommandKind::Note,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }

    /// The state-machine event this command asks for; a note asks for none.
    pub fn event(self, by: &str, text: Option<&str>) -> Option<Event> {
        let by = by.to_string();
        let text = text.map(str::to_string);
        Some(match self {
            CommandKind::Approve => Event::Approve { by },
            CommandKind::ApproveCi => Event::ApproveCi { by },
            CommandKind::RequestChanges => Event::RequestChanges {
                by,
                note: text.unwrap_or_default(),
            },
            CommandKind::Resume => Event::Resume { by, focus: text },
            CommandKind::Abort => Event::Abort { by, reason: text },
            CommandKind::Handoff => Event::Handoff { by, focus: text },
            CommandKind::Note => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandStatus {
    Pending,
    Applied,
    Refused,
}

impl CommandStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandStatus::Pending => "pending",
            CommandStatus::Applied => "applied",
            CommandStatus::Refused => "refused",
        }
    }
}

/// What a command asks, by whom, when and against which transition: what is written,
/// and what its writer's proof covers (`store::signing`).
#[derive(Debug, Clone, Copy)]
pub struct NewCommand<'a> {
    pub sprint_id: &'a str,
    pub kind: CommandKind,
    pub text: Option<&'a str>,
    pub by: &'a str,
    pub seq: Option<i64>,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Command {
    pub id: i64,
    pub sprint_id: String,
    pub kind: CommandKind,
    pub text: Option<String>,
    pub by: String,
    pub created_at: i64,
    pub status: CommandStatus,
    pub result: Option<String>,
    /// The sprint's transition it was given against (its `last_seq` then): it applies
    /// only while the sprint is still there. `None` for commands written before it was
    /// recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// Its writer's proof (`store::signing`); never shown.
    #[serde(skip)]
    pub mac: Option<String>,
    /// A note: the run it was given to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_run: Option<String>,
    /// A note from Discord: where it was written (`<channel id>/<message id>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Command {
    /// What it asks, as its writer signed it.
    pub fn asked(&self) -> NewCommand<'_> {
        NewCommand {
            sprint_id: &self.sprint_id,
            kind: self.kind,
            text: self.text.as_deref(),
            by: &self.by,
            seq: self.seq,
            created_at: self.created_at,
        }
    }

    pub fn event(&self) -> Option<Event> {
        self.kind.event(&self.by, self.text.as_deref())
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CommandRaw {
    id: i64,
    sprint_id: String,
    kind: String,
    text: Option<String>,
    by: String,
    created_at: i64,
    status: String,
    result: Option<String>,
    seq: Option<i64>,
    mac: Option<String>,
    delivered_run: Option<String>,
    message: Option<String>,
}

impl TryFrom<CommandRaw> for Command {
    type Error = StoreError;

    fn try_from(r: CommandRaw) -> Result<Self, StoreError> {
        let key = r.id.to_string();
        let bad = |what: &str| StoreError::corrupt("commands", &key, what);
        let status = match r.status.as_str() {
            "pending" => CommandStatus::Pending,
            "applied" => CommandStatus::Applied,
            "refused" => CommandStatus::Refused,
            _ => return Err(bad("status")),
        };
        Ok(Command {
            id: r.id,
            kind: CommandKind::parse(&r.kind).ok_or_else(|| bad("kind"))?,
            sprint_id: r.sprint_id,
            text: r.text,
            by: r.by,
            created_at: r.created_at,
            status,
            result: r.result,
            seq: r.seq,
            mac: r.mac,
            delivered_run: r.delivered_run,
            message: r.message,
        })
    }
}
