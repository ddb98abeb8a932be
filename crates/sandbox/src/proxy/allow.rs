//! The domain allow-list of the `allowlist` network mode: which hosts the proxy lets a
//! sandboxed process reach.

use std::net::IpAddr;

/// Hosts a sandbox may reach through the proxy: exact names (`pypi.org`), suffix patterns
/// (`*.github.com`, which matches `api.github.com` and `a.b.github.com` but not `github.com`)
/// and IP literals (`10.0.0.5`, which the proxy then connects to even though it is private).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainAllowList {
    exact: Vec<String>,
    suffixes: Vec<String>,
}

impl DomainAllowList {
    pub fn new<S: AsRef<str>>(entries: &[S]) -> Self {
        let mut list = Self::default();
        for entry in entries {
            let entry = normalize(entry.as_ref());
            match entry.strip_prefix("*.") {
                Some(suffix) => list.suffixes.push(format!(".{suffix}")),
                None => list.exact.push(entry),
            }
        }
        list
    }

    /// Whether `host` (a name or an IP literal, IPv6 with or without brackets) is allowed.
    pub fn allows(&self, host: &str) -> bool {
        let host = normalize(host);
        self.exact.contains(&host) || self.suffixes.iter().any(|s| host.ends_with(s.as_str()))
    }

    /// Whether `host` is an IP literal named exactly in the list: the operator chose that
    /// address, so the private-address guard does not apply to it.
    pub fn names_address(&self, host: &str) -> bool {
        let host = normalize(host);
        host.parse::<IpAddr>().is_ok() && self.exact.contains(&host)
    }
}

/// Lower case, no trailing dot, no IPv6 brackets.
fn normalize(host: &str) -> String {
    let host = host.trim().trim_end_matches('.');
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::DomainAllowList;

    #[test]
    fn exact_suffix_and_address_entries() {
        let list = DomainAllowList::new(&["PyPI.org", "*.github.com", "10.0.0.5", "::1"]);
        assert!(list.allows("pypi.org") && list.allows("pypi.org.") && list.allows("PYPI.ORG"));
        assert!(!list.allows("files.pypi.org") && !list.allows("evilpypi.org"));
        assert!(list.allows("api.github.com") && list.allows("a.b.github.com"));
        assert!(!list.allows("github.com") && !list.allows("notgithub.com"));
        assert!(list.allows("10.0.0.5") && list.names_address("10.0.0.5"));
        assert!(list.allows("[::1]") && list.names_address("[::1]"));
        assert!(!list.names_address("pypi.org") && !list.allows("10.0.0.6"));
    }
}
