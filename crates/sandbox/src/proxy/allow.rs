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

/// The hosts both lists allow, as a list of the same form: `allowed` (the sandbox's
/// `allow_domains`) narrowed to what `granted` (an agent's capability `domains`, where `*` is
/// anything) covers. An entry allowed and covered is kept; a granted entry narrower than an
/// allowed one takes its place (`*.github.com` allowed, `api.github.com` granted: only
/// `api.github.com`). The order of `allowed` is kept, then that of `granted`.
pub fn narrow_domains(allowed: &[String], granted: &[String]) -> Vec<String> {
    if granted.iter().any(|g| g.trim() == "*") {
        return allowed.to_vec();
    }
    let mut out: Vec<String> = Vec::new();
    let mut push = |entry: &str| {
        let entry = normalize(entry);
        if !out.contains(&entry) {
            out.push(entry);
        }
    };
    for a in allowed {
        if granted.iter().any(|g| covers(g, a)) {
            push(a);
        }
    }
    for g in granted {
        if allowed.iter().any(|a| covers(a, g)) {
            push(g);
        }
    }
    out
}

/// Whether pattern `p` allows every host `q` allows (`*.x` covers `a.x` and `*.a.x`).
fn covers(p: &str, q: &str) -> bool {
    let (p, q) = (normalize(p), normalize(q));
    if p == q {
        return true;
    }
    let Some(suffix) = p.strip_prefix("*.") else {
        return false;
    };
    let q = q.strip_prefix("*.").unwrap_or(&q);
    q.ends_with(&format!(".{suffix}"))
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
    use super::{DomainAllowList, narrow_domains};

    fn list(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|e| (*e).to_owned()).collect()
    }

    #[test]
    fn a_grant_narrows_the_allowed_domains_and_never_widens_them() {
        let allowed = list(&["pypi.org", "*.github.com", "example.net"]);
        assert_eq!(narrow_domains(&allowed, &list(&["*"])), allowed);
        assert_eq!(
            narrow_domains(&allowed, &list(&["api.github.com", "PyPI.org", "evil.com"])),
            list(&["pypi.org", "api.github.com"]),
            "only what both allow"
        );
        assert_eq!(
            narrow_domains(&allowed, &list(&["*.github.com"])),
            list(&["*.github.com"])
        );
        assert_eq!(
            narrow_domains(&list(&["api.github.com"]), &list(&["*.github.com"])),
            list(&["api.github.com"]),
            "a wider grant keeps the narrower allowance"
        );
        assert_eq!(
            narrow_domains(&list(&["*.github.com"]), &list(&["*.api.github.com"])),
            list(&["*.api.github.com"])
        );
        assert!(
            narrow_domains(&allowed, &[]).is_empty(),
            "no grant, nothing"
        );
        assert!(
            narrow_domains(&list(&["github.com"]), &list(&["*.github.com"])).is_empty(),
            "*.x does not cover x itself"
        );
    }

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
