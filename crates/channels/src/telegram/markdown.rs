//! What an agent writes (Markdown) as Telegram shows it: plain text plus `entities` (bold,
//! italic, strikethrough, code, pre with its language, links), with offsets and lengths in
//! UTF-16 code units as the Bot API counts them. Entities need no escaping, so nothing the
//! model writes can break the message; a marker without its partner stays as it was typed.
//! Long answers are split first, between paragraphs (a fenced code block kept whole when it
//! fits), so every piece renders on its own.

use super::types::Entity;

/// Text with its entities.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    pub entities: Vec<Entity>,
}

/// `markdown` rendered.
pub fn render(markdown: &str) -> Rendered {
    let mut out = Out::default();
    let lines: Vec<&str> = markdown.split('\n').collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_end_matches('\r');
        if let Some(language) = fence(line)
            && let Some(end) = (i + 1..lines.len()).find(|&j| lines[j].trim() == "```")
        {
            let code = lines[i + 1..end].join("\n");
            let start = out.len16;
            out.push(&code);
            let language = (!language.is_empty()).then(|| language.to_owned());
            out.entity("pre", start, None, language);
            i = end + 1;
        } else {
            match heading(line) {
                Some(title) => {
                    let start = out.len16;
                    out.inline(title);
                    out.entity("bold", start, None, None);
                }
                None => out.inline(line),
            }
            i += 1;
        }
        if i < lines.len() {
            out.push("\n");
        }
    }
    out.entities
        .sort_by_key(|e| (e.offset, std::cmp::Reverse(e.length)));
    Rendered {
        text: out.text,
        entities: out.entities,
    }
}

/// `text` in pieces of at most `max` UTF-16 code units: whole paragraphs where they fit, a
/// fenced code block kept whole when it fits, then lines, words and characters.
pub fn split(text: &str, max: usize) -> Vec<String> {
    let max = max.max(2);
    let mut pieces = Vec::new();
    let mut current = String::new();
    for block in blocks(text) {
        let joined = if current.is_empty() {
            len16(&block)
        } else {
            len16(&current) + 2 + len16(&block)
        };
        if joined <= max {
            if !current.is_empty() {
                current.push_str("\n\n");
            }
            current.push_str(&block);
            continue;
        }
        if !current.is_empty() {
            pieces.push(std::mem::take(&mut current));
        }
        if len16(&block) <= max {
            current = block;
        } else {
            pieces.extend(split_long(&block, max));
        }
    }
    if !current.trim().is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Paragraphs (separated by blank lines), a fenced code block being one with what surrounds
/// it on its lines.
fn blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence && line.trim().is_empty() {
            if !current.is_empty() {
                blocks.push(current.join("\n"));
                current.clear();
            }
            continue;
        }
        current.push(line);
    }
    if !current.is_empty() {
        blocks.push(current.join("\n"));
    }
    blocks
}

/// A block longer than `max`: by lines, then words, then characters.
fn split_long(block: &str, max: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let flush = |current: &mut String, pieces: &mut Vec<String>| {
        if !current.trim().is_empty() {
            pieces.push(std::mem::take(current));
        }
        current.clear();
    };
    for line in block.lines() {
        let sep = usize::from(!current.is_empty());
        if len16(&current) + sep + len16(line) <= max {
            if sep == 1 {
                current.push('\n');
            }
            current.push_str(line);
            continue;
        }
        flush(&mut current, &mut pieces);
        for word in line.split(' ') {
            let sep = usize::from(!current.is_empty());
            if len16(&current) + sep + len16(word) <= max {
                if sep == 1 {
                    current.push(' ');
                }
                current.push_str(word);
                continue;
            }
            flush(&mut current, &mut pieces);
            for c in word.chars() {
                if len16(&current) + c.len_utf16() > max {
                    flush(&mut current, &mut pieces);
                }
                current.push(c);
            }
        }
    }
    flush(&mut current, &mut pieces);
    pieces
}

/// Length in UTF-16 code units, as Telegram counts.
pub fn len16(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// The language of a fence's opening line (```` ```rust ````), empty for none.
fn fence(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("```")?;
    let language = rest.trim();
    language
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "+-_#.".contains(c))
        .then_some(language)
}

/// The title of a `#`-heading line.
fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    line[hashes..]
        .strip_prefix(' ')
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

#[derive(Default)]
struct Out {
    text: String,
    len16: usize,
    entities: Vec<Entity>,
}

impl Out {
    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.len16 += len16(s);
    }

    /// An entity from `start` to the end of what is written; an empty one is dropped.
    fn entity(&mut self, kind: &str, start: usize, url: Option<String>, language: Option<String>) {
        if self.len16 > start {
            self.entities.push(Entity {
                kind: kind.to_owned(),
                offset: start,
                length: self.len16 - start,
                url,
                language,
            });
        }
    }

    /// One line's inline markup.
    fn inline(&mut self, s: &str) {
        let mut rest = s;
        while let Some(c) = rest.chars().next() {
            let before = &s[..s.len() - rest.len()];
            match self.span(c, rest, before) {
                Some(used) => rest = &rest[used..],
                None => {
                    self.text.push(c);
                    self.len16 += c.len_utf16();
                    rest = &rest[c.len_utf8()..];
                }
            }
        }
    }

    /// Renders the construct starting at `rest` (its first character `c`; `before` is the
    /// line up to it), returning the bytes it took; `None` when it is plain text.
    fn span(&mut self, c: char, rest: &str, before: &str) -> Option<usize> {
        match c {
            '\\' => {
                let next = rest[1..]
                    .chars()
                    .next()
                    .filter(|n| n.is_ascii_punctuation())?;
                self.push(&next.to_string());
                Some(1 + next.len_utf8())
            }
            '`' => {
                let end = rest[1..].find('`')?;
                let code = &rest[1..1 + end];
                if code.is_empty() {
                    return None;
                }
                let start = self.len16;
                self.push(code);
                self.entity("code", start, None, None);
                Some(end + 2)
            }
            '*' | '_' | '~' => self.emphasis(c, rest, before),
            '[' => {
                let close = rest.find("](")?;
                let label = &rest[1..close];
                let after = &rest[close + 2..];
                let end = after.find(')')?;
                let url = &after[..end];
                if label.is_empty()
                    || !(url.starts_with("https://") || url.starts_with("http://"))
                    || url.contains(char::is_whitespace)
                {
                    return None;
                }
                let start = self.len16;
                self.inline(label);
                self.entity("text_link", start, Some(url.to_owned()), None);
                Some(close + 2 + end + 1)
            }
            _ => None,
        }
    }

    /// `**bold**`, `__bold__`, `*italic*`, `_italic_` (between words only, so `snake_case`
    /// stays), `~~strike~~`.
    fn emphasis(&mut self, c: char, rest: &str, before: &str) -> Option<usize> {
        let double = rest[1..].starts_with(c);
        let (marker, kind) = match (c, double) {
            ('*' | '_', true) => (&rest[..2], "bold"),
            ('*', false) => ("*", "italic"),
            ('_', false) => ("_", "italic"),
            ('~', true) => ("~~", "strikethrough"),
            _ => return None,
        };
        let word_char = |ch: Option<char>| ch.is_some_and(char::is_alphanumeric);
        if c == '_' && word_char(before.chars().next_back()) {
            return None;
        }
        let body = &rest[marker.len()..];
        // The content starts and ends with something other than a space.
        if body.starts_with(char::is_whitespace) {
            return None;
        }
        let mut search = 0;
        let end = loop {
            let found = body[search..].find(marker)? + search;
            let inner = &body[..found];
            let after = body[found + marker.len()..].chars().next();
            // Not empty, not ending in a space, a single `*` not the first half of a `**`, and
            // a `_` not inside a word.
            let refused = inner.is_empty()
                || inner.ends_with(char::is_whitespace)
                || (marker.len() == 1 && after == Some(c))
                || (c == '_' && word_char(after));
            let fits = !refused;
            if fits {
                break found;
            }
            search = found + marker.len();
        };
        let start = self.len16;
        self.inline(&body[..end]);
        self.entity(kind, start, None, None);
        Some(marker.len() + end + marker.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(kind: &str, offset: usize, length: usize) -> Entity {
        Entity {
            kind: kind.into(),
            offset,
            length,
            url: None,
            language: None,
        }
    }

    #[test]
    fn markup_becomes_entities_in_utf16_units() {
        let r = render("**Done**: the `build` passed *twice*");
        assert_eq!(r.text, "Done: the build passed twice");
        assert_eq!(
            r.entities,
            [e("bold", 0, 4), e("code", 10, 5), e("italic", 23, 5)]
        );
        // An emoji is two UTF-16 units: the entity after it starts two further on.
        let r = render("🐠 **fish**");
        assert_eq!(r.text, "🐠 fish");
        assert_eq!(r.entities, [e("bold", 3, 4)]);
        let r = render("see [the docs](https://example.com/a_b) and ~~old~~");
        assert_eq!(r.text, "see the docs and old");
        assert_eq!(r.entities[0].kind, "text_link");
        assert_eq!(
            r.entities[0].url.as_deref(),
            Some("https://example.com/a_b")
        );
        assert_eq!((r.entities[0].offset, r.entities[0].length), (4, 8));
        assert_eq!(r.entities[1], e("strikethrough", 17, 3));
    }

    #[test]
    fn code_blocks_headings_and_nesting() {
        let r = render("# Report\n```rust\nlet a_b = *x*;\n```\nok **a *b* c**");
        assert_eq!(r.text, "Report\nlet a_b = *x*;\nok a b c");
        let pre = r.entities.iter().find(|x| x.kind == "pre").unwrap();
        assert_eq!((pre.offset, pre.length), (7, 14));
        assert_eq!(pre.language.as_deref(), Some("rust"));
        assert!(r.entities.contains(&e("bold", 0, 6)));
        assert!(r.entities.contains(&e("bold", 25, 5)));
        assert!(r.entities.contains(&e("italic", 27, 1)));
    }

    #[test]
    fn unpaired_markers_and_identifiers_stay_as_typed() {
        for text in [
            "2 * 3 = 6",
            "a snake_case_name here",
            "**never closed",
            "`open",
            "[x](javascript:alert(1))",
            "price: 5 * 4 * 3",
            "\\*not italic\\*",
        ] {
            let r = render(text);
            assert!(r.entities.is_empty(), "{text}: {:?}", r.entities);
        }
        assert_eq!(render("\\*not italic\\*").text, "*not italic*");
        assert_eq!(render("a snake_case_name").text, "a snake_case_name");
    }

    #[test]
    fn long_text_splits_between_paragraphs_and_keeps_code_whole() {
        let para = |c: char| c.to_string().repeat(30);
        let text = format!("{}\n\n{}\n\n{}", para('a'), para('b'), para('c'));
        assert_eq!(
            split(&text, 64),
            [format!("{}\n\n{}", para('a'), para('b')), para('c')]
        );
        let code = "```\nline one\n\nline two\n```";
        let text = format!("{}\n\n{code}", para('a'));
        assert_eq!(split(&text, 40), [para('a'), code.to_owned()]);
        // Nothing longer than the limit, nothing lost, in UTF-16 units.
        let long = "🐠 word ".repeat(500);
        let pieces = split(&long, 100);
        assert!(pieces.iter().all(|p| len16(p) <= 100));
        assert_eq!(
            pieces.join(" ").split_whitespace().count(),
            long.split_whitespace().count()
        );
        assert!(split("", 10).is_empty());
    }
}
