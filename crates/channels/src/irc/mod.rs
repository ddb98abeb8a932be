//! The IRC protocol as servers speak it (RFC 1459 and 2812, with IRCv3 message tags skipped):
//! [`Message`] lines, `nick!user@host` [masks](mask_matches) under the server's casemapping,
//! and how much text fits in one line.

mod channel;
mod conn;
mod flood;
mod mask;
mod message;

pub use channel::{Credentials, IrcChannel, agent_nick};
pub use flood::Flood;

pub use mask::{Casemapping, eq_ignore_case, mask_matches};
pub use message::{BuildError, Message, ParseError};

/// The most bytes of one protocol line, CR LF included.
pub const LINE_MAX_BYTES: usize = 512;

/// The most bytes of text one `command target :text` line can carry when the server relays
/// it to others with the sender's `:nick!user@host ` prefix in front. `prefix_len` is the
/// length of `nick!user@host` as the server knows it (`NICKLEN` + 1 + user + 1 + host when it
/// is not known yet; servers cap a host at 63 bytes).
pub fn text_budget(prefix_len: usize, command: &str, target: &str) -> usize {
    // ":" prefix " " command " " target " :" text "\r\n"
    let fixed = 1 + prefix_len + 1 + command.len() + 1 + target.len() + 2 + 2;
    LINE_MAX_BYTES.saturating_sub(fixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_line_fits_in_512_bytes() {
        let prefix = "overseer!reef@127.0.0.1";
        let budget = text_budget(prefix.len(), "PRIVMSG", "#agents");
        let text = "x".repeat(budget);
        let relayed = format!(":{prefix} PRIVMSG #agents :{text}\r\n");
        assert_eq!(relayed.len(), LINE_MAX_BYTES);
        assert_eq!(text_budget(600, "PRIVMSG", "#a"), 0);
    }
}
