//! Who may steer a sprint from Discord: the configured user, the approver users, and
//! members holding an approver role. Checked in code on every command and click;
//! Discord-side command permissions are not trusted.

use crate::config::DiscordConfig;

/// Whether this member may approve, request changes, resume, hand off or abort.
pub fn may_steer(discord: &DiscordConfig, user_id: u64, role_ids: &[u64]) -> bool {
    user_id == discord.user_id.0
        || discord.approver_user_ids.iter().any(|u| u.0 == user_id)
        || role_ids
            .iter()
            .any(|r| discord.approver_role_ids.iter().any(|a| a.0 == *r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Snowflake;

    fn discord() -> DiscordConfig {
        DiscordConfig {
            token_env: "DISCORD_TOKEN".into(),
            guild_id: Snowflake(1),
            forum_channel_id: Snowflake(2),
            user_id: Snowflake(10),
            nickname: None,
            approver_user_ids: vec![Snowflake(11)],
            approver_role_ids: vec![Snowflake(100)],
            http_proxy: None,
        }
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
