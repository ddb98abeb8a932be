//! Splitting a document into overlapping chunks for retrieval: about `size` characters each,
//! cut at whitespace where possible, each starting `overlap` characters before the previous
//! one ended.

/// Chunks of `text`. `size` is at least 1 and `overlap` is below `size` (checked by the
/// caller); empty or blank text has no chunks.
pub fn chunks(text: &str, size: usize, overlap: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let mut end = (start + size).min(chars.len());
        if end < chars.len() {
            // Prefer a break at whitespace in the last fifth of the window.
            let floor = start + size - size / 5;
            if let Some(cut) = (floor.max(start + 1)..end)
                .rev()
                .find(|&i| chars[i].is_whitespace())
            {
                end = cut;
            }
        }
        let chunk: String = chars[start..end].iter().collect();
        if !chunk.trim().is_empty() {
            out.push(chunk.trim().to_owned());
        }
        if end >= chars.len() {
            break;
        }
        // Step back by the overlap (always moving forward), then on to the next word start
        // if the step landed inside a word and the window has one.
        let next = end.saturating_sub(overlap).max(start + 1);
        start = match (next..end).find(|&i| chars[i].is_whitespace()) {
            Some(space) if !chars[next - 1].is_whitespace() => space + 1,
            _ => next,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_chunk_and_blank_text_none() {
        assert_eq!(chunks("hello world", 100, 10), ["hello world"]);
        assert!(chunks("  \n ", 100, 10).is_empty());
    }

    #[test]
    fn long_text_is_cut_at_words_with_overlap() {
        let text = (0..60)
            .map(|i| format!("w{i:02}"))
            .collect::<Vec<_>>()
            .join(" ");
        let parts = chunks(&text, 40, 12);
        assert!(parts.len() > 4, "{parts:?}");
        for p in &parts {
            assert!(p.chars().count() <= 40, "{p}");
            assert!(p.split(' ').all(|w| w.len() == 3), "cut inside a word: {p}");
        }
        // Consecutive chunks share words, and together they cover every word.
        for pair in parts.windows(2) {
            let last = pair[0].split(' ').next_back().unwrap_or_default();
            assert!(pair[1].contains(last), "{pair:?}");
        }
        for i in 0..60 {
            assert!(
                parts.iter().any(|p| p.contains(&format!("w{i:02}"))),
                "w{i:02} lost"
            );
        }
    }

    #[test]
    fn text_without_spaces_is_still_cut() {
        let parts = chunks(&"x".repeat(95), 40, 10);
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [40, 40, 35]
        );
    }
}
