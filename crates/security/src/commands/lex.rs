//! Shell lexing for the command rules: a line becomes every simple command it would run,
//! including those inside `$(…)`, backticks, `<(…)`, subshells and unquoted here-documents,
//! each as words whose characters remember whether the shell would substitute them. Quotes,
//! escapes (`\`, `$'…'`), comments and redirections are honoured, so a quote inside a
//! comment or a here-document cannot swallow the rest of the line.

/// What kind of shell substitution produced part of a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expansion {
    /// `$X`, `${X}`, `$1`, `$@`, …
    Variable,
    /// `$(…)` or `` `…` ``.
    Command,
    /// `$((…))`.
    Arithmetic,
    /// `<(…)` or `>(…)`.
    Process,
}

/// Where one character of a word came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Unquoted literal text (globs and braces in it are live).
    Bare,
    /// Quoted or escaped literal text.
    Quoted,
    /// Source text of a substitution; `true` when inside double quotes (no field splitting).
    Expansion(Expansion, bool),
}

/// One shell word: its text with quotes removed (substitutions kept as their source text)
/// and, for every character, where it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Word {
    pub text: String,
    pub pieces: Vec<Piece>,
}

impl Word {
    /// A word written out plainly.
    pub fn literal(text: &str) -> Word {
        let mut word = Word::default();
        word.push_str(text, Piece::Bare);
        word
    }

    fn push(&mut self, c: char, piece: Piece) {
        self.text.push(c);
        self.pieces.push(piece);
    }

    fn push_str(&mut self, s: &str, piece: Piece) {
        for c in s.chars() {
            self.push(c, piece);
        }
    }

    /// No substitution anywhere in the word.
    pub fn is_literal(&self) -> bool {
        !self
            .pieces
            .iter()
            .any(|p| matches!(p, Piece::Expansion(..)))
    }

    /// The first substitution in the word, if any.
    pub fn expansion(&self) -> Option<Expansion> {
        self.pieces.iter().find_map(|p| match p {
            Piece::Expansion(kind, _) => Some(*kind),
            _ => None,
        })
    }

    /// The word begins with a substitution, so it may turn out to be an option or anything.
    pub fn starts_with_expansion(&self) -> bool {
        matches!(self.pieces.first(), Some(Piece::Expansion(..)))
    }

    fn any_quoted(&self) -> bool {
        self.pieces.contains(&Piece::Quoted)
    }

    /// Why the shell, not this text, decides which program the word names: `None` when the
    /// program's name is written out. An unquoted substitution anywhere is field-split (it can
    /// become several words: any command); a quoted one, a glob or a brace expansion hides
    /// the program when it is in the last path component (`"$VENV/bin/python"` still names
    /// `python`).
    pub fn hidden_program(&self) -> Option<&'static str> {
        let reason = |kind: Expansion| match kind {
            Expansion::Variable => "variable as command",
            Expansion::Command => "command substitution as command",
            Expansion::Arithmetic => "arithmetic as command",
            Expansion::Process => "process substitution as command",
        };
        let chars: Vec<(char, Piece)> =
            self.text.chars().zip(self.pieces.iter().copied()).collect();
        if let Some(kind) = chars.iter().find_map(|(_, p)| match p {
            Piece::Expansion(kind, false) => Some(*kind),
            _ => None,
        }) {
            return Some(reason(kind));
        }
        let base = chars
            .iter()
            .rposition(|&(c, p)| c == '/' && !matches!(p, Piece::Expansion(..)))
            .map_or(0, |i| i + 1);
        let tail = chars.get(base..).unwrap_or_default();
        if let Some(kind) = tail.iter().find_map(|(_, p)| match p {
            Piece::Expansion(kind, _) => Some(*kind),
            _ => None,
        }) {
            return Some(reason(kind));
        }
        let bare_at = |want: char| {
            tail.iter()
                .position(|&(c, p)| c == want && p == Piece::Bare)
        };
        let bracket = bare_at('[').is_some_and(|open| {
            tail.iter()
                .skip(open + 2)
                .any(|&(c, p)| c == ']' && p == Piece::Bare)
        });
        if bare_at('*').is_some() || bare_at('?').is_some() || bracket {
            return Some("glob as command");
        }
        let bare = |want: char| {
            chars
                .iter()
                .position(|&(c, p)| c == want && p == Piece::Bare)
        };
        if let (Some(open), Some(close)) = (
            bare('{'),
            chars
                .iter()
                .rposition(|&(c, p)| c == '}' && p == Piece::Bare),
        ) {
            let inside = chars.get(open + 1..close).unwrap_or_default();
            let comma = inside.iter().any(|&(c, p)| c == ',' && p == Piece::Bare);
            let range = inside
                .windows(2)
                .any(|w| w.iter().all(|&(c, p)| c == '.' && p == Piece::Bare));
            if comma || range {
                return Some("brace expansion as command");
            }
        }
        None
    }

    /// `NAME=value` (or `NAME+=value`, `NAME[i]=value`) with the name written out: a variable
    /// assignment, not a command.
    pub fn is_assignment(&self) -> bool {
        let mut chars = self.text.chars().zip(self.pieces.iter());
        match chars.next() {
            Some((c, Piece::Bare)) if c.is_ascii_alphabetic() || c == '_' => {}
            _ => return false,
        }
        for (c, p) in chars {
            if *p != Piece::Bare {
                return false;
            }
            match c {
                '=' => return true,
                '+' | '[' => return self.text.contains('='),
                c if c.is_ascii_alphanumeric() || c == '_' => {}
                _ => return false,
            }
        }
        false
    }

    /// `2` in `2>file` or `{fd}` in `{fd}>file`: the descriptor of a redirection.
    fn is_descriptor(&self) -> bool {
        let bare = self.pieces.iter().all(|p| *p == Piece::Bare);
        let digits = !self.text.is_empty() && self.text.chars().all(|c| c.is_ascii_digit());
        let named = self.text.len() > 2 && self.text.starts_with('{') && self.text.ends_with('}');
        bare && (digits || named)
    }
}

/// Splits a line into the simple commands it would run, nested ones included (each as its
/// own entry); redirections and their targets are dropped from the words. `None` when
/// substitutions nest deeper than reef follows (it will not recurse without bound).
pub(crate) fn simple_commands(line: &str) -> Option<Vec<Vec<Word>>> {
    let mut lexer = Lexer::new(line.chars().collect(), 0);
    lexer.list(false);
    (!lexer.overflow).then_some(lexer.out)
}

/// How deep `$(…)`, `${…}`, backticks and parentheses may nest.
const MAX_NESTING: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Redirect {
    Plain,
    Heredoc { strip_tabs: bool },
}

/// The simple command being read.
#[derive(Default)]
struct Cmd {
    words: Vec<Word>,
    word: Word,
    in_word: bool,
    redirect: Option<Redirect>,
}

struct Heredoc {
    delimiter: String,
    strip_tabs: bool,
    expands: bool,
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    /// Inside `((…))` / `$((…))`: `<` and `>` are operators, not redirections.
    arith: usize,
    heredocs: Vec<Heredoc>,
    out: Vec<Vec<Word>>,
    /// Current nesting, and whether it went past `MAX_NESTING`.
    depth: usize,
    overflow: bool,
}

impl Lexer {
    fn new(chars: Vec<char>, depth: usize) -> Lexer {
        Lexer {
            depth,
            overflow: false,
            chars,
            pos: 0,
            arith: 0,
            heredocs: Vec::new(),
            out: Vec::new(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.pos + n).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    /// Enters one more level of nesting; past the limit, gives up on the rest of the line.
    fn descend(&mut self) -> bool {
        if self.depth >= MAX_NESTING {
            self.overflow = true;
            self.pos = self.chars.len();
            return false;
        }
        self.depth += 1;
        true
    }

    /// A sub-lexer's commands (and overflow) become this one's.
    fn absorb(&mut self, mut sub: Lexer) {
        self.out.append(&mut sub.out);
        self.overflow |= sub.overflow;
        if sub.overflow {
            self.pos = self.chars.len();
        }
    }

    /// Reads a command list up to the end, or (when `in_parens`) up to its unmatched `)`.
    fn list(&mut self, in_parens: bool) {
        if self.descend() {
            self.commands(in_parens);
            self.depth -= 1;
        }
    }

    fn commands(&mut self, in_parens: bool) {
        let mut cmd = Cmd::default();
        while let Some(c) = self.peek() {
            match c {
                ')' => {
                    self.pos += 1;
                    self.finish(&mut cmd);
                    if in_parens {
                        return;
                    }
                }
                '\'' => {
                    self.pos += 1;
                    cmd.in_word = true;
                    while let Some(q) = self.next() {
                        if q == '\'' {
                            break;
                        }
                        cmd.word.push(q, Piece::Quoted);
                    }
                }
                '"' => {
                    self.pos += 1;
                    cmd.in_word = true;
                    self.double_quoted(&mut cmd.word);
                }
                '\\' => {
                    self.pos += 1;
                    match self.next() {
                        Some('\n') => {}
                        Some(e) => {
                            cmd.in_word = true;
                            cmd.word.push(e, Piece::Quoted);
                        }
                        None => {}
                    }
                }
                '$' => {
                    cmd.in_word = true;
                    self.dollar(&mut cmd.word, false);
                }
                '`' => {
                    self.pos += 1;
                    cmd.in_word = true;
                    self.backtick(&mut cmd.word, false);
                }
                '#' if !cmd.in_word => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                '<' | '>' if self.arith == 0 && self.peek_at(1) == Some('(') => {
                    let start = self.pos;
                    self.pos += 2;
                    cmd.in_word = true;
                    self.substitution(&mut cmd.word, start, Expansion::Process, false);
                }
                '<' | '>' if self.arith == 0 => self.redirect(&mut cmd),
                '&' if self.arith == 0 && self.peek_at(1) == Some('>') => self.redirect(&mut cmd),
                ';' | '&' | '|' | '\n' => {
                    self.pos += 1;
                    self.finish(&mut cmd);
                    if c == '\n' {
                        self.heredoc_bodies();
                    }
                }
                '(' => {
                    self.finish(&mut cmd);
                    if self.peek_at(1) == Some('(') {
                        // `((…))`: an arithmetic command.
                        self.pos += 2;
                        self.arith += 1;
                        self.list(true);
                        if self.peek() == Some(')') {
                            self.pos += 1;
                        }
                        self.arith -= 1;
                    } else {
                        self.pos += 1;
                        self.list(true);
                    }
                }
                c if c.is_whitespace() => {
                    self.pos += 1;
                    self.end_word(&mut cmd);
                }
                c => {
                    self.pos += 1;
                    cmd.in_word = true;
                    cmd.word.push(c, Piece::Bare);
                }
            }
        }
        self.finish(&mut cmd);
    }

    fn end_word(&mut self, cmd: &mut Cmd) {
        if !std::mem::take(&mut cmd.in_word) {
            return;
        }
        let word = std::mem::take(&mut cmd.word);
        match cmd.redirect.take() {
            None => cmd.words.push(word),
            Some(Redirect::Plain) => {}
            Some(Redirect::Heredoc { strip_tabs }) => self.heredocs.push(Heredoc {
                expands: !word.any_quoted(),
                delimiter: word.text,
                strip_tabs,
            }),
        }
    }

    fn finish(&mut self, cmd: &mut Cmd) {
        self.end_word(cmd);
        cmd.redirect = None;
        let words = std::mem::take(&mut cmd.words);
        if !words.is_empty() {
            self.out.push(words);
        }
    }

    /// At `<`, `>` or `&>`: reads the operator; the next word is its target, not an argument.
    fn redirect(&mut self, cmd: &mut Cmd) {
        if cmd.in_word && cmd.word.is_descriptor() {
            cmd.word = Word::default();
            cmd.in_word = false;
        } else {
            self.end_word(cmd);
        }
        let mut redirect = Redirect::Plain;
        match self.next() {
            Some('&') => {
                self.pos += 1;
                if self.peek() == Some('>') {
                    self.pos += 1;
                }
            }
            Some('>') => {
                if matches!(self.peek(), Some('>' | '|' | '&')) {
                    self.pos += 1;
                }
            }
            _ => match self.peek() {
                Some('<') => {
                    self.pos += 1;
                    if self.peek() == Some('<') {
                        self.pos += 1; // `<<<`: a here-string, whose word is data.
                    } else {
                        let strip_tabs = self.peek() == Some('-');
                        if strip_tabs {
                            self.pos += 1;
                        }
                        redirect = Redirect::Heredoc { strip_tabs };
                    }
                }
                Some('>' | '&') => self.pos += 1,
                _ => {}
            },
        }
        cmd.redirect = Some(redirect);
    }

    /// After a newline: the bodies of the here-documents opened on that line. A body is
    /// data, except that an unquoted delimiter lets `$(…)` and backticks in it run.
    fn heredoc_bodies(&mut self) {
        for doc in std::mem::take(&mut self.heredocs) {
            let mut body = Vec::new();
            while self.pos < self.chars.len() {
                let mut line = Vec::new();
                while let Some(c) = self.next() {
                    if c == '\n' {
                        break;
                    }
                    line.push(c);
                }
                let text: String = line.iter().collect();
                let text = if doc.strip_tabs {
                    text.trim_start_matches('\t')
                } else {
                    &text
                };
                if text == doc.delimiter {
                    break;
                }
                body.extend(line);
                body.push('\n');
            }
            if doc.expands {
                let mut sub = Lexer::new(body, self.depth + 1);
                let mut scratch = Word::default();
                while let Some(c) = sub.peek() {
                    match c {
                        '\\' => sub.pos += 2,
                        '$' => sub.dollar(&mut scratch, true),
                        '`' => {
                            sub.pos += 1;
                            sub.backtick(&mut scratch, true);
                        }
                        _ => sub.pos += 1,
                    }
                }
                self.absorb(sub);
            }
        }
    }

    /// After an opening `"`: up to the closing one.
    fn double_quoted(&mut self, word: &mut Word) {
        while let Some(c) = self.peek() {
            match c {
                '"' => {
                    self.pos += 1;
                    return;
                }
                '\\' => {
                    self.pos += 1;
                    match self.next() {
                        Some(e @ ('$' | '`' | '"' | '\\')) => word.push(e, Piece::Quoted),
                        Some('\n') | None => {}
                        Some(e) => {
                            word.push('\\', Piece::Quoted);
                            word.push(e, Piece::Quoted);
                        }
                    }
                }
                '$' => self.dollar(word, true),
                '`' => {
                    self.pos += 1;
                    self.backtick(word, true);
                }
                c => {
                    self.pos += 1;
                    word.push(c, Piece::Quoted);
                }
            }
        }
    }

    /// At a `$`: a substitution, `$'…'`, `$"…"` or a literal dollar sign.
    fn dollar(&mut self, word: &mut Word, quoted: bool) {
        if self.descend() {
            self.expansion(word, quoted);
            self.depth -= 1;
        }
    }

    fn expansion(&mut self, word: &mut Word, quoted: bool) {
        let start = self.pos;
        self.pos += 1;
        match self.peek() {
            Some('(') if self.peek_at(1) == Some('(') => {
                self.pos += 2;
                self.arith += 1;
                self.list(true);
                if self.peek() == Some(')') {
                    self.pos += 1;
                }
                self.arith -= 1;
                self.raw(word, start, Expansion::Arithmetic, quoted);
            }
            Some('(') => {
                self.pos += 1;
                self.substitution(word, start, Expansion::Command, quoted);
            }
            Some('{') => {
                self.pos += 1;
                let mut depth = 1;
                let mut scratch = Word::default();
                while let Some(c) = self.peek() {
                    match c {
                        '}' => {
                            self.pos += 1;
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        '{' => {
                            self.pos += 1;
                            depth += 1;
                        }
                        '\\' => self.pos += 2,
                        '$' => self.dollar(&mut scratch, true),
                        '`' => {
                            self.pos += 1;
                            self.backtick(&mut scratch, true);
                        }
                        _ => self.pos += 1,
                    }
                }
                self.pos = self.pos.min(self.chars.len());
                self.raw(word, start, Expansion::Variable, quoted);
            }
            Some('\'') if !quoted => {
                self.pos += 1;
                self.ansi_c(word);
            }
            Some('"') if !quoted => {
                self.pos += 1;
                self.double_quoted(word);
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                self.raw(word, start, Expansion::Variable, quoted);
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.pos += 1;
                self.raw(word, start, Expansion::Variable, quoted);
            }
            _ => word.push('$', if quoted { Piece::Quoted } else { Piece::Bare }),
        }
    }

    /// After `$(`, `<(` or `>(`: the commands inside (collected), then the source text.
    fn substitution(&mut self, word: &mut Word, start: usize, kind: Expansion, quoted: bool) {
        let arith = std::mem::take(&mut self.arith);
        self.list(true);
        self.arith = arith;
        self.raw(word, start, kind, quoted);
    }

    /// Appends the source text from `start` to here as one substitution.
    fn raw(&self, word: &mut Word, start: usize, kind: Expansion, quoted: bool) {
        let end = self.pos.min(self.chars.len());
        let text: String = self
            .chars
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .collect();
        word.push_str(&text, Piece::Expansion(kind, quoted));
    }

    /// After an opening backtick: the body, lexed as a line of its own.
    fn backtick(&mut self, word: &mut Word, quoted: bool) {
        let mut body = Vec::new();
        while let Some(c) = self.next() {
            match c {
                '`' => break,
                '\\' => match self.next() {
                    Some(e @ ('`' | '\\' | '$')) => body.push(e),
                    Some(e) => body.extend(['\\', e]),
                    None => {}
                },
                c => body.push(c),
            }
        }
        let text: String = body.iter().collect();
        let mut sub = Lexer::new(body, self.depth + 1);
        sub.list(false);
        self.absorb(sub);
        word.push_str(
            &format!("`{text}`"),
            Piece::Expansion(Expansion::Command, quoted),
        );
    }

    /// After `$'`: ANSI-C quoting, escapes decoded (`$'\x72m'` is `rm`).
    fn ansi_c(&mut self, word: &mut Word) {
        while let Some(c) = self.next() {
            let decoded = match c {
                '\'' => return,
                '\\' => match self.next() {
                    Some('n') => '\n',
                    Some('t') => '\t',
                    Some('r') => '\r',
                    Some('a') => '\x07',
                    Some('b') => '\x08',
                    Some('e' | 'E') => '\x1b',
                    Some('f') => '\x0c',
                    Some('v') => '\x0b',
                    Some('c') => self
                        .next()
                        .and_then(|c| char::from_u32(u32::from(c) & 0x1f))
                        .unwrap_or_default(),
                    Some('x') => self.number(16, 2),
                    Some('u') => self.number(16, 4),
                    Some('U') => self.number(16, 8),
                    Some('0'..='7') => {
                        self.pos -= 1;
                        self.number(8, 3)
                    }
                    Some(e @ ('\\' | '\'' | '"' | '?')) => e,
                    Some(e) => {
                        word.push('\\', Piece::Quoted);
                        e
                    }
                    None => return,
                },
                c => c,
            };
            word.push(decoded, Piece::Quoted);
        }
    }

    fn number(&mut self, radix: u32, max: usize) -> char {
        let mut value = 0u32;
        for _ in 0..max {
            match self.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    value = value.saturating_mul(radix).saturating_add(d);
                    self.pos += 1;
                }
                None => break,
            }
        }
        char::from_u32(value).unwrap_or(char::REPLACEMENT_CHARACTER)
    }
}
