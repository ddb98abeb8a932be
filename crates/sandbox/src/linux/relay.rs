//! The relay inside an `allowlist` sandbox: PID 1 listens on `127.0.0.1:PROXY_PORT` in the
//! sandbox's own network namespace and pipes every connection to the host proxy's unix socket.
//! It enforces nothing itself; the host proxy decides what each request may reach.

use super::spec::{PROXY_PORT, PROXY_SOCKET_INSIDE};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::thread;

/// Stack of each relay thread: they only shuttle bytes through a small buffer.
const STACK: usize = 64 * 1024;

/// Binds the relay's listener. Must run while the process may still bind (before Landlock)
/// and after loopback is up.
pub(crate) fn listen() -> Result<TcpListener, String> {
    TcpListener::bind(("127.0.0.1", PROXY_PORT))
        .map_err(|e| format!("listen on 127.0.0.1:{PROXY_PORT} for the proxy relay: {e}"))
}

/// Serves `listener` on a background thread of PID 1 for the rest of the run.
pub(crate) fn serve(listener: TcpListener) -> Result<(), String> {
    thread::Builder::new()
        .name("relay".into())
        .stack_size(STACK)
        .spawn(move || serve_here(listener))
        .map(drop)
        .map_err(|e| format!("start the proxy relay: {e}"))
}

/// Serves `listener` on this thread, a thread per connection, until accepting fails (a warm
/// sandbox runs this in a process of its own, so that PID 1 stays single-threaded).
pub(crate) fn serve_here(listener: TcpListener) {
    for conn in listener.incoming().flatten() {
        let _spawned = thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || relay(conn));
    }
}

/// Pipes one TCP connection to a new connection on the proxy socket, both ways.
fn relay(tcp: TcpStream) {
    let Ok(unix) = UnixStream::connect(PROXY_SOCKET_INSIDE) else {
        // The proxy is gone (reef is stopping): the client sees the connection close.
        return;
    };
    let (Ok(tcp_back), Ok(unix_back)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let upstream = thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || pipe(tcp, unix, |u| u.shutdown(Shutdown::Write)));
    pipe(unix_back, tcp_back, |t| t.shutdown(Shutdown::Write));
    if let Ok(handle) = upstream {
        let _joined = handle.join();
    }
}

/// Copies `from` into `to` until end of stream, then half-closes `to`.
fn pipe<R: Read, W: Write>(mut from: R, mut to: W, close: impl FnOnce(&W) -> std::io::Result<()>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _closed = close(&to);
}
