//! reef-security: pure security policy for reef (no I/O): SSRF rules for outbound requests,
//! the command rules that decide which shell commands wait for the operator's approval, and
//! secret fingerprints that recognise a secret's value without keeping it, and webhook
//! signatures (GitHub's and reef's HMAC-SHA256), the audit log's keyed hash chain, and
//! capability tokens (biscuit) with the one check every call of an agent passes, the leak
//! detector, the vault's format and cryptography, and the HTTP API's scoped tokens and
//! their rate window.
//!
//! Callers classify addresses with [`classify_ip`] and ask an [`SsrfPolicy`] whether a URL
//! (before resolution) and its resolved addresses (before connecting) may be used.

pub mod api_token;
pub mod audit;
pub mod cap;
mod commands;
mod fingerprint;
mod ip;
pub mod leak;
pub mod safety;
mod ssrf;
pub mod vault;
pub mod webhook;

pub use commands::{CommandDecision, CommandRules, DEFAULT_DANGEROUS};
pub use fingerprint::{fingerprint, fingerprint_matches, redact_fingerprinted};
pub use ip::{AddressClass, classify_ip};
pub use ssrf::{SsrfError, SsrfPolicy};
