//! Text helpers: head-and-tail truncation and binary detection.

/// Keeps the first and last characters of `s` so that at most `max_chars` characters of the
/// original remain, with a visible marker in between saying how many were cut.
pub fn truncate_middle(s: &str, max_chars: usize) -> String {
    let total = s.chars().count();
    if total <= max_chars {
        return s.to_owned();
    }
    let head_len = max_chars / 2;
    let tail_len = max_chars - head_len;
    let head: String = s.chars().take(head_len).collect();
    let tail: String = s.chars().skip(total - tail_len).collect();
    let cut = total - max_chars;
    format!("{head}\n[... {cut} characters truncated ...]\n{tail}")
}

/// Whether bytes look like a binary file: a NUL byte in the first 8 KiB.
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|b| *b == 0)
}

/// Cuts a single line to `max` characters, marking the cut.
pub(crate) fn clip_line(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        line.to_owned()
    } else {
        let kept: String = line.chars().take(max).collect();
        format!("{kept} [...]")
    }
}
