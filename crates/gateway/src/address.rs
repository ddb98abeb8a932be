//! Who a line is for, and where an answer goes back: whether a room line names an agent
//! (its name or its nick as a word anywhere in the line), and the sender label a channel
//! message carries into an agent's inbox (`irc:alice@#agents`, `irc:alice`, `tg:alice~4242`
//! for a chat with an id of its own), from which the answer finds its way back after any
//! restart.

use reef_core::Conversation;

/// Whether `text` names any of `names` as a word, compared with `same` (the channel's own
/// case folding).
pub fn mentions(text: &str, names: &[&str], same: impl Fn(&str, &str) -> bool) -> bool {
    text.split(|c: char| !is_nick_char(c))
        .filter(|w| !w.is_empty())
        .any(|word| names.iter().any(|n| !n.is_empty() && same(word, n)))
}

fn is_nick_char(c: char) -> bool {
    c.is_alphanumeric() || "-_[]\\`^{}|".contains(c)
}

/// Where an inbound message came from, as the inbox's sender label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The `[channels.NAME]` it came through.
    pub channel: String,
    /// Who wrote it (a nick, a username).
    pub author: String,
    /// Where it was written.
    pub place: Place,
}

/// A room, or a direct conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    Room(String),
    /// A direct conversation, with the platform's id of it when that is not the author's
    /// name (a bot platform's chat id).
    Direct(Option<String>),
}

impl Origin {
    pub fn new(channel: &str, author: &str, conversation: &Conversation) -> Origin {
        Origin {
            channel: channel.to_owned(),
            author: author.to_owned(),
            place: match conversation {
                Conversation::Room(room) => Place::Room(room.clone()),
                Conversation::Direct(peer) if peer == author => Place::Direct(None),
                Conversation::Direct(peer) => Place::Direct(Some(peer.clone())),
            },
        }
    }

    /// `CHANNEL:AUTHOR@ROOM`; for a direct conversation `CHANNEL:AUTHOR`, or
    /// `CHANNEL:AUTHOR~PEER` when the conversation has an id of its own.
    pub fn label(&self) -> String {
        match &self.place {
            Place::Room(room) => format!("{}:{}@{room}", self.channel, self.author),
            Place::Direct(None) => format!("{}:{}", self.channel, self.author),
            Place::Direct(Some(peer)) => format!("{}:{}~{peer}", self.channel, self.author),
        }
    }

    /// Reads a label back, if it is one of `channel`'s.
    pub fn parse(channel: &str, label: &str) -> Option<Origin> {
        let rest = label.strip_prefix(channel)?.strip_prefix(':')?;
        let (author, place) = if let Some((author, room)) = rest.split_once('@') {
            (author, Place::Room(room.to_owned()))
        } else if let Some((author, peer)) = rest.split_once('~') {
            (author, Place::Direct(Some(peer.to_owned())))
        } else {
            (rest, Place::Direct(None))
        };
        let empty = match &place {
            Place::Room(name) | Place::Direct(Some(name)) => name.is_empty(),
            Place::Direct(None) => false,
        };
        (!author.is_empty() && !empty).then(|| Origin {
            channel: channel.to_owned(),
            author: author.to_owned(),
            place,
        })
    }

    /// Whether it was written in a room.
    pub fn in_room(&self) -> bool {
        matches!(self.place, Place::Room(_))
    }

    /// Where the answer goes.
    pub fn conversation(&self) -> Conversation {
        match &self.place {
            Place::Room(room) => Conversation::Room(room.clone()),
            Place::Direct(None) => Conversation::Direct(self.author.clone()),
            Place::Direct(Some(peer)) => Conversation::Direct(peer.clone()),
        }
    }
}

/// The agent a `spawn:` route creates for a conversation with `peer` on `channel`: both
/// names folded to what an agent name may hold, then a hash of the peer's name (case folded)
/// so that nicks folding alike (`a[b`, `a]b`) or cut alike keep agents of their own; at most
/// 40 characters.
pub fn conversation_agent(channel: &str, peer: &str) -> String {
    let fold = |s: &str| -> String {
        s.chars()
            .map(|c| {
                let c = c.to_ascii_lowercase();
                if c.is_ascii_lowercase() || c.is_ascii_digit() {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    // FNV-1a: stable across releases, unlike the standard library's hasher.
    let hash = peer
        .to_ascii_lowercase()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    let mut name = format!("{}-{}", fold(channel), fold(peer));
    name.truncate(33);
    let name = name.trim_matches('-');
    let name = if name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        name.to_owned()
    } else {
        format!("c{name}")
    };
    format!("{name}-{:06x}", hash & 0xff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ascii(a: &str, b: &str) -> bool {
        a.eq_ignore_ascii_case(b)
    }

    #[test]
    fn a_name_counts_as_a_word_anywhere_but_not_inside_another() {
        assert!(mentions("ada: write a haiku", &["ada"], ascii));
        assert!(mentions("could ADA, or bea, look?", &["ada"], ascii));
        assert!(mentions("thanks @ada!", &["ada"], ascii));
        assert!(!mentions("adamant about it", &["ada"], ascii));
        assert!(!mentions("my-ada-bot", &["ada"], ascii));
        assert!(mentions("ada2: hi", &["ada", "ada2"], ascii));
        assert!(!mentions("anything", &[""], ascii));
    }

    #[test]
    fn labels_read_back_for_their_own_channel_only() {
        let room = Origin::new("irc", "alice", &Conversation::Room("#agents".into()));
        assert_eq!(room.label(), "irc:alice@#agents");
        assert_eq!(Origin::parse("irc", &room.label()), Some(room.clone()));
        assert_eq!(room.conversation(), Conversation::Room("#agents".into()));
        let direct = Origin::new("irc", "bob", &Conversation::Direct("bob".into()));
        assert_eq!(direct.label(), "irc:bob");
        assert_eq!(direct.conversation(), Conversation::Direct("bob".into()));
        assert_eq!(Origin::parse("irc", "operator"), None);
        assert_eq!(Origin::parse("irc", "ircnet:bob"), None);
        assert_eq!(Origin::parse("irc", "irc:"), None);
        assert_eq!(Origin::parse("irc", "irc:bob@"), None);
        // A bot platform's private chat has an id of its own.
        let chat = Origin::new("tg", "alice", &Conversation::Direct("4242".into()));
        assert_eq!(chat.label(), "tg:alice~4242");
        assert_eq!(Origin::parse("tg", &chat.label()), Some(chat.clone()));
        assert_eq!(chat.conversation(), Conversation::Direct("4242".into()));
        assert!(!chat.in_room());
        assert_eq!(Origin::parse("tg", "tg:alice~"), None);
        let group = Origin::parse("tg", "tg:alice@-100777").unwrap();
        assert_eq!(group.conversation(), Conversation::Room("-100777".into()));
    }

    #[test]
    fn conversation_agents_have_valid_distinct_names() {
        let alice = conversation_agent("irc", "Alice");
        assert!(alice.starts_with("irc-alice-"), "{alice}");
        assert_eq!(alice, conversation_agent("irc", "alice"));
        assert_ne!(
            conversation_agent("irc", "a[b"),
            conversation_agent("irc", "a]b")
        );
        let long = "n".repeat(80);
        assert_ne!(
            conversation_agent("irc", &long),
            conversation_agent("irc", &format!("{long}x"))
        );
        for name in [
            alice,
            conversation_agent("_t", "x"),
            conversation_agent("irc", &long),
        ] {
            assert!(name.len() <= 40, "{name}");
            assert!(
                name.starts_with(|c: char| c.is_ascii_alphanumeric()),
                "{name}"
            );
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            );
        }
    }
}
