//! Reading and rewriting the head of one proxied HTTP request: `CONNECT host:port` for
//! tunnels (HTTPS) or an absolute URI (`GET http://host/path`) for plain HTTP.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest request head the proxy accepts.
pub(crate) const MAX_HEAD: usize = 16 * 1024;

/// What a client asked the proxy for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Open a tunnel to `host:port`.
    Connect { host: String, port: u16 },
    /// Forward one plain-HTTP request; `head` is already rewritten for the origin server.
    Forward {
        method: String,
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

/// Why a request head was refused, with the HTTP status to answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: u16,
    pub reason: String,
}

fn bad(reason: impl Into<String>) -> Refusal {
    Refusal {
        status: 400,
        reason: reason.into(),
    }
}

/// Reads until the end of the head. Returns the head and any bytes read past it (the start
/// of a body or of tunnelled data). `Ok(None)` when the client closed without a request.
pub(crate) async fn read_head<R: AsyncRead + Unpin>(
    reader: &mut R,
) -> Result<Option<(Vec<u8>, Vec<u8>)>, Refusal> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = reader
            .read(&mut chunk)
            .await
            .map_err(|e| bad(format!("reading the request: {e}")))?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(bad("the connection closed inside the request head"))
            };
        }
        let scan_from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_end(&buf[scan_from..]) {
            let end = scan_from + end;
            let rest = buf.split_off(end);
            return Ok(Some((buf, rest)));
        }
        if buf.len() > MAX_HEAD {
            return Err(Refusal {
                status: 431,
                reason: format!("the request head is larger than {MAX_HEAD} bytes"),
            });
        }
    }
}

/// Index just past the blank line ending a head.
fn find_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parses a head into what the client wants.
pub(crate) fn parse(head: &[u8]) -> Result<Request, Refusal> {
    let text = std::str::from_utf8(head).map_err(|_| bad("the request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(format!("malformed request line {line:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(bad(format!("unsupported HTTP version {version:?}")));
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target)
            .ok_or_else(|| bad(format!("CONNECT needs host:port, got {target:?}")))?;
        return Ok(Request::Connect { host, port });
    }
    let url = url::Url::parse(target).map_err(|_| {
        bad(format!(
            "the proxy needs an absolute http:// URI or CONNECT, got {target:?}"
        ))
    })?;
    if url.scheme() != "http" {
        return Err(bad(format!(
            "{} URLs go through CONNECT; only http:// is forwarded directly",
            url.scheme()
        )));
    }
    let host = url
        .host_str()
        .ok_or_else(|| bad(format!("no host in {target:?}")))?
        .to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let mut path = url.path().to_owned();
    if let Some(query) = url.query() {
        path.push('?');
        path.push_str(query);
    }
    // The host the policy allowed is the host the origin is told: a client's own `Host`
    // header (which could name another virtual host behind the same address) is replaced.
    let mut out = format!(
        "{method} {path} {version}\r\nHost: {}\r\n",
        authority(&host, port)
    );
    for header in lines.filter(|l| !l.is_empty()) {
        // A bare CR or LF, or a folded continuation line, could smuggle a header past this
        // rewrite to an origin that splits lines differently.
        if header.contains(['\r', '\n']) || header.starts_with([' ', '\t']) {
            return Err(bad("a header line holds a bare CR or LF, or is folded"));
        }
        let name = header.split(':').next().unwrap_or_default().trim();
        if HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h))
            || name.eq_ignore_ascii_case("host")
        {
            continue;
        }
        out.push_str(header);
        out.push_str("\r\n");
    }
    // One request per connection: a client cannot reuse this upstream for another host.
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request::Forward {
        method: method.to_owned(),
        host,
        port,
        head: out.into_bytes(),
    })
}

/// Headers meant for the proxy itself, never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "proxy-connection",
    "proxy-authorization",
    "connection",
    "keep-alive",
];

/// `host:port` or `[v6]:port`.
fn split_authority(target: &str) -> Option<(String, u16)> {
    let (host, port) = target.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() || host.contains(['/', ' ', '@']) {
        return None;
    }
    Some((host.to_owned(), port))
}

fn authority(host: &str, port: u16) -> String {
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    if port == 80 {
        host
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::{Request, parse};

    #[test]
    fn connect_and_absolute_uri() {
        assert_eq!(
            parse(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n"),
            Ok(Request::Connect {
                host: "pypi.org".into(),
                port: 443
            })
        );
        assert_eq!(
            parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n"),
            Ok(Request::Connect {
                host: "::1".into(),
                port: 8443
            })
        );
        let Ok(Request::Forward { host, port, head, .. }) = parse(
            b"GET http://example.com:8080/a?b=1 HTTP/1.1\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        ) else {
            panic!("not forwarded");
        };
        assert_eq!((host.as_str(), port), ("example.com", 8080));
        assert_eq!(
            String::from_utf8_lossy(&head),
            "GET /a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let Ok(Request::Forward { head, .. }) = parse(
            b"GET http://allowed.example/ HTTP/1.1\r\nHost: internal.example\r\nhOsT: other\r\n\r\n",
        ) else {
            panic!("not forwarded");
        };
        assert_eq!(
            String::from_utf8_lossy(&head),
            "GET / HTTP/1.1\r\nHost: allowed.example\r\nConnection: close\r\n\r\n",
            "the client's Host headers are replaced by the URL's host"
        );
    }

    #[test]
    fn refusals_name_the_problem() {
        for (head, needle) in [
            (&b"GET /relative HTTP/1.1\r\n\r\n"[..], "absolute"),
            (b"GET https://x.org/ HTTP/1.1\r\n\r\n", "CONNECT"),
            (b"CONNECT nohostport HTTP/1.1\r\n\r\n", "host:port"),
            (b"GARBAGE\r\n\r\n", "malformed"),
            (
                b"GET http://a.example/ HTTP/1.1\r\nX: a\nHost: b.example\r\n\r\n",
                "bare CR or LF",
            ),
            (
                b"GET http://a.example/ HTTP/1.1\r\nX: a\r\n Host: b.example\r\n\r\n",
                "folded",
            ),
        ] {
            let refusal = parse(head).err().map(|r| r.reason).unwrap_or_default();
            assert!(refusal.contains(needle), "{refusal}");
        }
    }
}
