//! The daemon's own names, and the refusal of a request addressed to any other (DNS
//! rebinding: a page on a name the attacker controls, resolved to this machine, sends the
//! attacker's name as `Host`). The names are the listen address, the loopback names when
//! the daemon listens on loopback or on every address, and `daemon.hosts`; the dashboard
//! and `/mcp` check the same list, with origins.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::Arc;

/// The daemon's own names for a daemon listening on `addr` that also answers to `extra`
/// (`daemon.hosts`: `name` or `name:port`), over https when `tls`.
pub(crate) fn own_names(addr: SocketAddr, extra: &[String], tls: bool) -> reef_dashboard::Own {
    let port = addr.port();
    let scheme = if tls { "https" } else { "http" };
    let mut names = vec![match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    }];
    if addr.ip().is_loopback() || addr.ip().is_unspecified() {
        names.extend(["127.0.0.1", "localhost", "[::1]"].map(String::from));
    }
    names.dedup();
    let mut hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
    let mut origins: Vec<String> = names
        .iter()
        .map(|n| format!("{scheme}://{n}:{port}"))
        .collect();
    // On the scheme's own port a browser names the host without the port.
    if port == if tls { 443 } else { 80 } {
        hosts.extend(names.iter().cloned());
        origins.extend(names.iter().map(|n| format!("{scheme}://{n}")));
    }
    // A configured name is the operator's: with its port as given, or bare and with the
    // daemon's port; by either scheme (a proxy in front may end TLS).
    for name in extra {
        let forms = if has_port(name) {
            vec![name.clone()]
        } else {
            vec![name.clone(), format!("{name}:{port}")]
        };
        for form in forms {
            origins.extend(["http", "https"].map(|s| format!("{s}://{form}")));
            hosts.push(form);
        }
    }
    reef_dashboard::Own {
        hosts,
        origins,
        port,
    }
}

/// Whether `host` (`name`, `name:port`, `[v6]` or `[v6]:port`) carries a port.
fn has_port(host: &str) -> bool {
    match host.rsplit_once(':') {
        Some((name, _)) if host.starts_with('[') => name.ends_with(']'),
        Some((name, _)) => !name.contains(':'),
        None => false,
    }
}

/// Refuses a request whose `Host` is not one of the daemon's names; one without a `Host`
/// passes.
pub(crate) async fn own_host(
    State(own): State<Arc<reef_dashboard::Own>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        // HTTP/2 and absolute-form requests carry it in the URI instead.
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    match host {
        Some(host) if own.hosts.iter().any(|o| o.eq_ignore_ascii_case(host)) => {
            Ok(next.run(request).await)
        }
        Some(host) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "this daemon does not answer to the name `{}`; add it to daemon.hosts if it is \
                 the daemon's own",
                host.escape_debug()
            ),
        )),
        // No browser sends a request without one (HTTP/1.0 clients and in-process callers
        // do): there is no page to be rebound.
        None => Ok(next.run(request).await),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_a_loopback_daemon_and_configured_ones() {
        let own = own_names(
            "127.0.0.1:7447".parse().unwrap(),
            &["reef.example.com".into(), "[fd00::1]:9000".into()],
            true,
        );
        for host in [
            "127.0.0.1:7447",
            "localhost:7447",
            "[::1]:7447",
            "reef.example.com",
            "reef.example.com:7447",
            "[fd00::1]:9000",
        ] {
            assert!(
                own.hosts.iter().any(|h| h == host),
                "{host}: {:?}",
                own.hosts
            );
        }
        assert!(!own.hosts.iter().any(|h| h == "evil.example:7447"));
        assert!(own.origins.iter().any(|o| o == "https://localhost:7447"));
        assert!(!own.origins.iter().any(|o| o == "http://localhost:7447"));
        assert!(own.origins.iter().any(|o| o == "http://reef.example.com"));
        assert!(has_port("a:1") && has_port("[::1]:2"));
        assert!(!has_port("a") && !has_port("[::1]") && !has_port("::1"));
    }

    #[test]
    fn a_daemon_on_one_address_answers_to_that_address() {
        let own = own_names("192.0.2.7:7447".parse().unwrap(), &[], false);
        assert_eq!(own.hosts, vec!["192.0.2.7:7447".to_owned()]);
        assert_eq!(own.origins, vec!["http://192.0.2.7:7447".to_owned()]);
    }
}
