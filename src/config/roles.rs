//! Who may do what: the configured user, the approver users and members holding an
//! approver role steer sprints; they and the starters may start one; with
//! `approval = "not-starter"` a sprint's starter may not approve its deploy. Checked in
//! code on every command and click (Discord-side permissions are not trusted), and for the
//! forge's people by the Discord id `people` maps their login to.

use super::{Approval, DiscordConfig};

/// Whether this member may approve, request changes, resume, hand off or abort.
pub fn may_steer(discord: &DiscordConfig, user_id: u64, role_ids: &[u64]) -> bool {
    user_id == discord.user_id.0
        || discord.approver_user_ids.iter().any(|u| u.0 == user_id)
        || role_ids
            .iter()
            .any(|r| discord.approver_role_ids.iter().any(|a| a.0 == *r))
}

/// Whether this member may start a sprint: whoever may steer, and the starters.
pub fn may_start(discord: &DiscordConfig, user_id: u64, role_ids: &[u64]) -> bool {
    may_steer(discord, user_id, role_ids)
        || discord.starter_user_ids.iter().any(|u| u.0 == user_id)
        || role_ids
            .iter()
            .any(|r| discord.starter_role_ids.iter().any(|s| s.0 == *r))
}

/// Whether this member's reply in a sprint's thread is a note for it:
/// whoever may steer, and the one who started it.
pub fn may_note(
    discord: &DiscordConfig,
    user_id: u64,
    role_ids: &[u64],
    started_by: Option<&str>,
) -> bool {
    may_steer(discord, user_id, role_ids)
        || started_by == Some(format!("discord:{user_id}").as_str())
}

/// Whether an approver may approve the deploy of a sprint `started_by` someone: not
/// their own under `approval = "not-starter"`.
pub fn may_approve(discord: &DiscordConfig, user_id: u64, started_by: Option<&str>) -> bool {
    discord.approval == Approval::Any || started_by != Some(format!("discord:{user_id}").as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Snowflake;

    fn discord() -> DiscordConfig {
        DiscordConfig {
            token_env: "DISCORD_TOKEN".into(),
            token_file: None,
            guild_id: Snowflake(1),
            forum_channel_id: Snowflake(2),
            user_id: Snowflake(10),
            nickname: None,
            approver_user_ids: vec![Snowflake(11)],
            approver_role_ids: vec![Snowflake(100)],
            starter_user_ids: vec![Snowflake(20)],
            starter_role_ids: vec![Snowflake(200)],
            approval: Approval::Any,
            http_proxy: None,
        }
    }

    #[test]
    fn starters_may_start_but_not_steer_and_strangers_neither() {
        let d = discord();
        assert!(may_start(&d, 10, &[]), "the user");
        assert!(may_start(&d, 11, &[]), "an approver");
        assert!(may_start(&d, 20, &[]), "a starter");
        assert!(may_start(&d, 30, &[200]), "a starter role");
        assert!(!may_steer(&d, 20, &[200]), "a starter steers nothing");
        assert!(!may_start(&d, 30, &[7]), "a stranger");
        assert!(!may_start(&d, 200, &[]), "a role id is not a user id");
    }

    #[test]
    fn with_not_starter_the_starter_cannot_approve_alone() {
        let mut d = discord();
        assert!(
            may_approve(&d, 11, Some("discord:11")),
            "any: the starter may"
        );
        d.approval = Approval::NotStarter;
        assert!(!may_approve(&d, 11, Some("discord:11")));
        assert!(
            may_approve(&d, 10, Some("discord:11")),
            "another approver may"
        );
        assert!(
            may_approve(&d, 11, Some("cli:ops@build")),
            "started from the CLI"
        );
        assert!(may_approve(&d, 11, None), "no starter on record");
    }

    #[test]
    fn the_user_approvers_and_approver_roles_may_steer_nobody_else() {
        let d = discord();
        assert!(may_steer(&d, 10, &[]));
        assert!(may_steer(&d, 11, &[]));
        assert!(may_steer(&d, 12, &[7, 100]));
        assert!(!may_steer(&d, 12, &[7]));
        assert!(!may_steer(&d, 100, &[]), "a role id is not a user id");
    }
}
