//! The bot token: read from its file (`discord.token_file`, systemd's credential) or taken
//! out of the environment at start, so that whoever reads hanarang's `/proc/<pid>/environ`
//! (a sister running unconfined, root) finds no token there.

use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use secrecy::{ExposeSecret, SecretString};

use super::StartError;
use crate::config::{DiscordConfig, TokenSource};

/// The bot token; never printed (its `Debug` is redacted), zeroed when dropped.
#[derive(Clone, Debug)]
pub struct Token(SecretString);

impl Token {
    pub fn new(token: impl Into<String>) -> Token {
        Token(SecretString::new(token.into()))
    }

    /// The token itself, for the one place that sends it: the Authorization header.
    pub(crate) fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

/// A token file is a line: anything much longer is not a token (a log, a key file named
/// by mistake), and is refused before it is read whole.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// Reads the token from where `discord.token_source()` says it is.
pub fn read_token(discord: &DiscordConfig) -> Result<Token, StartError> {
    let source = discord.token_source();
    match &source {
        TokenSource::File(path) | TokenSource::Credential(path) => {
            read_file(path).map_err(|reason| StartError::TokenUnreadable(source.clone(), reason))
        }
        TokenSource::Env(name) => {
            from_environment(name).ok_or_else(|| StartError::TokenMissing(name.clone()))
        }
    }
}

/// The token in `path`, its surrounding whitespace (the file's last newline) trimmed;
/// the error says why not, never what the file holds.
fn read_file(path: &Path) -> Result<Token, String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    file.take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(format!(
            "{} is longer than a bot token can be ({MAX_TOKEN_FILE_BYTES} bytes at most); is this the right file?",
            path.display()
        ));
    }
    let token = String::from_utf8(bytes)
        .map_err(|_| format!("{} is not text (UTF-8)", path.display()))
        .map(|text| SecretString::new(text.trim().to_string()))?;
    if token.expose_secret().is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(Token(token))
}

/// The variable taken out of the environment at start, and its value.
struct Taken {
    name: String,
    value: Option<SecretString>,
}

static TAKEN: OnceLock<Taken> = OnceLock::new();

/// The token in the variable `name`: as taken at start (`take_from_environment`), else
/// from the environment (a caller that took nothing).
fn from_environment(name: &str) -> Option<Token> {
    let value = match TAKEN.get() {
        Some(taken) if taken.name == name => taken.value.clone()?,
        _ => SecretString::new(std::env::var(name).ok()?),
    };
    let token = value.expose_secret().trim();
    (!token.is_empty()).then(|| Token::new(token))
}

/// Takes the variable `name` out of this process's environment, keeping its value for
/// `read_token`: the bytes of the value are zeroed where `/proc/<pid>/environ` reads
/// them, and the variable is removed. The environment may be changed only while no other
/// thread can read it, so this is called at start, before any runtime, and does nothing
/// (but log) when it finds another thread running. Once per process: later calls do
/// nothing.
pub fn take_from_environment(name: &str) {
    if TAKEN.get().is_some() || std::env::var_os(name).is_none() {
        return;
    }
    let Ok(value) = crate::environ::hide(name, false) else {
        tracing::warn!(
            variable = name,
            "the token's variable stays in hanarang's environment: other threads run already"
        );
        return;
    };
    let _ = TAKEN.set(Taken {
        name: name.to_string(),
        value: value.map(SecretString::new),
    });
}
