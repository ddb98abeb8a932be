//! The host side of the `allowlist` network mode: an HTTP/HTTPS proxy on a unix socket that
//! lets a sandbox reach only the allowed domains, refuses private addresses behind allowed
//! names (DNS rebinding), and records every request it sees.

mod allow;
mod head;

pub use allow::{DomainAllowList, narrow_domains};

use head::{Refusal, Request};
use reef_security::{AddressClass, classify_ip};
use serde::Serialize;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Requests kept in a proxy's log (the oldest are dropped first).
const LOG_CAPACITY: usize = 1024;
/// Time a client has to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Time to open the upstream connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Connections one proxy serves at once (each costs reef two descriptors). Beyond it, a new
/// connection is answered `503` and closed at once, so a sandbox opening thousands of idle
/// connections cannot exhaust reef's descriptors.
pub const MAX_CONNECTIONS: usize = 128;

/// What the proxy did with one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "reason", rename_all = "snake_case")]
pub enum NetVerdict {
    /// Forwarded or tunnelled.
    Allowed,
    /// Refused by policy (host not allowed, private address behind an allowed name).
    Denied(String),
    /// Allowed, but the upstream could not be reached, or the request was malformed.
    Failed(String),
}

/// One request a sandboxed process made through the proxy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetRequest {
    /// `CONNECT` for tunnels, otherwise the HTTP method.
    pub method: String,
    pub host: String,
    pub port: u16,
    #[serde(flatten)]
    pub verdict: NetVerdict,
}

type NetLog = Arc<Mutex<VecDeque<NetRequest>>>;

/// A running proxy. Dropping it stops it and removes its socket.
#[derive(Debug)]
pub struct NetProxy {
    dir: PathBuf,
    socket: PathBuf,
    log: NetLog,
    task: JoinHandle<()>,
}

impl NetProxy {
    /// Starts a proxy for `allow` on a fresh socket in a private (0700) directory under the
    /// system temporary directory. Must be called inside a tokio runtime.
    pub fn start(allow: DomainAllowList) -> std::io::Result<NetProxy> {
        let dir = crate::private_dir::create("proxy")?;
        let socket = dir.join("proxy.sock");
        let listener = match UnixListener::bind(&socket) {
            Ok(listener) => listener,
            Err(e) => {
                let _removed = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let log: NetLog = Arc::default();
        let task = tokio::spawn(accept_loop(listener, Arc::new(allow), log.clone()));
        Ok(NetProxy {
            dir,
            socket,
            log,
            task,
        })
    }

    /// The unix socket clients connect to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The requests seen so far, oldest first (at most the last 1,024).
    pub fn log(&self) -> Vec<NetRequest> {
        let log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        log.iter().cloned().collect()
    }
}

impl Drop for NetProxy {
    fn drop(&mut self) {
        self.task.abort();
        let _removed = std::fs::remove_dir_all(&self.dir);
    }
}

async fn accept_loop(listener: UnixListener, allow: Arc<DomainAllowList>, log: NetLog) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut refused: u64 = 0;
    loop {
        match listener.accept().await {
            Ok((mut client, _)) => {
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    refused += 1;
                    if refused == 1 {
                        tracing::warn!(
                            "sandbox proxy: {MAX_CONNECTIONS} connections are open; refusing more"
                        );
                    }
                    let reason = format!(
                        "more than {MAX_CONNECTIONS} connections open at once; close some first"
                    );
                    tokio::spawn(async move { busy(&mut client, &reason).await });
                    continue;
                };
                let (allow, log) = (allow.clone(), log.clone());
                tokio::spawn(async move {
                    handle(client, &allow, &log).await;
                    drop(slot);
                });
            }
            Err(err) => {
                tracing::warn!(%err, "sandbox proxy: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Answers a connection over the limit with `503` and closes it, bounded in time so that a
/// client that never reads cannot keep it open.
async fn busy(client: &mut UnixStream, reason: &str) {
    let body = format!("reef sandbox proxy: {reason}\n");
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _sent = tokio::time::timeout(
        Duration::from_secs(1),
        client.write_all(response.as_bytes()),
    )
    .await;
}

/// Serves one client connection: one tunnel or one forwarded request.
async fn handle(mut client: UnixStream, allow: &DomainAllowList, log: &NetLog) {
    let read = tokio::time::timeout(HEAD_TIMEOUT, head::read_head(&mut client)).await;
    let (head, rest) = match read {
        Ok(Ok(Some(parts))) => parts,
        Ok(Ok(None)) | Err(_) => return,
        Ok(Err(refusal)) => return refuse(&mut client, refusal, log).await,
    };
    let request = match head::parse(&head) {
        Ok(request) => request,
        Err(refusal) => return refuse(&mut client, refusal, log).await,
    };
    let (method, host, port) = match &request {
        Request::Connect { host, port } => ("CONNECT".to_owned(), host.clone(), *port),
        Request::Forward {
            method, host, port, ..
        } => (method.clone(), host.clone(), *port),
    };
    let mut record = NetRequest {
        method,
        host: host.clone(),
        port,
        verdict: NetVerdict::Allowed,
    };
    if !allow.allows(&host) {
        let reason = format!("{host} is not in sandbox.allow_domains");
        return deny(&mut client, 403, reason, record, log).await;
    }
    let mut upstream = match connect(&host, port, allow.names_address(&host)).await {
        Ok(stream) => stream,
        Err((status, verdict)) => {
            let reason = match &verdict {
                NetVerdict::Denied(r) | NetVerdict::Failed(r) => r.clone(),
                NetVerdict::Allowed => String::new(),
            };
            record.verdict = verdict;
            return respond_logged(&mut client, status, &reason, record, log).await;
        }
    };
    push(log, record);
    let sent = match &request {
        Request::Connect { .. } => {
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
        }
        Request::Forward { head, .. } => upstream.write_all(head).await,
    };
    if sent.is_err() || upstream.write_all(&rest).await.is_err() {
        return;
    }
    let _copied = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// Resolves and connects; a name (not an address the list names) must resolve to public
/// addresses only.
async fn connect(
    host: &str,
    port: u16,
    named_address: bool,
) -> Result<TcpStream, (u16, NetVerdict)> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| {
            (
                502,
                NetVerdict::Failed(format!("cannot resolve {host}: {e}")),
            )
        })?
        .collect();
    if !named_address {
        for addr in &addrs {
            let class = classify_ip(addr.ip());
            if class != AddressClass::Public {
                let reason = format!(
                    "{host} resolves to {} ({}); allow_domains must name that address to reach it",
                    addr.ip(),
                    class.as_str()
                );
                return Err((403, NetVerdict::Denied(reason)));
            }
        }
    }
    let mut last = format!("{host} has no address");
    for addr in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = format!("cannot connect to {addr}: {e}"),
            Err(_) => last = format!("connecting to {addr} timed out"),
        }
    }
    Err((502, NetVerdict::Failed(last)))
}

/// Answers a malformed request.
async fn refuse(client: &mut UnixStream, refusal: Refusal, log: &NetLog) {
    let record = NetRequest {
        method: String::new(),
        host: String::new(),
        port: 0,
        verdict: NetVerdict::Failed(refusal.reason.clone()),
    };
    respond_logged(client, refusal.status, &refusal.reason, record, log).await;
}

async fn deny(
    client: &mut UnixStream,
    status: u16,
    reason: String,
    mut record: NetRequest,
    log: &NetLog,
) {
    record.verdict = NetVerdict::Denied(reason.clone());
    respond_logged(client, status, &reason, record, log).await;
}

/// Records `record` and answers the client with `status` and a one-line explanation.
async fn respond_logged(
    client: &mut UnixStream,
    status: u16,
    reason: &str,
    record: NetRequest,
    log: &NetLog,
) {
    push(log, record);
    let text = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        _ => "Bad Gateway",
    };
    let body = format!("reef sandbox proxy: {reason}\n");
    let response = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _sent = client.write_all(response.as_bytes()).await;
    let _closed = client.shutdown().await;
}

fn push(log: &NetLog, record: NetRequest) {
    match &record.verdict {
        NetVerdict::Allowed => tracing::info!(
            method = %record.method, host = %record.host, port = record.port,
            "sandbox network request allowed"
        ),
        NetVerdict::Denied(reason) | NetVerdict::Failed(reason) => tracing::info!(
            method = %record.method, host = %record.host, port = record.port, %reason,
            "sandbox network request refused"
        ),
    }
    let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
    if log.len() == LOG_CAPACITY {
        log.pop_front();
    }
    log.push_back(record);
}
