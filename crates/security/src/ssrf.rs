//! SSRF policy: which URLs and resolved addresses an outbound request may use.

use crate::ip::{AddressClass, classify_ip};
use std::net::IpAddr;
use url::{Host, Url};

/// Why an outbound request was refused. Each message names the host and, where relevant,
/// the address and its class, so the caller (or a model) can see what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SsrfError {
    /// Only `http` and `https` URLs may be fetched; use another tool for other schemes.
    #[error("scheme `{scheme}` is not allowed; only http and https URLs may be fetched")]
    UnsupportedScheme { scheme: String },
    /// The URL has no host; pass an absolute http(s) URL with a host name.
    #[error("URL `{url}` has no host")]
    MissingHost { url: String },
    /// The host is a `localhost` name, which always reaches this machine.
    #[error(
        "host {host} is a localhost name (loopback); requests to loopback addresses are refused \
         unless private addresses are allowed"
    )]
    LocalhostName { host: String },
    /// The host is (or resolves to) an address of a refused class.
    #[error(
        "host {host} resolves to {addr}, a {class} address; requests to {class} addresses are refused{hint}"
    )]
    BlockedAddress {
        host: String,
        addr: IpAddr,
        class: AddressClass,
        /// How the refusal could be lifted, if at all (empty when it cannot).
        hint: String,
    },
    /// The host resolved to no addresses at all; check the name.
    #[error("host {host} resolved to no addresses")]
    NoAddresses { host: String },
}

/// Rules for outbound requests. The default refuses everything but public addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SsrfPolicy {
    /// Allow loopback, RFC 1918, link-local, CGNAT and IPv6 unique-local addresses.
    pub allow_private: bool,
    /// Host names exempt from address checks. An entry matches the host exactly
    /// (case-insensitive); an entry starting with `*.` or `.` also matches any subdomain.
    pub allow_hosts: Vec<String>,
}

impl SsrfPolicy {
    /// Checks a URL before resolution: the scheme must be http/https, a literal IP host must
    /// be of an allowed class, and `localhost` / `*.localhost` are treated as loopback.
    pub fn check_url(&self, url: &Url) -> Result<(), SsrfError> {
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(SsrfError::UnsupportedScheme {
                scheme: scheme.to_owned(),
            });
        }
        let Some(host) = url.host() else {
            return Err(SsrfError::MissingHost {
                url: url.to_string(),
            });
        };
        let host_str = url.host_str().unwrap_or_default();
        if self.host_allowed(host_str) {
            return Ok(());
        }
        match host {
            Host::Ipv4(v4) => self.check_addr(host_str, IpAddr::V4(v4)),
            Host::Ipv6(v6) => self.check_addr(host_str, IpAddr::V6(v6)),
            Host::Domain(name) => {
                if is_localhost_name(name) && !self.allow_private {
                    Err(SsrfError::LocalhostName {
                        host: name.to_owned(),
                    })
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Checks the addresses a host resolved to, before connecting: every one must be allowed
    /// (a single refused address refuses the host, so DNS cannot mix in an internal address).
    pub fn check_resolved(&self, host: &str, addrs: &[IpAddr]) -> Result<(), SsrfError> {
        if self.host_allowed(host) {
            return Ok(());
        }
        if addrs.is_empty() {
            return Err(SsrfError::NoAddresses {
                host: host.to_owned(),
            });
        }
        addrs
            .iter()
            .try_for_each(|addr| self.check_addr(host, *addr))
    }

    /// Whether an address class is allowed under this policy.
    pub fn class_allowed(&self, class: AddressClass) -> bool {
        class == AddressClass::Public || (self.allow_private && class.is_private_network())
    }

    fn check_addr(&self, host: &str, addr: IpAddr) -> Result<(), SsrfError> {
        let class = classify_ip(addr);
        if self.class_allowed(class) {
            return Ok(());
        }
        let hint = if class.is_private_network() {
            " unless private addresses are allowed".to_owned()
        } else {
            String::new()
        };
        Err(SsrfError::BlockedAddress {
            host: host.to_owned(),
            addr,
            class,
            hint,
        })
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = normalize_host(host);
        self.allow_hosts.iter().any(|entry| {
            let entry = normalize_host(entry);
            if let Some(suffix) = entry.strip_prefix("*.").or_else(|| entry.strip_prefix('.')) {
                host == suffix || host.ends_with(&format!(".{suffix}"))
            } else {
                host == entry
            }
        })
    }
}

fn normalize_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

fn is_localhost_name(name: &str) -> bool {
    let name = normalize_host(name);
    name == "localhost" || name.ends_with(".localhost")
}
