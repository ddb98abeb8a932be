//! Tests for `SsrfPolicy`.

use reef_security::{AddressClass, SsrfError, SsrfPolicy};
use std::net::IpAddr;
use url::Url;

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn public_urls_pass() {
    let policy = SsrfPolicy::default();
    policy.check_url(&url("https://example.com/x")).unwrap();
    policy.check_url(&url("http://93.184.216.34/")).unwrap();
    policy
        .check_url(&url("http://[2606:4700:4700::1111]/"))
        .unwrap();
}

#[test]
fn non_http_schemes_are_refused() {
    let policy = SsrfPolicy {
        allow_private: true,
        ..SsrfPolicy::default()
    };
    for u in ["file:///etc/passwd", "ftp://example.com/", "gopher://x/"] {
        let err = policy.check_url(&url(u)).unwrap_err();
        assert!(
            matches!(err, SsrfError::UnsupportedScheme { .. }),
            "{u}: {err}"
        );
    }
}

#[test]
fn literal_private_addresses_are_refused_with_host_and_class() {
    let policy = SsrfPolicy::default();
    let err = policy
        .check_url(&url("http://127.0.0.1:8080/"))
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("127.0.0.1"), "{msg}");
    assert!(msg.contains("loopback"), "{msg}");
    assert!(matches!(
        err,
        SsrfError::BlockedAddress {
            class: AddressClass::Loopback,
            ..
        }
    ));

    let err = policy
        .check_url(&url("http://169.254.169.254/latest/meta-data"))
        .unwrap_err();
    assert!(err.to_string().contains("link-local"), "{err}");

    let err = policy
        .check_url(&url("http://[::ffff:7f00:1]/"))
        .unwrap_err();
    assert!(err.to_string().contains("loopback"), "{err}");
}

#[test]
fn numeric_host_tricks_are_normalised_by_the_url_parser() {
    let policy = SsrfPolicy::default();
    for u in ["http://2130706433/", "http://0x7f.1/", "http://127.1/"] {
        let err = policy.check_url(&url(u)).unwrap_err();
        assert!(err.to_string().contains("loopback"), "{u}: {err}");
    }
}

#[test]
fn localhost_names_are_refused() {
    let policy = SsrfPolicy::default();
    for u in [
        "http://localhost/",
        "http://LOCALHOST:3000/",
        "http://api.localhost/",
        "http://localhost./",
    ] {
        let err = policy.check_url(&url(u)).unwrap_err();
        assert!(matches!(err, SsrfError::LocalhostName { .. }), "{u}: {err}");
    }
}

#[test]
fn allow_private_permits_private_but_not_special_classes() {
    let policy = SsrfPolicy {
        allow_private: true,
        ..SsrfPolicy::default()
    };
    policy.check_url(&url("http://127.0.0.1/")).unwrap();
    policy.check_url(&url("http://localhost/")).unwrap();
    policy.check_url(&url("http://10.0.0.1/")).unwrap();
    let err = policy.check_url(&url("http://0.0.0.0/")).unwrap_err();
    assert!(err.to_string().contains("unspecified"), "{err}");
    let err = policy.check_url(&url("http://224.0.0.1/")).unwrap_err();
    assert!(err.to_string().contains("multicast"), "{err}");
}

#[test]
fn resolved_addresses_must_all_be_allowed() {
    let policy = SsrfPolicy::default();
    policy
        .check_resolved("example.com", &ips(&["93.184.216.34", "2606:2800::1"]))
        .unwrap();
    let err = policy
        .check_resolved("evil.example", &ips(&["93.184.216.34", "10.0.0.5"]))
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("evil.example"), "{msg}");
    assert!(msg.contains("10.0.0.5"), "{msg}");
    assert!(msg.contains("private"), "{msg}");
}

#[test]
fn empty_resolution_is_refused() {
    let err = SsrfPolicy::default()
        .check_resolved("nowhere.example", &[])
        .unwrap_err();
    assert_eq!(
        err,
        SsrfError::NoAddresses {
            host: "nowhere.example".into()
        }
    );
}

#[test]
fn allow_hosts_exempts_exact_and_wildcard_names() {
    let policy = SsrfPolicy {
        allow_private: false,
        allow_hosts: vec!["intranet.corp".into(), "*.svc.local".into()],
    };
    policy
        .check_resolved("Intranet.Corp", &ips(&["10.0.0.1"]))
        .unwrap();
    policy
        .check_resolved("db.svc.local", &ips(&["10.0.0.2"]))
        .unwrap();
    policy
        .check_resolved("svc.local", &ips(&["10.0.0.2"]))
        .unwrap();
    policy
        .check_resolved("other.corp", &ips(&["10.0.0.1"]))
        .unwrap_err();
    policy
        .check_resolved("notsvc.local", &ips(&["10.0.0.1"]))
        .unwrap_err();
}
