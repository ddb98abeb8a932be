//! One IRC protocol line: an optional `:prefix`, a command and its parameters, the last of
//! which may hold spaces. Parsing is lenient about what servers send but refuses CR, LF and
//! NUL inside a line; building refuses them and every other control character but IRC's
//! formatting codes (no CTCP). The fields are private, so every `Message` came through one of
//! the two, and [`Message::to_line`] can never end a line early or smuggle in a command.

/// A parsed or built IRC message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    prefix: Option<String>,
    command: String,
    params: Vec<String>,
}

/// Why a received line is not an IRC message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("an empty line")]
    Empty,
    #[error("a prefix with no command after it")]
    NoCommand,
    #[error("the command `{0}` is neither letters nor a three-digit reply")]
    BadCommand(String),
    #[error("a CR, LF or NUL inside the line")]
    LineBreak,
}

/// Why a message cannot be sent as built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("parameter {index} holds a CR, LF or NUL, which would end the line")]
    LineBreak { index: usize },
    #[error("parameter {index} holds a control character (CTCP's \\x01 among them)")]
    Control { index: usize },
    #[error(
        "parameter {index} is empty, starts with `:` or holds a space, which only the last may"
    )]
    Middle { index: usize },
    #[error("the command `{0}` is neither letters nor a three-digit reply")]
    BadCommand(String),
}

impl Message {
    /// A message to send. Every parameter but the last must be a single non-empty word not
    /// starting with `:`; none may hold CR, LF or NUL.
    pub fn new(command: &str, params: &[&str]) -> Result<Self, BuildError> {
        if !valid_command(command) {
            return Err(BuildError::BadCommand(command.to_owned()));
        }
        for (index, param) in params.iter().enumerate() {
            if param.contains(['\r', '\n', '\0']) {
                return Err(BuildError::LineBreak { index });
            }
            if param
                .chars()
                .any(|c| c.is_control() && !FORMATTING.contains(&c))
            {
                return Err(BuildError::Control { index });
            }
            let last = index + 1 == params.len();
            if !last && (param.is_empty() || param.starts_with(':') || param.contains(' ')) {
                return Err(BuildError::Middle { index });
            }
        }
        Ok(Self {
            prefix: None,
            command: command.to_ascii_uppercase(),
            params: params.iter().map(|p| (*p).to_owned()).collect(),
        })
    }

    /// Parses one line as received, without its CR LF. IRCv3 tags (`@a=b `) are skipped; a
    /// line with more than 15 parameters keeps them all (servers do not send such lines, and
    /// dropping text would be worse).
    pub fn parse(line: &str) -> Result<Self, ParseError> {
        let mut rest = line.trim_end_matches(['\r', '\n']);
        if rest.contains(['\r', '\n', '\0']) {
            return Err(ParseError::LineBreak);
        }
        if let Some(tagged) = rest.strip_prefix('@') {
            rest = tagged.split_once(' ').map_or("", |(_, r)| r);
        }
        rest = rest.trim_start_matches(' ');
        if rest.is_empty() {
            return Err(ParseError::Empty);
        }
        let mut prefix = None;
        if let Some(prefixed) = rest.strip_prefix(':') {
            let (p, r) = prefixed.split_once(' ').ok_or(ParseError::NoCommand)?;
            prefix = Some(p.to_owned());
            rest = r.trim_start_matches(' ');
        }
        let (command, mut rest) = rest.split_once(' ').unwrap_or((rest, ""));
        if command.is_empty() {
            return Err(ParseError::NoCommand);
        }
        if !valid_command(command) {
            return Err(ParseError::BadCommand(command.to_owned()));
        }
        let mut params = Vec::new();
        loop {
            rest = rest.trim_start_matches(' ');
            if rest.is_empty() {
                break;
            }
            if let Some(trailing) = rest.strip_prefix(':') {
                params.push(trailing.to_owned());
                break;
            }
            let (param, r) = rest.split_once(' ').unwrap_or((rest, ""));
            params.push(param.to_owned());
            rest = r;
        }
        Ok(Self {
            prefix,
            command: command.to_ascii_uppercase(),
            params,
        })
    }

    /// The line to send, without CR LF: the last parameter gets a `:` when it needs one
    /// (empty, holding a space, or starting with `:`).
    pub fn to_line(&self) -> String {
        let mut line = String::new();
        if let Some(prefix) = &self.prefix {
            line.push(':');
            line.push_str(prefix);
            line.push(' ');
        }
        line.push_str(&self.command);
        for (index, param) in self.params.iter().enumerate() {
            line.push(' ');
            let last = index + 1 == self.params.len();
            if last && (param.is_empty() || param.contains(' ') || param.starts_with(':')) {
                line.push(':');
            }
            line.push_str(param);
        }
        line
    }

    /// Who sent it (`nick!user@host` or a server name), without the colon.
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// The command in upper case (`PRIVMSG`) or a three-digit reply (`001`).
    pub fn command(&self) -> &str {
        &self.command
    }

    pub fn params(&self) -> &[String] {
        &self.params
    }

    /// The nick of the prefix (`ada` of `ada!reef@host`), if the sender is a user.
    pub fn nick(&self) -> Option<&str> {
        let prefix = self.prefix.as_deref()?;
        let nick = prefix.split(['!', '@']).next()?;
        (!nick.is_empty() && prefix.contains(['!', '@'])).then_some(nick)
    }

    /// The parameter at `index`, or an empty string.
    pub fn param(&self, index: usize) -> &str {
        self.params.get(index).map_or("", String::as_str)
    }
}

/// IRC's formatting codes (bold, colour, reset, reverse, italic, underline), the only
/// control characters a built parameter may hold.
const FORMATTING: [char; 6] = ['\x02', '\x03', '\x0f', '\x16', '\x1d', '\x1f'];

/// A command is letters, or a numeric reply of exactly three digits.
fn valid_command(command: &str) -> bool {
    (!command.is_empty() && command.chars().all(|c| c.is_ascii_alphabetic()))
        || (command.len() == 3 && command.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_as_servers_send_them() {
        let m = Message::parse(":alice!al@example.org PRIVMSG #control :!invoke ada coder\r\n")
            .unwrap();
        assert_eq!(m.prefix(), Some("alice!al@example.org"));
        assert_eq!(m.command(), "PRIVMSG");
        assert_eq!(m.params(), ["#control", "!invoke ada coder"]);
        assert_eq!(m.nick(), Some("alice"));

        let ping = Message::parse("PING :irc.example.org").unwrap();
        assert_eq!((ping.command(), ping.param(0)), ("PING", "irc.example.org"));
        assert_eq!(ping.nick(), None);

        let welcome = Message::parse(":srv 001 overseer :Welcome to IRC").unwrap();
        assert_eq!(welcome.params(), ["overseer", "Welcome to IRC"]);
        assert_eq!(welcome.nick(), None, "a server is no user");

        let tagged = Message::parse("@time=2026-11-24T00:00:00Z :bob!b@h JOIN #agents").unwrap();
        assert_eq!((tagged.command(), tagged.param(0)), ("JOIN", "#agents"));
        let spaced = Message::parse(":a!b@c  MODE  #x  +o  a").unwrap();
        assert_eq!(spaced.params(), ["#x", "+o", "a"]);
        assert_eq!(Message::parse("privmsg x :y").unwrap().command(), "PRIVMSG");
        assert_eq!(Message::parse("CMD a :").unwrap().params(), ["a", ""]);
    }

    #[test]
    fn lines_that_are_not_messages_are_errors() {
        assert_eq!(Message::parse(""), Err(ParseError::Empty));
        assert_eq!(Message::parse("\r\n"), Err(ParseError::Empty));
        assert_eq!(Message::parse("@tag"), Err(ParseError::Empty));
        assert_eq!(Message::parse(":lonely"), Err(ParseError::NoCommand));
        assert_eq!(Message::parse(":p  "), Err(ParseError::NoCommand));
        assert_eq!(
            Message::parse("12 x"),
            Err(ParseError::BadCommand("12".into()))
        );
        assert_eq!(
            Message::parse("PRIVMSG #a :x\rQUIT"),
            Err(ParseError::LineBreak)
        );
        assert_eq!(
            Message::parse("PRIVMSG #a :x\0y"),
            Err(ParseError::LineBreak)
        );
        assert_eq!(
            Message::parse("PRIV-MSG x"),
            Err(ParseError::BadCommand("PRIV-MSG".into()))
        );
    }

    #[test]
    fn built_messages_cannot_smuggle_a_second_line() {
        let m = Message::new("PRIVMSG", &["#agents", "hello there"]).unwrap();
        assert_eq!(m.to_line(), "PRIVMSG #agents :hello there");
        assert_eq!(
            Message::new("NICK", &["ada"]).unwrap().to_line(),
            "NICK ada"
        );
        assert_eq!(
            Message::new("PRIVMSG", &["#a", ":-)"]).unwrap().to_line(),
            "PRIVMSG #a ::-)"
        );
        assert_eq!(
            Message::new("PRIVMSG", &["#a", "hi\r\nQUIT :bye"]),
            Err(BuildError::LineBreak { index: 1 })
        );
        assert_eq!(
            Message::new("PRIVMSG", &["#a", "\rQUIT"]),
            Err(BuildError::LineBreak { index: 1 })
        );
        assert_eq!(
            Message::new("PRIVMSG", &["#a", "\x01DCC SEND x 1 2 3\x01"]),
            Err(BuildError::Control { index: 1 })
        );
        assert!(Message::new("PRIVMSG", &["#a", "\x02bold\x02 \x0304red"]).is_ok());
        assert_eq!(
            Message::new("PRIVMSG", &["#a b", "x"]),
            Err(BuildError::Middle { index: 0 })
        );
        assert_eq!(
            Message::new("PRIVMSG", &["", "x"]),
            Err(BuildError::Middle { index: 0 })
        );
        assert_eq!(
            Message::new("PRIV MSG", &[]),
            Err(BuildError::BadCommand("PRIV MSG".into()))
        );
        // What is built parses back to itself.
        for params in [&["#a", "x y"][..], &["#a", ""], &["ada"], &["#a", ":x"]] {
            let built = Message::new("PRIVMSG", params).unwrap();
            assert_eq!(Message::parse(&built.to_line()).unwrap(), built);
        }
    }
}
