//! Escape suite, 3. + 4. Network.

use super::*;

// ---------------------------------------------------------------------------------------
// 3. + 4. Network
// ---------------------------------------------------------------------------------------

/// A `/dev/tcp` or `/dev/udp` write from bash inside the sandbox to 127.0.0.1:`port`.
fn bash_send(fx: &Fixture, proto: &str, port: u16) -> ExecRequest {
    let mut req = fx.req(&format!(
        r#"bash -c 'echo hi > /dev/{proto}/127.0.0.1/$PORT'"#
    ));
    req.env.push(("PORT".into(), port.to_string()));
    req
}

#[tokio::test]
async fn tcp_connect_in_none_mode_fails() {
    let fx = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Observed: "bash: socket: Operation not permitted" (seccomp allows only AF_UNIX; exit 1).
    let out = run_with(confined_policy(), bash_send(&fx, "tcp", port)).await;
    assert_fails_with(&out, "echo > /dev/tcp/127.0.0.1/PORT", NET_BLOCKED);
    // A loopback connect completes in the kernel before connect() returns, so a connection
    // made by the finished command would be queued now.
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("the host listener received a connection from {peer}"),
        Err(e) => panic!("accept: {e}"),
    }
}

#[tokio::test]
async fn udp_send_in_none_mode_fails() {
    let fx = Fixture::new();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    // Observed: "bash: socket: Operation not permitted" (seccomp; exit 1).
    let out = run_with(confined_policy(), bash_send(&fx, "udp", port)).await;
    assert_fails_with(&out, "echo > /dev/udp/127.0.0.1/PORT", NET_BLOCKED);
    // Loopback delivery is synchronous: a datagram sent by the finished command is queued.
    socket.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    match socket.recv_from(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((n, peer)) => panic!("the host socket received {n} bytes from {peer}"),
        Err(e) => panic!("recv: {e}"),
    }
}

#[tokio::test]
async fn dns_and_outbound_connect_in_none_mode_fail() {
    let fx = Fixture::new();
    // Observed: exit 2 (not found), no output: no resolver is reachable.
    let out = fx.run("getent hosts example.com").await;
    assert_sandbox_built(&out, "getent hosts example.com");
    assert!(
        !out.success() && out.stdout.is_empty(),
        "getent resolved example.com; {}",
        show(&out)
    );
    // 192.0.2.1 is TEST-NET-1: a connect can only fail, but must fail at once, not time out.
    // Observed: "bash: socket: Operation not permitted" (seccomp; exit 1).
    let out = fx.run("bash -c 'echo > /dev/tcp/192.0.2.1/80'").await;
    assert!(!out.timed_out, "the connect was attempted; {}", show(&out));
    assert_fails_with(&out, "echo > /dev/tcp/192.0.2.1/80", NET_BLOCKED);
    // Observed: "PermissionError: [Errno 1] Operation not permitted" from socket(AF_INET).
    let out = fx
        .run(
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\
             .sendto(b\"x\", (\"1.1.1.1\", 53))'",
        )
        .await;
    assert_fails_with(&out, "python3 udp sendto 1.1.1.1:53", NET_BLOCKED);
}

#[tokio::test]
async fn tcp_connect_in_full_mode_reaches_the_listener() {
    // Positive control for `tcp_connect_in_none_mode_fails`: same command, network `full`.
    let fx = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let policy = SandboxPolicy {
        network: NetworkMode::Full,
        ..confined_policy()
    };
    let out = run_with(policy, bash_send(&fx, "tcp", port)).await;
    assert_succeeds(&out, "echo hi > /dev/tcp/127.0.0.1/PORT in full mode");
    listener.set_nonblocking(true).unwrap();
    let (mut stream, _) = listener
        .accept()
        .unwrap_or_else(|e| panic!("no connection reached the listener ({e}); {}", show(&out)));
    stream.set_nonblocking(false).unwrap();
    let mut got = String::new();
    stream.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hi\n");
}
