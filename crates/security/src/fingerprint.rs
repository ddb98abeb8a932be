//! Secret fingerprints: recognising a secret's value in an output without keeping the value.
//! A fingerprint holds the value's length, a salted SHA-256 of it and a 32-bit rolling hash;
//! finding it in a text hashes every window of that length with the rolling hash (one pass per
//! distinct length) and checks the SHA-256 only where the rolling hash matches.

use reef_core::SecretFingerprint;
use sha2::{Digest, Sha256};

/// The rolling hash's modulus (a Mersenne prime, so reductions are cheap) and base.
const MODULUS: u64 = (1 << 61) - 1;
const BASE: u64 = 1_000_003;

fn mul_mod(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    let folded = (product & u128::from(MODULUS)) + (product >> 61);
    let folded = (folded & u128::from(MODULUS)) + (folded >> 61);
    u64::try_from(folded % u128::from(MODULUS)).unwrap_or(0)
}

fn add_mod(a: u64, b: u64) -> u64 {
    (a + b) % MODULUS
}

/// The polynomial hash of `bytes`.
fn rolling(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0, |h, b| add_mod(mul_mod(h, BASE), u64::from(*b) + 1))
}

fn probe_of(hash: u64) -> u32 {
    (hash & 0xffff_ffff) as u32
}

fn salted(salt: &[u8], value: &[u8]) -> Vec<u8> {
    let mut hasher = Sha256::new();
    hasher.update(salt);
    hasher.update(value);
    hasher.finalize().to_vec()
}

/// The fingerprint of the secret `name` whose value is `value`, hashed with `salt` (random
/// bytes the caller picks once per fingerprint).
pub fn fingerprint(name: &str, value: &str, salt: &[u8]) -> SecretFingerprint {
    SecretFingerprint {
        name: name.to_owned(),
        len: value.len(),
        probe: probe_of(rolling(value.as_bytes())),
        salt: salt.to_vec(),
        hash: salted(salt, value.as_bytes()),
    }
}

/// Whether `value` is the value `fingerprint` was made from.
pub fn fingerprint_matches(fingerprint: &SecretFingerprint, value: &str) -> bool {
    value.len() == fingerprint.len
        && salted(&fingerprint.salt, value.as_bytes()) == fingerprint.hash
}

/// `text` with every occurrence of a fingerprinted value replaced by `[secret NAME]`.
pub fn redact_fingerprinted(text: &str, fingerprints: &[SecretFingerprint]) -> String {
    let bytes = text.as_bytes();
    // (start, end, name) of every match, found one length at a time.
    let mut found: Vec<(usize, usize, &str)> = Vec::new();
    let mut lengths: Vec<usize> = fingerprints.iter().map(|f| f.len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    for len in lengths.into_iter().filter(|l| *l > 0 && *l <= bytes.len()) {
        let of_len: Vec<&SecretFingerprint> =
            fingerprints.iter().filter(|f| f.len == len).collect();
        // BASE^(len-1): the weight of the byte that leaves the window.
        let top = (1..len).fold(1, |p, _| mul_mod(p, BASE));
        let mut hash = rolling(&bytes[..len]);
        let mut start = 0;
        loop {
            let probe = probe_of(hash);
            for f in of_len.iter().filter(|f| f.probe == probe) {
                let window = &bytes[start..start + len];
                if salted(&f.salt, window) == f.hash {
                    found.push((start, start + len, &f.name));
                }
            }
            if start + len == bytes.len() {
                break;
            }
            let out = mul_mod(u64::from(bytes[start]) + 1, top);
            hash = add_mod(hash + MODULUS - out, 0);
            hash = add_mod(mul_mod(hash, BASE), u64::from(bytes[start + len]) + 1);
            start += 1;
        }
    }
    if found.is_empty() {
        return text.to_owned();
    }
    // Longest first at each position, then left to right; a match overlapping the one before
    // is folded into it, so no part of either value shows.
    found.sort_by_key(|(s, e, _)| (*s, std::cmp::Reverse(*e)));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (s, e, name) in found {
        // A value is valid UTF-8, so a window equal to it starts and ends on char boundaries.
        if !text.is_char_boundary(s) || !text.is_char_boundary(e) {
            continue;
        }
        if s < at {
            at = at.max(e);
            continue;
        }
        out.push_str(&text[at..s]);
        out.push_str(&format!("[secret {name}]"));
        at = e;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::{fingerprint, fingerprint_matches, redact_fingerprinted, rolling};

    #[test]
    fn every_occurrence_is_found_and_only_those() {
        let token = fingerprint("TOKEN", "tok-3f9A-x", b"salt-1");
        let other = fingerprint("OTHER", "an-other-value-é", b"salt-2");
        let text = "tok-3f9A-x at start, tok-3f9A-y not it, an-other-value-é, end tok-3f9A-x";
        assert_eq!(
            redact_fingerprinted(text, &[token.clone(), other.clone()]),
            "[secret TOKEN] at start, tok-3f9A-y not it, [secret OTHER], end [secret TOKEN]"
        );
        assert_eq!(
            redact_fingerprinted("short", std::slice::from_ref(&token)),
            "short"
        );
        // Two values overlapping in the text: neither shows a part of itself.
        let a = fingerprint("A", "abcdefgh", b"s");
        let b = fingerprint("B", "efghijkl", b"s");
        assert_eq!(
            redact_fingerprinted("xx abcdefghijkl yy", &[a, b]),
            "xx [secret A] yy"
        );
        assert!(fingerprint_matches(&token, "tok-3f9A-x"));
        assert!(!fingerprint_matches(&token, "tok-3f9A-y"));
        // The same value under another salt hashes differently.
        assert_ne!(
            token.hash,
            fingerprint("TOKEN", "tok-3f9A-x", b"salt-9").hash
        );
    }

    #[test]
    fn the_rolling_hash_of_a_window_equals_the_hash_of_its_bytes() {
        // Covered through redaction at every offset: a value placed anywhere is found.
        let value = "Zq9-Zq9-Zq9";
        let f = fingerprint("V", value, b"s");
        for pad in 0..40 {
            let text = format!("{}{value}{}", "x".repeat(pad), "y".repeat(40 - pad));
            assert_eq!(
                redact_fingerprinted(&text, std::slice::from_ref(&f)),
                format!("{}[secret V]{}", "x".repeat(pad), "y".repeat(40 - pad)),
                "offset {pad}"
            );
        }
        assert_ne!(rolling(b"ab"), rolling(b"ba"));
    }
}
