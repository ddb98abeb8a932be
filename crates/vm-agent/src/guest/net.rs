//! An `allowlist` VM's only way out: a listener on the guest's `127.0.0.1:PROXY_PORT` (where
//! `http_proxy` points) whose connections are carried over the virtio-serial port
//! [`NET_PORT_NAME`] to reef, which joins each to its allow-list proxy. It enforces nothing
//! itself: the VM has no network device, and the proxy decides what each request may reach.
//! Each connection gets a reader thread (its bytes become `Data` frames, its end `Close`) and a
//! writer thread (fed what reef sends for it, so one slow client stalls no other).

use crate::protocol::{self, NetFrame, PROXY_PORT};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};

type Streams = Arc<Mutex<HashMap<u32, Sender<Vec<u8>>>>>;

/// Starts the listener and the port's reader; returns once the listener is bound.
pub(super) fn start(port: File) -> io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", PROXY_PORT))?;
    let out = Arc::new(Mutex::new(port.try_clone()?));
    let streams: Streams = Arc::default();
    let from_reef = Arc::clone(&streams);
    std::thread::spawn(move || read_port(port, &from_reef));
    std::thread::spawn(move || accept(listener, &out, &streams));
    Ok(())
}

fn send(out: &Mutex<File>, frame: &NetFrame) {
    let mut port = out.lock().unwrap_or_else(PoisonError::into_inner);
    if let Err(err) = protocol::write_frame(&mut *port, &frame.encode()) {
        super::log(&format!("cannot write to the network port: {err}"));
    }
}

fn lock(streams: &Streams) -> std::sync::MutexGuard<'_, HashMap<u32, Sender<Vec<u8>>>> {
    streams.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What reef sends: bytes for a connection, or its end.
fn read_port(mut port: File, streams: &Streams) {
    loop {
        let frame = match protocol::read_frame(&mut port) {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(err) => {
                super::log(&format!("the network port failed: {err}"));
                return;
            }
        };
        match NetFrame::decode(&frame) {
            Ok(NetFrame::Data { stream, bytes }) => {
                if let Some(tx) = lock(streams).get(&stream) {
                    let _gone = tx.send(bytes);
                }
            }
            // Dropping its sender lets the writer finish and half-close the connection.
            Ok(NetFrame::Close { stream }) => drop(lock(streams).remove(&stream)),
            Ok(NetFrame::Open { .. }) => {}
            Err(err) => super::log(&format!("ignoring a damaged network frame: {err}")),
        }
    }
}

fn accept(listener: TcpListener, out: &Arc<Mutex<File>>, streams: &Streams) {
    let mut next: u32 = 0;
    for conn in listener.incoming().flatten() {
        next = next.wrapping_add(1);
        let stream = next;
        let Ok(writer) = conn.try_clone() else {
            continue;
        };
        let (tx, rx) = channel::<Vec<u8>>();
        lock(streams).insert(stream, tx);
        send(out, &NetFrame::Open { stream });
        std::thread::spawn(move || {
            let mut writer = writer;
            for bytes in rx {
                if writer.write_all(&bytes).is_err() {
                    break;
                }
            }
            let _closed = writer.shutdown(Shutdown::Write);
        });
        let out = Arc::clone(out);
        std::thread::spawn(move || forward(conn, stream, &out));
    }
}

/// Sends what the client writes on `conn` to reef, then its end.
fn forward(mut conn: TcpStream, stream: u32, out: &Mutex<File>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => send(
                out,
                &NetFrame::Data {
                    stream,
                    bytes: buf[..n].to_vec(),
                },
            ),
        }
    }
    send(out, &NetFrame::Close { stream });
}
