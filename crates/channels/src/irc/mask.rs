//! `nick!user@host` masks with `*` and `?`, compared the way IRC servers compare names: case
//! folded under the `rfc1459` casemapping, where `[]\~` are the upper case of `{}|^`.

/// Whether `mask` (e.g. `alice!*@*.example.org`) matches `target` (`alice!al@host.example.org`).
/// `*` matches any run of characters, `?` any one; everything else matches itself, ignoring
/// case as IRC does.
pub fn mask_matches(mask: &str, target: &str) -> bool {
    let mask: Vec<char> = mask.chars().map(fold).collect();
    let target: Vec<char> = target.chars().map(fold).collect();
    let (mut m, mut t) = (0, 0);
    // Where the last `*` was, and the target position it has swallowed up to.
    let mut star: Option<(usize, usize)> = None;
    while t < target.len() {
        match mask.get(m) {
            Some('*') => {
                star = Some((m, t));
                m += 1;
            }
            Some(&c) if c == '?' || c == target[t] => {
                m += 1;
                t += 1;
            }
            _ => match star {
                Some((sm, st)) => {
                    m = sm + 1;
                    t = st + 1;
                    star = Some((sm, st + 1));
                }
                None => return false,
            },
        }
    }
    mask[m..].iter().all(|&c| c == '*')
}

/// Whether two names are the same to an IRC server (`rfc1459` casemapping).
pub fn eq_ignore_case(a: &str, b: &str) -> bool {
    a.chars().map(fold).eq(b.chars().map(fold))
}

/// The `rfc1459` lower case of `c`.
fn fold(c: char) -> char {
    match c {
        '[' => '{',
        ']' => '}',
        '\\' => '|',
        '~' => '^',
        c => c.to_ascii_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_match_as_servers_match_them() {
        let who = "Alice!al@host.example.org";
        for yes in [
            "alice!*@*",
            "*!*@*.example.org",
            "ALICE!al@host.example.org",
            "a?ice!*@*",
            "*",
            "*!*@*",
            "al*!*@*org",
        ] {
            assert!(mask_matches(yes, who), "{yes}");
        }
        for no in [
            "bob!*@*",
            "alice!*@*.example.com",
            "alice",
            "alice!al@host.example.org?",
            "",
        ] {
            assert!(!mask_matches(no, who), "{no}");
        }
        assert!(mask_matches("", ""));
        assert!(
            mask_matches("nick[1]!*@*", "NICK{1}!u@h"),
            "rfc1459 casemapping"
        );
        assert!(eq_ignore_case("Ada[bot]", "ada{BOT}"));
        assert!(!eq_ignore_case("ada", "ada_"));
    }
}
