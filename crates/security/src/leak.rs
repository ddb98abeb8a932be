//! The leak detector: finds credentials in text about to leave reef (a request's URL, headers
//! and body, a reply on a channel). Two kinds of finding:
//! - a known secret's value, as it is or in a common encoding (base64 at any alignment,
//!   base64url, percent-encoding, hex);
//! - a credential pattern: cloud and service keys by their documented prefixes, private key
//!   blocks, JWTs, bearer and basic authorization, passwords in URLs, and values of
//!   credential-named fields that look random.
//!
//! Scanning is pure; a [`LeakPolicy`] says what each kind of finding does (`ignore`, `warn`,
//! `sanitize`, `block`), and [`LeakPolicy::review`] applies it to a text.

use base64::Engine as _;
use regex::Regex;
use std::sync::OnceLock;

/// Shortest value (or encoded form) searched for: shorter ones match ordinary text.
const MIN_FORM: usize = 8;

/// One credential pattern: its id (for policies and reports) and the expression. Where the
/// expression has a group named `value`, that group must also look random
/// ([`looks_random`]).
struct Pattern {
    id: &'static str,
    re: &'static str,
}

const PATTERNS: &[Pattern] = &[
    Pattern {
        id: "aws_access_key",
        re: r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
    },
    Pattern {
        id: "github_token",
        re: r"\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{60,255})\b",
    },
    Pattern {
        id: "gitlab_token",
        re: r"\bglpat-[A-Za-z0-9_-]{20,}",
    },
    Pattern {
        id: "slack_token",
        re: r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    },
    Pattern {
        id: "slack_webhook",
        re: r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,}",
    },
    Pattern {
        id: "stripe_key",
        re: r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{20,}",
    },
    Pattern {
        id: "anthropic_key",
        re: r"\bsk-ant-[A-Za-z0-9_-]{20,}",
    },
    Pattern {
        id: "openai_key",
        re: r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}",
    },
    Pattern {
        id: "google_api_key",
        re: r"\bAIza[0-9A-Za-z_-]{35}",
    },
    Pattern {
        id: "sendgrid_key",
        re: r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
    },
    Pattern {
        id: "npm_token",
        re: r"\bnpm_[A-Za-z0-9]{36}\b",
    },
    Pattern {
        id: "huggingface_token",
        re: r"\bhf_[A-Za-z0-9]{34,}\b",
    },
    Pattern {
        id: "private_key",
        re: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    },
    Pattern {
        id: "jwt",
        re: r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}",
    },
    Pattern {
        id: "bearer_token",
        re: r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9._~+/-]{16,}=*)",
    },
    Pattern {
        id: "basic_auth",
        re: r"(?i)\bbasic\s+(?P<value>[A-Za-z0-9+/]{12,}={0,2})",
    },
    Pattern {
        id: "url_password",
        re: r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]{1,64}:(?P<value>[^/\s@]{3,128})@",
    },
    Pattern {
        id: "credential_field",
        re: r#"(?i)(?:passw(?:or)?d|passphrase|secret|token|api[_-]?key|access[_-]?key|auth[_-]?key|private[_-]?key|client[_-]?secret|credentials?)["']?\s*[:=]\s*["']?(?P<value>[^\s"',;&<>{}()\[\]]{8,})"#,
    },
];

/// What was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// A pattern's id, or `secret` for a known secret's value.
    pub kind: &'static str,
    /// The secret's name, for a known secret.
    pub secret: Option<String>,
    /// Where in the text (bytes).
    pub start: usize,
    pub end: usize,
    /// The credential itself within the match (bytes): the `value` group, or the whole match.
    pub value: std::ops::Range<usize>,
}

/// Finds credentials in text.
#[derive(Clone, Debug, Default)]
pub struct LeakScanner {
    /// Each known secret's name and the forms its value may travel in.
    known: Vec<(String, Vec<String>)>,
}

fn compiled() -> &'static [(&'static str, Regex)] {
    static COMPILED: OnceLock<Vec<(&'static str, Regex)>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        PATTERNS
            .iter()
            .filter_map(|p| Regex::new(p.re).ok().map(|re| (p.id, re)))
            .collect()
    })
}

impl LeakScanner {
    /// A scanner for the credential patterns and these known secrets (name, value).
    pub fn new<'a>(known: impl IntoIterator<Item = (&'a str, &'a str)>) -> LeakScanner {
        let known = known
            .into_iter()
            .filter(|(_, value)| value.len() >= MIN_FORM)
            .map(|(name, value)| (name.to_owned(), forms(value)))
            .collect();
        LeakScanner { known }
    }

    /// The ids of every credential pattern, for policies that name them.
    pub fn pattern_ids() -> Vec<&'static str> {
        PATTERNS.iter().map(|p| p.id).collect()
    }

    /// Every finding in `text`, in order of where it starts.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        let mut out = Vec::new();
        for (name, forms) in &self.known {
            for form in forms {
                for (start, _) in text.match_indices(form.as_str()) {
                    out.push(Finding {
                        kind: "secret",
                        secret: Some(name.clone()),
                        start,
                        end: start + form.len(),
                        value: start..start + form.len(),
                    });
                }
            }
        }
        for (id, re) in compiled() {
            for caps in re.captures_iter(text) {
                let Some(whole) = caps.get(0) else { continue };
                if let Some(value) = caps.name("value")
                    && !looks_random(value.as_str())
                {
                    continue;
                }
                let value = caps.name("value").unwrap_or(whole);
                out.push(Finding {
                    kind: id,
                    secret: None,
                    start: whole.start(),
                    end: whole.end(),
                    value: value.start()..value.end(),
                });
            }
        }
        out.sort_by_key(|f| (f.start, f.end));
        out
    }
}

/// The forms a value may travel in: itself, percent-encoded, hex, and base64 (standard and
/// URL-safe) at each of the three alignments it can have inside a longer encoded text.
pub fn forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut out = vec![value.to_owned()];
    let percent: String = bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    out.push(percent.clone());
    out.push(percent.replace("%20", "+"));
    out.push(crate::audit::hex(bytes));
    out.push(crate::audit::hex(bytes).to_ascii_uppercase());
    for engine in [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::URL_SAFE,
    ] {
        for shift in 0..3usize {
            let mut padded = vec![0u8; shift];
            padded.extend_from_slice(bytes);
            let encoded = engine.encode(&padded);
            // Characters made only of the value's bits: skip those that mix in the bytes
            // before it, stop before those that mix in the bytes after it.
            let first = (shift * 8).div_ceil(6);
            let last = padded.len() * 8 / 6;
            if let Some(core) = encoded.get(first..last) {
                out.push(core.to_owned());
            }
        }
    }
    out.retain(|f| f.len() >= MIN_FORM);
    out.sort();
    out.dedup();
    out
}

/// Whether `value` looks like a credential rather than a word, a placeholder or a path:
/// at least 8 characters, not a template (`${X}`, `<X>`, `***`), with letters and digits
/// mixed, and enough distinct characters (Shannon entropy of at least 3 bits a character).
pub fn looks_random(value: &str) -> bool {
    let v = value.trim_matches(|c| c == '"' || c == '\'');
    if v.len() < 8 || v.starts_with('$') || v.starts_with('%') || v.contains("***") {
        return false;
    }
    let lower = v.to_ascii_lowercase();
    if [
        "xxxx",
        "example",
        "changeme",
        "placeholder",
        "redacted",
        "your_",
        "<",
    ]
    .iter()
    .any(|w| lower.contains(w))
    {
        return false;
    }
    let has_digit = v.bytes().any(|b| b.is_ascii_digit());
    let has_alpha = v.bytes().any(|b| b.is_ascii_alphabetic());
    has_digit && has_alpha && entropy(v) >= 3.0
}

/// Shannon entropy of `text` in bits a character.
fn entropy(text: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in text.bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = text.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_secret_is_found_in_every_encoding() {
        let secret = "s3cr3t-Deploy/Value+8841";
        let scanner = LeakScanner::new([("DEPLOY", secret)]);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let texts = [
            format!("token={secret}"),
            "q=s3cr3t-Deploy%2FValue%2B8841&x=1".to_owned(),
            format!("{{\"auth\":\"{}\"}}", b64(&format!("user:{secret}"))),
            b64(&format!("ab{secret}cd")),
            format!("x{}y", crate::audit::hex(secret.as_bytes())),
            base64::engine::general_purpose::URL_SAFE.encode(format!("a{secret}")),
        ];
        for text in &texts {
            let found = scanner.scan(text);
            assert!(
                found.iter().any(|f| f.secret.as_deref() == Some("DEPLOY")),
                "{text}: {found:?}"
            );
        }
        assert!(scanner.scan("nothing to see here").is_empty());
    }

    #[test]
    fn placeholders_and_words_do_not_look_random() {
        for value in [
            "${API_TOKEN}",
            "<your token>",
            "changeme123",
            "password",
            "********",
        ] {
            assert!(!looks_random(value), "{value}");
        }
        assert!(looks_random("q8Zr2LmX0vT7pWcd"));
    }
}

/// What a finding of one kind does to the text it is in.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum LeakAction {
    /// Let it go, unrecorded.
    Ignore,
    /// Let it go and record that it went.
    Warn,
    /// Replace the credential with `[redacted KIND]` and send the rest.
    Sanitize,
    /// Send nothing.
    Block,
}

impl LeakAction {
    /// The audit record for a finding of `area` (`leak`, `safety`) handled this way:
    /// `leak.blocked`, `safety.sanitized`, …
    pub fn audit_kind(self, area: &str) -> String {
        let done = match self {
            LeakAction::Block => "blocked",
            LeakAction::Sanitize => "sanitized",
            LeakAction::Warn | LeakAction::Ignore => "warned",
        };
        format!("{area}.{done}")
    }
}

impl std::str::FromStr for LeakAction {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ignore" => Ok(LeakAction::Ignore),
            "warn" => Ok(LeakAction::Warn),
            "sanitize" => Ok(LeakAction::Sanitize),
            "block" => Ok(LeakAction::Block),
            other => Err(format!(
                "{other:?} is not an action; use ignore, warn, sanitize or block"
            )),
        }
    }
}

/// The action for each kind of finding (`secret`, or a pattern id), and for the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeakPolicy {
    pub default: LeakAction,
    pub by_kind: std::collections::BTreeMap<String, LeakAction>,
}

impl Default for LeakPolicy {
    /// Everything blocked.
    fn default() -> Self {
        Self {
            default: LeakAction::Block,
            by_kind: std::collections::BTreeMap::new(),
        }
    }
}

/// What a review decided: the strongest action any finding called for, the findings that
/// called for one (ignored ones and allowed secrets left out), and the text with sanitized
/// findings replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    pub action: LeakAction,
    pub findings: Vec<Finding>,
    /// The credentials to replace (the text of each sanitized finding's value), with the
    /// kind to name in its place.
    pub replace: Vec<(String, &'static str)>,
}

impl LeakPolicy {
    /// The action for findings of `kind`.
    pub fn action(&self, kind: &str) -> LeakAction {
        self.by_kind.get(kind).copied().unwrap_or(self.default)
    }

    /// The kinds a policy may name: `secret` and every pattern id.
    pub fn kinds() -> Vec<&'static str> {
        let mut kinds = vec!["secret"];
        kinds.extend(LeakScanner::pattern_ids());
        kinds
    }

    /// Applies the policy to `text` scanned by `scanner`; a finding `allowed` says may go
    /// (a secret bound for a host its policy names) is left out.
    pub fn review(
        &self,
        scanner: &LeakScanner,
        text: &str,
        allowed: impl Fn(&Finding) -> bool,
    ) -> Review {
        let mut review = Review {
            action: LeakAction::Ignore,
            findings: Vec::new(),
            replace: Vec::new(),
        };
        let findings = scanner.scan(text);
        // A credential pattern matching an allowed secret's own bytes is that secret.
        let allowed_spans: Vec<std::ops::Range<usize>> = findings
            .iter()
            .filter(|f| f.secret.is_some() && allowed(f))
            .map(|f| f.value.clone())
            .collect();
        for finding in findings {
            let action = self.action(finding.kind);
            let on_allowed = allowed_spans
                .iter()
                .any(|s| s.start < finding.value.end && finding.value.start < s.end);
            if action == LeakAction::Ignore || on_allowed || allowed(&finding) {
                continue;
            }
            if action == LeakAction::Sanitize
                && let Some(value) = text.get(finding.value.clone())
            {
                review.replace.push((value.to_owned(), finding.kind));
            }
            review.action = review.action.max(action);
            review.findings.push(finding);
        }
        // Longest first, so a credential holding another is replaced whole.
        review
            .replace
            .sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        review.replace.dedup();
        review
    }
}

impl Review {
    /// `text` with every sanitized credential replaced by `[redacted KIND]`.
    pub fn sanitize(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (value, kind) in &self.replace {
            out = out.replace(value.as_str(), &format!("[redacted {kind}]"));
        }
        out
    }

    /// The kinds found, each once, with the secrets' names: `secret DEPLOY_TOKEN, jwt`.
    pub fn describe(&self) -> String {
        let mut seen: Vec<String> = Vec::new();
        for f in &self.findings {
            let what = match &f.secret {
                Some(name) => format!("the secret {name}"),
                None => format!("what looks like a credential ({})", f.kind),
            };
            if !seen.contains(&what) {
                seen.push(what);
            }
        }
        seen.join(", ")
    }
}
