//! What the fake holds between requests: every record, the open gateway session, and the
//! failures a test asked for. One mutex guards it; a watch channel says it changed.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::{FakeConfig, FakeMessage, InteractionResponse, RecordedRequest};

pub(super) struct Inner {
    pub(super) config: FakeConfig,
    pub(super) addr: SocketAddr,
    pub(super) state: Mutex<State>,
    pub(super) changed: watch::Sender<u64>,
    pub(super) tasks: Mutex<Vec<AbortHandle>>,
}

pub(super) struct GatewaySession {
    pub(super) tx: mpsc::UnboundedSender<WsMessage>,
    pub(super) session_id: String,
}

pub(super) struct InteractionState {
    pub(super) token: String,
    pub(super) kind: u8,
    pub(super) channel_id: u64,
    /// For components: the message the component is on.
    pub(super) message_id: Option<u64>,
    pub(super) callback: Option<u64>,
    pub(super) original: Option<u64>,
    pub(super) followups: Vec<u64>,
    pub(super) responses: Vec<InteractionResponse>,
}

pub(super) struct ThreadState {
    pub(super) id: u64,
    pub(super) parent_id: u64,
    pub(super) name: String,
    pub(super) archived: bool,
    pub(super) locked: bool,
    pub(super) has_starter: bool,
    pub(super) auto_archive_duration: u64,
    pub(super) create_body: Value,
    pub(super) edits: Vec<Value>,
    pub(super) created_at: String,
}

pub(super) struct State {
    pub(super) next_id: u64,
    pub(super) requests: Vec<RecordedRequest>,
    /// Commands by guild (`None`: global).
    pub(super) commands: BTreeMap<Option<u64>, Vec<Value>>,
    pub(super) messages: BTreeMap<u64, FakeMessage>,
    pub(super) threads: Vec<ThreadState>,
    pub(super) interactions: HashMap<u64, InteractionState>,
    pub(super) tokens: HashMap<String, u64>,
    pub(super) gateway: Option<GatewaySession>,
    pub(super) gateway_received: Vec<Value>,
    pub(super) identify: Option<Value>,
    pub(super) ready_count: usize,
    pub(super) seq: u64,
    pub(super) fail_next: u32,
    pub(super) fail_next_status: u16,
    pub(super) failing: Option<u16>,
    pub(super) delay: Duration,
    pub(super) roles: Vec<(u64, String)>,
    pub(super) command_channel_id: u64,
    /// Channels (threads) deleted: every request about them is answered 404 Unknown Channel.
    pub(super) deleted_channels: Vec<u64>,
    /// Channels the bot lost access to: 403 Missing Access.
    pub(super) denied_channels: Vec<u64>,
    /// Channels whose every request fails with a status (a 503 on one thread).
    pub(super) failing_channels: Vec<(u64, u16)>,
    /// Channels whose requests are not answered until they are let go.
    pub(super) held_channels: Vec<u64>,
    /// Requests with files (multipart) are not answered until this is off.
    pub(super) hold_uploads: bool,
    /// Requests being held now.
    pub(super) held: usize,
    /// The next posts of a message (`POST /channels/{id}/messages`) to fail, and how.
    pub(super) fail_next_posts: (u32, u16),
    /// The next forum posts to be created but answered with an error status, as when
    /// Discord's answer is lost on the way.
    pub(super) lose_next_post_answers: (u32, u16),
    /// The message each nonce created, for `enforce_nonce`: Discord answers a post whose
    /// nonce its author used "in the past few minutes" with that message, creating none
    /// (kept here for the whole test, which is shorter).
    pub(super) nonces: HashMap<String, u64>,
    /// The application's flags, as `GET /oauth2/applications/@me` and READY report them:
    /// which privileged intents it was granted.
    pub(super) app_flags: u64,
}

/// Discord's epoch, 2015-01-01, in unix milliseconds.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

impl State {
    /// A new id, as Discord makes them: its time of creation in its top bits (ms since
    /// 2015), unique and increasing.
    pub(super) fn snowflake(&mut self) -> u64 {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0));
        let timed = ms.saturating_sub(DISCORD_EPOCH_MS) << 22;
        self.next_id = (self.next_id + 1).max(timed);
        self.next_id
    }
}

impl Inner {
    pub(super) fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
