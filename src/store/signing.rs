//! Proof that a command came through hanarang's own paths: every command
//! hanarang writes carries an HMAC-SHA256 over what it asks, keyed with a secret the
//! database keeps (table `command_key`, made on first need). A row written by anything
//! else carries none that verifies, and the orchestrator refuses it.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{NewCommand, Result, StoreError};

/// The key's length, in bytes.
pub const KEY_BYTES: usize = 32;

/// The secret commands are signed with.
#[derive(Clone)]
pub struct CommandKey([u8; KEY_BYTES]);

impl std::fmt::Debug for CommandKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommandKey(…)")
    }
}

impl CommandKey {
    /// The key as the database keeps it; a stored value of another length is corrupt.
    pub fn from_stored(bytes: &[u8]) -> Result<CommandKey> {
        let key: [u8; KEY_BYTES] = bytes
            .try_into()
            .map_err(|_| StoreError::corrupt("command_key", "1", "its key is not 32 bytes"))?;
        Ok(CommandKey(key))
    }

    /// A new key, from the kernel's random source.
    pub fn generate() -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let mut key = vec![0u8; KEY_BYTES];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
        Ok(key)
    }

    /// `None` only if HMAC refused the key, which it does for no length.
    fn mac(&self, c: &NewCommand<'_>) -> Option<Hmac<Sha256>> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).ok()?;
        // One JSON array: no field can run into the next.
        let covered = serde_json::json!([
            "hanarang-command-v1",
            c.sprint_id,
            c.kind.as_str(),
            c.text,
            c.by,
            c.seq,
            c.created_at
        ]);
        mac.update(covered.to_string().as_bytes());
        Some(mac)
    }

    /// The signature of a command, as stored (hex).
    pub fn sign(&self, c: &NewCommand<'_>) -> String {
        self.mac(c).map_or_else(String::new, |mac| {
            mac.finalize()
                .into_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        })
    }

    /// Whether `signature` (as stored) is this key's over `c`, compared in constant time.
    pub fn verifies(&self, c: &NewCommand<'_>, signature: Option<&str>) -> bool {
        let Some(bytes) = signature.and_then(from_hex) else {
            return false;
        };
        self.mac(c)
            .is_some_and(|mac| mac.verify_slice(&bytes).is_ok())
    }
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::CommandKind;

    fn command(text: Option<&str>) -> NewCommand<'_> {
        NewCommand {
            sprint_id: "SPRINT-001",
            kind: CommandKind::Approve,
            text,
            by: "discord:1",
            seq: Some(4),
            created_at: 1_700_000_000_000,
        }
    }

    #[test]
    fn a_signature_verifies_only_for_its_command_and_its_key() {
        let key = CommandKey([7; KEY_BYTES]);
        let signature = key.sign(&command(None));
        assert_eq!(signature.len(), 64);
        assert!(key.verifies(&command(None), Some(&signature)));
        assert!(!key.verifies(&command(Some("x")), Some(&signature)));
        assert!(!CommandKey([8; KEY_BYTES]).verifies(&command(None), Some(&signature)));
        assert!(!key.verifies(&command(None), None));
        assert!(!key.verifies(&command(None), Some("zz")));
    }
}
