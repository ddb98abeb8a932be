//! Escape suite, 5. Network in `allowlist` mode: only HTTP/HTTPS through the host proxy, only
//! to allowed hosts.

use super::*;
use reef_sandbox::{NetRequest, NetVerdict};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::mpsc;

fn allowlist(domains: &[&str]) -> SandboxPolicy {
    SandboxPolicy {
        network: NetworkMode::Allowlist,
        allow_domains: domains.iter().map(|d| (*d).to_owned()).collect(),
        ..confined_policy()
    }
}

/// A host HTTP server on loopback answering `conns` connections with `body`; sends each
/// request line it received.
fn origin(conns: usize, body: &'static str) -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..conns {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap() == 0 || header == "\r\n" {
                    break;
                }
            }
            let _ = tx.send(line.trim_end().to_owned());
            let mut stream: TcpStream = stream;
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(response.as_bytes()).unwrap();
        }
    });
    (port, rx)
}

async fn run_logged(policy: SandboxPolicy, req: ExecRequest) -> (ExecOutput, Vec<NetRequest>) {
    let sandbox = Sandbox::new(policy);
    let args = req.args.clone();
    let out = sandbox
        .run(req)
        .await
        .unwrap_or_else(|e| panic!("the sandbox could not run {args:?}: {e}"));
    (out, sandbox.network_log())
}

#[tokio::test]
async fn non_allowed_domain_in_allowlist_mode_is_refused() {
    let fx = Fixture::new();
    // Plain HTTP through the proxy. Observed: "curl: (22) The requested URL returned error:
    // 403" — the proxy answered "reef sandbox proxy: denied.example is not in
    // sandbox.allow_domains" without resolving the name.
    let (out, log) = run_logged(
        allowlist(&["pypi.org"]),
        fx.req("curl -sSf --max-time 20 http://denied.example/"),
    )
    .await;
    assert_fails_with(&out, "curl http://denied.example/", &["403"]);
    // HTTPS goes through CONNECT. Observed: "curl: (56) CONNECT tunnel failed, response 403".
    let (out2, log2) = run_logged(
        allowlist(&["pypi.org"]),
        fx.req("curl -sSf --max-time 20 https://denied.example/"),
    )
    .await;
    assert_fails_with(&out2, "curl https://denied.example/", &["403"]);
    for (log, method) in [(log, "GET"), (log2, "CONNECT")] {
        assert!(
            log.iter().any(|r| r.method == method
                && r.host == "denied.example"
                && matches!(&r.verdict, NetVerdict::Denied(why) if why.contains("allow_domains"))),
            "the proxy log has no refused {method} for denied.example: {log:?}"
        );
    }
}

#[tokio::test]
async fn allowlist_mode_has_no_way_around_the_proxy() {
    let fx = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let policy = || allowlist(&["127.0.0.1"]);
    // Direct TCP, ignoring the proxy variables: the namespace has only its own loopback, and
    // Landlock allows connect to the relay's port only. Observed: "bash: connect: Permission
    // denied" (Landlock, EACCES), at once.
    let (out, _) = run_logged(policy(), fx.req("bash -c 'echo > /dev/tcp/192.0.2.1/80'")).await;
    assert!(!out.timed_out, "the connect was attempted; {}", show(&out));
    assert_fails_with(&out, "direct /dev/tcp to 192.0.2.1:80", NET_BLOCKED);
    // The same with curl told to bypass the proxy. Observed: "curl: (7) Failed to connect to
    // 192.0.2.1 port 80 after 0 ms: Couldn't connect to server".
    let (out, _) = run_logged(
        policy(),
        fx.req("curl -sS --noproxy '*' --max-time 20 http://192.0.2.1/"),
    )
    .await;
    assert!(!out.timed_out, "the connect was attempted; {}", show(&out));
    assert_fails_with(&out, "curl --noproxy to 192.0.2.1", &["Couldn't connect"]);
    // The host's loopback is another namespace's: a host listener is unreachable even though
    // 127.0.0.1 is allowed through the proxy. Observed: "Permission denied" (Landlock).
    let mut req = fx.req(r#"bash -c 'echo hi > /dev/tcp/127.0.0.1/$PORT'"#);
    req.env.push(("PORT".into(), port.to_string()));
    let (out, _) = run_logged(policy(), req).await;
    assert_fails_with(&out, "direct /dev/tcp to the host's loopback", NET_BLOCKED);
    listener.set_nonblocking(true).unwrap();
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "the host listener received a direct connection"
    );
    // UDP (and so DNS) is refused outright. Observed: "PermissionError: [Errno 1] Operation
    // not permitted" from socket(AF_INET, SOCK_DGRAM) (seccomp).
    let (out, _) = run_logged(
        policy(),
        fx.req(
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\
             .sendto(b\"x\", (\"1.1.1.1\", 53))'",
        ),
    )
    .await;
    assert_fails_with(&out, "python3 udp sendto 1.1.1.1:53", NET_BLOCKED);
    // So is IPv6. Observed: "Operation not permitted" (seccomp).
    let (out, _) = run_logged(
        policy(),
        fx.req("python3 -c 'import socket; socket.socket(socket.AF_INET6)'"),
    )
    .await;
    assert_fails_with(&out, "python3 AF_INET6 socket", NET_BLOCKED);
}

#[tokio::test]
async fn allowed_name_resolving_to_a_private_address_is_refused() {
    // `localhost` is on the list, but it resolves to loopback: the proxy refuses to carry a
    // sandbox into the host's own services (the DNS-rebinding case). Observed: "curl: (22)
    // The requested URL returned error: 403"; log reason "localhost resolves to 127.0.0.1
    // (loopback); allow_domains must name that address to reach it".
    let fx = Fixture::new();
    let (port, requests) = origin(1, "host-secret-service");
    let (out, log) = run_logged(
        allowlist(&["localhost"]),
        fx.req(&format!("curl -sSf --max-time 20 http://localhost:{port}/")),
    )
    .await;
    assert_fails_with(&out, "curl http://localhost:PORT/", &["403"]);
    assert!(
        !out.stdout.contains("host-secret-service"),
        "{}",
        show(&out)
    );
    assert!(requests.try_recv().is_err(), "the origin got a request");
    assert!(
        log.iter().any(|r| r.host == "localhost"
            && matches!(&r.verdict, NetVerdict::Denied(why) if why.contains("loopback"))),
        "{log:?}"
    );
}

#[tokio::test]
async fn allowed_host_is_reached_through_the_proxy() {
    // Positive control for the cases above: the same sandbox reaches an allowed host, by plain
    // HTTP (absolute URI, rewritten to origin form) and through a CONNECT tunnel.
    let fx = Fixture::new();
    let (port, requests) = origin(2, "hello-through-the-proxy");
    let command = format!(
        "curl -sSf --max-time 20 http://127.0.0.1:{port}/plain && echo && \
         curl -sSf --max-time 20 --proxytunnel http://127.0.0.1:{port}/tunnel"
    );
    let (out, log) = run_logged(allowlist(&["127.0.0.1"]), fx.req(&command)).await;
    assert_succeeds(&out, "curl to an allowed host");
    assert_eq!(
        out.stdout,
        "hello-through-the-proxy\nhello-through-the-proxy",
        "{}",
        show(&out)
    );
    let seen: Vec<String> = requests.try_iter().collect();
    assert_eq!(seen, ["GET /plain HTTP/1.1", "GET /tunnel HTTP/1.1"]);
    let methods: Vec<(&str, &str, u16, &NetVerdict)> = log
        .iter()
        .map(|r| (r.method.as_str(), r.host.as_str(), r.port, &r.verdict))
        .collect();
    assert_eq!(
        methods,
        [
            ("GET", "127.0.0.1", port, &NetVerdict::Allowed),
            ("CONNECT", "127.0.0.1", port, &NetVerdict::Allowed)
        ]
    );
}

/// Descriptors this process has open now.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[tokio::test]
async fn thousands_of_idle_connections_do_not_exhaust_the_proxy() {
    use reef_sandbox::{DomainAllowList, MAX_PROXY_CONNECTIONS, NetProxy};
    use tokio::io::AsyncReadExt;
    let proxy = NetProxy::start(DomainAllowList::new(&["127.0.0.1"])).unwrap();
    let before = open_fds();
    // 2,000 clients connect and send nothing, as a sandboxed process could.
    let mut idle = Vec::new();
    for _ in 0..2000 {
        idle.push(
            tokio::net::UnixStream::connect(proxy.socket())
                .await
                .unwrap(),
        );
    }
    // The last one is over the limit: it is told so and closed at once, without waiting
    // for the idle ones to time out.
    let mut answer = String::new();
    idle.last_mut()
        .unwrap()
        .read_to_string(&mut answer)
        .await
        .unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 503") && answer.contains("connections open at once"),
        "{answer:?}"
    );
    // This process holds the 2,000 client ends; the proxy's own ends are bounded by the limit
    // (plus the few refused ones whose answers are still being written).
    let held = open_fds() - before;
    assert!(
        held <= 2000 + MAX_PROXY_CONNECTIONS + 64,
        "{held} descriptors for 2,000 connections (limit {MAX_PROXY_CONNECTIONS})"
    );
    // Once they close, the proxy serves again.
    drop(idle);
    let (port, rx) = origin(1, "after");
    let mut client = loop {
        let mut c = tokio::net::UnixStream::connect(proxy.socket())
            .await
            .unwrap();
        use tokio::io::AsyncWriteExt;
        c.write_all(format!("GET http://127.0.0.1:{port}/ok HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut head = [0u8; 12];
        if c.read_exact(&mut head).await.is_ok() && &head == b"HTTP/1.1 200" {
            break c;
        }
        // The slots of the closed connections are released as their tasks notice the close.
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut rest = String::new();
    client.read_to_string(&mut rest).await.unwrap();
    assert!(rest.ends_with("after"), "{rest}");
    assert_eq!(rx.recv().unwrap(), "GET /ok HTTP/1.1");
}
