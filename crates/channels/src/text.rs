//! Text rules every channel shares: a reply longer than the channel allows is split on line,
//! then word, then character boundaries; inbound text is made safe before a model sees it.

/// `text` in pieces of at most `max_bytes` bytes each: one piece per line (a CR ends one as
/// LF does, so no piece holds either), a line longer than that split between words, a word
/// longer than that split between characters (never inside one). Blank lines are left out, as
/// no channel sends an empty message. A `max_bytes` below 4 is taken as 4, the longest UTF-8
/// character; a caller whose budget can be that small must check it first.
pub fn split(text: &str, max_bytes: usize) -> Vec<String> {
    let max = max_bytes.max(4);
    let mut pieces = Vec::new();
    for line in text.split(['\r', '\n']) {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let mut current = String::new();
        for word in line.split(' ') {
            let sep = usize::from(!current.is_empty());
            if current.len() + sep + word.len() <= max {
                if sep == 1 {
                    current.push(' ');
                }
                current.push_str(word);
                continue;
            }
            if !current.trim().is_empty() {
                pieces.push(std::mem::take(&mut current));
            }
            current.clear();
            let mut rest = word;
            while rest.len() > max {
                let cut = floor_char_boundary(rest, max);
                pieces.push(rest[..cut].to_owned());
                rest = &rest[cut..];
            }
            current.push_str(rest);
        }
        if !current.trim().is_empty() {
            pieces.push(current);
        }
    }
    pieces
}

/// A person's name as agents are told it: the characters of `raw` an inbox label keeps
/// (letters, digits, `_`, `-`), at most 32; `user{id}` when none are left.
pub fn label_name(raw: &str, id: &str) -> String {
    let name: String = raw
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-'))
        .take(32)
        .collect();
    if name.is_empty() {
        format!("user{id}")
    } else {
        name
    }
}

/// The largest index at most `at` that is a character boundary of `s` (0 < result for
/// `at` ≥ 4 and a non-empty `s`).
pub fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Inbound text as a model may see it, and whether anything had to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sanitized {
    pub text: String,
    /// Invalid UTF-8 was replaced, or control or formatting characters were removed: worth a
    /// log line, as the sender's client or the sender is odd.
    pub changed: bool,
}

/// `bytes` from a channel made safe: invalid UTF-8 replaced by U+FFFD; IRC's formatting
/// codes removed with their arguments (colour `\x03` takes up to two digits for the
/// foreground and, after a comma, two for the background); every other control character
/// but tab removed (CR and LF included: one inbound message is one line of the protocol, and
/// a newline the model saw would be one the sender did not send), and the Unicode line and
/// paragraph separators turned into spaces for the same reason; and the invisible format
/// characters removed (zero-width spaces, bidirectional controls, the tag block), which could
/// carry words a model reads and a person reviewing the log does not see. The zero-width
/// joiner and non-joiner stay: scripts and emoji need them.
pub fn sanitize(bytes: &[u8]) -> Sanitized {
    clean(bytes, false)
}

/// As [`sanitize`], for platforms whose one message may hold several lines (chat apps): a
/// line feed stays (a CR LF or a lone CR becomes one), the rest is the same.
pub fn sanitize_multiline(bytes: &[u8]) -> Sanitized {
    clean(bytes, true)
}

fn clean(bytes: &[u8], multiline: bool) -> Sanitized {
    let lossy = String::from_utf8_lossy(bytes);
    let mut changed = matches!(lossy, std::borrow::Cow::Owned(_));
    let mut text = String::with_capacity(lossy.len());
    let mut chars = lossy.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x03' {
            changed = true;
            let foreground = skip_digits(&mut chars);
            let mut ahead = chars.clone();
            // A background colour only follows a foreground one.
            if foreground > 0
                && ahead.next() == Some(',')
                && ahead.next().is_some_and(|d| d.is_ascii_digit())
            {
                chars.next();
                skip_digits(&mut chars);
            }
        } else if multiline && c == '\r' {
            chars.next_if_eq(&'\n');
            text.push('\n');
        } else if multiline && c == '\n' {
            text.push('\n');
        } else if (c.is_control() && c != '\t') || invisible(c) {
            changed = true;
        } else if matches!(c, '\u{2028}' | '\u{2029}') {
            changed = true;
            text.push(' ');
        } else {
            text.push(c);
        }
    }
    Sanitized { text, changed }
}

/// Whether `c` is an invisible format character (Unicode category Cf) a sender has no honest
/// use for in a chat line: soft hyphen, Arabic letter mark, zero-width space, direction marks
/// and overrides, word joiner and invisible operators, byte-order mark, the tag block.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}'
        | '\u{061C}'
        | '\u{200B}'
        | '\u{200E}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}'
        | '\u{E0000}'..='\u{E007F}')
}

/// Skips up to two ASCII digits (one colour number of IRC's `\x03` code); returns how many.
fn skip_digits(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> usize {
    let mut skipped = 0;
    while skipped < 2 && chars.next_if(char::is_ascii_digit).is_some() {
        skipped += 1;
    }
    skipped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_reply_splits_on_lines_then_words_then_characters() {
        assert_eq!(split("one\n\ntwo  \n", 10), ["one", "two"]);
        assert_eq!(split("the quick brown fox", 10), ["the quick", "brown fox"]);
        assert_eq!(split("abcdefghijkl", 5), ["abcde", "fghij", "kl"]);
        // Never inside a character: each 'é' is two bytes.
        let pieces = split("ééééé", 5);
        assert_eq!(pieces, ["éé", "éé", "é"]);
        for max in 4..40 {
            let text = "Grüße aus dem Riff 🐠🐠🐠 with a verylongwordthatneverends and more";
            for piece in split(text, max) {
                assert!(piece.len() <= max, "{piece:?} over {max}");
            }
            let joined: String = split(text, max).concat();
            let expected: String = text.split(' ').collect();
            assert_eq!(joined.replace(' ', ""), expected, "nothing lost at {max}");
        }
        assert!(split("", 10).is_empty());
        assert_eq!(
            split("a\rQUIT :x", 100),
            ["a", "QUIT :x"],
            "a CR ends a piece"
        );
        assert_eq!(split("\t \t", 100), Vec::<String>::new());
        assert_eq!(split("🐠", 1), ["🐠"], "a limit below 4 is taken as 4");
    }

    #[test]
    fn inbound_text_loses_controls_and_formatting() {
        let clean = sanitize("hello, agent".as_bytes());
        assert_eq!(clean.text, "hello, agent");
        assert!(!clean.changed);
        let odd = sanitize(b"\x02bold\x02 \x0304,12red\x03 plain\x0f\r\nnext\x07");
        assert_eq!(odd.text, "bold red plainnext");
        assert!(odd.changed);
        let bad = sanitize(b"caf\xe9 \xff");
        assert_eq!(bad.text, "caf\u{fffd} \u{fffd}");
        assert!(bad.changed);
        assert_eq!(
            sanitize(b"\x03,5x").text,
            ",5x",
            "a comma without a colour stays"
        );
        assert_eq!(sanitize(b"tab\there").text, "tab\there");
        assert_eq!(sanitize(b"end\x03").text, "end");
        assert_eq!(sanitize(b"\x031,x").text, ",x");
        let hidden = sanitize("pay\u{200B}ment \u{202E}txt.exe \u{E0041}\u{E0042}ok".as_bytes());
        assert_eq!(hidden.text, "payment txt.exe ok");
        assert!(hidden.changed);
        let lines = sanitize("one\u{2028}two\u{2029}three\u{85}four".as_bytes());
        assert_eq!(lines.text, "one two threefour");
        // Joiners stay: a family emoji is one with them.
        let family = "👩\u{200D}👩\u{200D}👧";
        assert_eq!(sanitize(family.as_bytes()).text, family);
        // A chat message keeps its lines, and only them.
        let chat = sanitize_multiline(b"one\r\ntwo\rthree\nfour\x07\x1b[2J");
        assert_eq!(chat.text, "one\ntwo\nthree\nfour[2J");
        assert!(chat.changed);
        assert!(!sanitize_multiline(b"a\nb").changed);
    }
}
