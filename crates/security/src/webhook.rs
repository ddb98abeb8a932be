//! Webhook signatures: GitHub's `X-Hub-Signature-256: sha256=HEX` (HMAC-SHA256 of the body),
//! reef's own `X-Reef-Signature: t=UNIX,v1=HEX` (HMAC-SHA256 of `t.body`, the timestamp
//! within a tolerance of now) and Slack's `X-Slack-Signature: v0=HEX` (HMAC-SHA256 of
//! `v0:TIMESTAMP:body`, the timestamp in `X-Slack-Request-Timestamp`, within the same
//! tolerance). Comparisons are constant-time. Whether a signature was seen
//! before is the caller's to remember.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How far a reef signature's timestamp may be from now.
pub const SIGNATURE_TOLERANCE_SECS: i64 = 300;

/// Why a delivery is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the request carries no X-Hub-Signature-256 or X-Reef-Signature header")]
    Missing,
    #[error("the signature header is malformed: {0}")]
    Malformed(&'static str),
    #[error("the signature does not match the body")]
    Mismatch,
    #[error("the signature's timestamp is {0} seconds from now (at most 300 are accepted)")]
    Stale(i64),
}

/// A verified signature: what identifies the delivery for replay protection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The signature's hex digest.
    pub digest: String,
}

/// Checks a GitHub `X-Hub-Signature-256` header (`sha256=HEX`) against `body`.
pub fn verify_github(secret: &[u8], body: &[u8], header: &str) -> Result<Verified, SignatureError> {
    let hex = header
        .trim()
        .strip_prefix("sha256=")
        .ok_or(SignatureError::Malformed("expected sha256=HEX"))?;
    let expected = decode_hex(hex).ok_or(SignatureError::Malformed(
        "the digest is not 64 hexadecimal digits",
    ))?;
    let mut mac = new_mac(secret)?;
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)?;
    Ok(Verified {
        digest: encode_hex(&expected),
    })
}

/// Checks an `X-Reef-Signature` header (`t=UNIX,v1=HEX`, several `v1` allowed during a
/// secret's rotation) against `body` at `now` (Unix seconds).
pub fn verify_reef(
    secret: &[u8],
    body: &[u8],
    header: &str,
    now: i64,
) -> Result<Verified, SignatureError> {
    let mut timestamp = None;
    let mut digests = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => {
                timestamp = Some(
                    t.parse::<i64>()
                        .map_err(|_| SignatureError::Malformed("t is not a Unix time"))?,
                );
            }
            Some(("v1", hex)) if digests.len() < MAX_CANDIDATES => digests.push(hex),
            Some(("v1", _)) => return Err(SignatureError::Malformed("more than 4 v1= digests")),
            _ => {}
        }
    }
    let t = timestamp.ok_or(SignatureError::Malformed("no t="))?;
    if digests.is_empty() {
        return Err(SignatureError::Malformed("no v1="));
    }
    let skew = now.saturating_sub(t);
    if skew.abs() > SIGNATURE_TOLERANCE_SECS {
        return Err(SignatureError::Stale(skew));
    }
    // One MAC over the body, compared with each candidate in constant time.
    let mut mac = new_mac(secret)?;
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let actual = mac.finalize().into_bytes();
    for hex in digests {
        let Some(expected) = decode_hex(hex) else {
            continue;
        };
        if constant_time_eq(&actual, &expected) {
            return Ok(Verified {
                digest: encode_hex(&expected),
            });
        }
    }
    Err(SignatureError::Mismatch)
}

/// `t=NOW,v1=HEX` for `body`: what a sender puts in `X-Reef-Signature`.
pub fn sign_reef(secret: &[u8], body: &[u8], now: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| empty_key());
    mac.update(now.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={now},v1={}", encode_hex(&mac.finalize().into_bytes()))
}

/// `sha256=HEX` for `body`, as GitHub signs.
pub fn sign_github(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| empty_key());
    mac.update(body);
    format!("sha256={}", encode_hex(&mac.finalize().into_bytes()))
}

/// Checks Slack's `X-Slack-Signature` (`v0=HEX`) and `X-Slack-Request-Timestamp` against
/// `body` at `now` (Unix seconds).
pub fn verify_slack(
    secret: &[u8],
    body: &[u8],
    timestamp: &str,
    signature: &str,
    now: i64,
) -> Result<Verified, SignatureError> {
    let t = timestamp
        .trim()
        .parse::<i64>()
        .map_err(|_| SignatureError::Malformed("X-Slack-Request-Timestamp is not a Unix time"))?;
    let hex = signature
        .trim()
        .strip_prefix("v0=")
        .ok_or(SignatureError::Malformed("expected v0=HEX"))?;
    let expected = decode_hex(hex).ok_or(SignatureError::Malformed(
        "the digest is not 64 hexadecimal digits",
    ))?;
    let skew = now.saturating_sub(t);
    if skew.abs() > SIGNATURE_TOLERANCE_SECS {
        return Err(SignatureError::Stale(skew));
    }
    let mut mac = new_mac(secret)?;
    mac.update(format!("v0:{t}:").as_bytes());
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)?;
    Ok(Verified {
        digest: encode_hex(&expected),
    })
}

/// `v0=HEX` for `body` sent at `timestamp`, as Slack signs.
pub fn sign_slack(secret: &[u8], body: &[u8], timestamp: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| empty_key());
    mac.update(format!("v0:{timestamp}:").as_bytes());
    mac.update(body);
    format!("v0={}", encode_hex(&mac.finalize().into_bytes()))
}

/// The most `v1=` digests a header may carry (a secret's rotation needs two).
const MAX_CANDIDATES: usize = 4;

fn new_mac(secret: &[u8]) -> Result<Hmac<Sha256>, SignatureError> {
    // HMAC takes keys of every length; the error type exists for other MACs.
    Hmac::<Sha256>::new_from_slice(secret).map_err(|_| SignatureError::Mismatch)
}

fn empty_key() -> Hmac<Sha256> {
    <Hmac<Sha256> as hmac::digest::KeyInit>::new(&Default::default())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A SHA-256 digest in hex: exactly 64 hexadecimal digits (no sign, no spaces), so one
/// digest has one spelling up to case, which replay protection relies on.
fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // GitHub's documented example: secret "It's a Secret to Everybody", payload
    // "Hello, World!".
    const GITHUB_EXAMPLE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    #[test]
    fn githubs_documented_example_verifies() {
        let secret = b"It's a Secret to Everybody";
        assert_eq!(sign_github(secret, b"Hello, World!"), GITHUB_EXAMPLE);
        assert!(verify_github(secret, b"Hello, World!", GITHUB_EXAMPLE).is_ok());
        assert_eq!(
            verify_github(secret, b"Hello, World?", GITHUB_EXAMPLE),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_github(b"wrong", b"Hello, World!", GITHUB_EXAMPLE),
            Err(SignatureError::Mismatch)
        );
        assert!(matches!(
            verify_github(secret, b"x", "sha1=abc"),
            Err(SignatureError::Malformed(_))
        ));
        assert!(matches!(
            verify_github(secret, b"x", "sha256=zz"),
            Err(SignatureError::Malformed(_))
        ));
    }

    #[test]
    fn a_digest_has_one_spelling() {
        let secret = b"It's a Secret to Everybody";
        let hex = GITHUB_EXAMPLE.strip_prefix("sha256=").unwrap();
        let upper = format!("sha256={}", hex.to_ascii_uppercase());
        let verified = verify_github(secret, b"Hello, World!", &upper).unwrap();
        assert_eq!(verified.digest, hex);
        // `+f` parses as a byte too, but is not a hex digit pair.
        let signed = format!("sha256=+{}", &hex[1..]);
        assert!(matches!(
            verify_github(secret, b"Hello, World!", &signed),
            Err(SignatureError::Malformed(_))
        ));
        let many = format!("t=5,{}", "v1=00,".repeat(5));
        assert!(matches!(
            verify_reef(secret, b"x", &many, 5),
            Err(SignatureError::Malformed(_))
        ));
    }

    #[test]
    fn slacks_documented_example_verifies() {
        // Slack's "Verifying requests" example.
        let secret = b"8f742231b10e8888abcd99yyyzzz85a5";
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign_slack(secret, body, 1_531_420_618), expected);
        assert!(verify_slack(secret, body, "1531420618", expected, 1_531_420_618).is_ok());
        assert_eq!(
            verify_slack(secret, body, "1531420618", expected, 1_531_420_618 + 301),
            Err(SignatureError::Stale(301))
        );
        assert_eq!(
            verify_slack(secret, b"token=x", "1531420618", expected, 1_531_420_618),
            Err(SignatureError::Mismatch)
        );
        assert!(matches!(
            verify_slack(secret, body, "soon", expected, 1),
            Err(SignatureError::Malformed(_))
        ));
        assert!(matches!(
            verify_slack(secret, body, "1531420618", "v1=00", 1_531_420_618),
            Err(SignatureError::Malformed(_))
        ));
    }

    #[test]
    fn reef_signatures_hold_within_five_minutes_only() {
        let secret = b"s3cret-value";
        let header = sign_reef(secret, b"{\"a\":1}", 1_000_000);
        assert!(verify_reef(secret, b"{\"a\":1}", &header, 1_000_000).is_ok());
        assert!(verify_reef(secret, b"{\"a\":1}", &header, 1_000_300).is_ok());
        assert_eq!(
            verify_reef(secret, b"{\"a\":1}", &header, 1_000_600),
            Err(SignatureError::Stale(600))
        );
        assert_eq!(
            verify_reef(secret, b"{\"a\":2}", &header, 1_000_000),
            Err(SignatureError::Mismatch)
        );
        // A second v1 (a rotated secret) is tried too.
        let other = sign_reef(b"old", b"x", 5);
        let good = sign_reef(secret, b"x", 5);
        let both = format!("{other},{}", good.split_once(',').unwrap().1);
        assert!(verify_reef(secret, b"x", &both, 5).is_ok());
        assert!(matches!(
            verify_reef(secret, b"x", "v1=00", 5),
            Err(SignatureError::Malformed(_))
        ));
    }
}
