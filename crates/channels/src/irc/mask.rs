//! `nick!user@host` masks with `*` and `?`, compared the way the server compares names: case
//! folded under its casemapping (ISUPPORT `CASEMAPPING`). `ascii` is the default, as ngircd
//! announces it and as it fails safe: under `rfc1459`, where `[]\~` are the upper case of
//! `{}|^`, a mask for `ada[m]` would also admit whoever holds `ada{m}` on an `ascii` server.

/// How a server folds the case of names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Casemapping {
    /// Only `A-Z` fold to `a-z`.
    #[default]
    Ascii,
    /// `A-Z` and `[]\~` fold to `a-z` and `{}|^`.
    Rfc1459,
}

impl Casemapping {
    /// The casemapping an ISUPPORT `CASEMAPPING=` value names; unknown ones are `Ascii`, the
    /// one that never makes two different names equal.
    pub fn from_isupport(value: &str) -> Self {
        match value.to_ascii_lowercase().as_str() {
            "rfc1459" | "strict-rfc1459" => Self::Rfc1459,
            _ => Self::Ascii,
        }
    }

    fn fold(self, c: char) -> char {
        match (self, c) {
            (Self::Rfc1459, '[') => '{',
            (Self::Rfc1459, ']') => '}',
            (Self::Rfc1459, '\\') => '|',
            (Self::Rfc1459, '~') => '^',
            (_, c) => c.to_ascii_lowercase(),
        }
    }
}

/// Whether `mask` (e.g. `alice!*@*.example.org`) matches `target` (`alice!al@host.example.org`).
/// `*` matches any run of characters, `?` any one; everything else matches itself, case folded
/// under `casemapping`. Linear backtracking over the last `*`: at most |mask|·|target| steps.
pub fn mask_matches(mask: &str, target: &str, casemapping: Casemapping) -> bool {
    let mask: Vec<char> = mask.chars().map(|c| casemapping.fold(c)).collect();
    let target: Vec<char> = target.chars().map(|c| casemapping.fold(c)).collect();
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

/// Whether two names are the same to the server.
pub fn eq_ignore_case(a: &str, b: &str, casemapping: Casemapping) -> bool {
    a.chars()
        .map(|c| casemapping.fold(c))
        .eq(b.chars().map(|c| casemapping.fold(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ASCII: Casemapping = Casemapping::Ascii;

    #[test]
    fn masks_match_as_servers_match_them() {
        let who = "Alice!~al@host.example.org";
        for yes in [
            "alice!*@*",
            "*!*@*.example.org",
            "ALICE!~al@host.example.org",
            "a?ice!*@*",
            "*",
            "*!*@*",
            "al*!*@*org",
            "a**e!*@*",
        ] {
            assert!(mask_matches(yes, who, ASCII), "{yes}");
        }
        for no in [
            "bob!*@*",
            "alice!*@*.example.com",
            "alice",
            "alice!~al@host.example.org?",
            "alice!al@*",
            "",
        ] {
            assert!(!mask_matches(no, who, ASCII), "{no}");
        }
        assert!(mask_matches("", "", ASCII));
        assert!(mask_matches("*", "", ASCII) && !mask_matches("*?", "", ASCII));
        // A pathological mask ends, with the right answer.
        let long = "a".repeat(500);
        assert!(!mask_matches("*a*a*a*b", &long, ASCII));
        assert!(mask_matches("*a*a*a*", &long, ASCII));
    }

    #[test]
    fn case_folds_under_the_server_casemapping() {
        assert!(!mask_matches("ada[m]!*@*", "ada{m}!u@h", ASCII));
        assert!(mask_matches(
            "ada[m]!*@*",
            "ADA{M}!u@h",
            Casemapping::Rfc1459
        ));
        assert!(eq_ignore_case("Ada", "aDA", ASCII));
        assert!(!eq_ignore_case("ada[bot]", "ada{bot}", ASCII));
        assert!(eq_ignore_case("Ada[bot]", "ada{BOT}", Casemapping::Rfc1459));
        assert_eq!(Casemapping::from_isupport("RFC1459"), Casemapping::Rfc1459);
        assert_eq!(Casemapping::from_isupport("ascii"), Casemapping::Ascii);
        assert_eq!(Casemapping::from_isupport("rfc7613"), Casemapping::Ascii);
        assert_eq!(Casemapping::default(), Casemapping::Ascii);
    }
}
