//! reef-security: pure security policy for reef (no I/O): SSRF rules for outbound requests.
//!
//! Callers classify addresses with [`classify_ip`] and ask an [`SsrfPolicy`] whether a URL
//! (before resolution) and its resolved addresses (before connecting) may be used.

mod ip;
mod ssrf;

pub use ip::{AddressClass, classify_ip};
pub use ssrf::{SsrfError, SsrfPolicy};
