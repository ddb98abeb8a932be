//! Reading a small model's prose: words, numbers and file names.

/// Whether `input` contains one of the lowercase `phrases`, in any case.
pub(super) fn mentions_any(input: &str, phrases: &[&str]) -> bool {
    let lower = input.to_ascii_lowercase();
    phrases.iter().any(|p| lower.contains(p))
}

/// Words: runs of letters, digits and `._-/`, with trailing dots and dashes removed.
pub(super) fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
        .map(|w| w.trim_end_matches(['.', '-']))
        .filter(|w| !w.is_empty())
}

/// Whether `word` occurs in `text` as a whole word.
pub(super) fn contains_word(text: &str, word: &str) -> bool {
    words(text).any(|w| w == word || w.trim_start_matches("./") == word)
}

/// The integers and decimals in `text`: thousands separators removed (`1,234`), a unit or
/// ordinal suffix dropped (`5.4G`, `80%`, `3rd`).
pub(super) fn numbers(text: &str) -> Vec<String> {
    words(&without_thousands_separators(text))
        .map(|w| {
            w.trim_start_matches('-')
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .trim_end_matches('.')
        })
        .filter(|w| {
            !w.is_empty()
                && w.chars().all(|c| c.is_ascii_digit() || c == '.')
                && w.chars().next().is_some_and(|c| c.is_ascii_digit())
        })
        .map(str::to_owned)
        .collect()
}

/// `text` without the commas that separate thousands (a comma between a digit and exactly
/// three more), so `41,200` is one number while `1,apple,3` stays three fields.
fn without_thousands_separators(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let digit = |i: usize| chars.get(i).is_some_and(char::is_ascii_digit);
    chars
        .iter()
        .enumerate()
        .filter(|&(i, &c)| {
            !(c == ',' && i > 0 && digit(i - 1) && (1..=3).all(|k| digit(i + k)) && !digit(i + 4))
        })
        .map(|(_, &c)| c)
        .collect()
}

/// Words that look like file names: a stem and an extension of letters and digits
/// (`data.csv`, `logs/a.log`), not numbers (`3.14`).
pub(super) fn file_names(text: &str) -> Vec<String> {
    words(text)
        .filter(|w| {
            let Some((stem, ext)) = w.rsplit_once('.') else {
                return false;
            };
            !stem.is_empty()
                && !stem.ends_with('/')
                && (1..=8).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        })
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_numbers_and_names() {
        assert_eq!(numbers("It is 1,234 and -5, not v2."), ["1234", "5"]);
        assert_eq!(numbers("5.4G free, 95% used, the 3rd."), ["5.4", "95", "3"]);
        assert_eq!(numbers("1,apple,3"), ["1", "3"]);
        assert_eq!(
            file_names("Move logs/a.log and b.txt, not 3.14 or end."),
            ["logs/a.log", "b.txt"]
        );
        assert!(contains_word("stdout:\n./c.txt\n", "c.txt"));
        assert!(!contains_word("abc.txt", "c.txt"));
    }
}
