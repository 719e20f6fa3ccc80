//! The bot's buttons, each in one place: its action, its label, its style and the command
//! it gives. A button's `custom_id` is a [`ButtonId`]: `hanarang:<action>:<sprint>`, then
//! the transition the card was posted at (`seq`; cards posted before hanarang bound them
//! carry none) and, for a note's request-changes button, the note whose text fills the
//! form. The ids keep working after a restart: the state comes from the database.

use poise::serenity_prelude as serenity;
use serenity::{CreateActionRow, CreateButton};

use crate::config::Locale;
use crate::say;
use crate::store::CommandKind;

const PREFIX: &str = "hanarang";

/// What a button does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Approve the deploy of a sprint in `done`.
    Approve,
    /// Approve the merge of a sprint in `done` whose project delivers through its forge.
    Merge,
    /// Let a held head's CI files be pushed and run (`sprint approve-ci`).
    PushCi,
    /// Ask for changes: opens a form for the note (the form's own id is this action's).
    Changes,
    /// Abort the sprint.
    Abort,
    /// Hand the running stage to a fresh session now.
    Handoff,
    /// Resume an escalated sprint, or a stage waiting (a pause, a retry's backoff), now.
    Resume,
    /// Resume an escalated sprint with a note that settles its cause: opens a form for
    /// the note (the form's own id is this action's).
    Settle,
}

impl Action {
    const ALL: [Action; 8] = [
        Action::Approve,
        Action::Merge,
        Action::PushCi,
        Action::Changes,
        Action::Abort,
        Action::Handoff,
        Action::Resume,
        Action::Settle,
    ];

    /// Whether a click opens a form for a note, the command given once it is submitted.
    pub fn asks_for_a_note(self) -> bool {
        matches!(self, Action::Changes | Action::Settle)
    }

    /// Its word in a `custom_id`.
    fn name(self) -> &'static str {
        match self {
            Action::Approve => "approve",
            Action::Merge => "merge",
            Action::PushCi => "push-ci",
            Action::Changes => "changes",
            Action::Abort => "abort",
            Action::Handoff => "handoff",
            Action::Resume => "resume",
            Action::Settle => "settle",
        }
    }

    /// The command a click gives (for `Changes`, once its form is submitted).
    pub fn kind(self) -> CommandKind {
        match self {
            Action::Approve | Action::Merge => CommandKind::Approve,
            Action::PushCi => CommandKind::ApproveCi,
            Action::Changes => CommandKind::RequestChanges,
            Action::Abort => CommandKind::Abort,
            Action::Handoff => CommandKind::Handoff,
            Action::Resume | Action::Settle => CommandKind::Resume,
        }
    }

    fn label(self, locale: Locale) -> String {
        match self {
            Action::Approve => say!(locale, ko: "배포 승인", en: "Approve deploy"),
            Action::Merge => say!(locale, ko: "병합 승인", en: "Approve merge"),
            Action::PushCi => say!(locale, ko: "푸시하고 CI 실행", en: "Push and run CI"),
            Action::Changes => say!(locale, ko: "변경 요청", en: "Request changes"),
            Action::Abort => say!(locale, ko: "중단", en: "Abort"),
            Action::Handoff => say!(locale, ko: "지금 핸드오프", en: "Hand off now"),
            Action::Resume => say!(locale, ko: "지금 재개", en: "Resume now"),
            Action::Settle => say!(locale, ko: "메모와 함께 재개", en: "Resume with a note"),
        }
    }

    fn style(self) -> serenity::ButtonStyle {
        match self {
            Action::Approve | Action::Merge => serenity::ButtonStyle::Success,
            Action::Changes | Action::Settle | Action::PushCi => serenity::ButtonStyle::Primary,
            Action::Abort => serenity::ButtonStyle::Danger,
            Action::Handoff | Action::Resume => serenity::ButtonStyle::Secondary,
        }
    }
}

/// A button's (or the request-changes form's) `custom_id`, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ButtonId {
    pub action: Action,
    pub sprint: String,
    /// The transition the card was posted at.
    pub seq: Option<i64>,
    /// The note whose text fills the request-changes form.
    pub note: Option<i64>,
}

impl ButtonId {
    pub fn new(action: Action, sprint: &str, seq: i64) -> ButtonId {
        ButtonId {
            action,
            sprint: sprint.to_string(),
            seq: Some(seq),
            note: None,
        }
    }

    /// `None` for an id that is not one of ours.
    pub fn parse(id: &str) -> Option<ButtonId> {
        let mut parts = id.splitn(5, ':');
        (parts.next()? == PREFIX).then_some(())?;
        let action = parts.next()?;
        let action = Action::ALL.into_iter().find(|a| a.name() == action)?;
        let sprint = parts.next()?.to_string();
        let seq = parts.next().and_then(|s| s.parse().ok());
        let note = parts.next().and_then(|s| s.parse().ok());
        Some(ButtonId {
            action,
            sprint,
            seq,
            note,
        })
    }

    /// The button, labelled in `locale`.
    pub fn button(&self, locale: Locale) -> CreateButton {
        CreateButton::new(self.to_string())
            .label(self.action.label(locale))
            .style(self.action.style())
    }
}

impl std::fmt::Display for ButtonId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PREFIX}:{}:{}", self.action.name(), self.sprint)?;
        if let Some(seq) = self.seq {
            write!(f, ":{seq}")?;
            if let Some(note) = self.note {
                write!(f, ":{note}")?;
            }
        }
        Ok(())
    }
}

/// The approve (`merges`: approve merge) / request changes / abort buttons of the `done`
/// reached at transition `seq`; a card whose state has passed (a later round's `done`)
/// gives nothing.
pub fn done_buttons(
    sprint_id: &str,
    seq: i64,
    merges: bool,
    locale: Locale,
) -> Vec<CreateActionRow> {
    decision_buttons(sprint_id, seq, None, merges, locale)
}

/// `done_buttons`, with the request-changes form prefilled from a note (its command id).
pub fn decision_buttons(
    sprint_id: &str,
    seq: i64,
    note: Option<i64>,
    merges: bool,
    locale: Locale,
) -> Vec<CreateActionRow> {
    let approve = if merges {
        Action::Merge
    } else {
        Action::Approve
    };
    let buttons = [approve, Action::Changes, Action::Abort]
        .into_iter()
        .map(|action| {
            let mut id = ButtonId::new(action, sprint_id, seq);
            if action == Action::Changes {
                id.note = note;
            }
            id.button(locale)
        })
        .collect();
    vec![CreateActionRow::Buttons(buttons)]
}

/// What a head held for its CI files offers: let them run (push it), or ask for changes.
pub fn ci_files_buttons(sprint_id: &str, seq: i64, locale: Locale) -> Vec<CreateActionRow> {
    let buttons = [Action::PushCi, Action::Changes]
        .into_iter()
        .map(|action| ButtonId::new(action, sprint_id, seq).button(locale))
        .collect();
    vec![CreateActionRow::Buttons(buttons)]
}

/// What an escalation offers, under what it says of its cause: resume with a note that
/// settles it (the next run is told, and the note amends the contract), resume as it is,
/// or abort.
pub fn escalation_buttons(sprint_id: &str, seq: i64, locale: Locale) -> Vec<CreateActionRow> {
    let buttons = [Action::Settle, Action::Resume, Action::Abort]
        .into_iter()
        .map(|action| ButtonId::new(action, sprint_id, seq).button(locale))
        .collect();
    vec![CreateActionRow::Buttons(buttons)]
}

/// The button a note's acknowledgement offers while a sister runs: hand the stage to a
/// fresh session now, which is given the note.
pub fn handoff_button(sprint_id: &str, seq: i64, locale: Locale) -> Vec<CreateActionRow> {
    one_button(Action::Handoff, sprint_id, seq, locale)
}

/// The button a note's acknowledgement offers while the sprint waits (escalated, or its
/// stage paused until a reset): go on now, and the next run is given the note.
pub fn resume_button(sprint_id: &str, seq: i64, locale: Locale) -> Vec<CreateActionRow> {
    one_button(Action::Resume, sprint_id, seq, locale)
}

fn one_button(action: Action, sprint_id: &str, seq: i64, locale: Locale) -> Vec<CreateActionRow> {
    let id = ButtonId::new(action, sprint_id, seq);
    vec![CreateActionRow::Buttons(vec![id.button(locale)])]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn button_ids_carry_the_action_the_sprint_and_the_cards_transition() {
        let id = |action, seq, note| ButtonId {
            action,
            sprint: "SPRINT-007".into(),
            seq,
            note,
        };
        for (text, parsed) in [
            (
                "hanarang:approve:SPRINT-007:12",
                id(Action::Approve, Some(12), None),
            ),
            (
                "hanarang:approve:SPRINT-007",
                id(Action::Approve, None, None),
            ),
            (
                "hanarang:changes:SPRINT-007:12:45",
                id(Action::Changes, Some(12), Some(45)),
            ),
            (
                "hanarang:abort:SPRINT-007:7",
                id(Action::Abort, Some(7), None),
            ),
            (
                "hanarang:handoff:SPRINT-007:3",
                id(Action::Handoff, Some(3), None),
            ),
            (
                "hanarang:resume:SPRINT-007:9",
                id(Action::Resume, Some(9), None),
            ),
        ] {
            assert_eq!(ButtonId::parse(text), Some(parsed.clone()), "{text}");
            assert_eq!(parsed.to_string(), text);
        }
        assert_eq!(ButtonId::parse("other:approve:SPRINT-007"), None);
        assert_eq!(ButtonId::parse("hanarang:approve"), None);
        assert_eq!(ButtonId::parse("hanarang:deploy:SPRINT-007:1"), None);
    }
}
