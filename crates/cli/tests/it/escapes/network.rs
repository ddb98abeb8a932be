//! The allow-list proxy, reached from `reef sandbox run --net allowlist`: the origin is told
//! the host that was allowed, and thousands of idle connections do not exhaust reef.

use crate::reef;
use reef_test_support::TestHome;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

/// A loopback HTTP server answering `conns` requests with 200 "ok"; sends each request's
/// `Host` header.
fn origin(conns: usize) -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..conns {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut host = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("host:") {
                    host = value.trim().to_owned();
                }
            }
            let _ = tx.send(host);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (port, rx)
}

#[test]
fn the_origin_is_told_the_allowed_host_not_the_clients() {
    let home = TestHome::new();
    let (port, hosts) = origin(2);
    let url = format!("http://127.0.0.1:{port}/");
    reef(&home)
        .args([
            "sandbox",
            "run",
            "--net",
            "allowlist",
            "--allow-domain",
            "127.0.0.1",
            "--",
        ])
        .args([
            "curl",
            "-sS",
            "--max-time",
            "20",
            "-H",
            "Host: internal.example",
            &url,
        ])
        .assert()
        .success()
        .stdout("ok");
    assert_eq!(hosts.recv().unwrap(), format!("127.0.0.1:{port}"));
    // Positive control: on the host's network the same request carries the client's header.
    reef(&home)
        .args(["sandbox", "run", "--net", "full", "--"])
        .args([
            "curl",
            "-sS",
            "--max-time",
            "20",
            "-H",
            "Host: internal.example",
            &url,
        ])
        .assert()
        .success();
    assert_eq!(hosts.recv().unwrap(), "internal.example");
}

/// Opens 2,000 connections to the proxy relay and holds them until `release` appears, then
/// makes one request through the proxy.
const HOLD: &str = r#"
import os, socket, sys, time, urllib.request
conns = []
for _ in range(2000):
    conns.append(socket.create_connection(("127.0.0.1", 3128), timeout=20))
# Written whole, then renamed: the test reads it as soon as the name exists.
with open("holding.tmp", "w") as f:
    f.write(str(len(conns)))
os.rename("holding.tmp", "holding")
while not os.path.exists("release"):
    time.sleep(0.02)
for c in conns:
    c.close()
for attempt in range(200):
    try:
        print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())
        break
    except Exception as e:
        time.sleep(0.05)
"#;

fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn thousands_of_idle_connections_do_not_exhaust_reef() {
    let home = TestHome::new();
    let (port, _hosts) = origin(1);
    let url = format!("http://127.0.0.1:{port}/after");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_reef"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("REEF_HOME", home.reef_home())
        .current_dir(home.workspace())
        // Room for 2,000 sockets in the command and 4,000 relay threads in the sandbox, so
        // that the only limit left is the proxy's own.
        .args([
            "-c",
            "sandbox.open_files=4096",
            "-c",
            "sandbox.max_processes=5000",
        ])
        .args([
            "sandbox",
            "run",
            "--net",
            "allowlist",
            "--allow-domain",
            "127.0.0.1",
        ])
        .args(["--timeout", "120s", "--", "python3", "-c", HOLD, &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let holding = home.workspace().join("holding");
    let mut waited = 0;
    while !holding.exists() && waited < 6000 {
        std::thread::sleep(Duration::from_millis(20));
        waited += 1;
    }
    let opened = std::fs::read_to_string(&holding).unwrap_or_default();
    let held = descriptors(child.id());
    std::fs::write(home.workspace().join("release"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Positive control: the command really held 2,000 connections to the proxy.
    assert_eq!(opened, "2000", "{stderr}");
    assert!(
        held < 1000,
        "reef held {held} descriptors while 2,000 connections were open"
    );
    // reef kept serving: the request after them went through.
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), "ok", "{stderr}");
}
