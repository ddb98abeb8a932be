//! A loopback HTTP file server for pull tests: serves fixed bodies by path, honours `Range`,
//! can cut a transfer short once, and records every request's path and range.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Default)]
struct State {
    files: HashMap<String, (Vec<u8>, &'static str)>,
    /// Path → bytes after which the next transfer of it is cut (once).
    cut_once: HashMap<String, usize>,
    requests: Vec<(String, Option<String>)>,
}

#[derive(Clone)]
pub struct FileServer {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl FileServer {
    pub async fn start() -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let served = state.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, served.clone()));
            }
        });
        FileServer { url, state }
    }

    pub fn put(&self, path: &str, body: Vec<u8>, content_type: &'static str) {
        self.state
            .lock()
            .unwrap()
            .files
            .insert(path.to_owned(), (body, content_type));
    }

    /// The next transfer of `path` stops after `bytes` bytes (the connection is closed).
    pub fn cut_once(&self, path: &str, bytes: usize) {
        self.state
            .lock()
            .unwrap()
            .cut_once
            .insert(path.to_owned(), bytes);
    }

    /// (path, Range header) of every request so far.
    pub fn requests(&self) -> Vec<(String, Option<String>)> {
        self.state.lock().unwrap().requests.clone()
    }
}

async fn serve(mut socket: tokio::net::TcpStream, state: Arc<Mutex<State>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if socket.read(&mut byte).await.unwrap_or(0) == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let range = head.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .strip_prefix("range: bytes=")
            .map(|r| r.trim().to_owned())
    });
    let (file, cut) = {
        let mut s = state.lock().unwrap();
        s.requests.push((path.clone(), range.clone()));
        let cut = s.cut_once.remove(&path);
        (s.files.get(&path).cloned(), cut)
    };
    let Some((body, content_type)) = file else {
        let _ = socket
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
        return;
    };
    let start = range
        .as_deref()
        .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok())
        .unwrap_or(0)
        .min(body.len());
    let status = if range.is_some() {
        format!(
            "206 Partial Content\r\ncontent-range: bytes {start}-{}/{}",
            body.len().saturating_sub(1),
            body.len()
        )
    } else {
        "200 OK".to_owned()
    };
    let rest = &body[start..];
    let header = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        rest.len()
    );
    if socket.write_all(header.as_bytes()).await.is_err() {
        return;
    }
    let sent = cut.map_or(rest.len(), |c| c.min(rest.len()));
    let _ = socket.write_all(&rest[..sent]).await;
    let _ = socket.flush().await;
    // Dropping the socket closes the connection: a cut transfer ends short of content-length.
}
