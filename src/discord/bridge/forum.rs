//! A sprint's forum post: the one on record, one a stopped bot left behind (found by its
//! title among the forum's open and archived posts), or a new one.

use super::*;
use crate::say;

impl Bridge {
    /// The sprint's forum post, created on first need with the board as its first message.
    pub(super) async fn post_for(&self, sprint: &Sprint) -> Result<ForumPost, DeliveryError> {
        if let Some(post) = self.store.forum_post(&sprint.id).await? {
            return Ok(post);
        }
        if let Some(thread) = self.unrecorded_post(sprint).await? {
            tracing::info!(thread = %thread, "continuing the sprint's forum post an earlier bot created but did not record");
            let post = post_of(&sprint.id, thread);
            return Ok(self.store.record_new_forum_post(&post, None).await?);
        }
        self.new_post(sprint, None).await
    }

    /// A post in the forum titled as the sprint's would be, though none is recorded.
    pub(super) async fn unrecorded_post(
        &self,
        sprint: &Sprint,
    ) -> Result<Option<ChannelId>, DeliveryError> {
        let listing = self.listing.lock().await;
        let drops = self.with(|s| s.unrecorded.is_none().then_some(s.unrecorded_drops));
        // A listing that cannot be kept (a creation came into doubt meanwhile) still
        // answers for this sprint.
        let mut unkept = None;
        if let Some(drops) = drops {
            let guild = serenity::GuildId::new(self.discord.guild_id.0);
            let forum = ChannelId::new(self.discord.forum_channel_id.0);
            let listed = async {
                let mut threads = call(self.rest.active_threads(guild)).await?;
                threads.retain(|t| t.parent_id == Some(forum));
                // A post left behind may have archived since (after a week without a line).
                match call(self.rest.archived_threads(forum)).await {
                    Ok(archived) => threads.extend(archived),
                    Err(e) if e.is_permanent() => {
                        tracing::warn!(error = %e, "cannot list the forum's archived posts; only its open ones are searched");
                    }
                    Err(e) => return Err(e),
                }
                Ok::<_, DeliveryError>(threads)
            };
            let found = match listed.await {
                Ok(threads) => threads
                    .into_iter()
                    .map(|t| (t.name.trim().to_string(), t.id))
                    .collect(),
                // The list is a safeguard: without it a post may be there twice, and the
                // sprint's lines still go on.
                Err(e) if e.is_permanent() => {
                    tracing::warn!(error = %e, "cannot list the forum's posts; a post an earlier bot left unrecorded may stay beside the new one");
                    HashMap::new()
                }
                Err(e) => return Err(e),
            };
            unkept = self.with(|s| {
                if s.unrecorded_drops == drops {
                    s.unrecorded = Some(found);
                    None
                } else {
                    Some(found)
                }
            });
        }
        drop(listing);
        let title = thread_title(&sprint.id, &sprint.goal);
        let thread = match unkept {
            Some(mut found) => found.remove(title.trim()),
            None => self.with(|s| s.unrecorded.as_mut().and_then(|p| p.remove(title.trim()))),
        };
        let Some(thread) = thread else {
            return Ok(None);
        };
        // Made for this sprint, not for an earlier one of the same number and goal (a
        // database started afresh beside the same forum): not long before the sprint.
        // (A snowflake carries the time it was made.)
        let made_at = thread.created_at().unix_timestamp().saturating_mul(1000);
        Ok((made_at >= sprint.created_at - UNRECORDED_SLACK_MS).then_some(thread))
    }

    /// A new forum post for the sprint, or, `replacing` a deleted one (its thread id), its
    /// continuation, which its first line after the board says. Another bot may have
    /// recorded one first (the one before a failover, still finishing its call): that one
    /// is the sprint's, and this one's board becomes a pointer to it.
    pub(super) async fn new_post(
        &self,
        sprint: &Sprint,
        replacing: Option<i64>,
    ) -> Result<ForumPost, DeliveryError> {
        let forum = ChannelId::new(self.discord.forum_channel_id.0);
        let board = self.board_text(sprint).await?;
        let first = CreateMessage::new()
            .content(board.clone())
            .allowed_mentions(CreateAllowedMentions::new());
        // The longest auto-archive: a sprint waiting days for its approval keeps its post
        // open (and one that archived anyway is opened again by its next line).
        let post = CreateForumPost::new(thread_title(&sprint.id, &sprint.goal), first)
            .auto_archive_duration(serenity::AutoArchiveDuration::OneWeek);
        let thread = match call(self.rest.create_forum_post(forum, &post)).await {
            Ok(thread) => thread,
            Err(e) => {
                if !e.is_permanent() {
                    // It may have been created all the same: look before the next try.
                    self.with(|s| {
                        s.unrecorded = None;
                        s.unrecorded_drops += 1;
                    });
                }
                return Err(e);
            }
        };
        let post = post_of(&sprint.id, thread.id);
        let id = post.thread_id;
        let recorded = self.store.record_new_forum_post(&post, replacing).await?;
        if recorded.thread_id != id {
            // Deleting it would take Manage Threads: it says where the sprint goes on.
            tracing::warn!(
                thread = id,
                kept = recorded.thread_id,
                "another bot recorded a post for this sprint first; this one points to it"
            );
            let (sprint_id, kept) = (&sprint.id, recorded.thread_id);
            let pointer = say!(self.config.pipeline.locale,
                ko: "ℹ️ {sprint_id}는 <#{kept}>에서 이어집니다",
                en: "ℹ️ {sprint_id} goes on in <#{kept}>");
            let edit = EditMessage::new()
                .content(pointer)
                .allowed_mentions(CreateAllowedMentions::new());
            let board = MessageId::new(thread.id.get());
            if let Err(e) = call(self.rest.edit_message(thread.id, board, &edit)).await {
                tracing::warn!(error = %e, thread = id, "could not point the second post to the first; it keeps only its board");
            }
            return Ok(recorded);
        }
        tracing::info!(sprint = %sprint.id, thread = id, "forum post created");
        // The sprint's board shows this text now: the same is not sent again.
        self.with(|s| s.boards.entry(sprint.id.clone()).or_default().shown = Some(board));
        if replacing.is_some() {
            let sprint_id = &sprint.id;
            let note = say!(self.config.pipeline.locale,
                ko: "ℹ️ {sprint_id}의 이전 포스트가 삭제되어 여기서 이어갑니다 (이전 기록: `hanarang sprint log {sprint_id}`)",
                en: "ℹ️ {sprint_id}'s earlier post was deleted; it continues here (what came before: `hanarang sprint log {sprint_id}`)");
            let message = CreateMessage::new()
                .content(note)
                .allowed_mentions(CreateAllowedMentions::new());
            call(self.rest.send_message(thread.id, &message)).await?;
        }
        Ok(post)
    }
}
