//! reef-security: Pure security policy for reef: SSRF rules for outbound requests.
