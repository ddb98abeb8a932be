//! An `allowlist` VM's connections to the session's proxy: the guest's agent carries each
//! connection to its `127.0.0.1:PROXY_PORT` over the VM's network port (`NetFrame`s); here each
//! `Open` becomes a connection to the proxy's unix socket, bytes flow both ways, and `Close`
//! half-closes. The VM has no network device: this is its only way out, and the proxy decides
//! (and logs) every request, as for the landlock backend.

use reef_vm_agent::protocol::{self, NetFrame};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

type Port = Arc<tokio::sync::Mutex<OwnedWriteHalf>>;

/// Serves the VM's network port (QEMU's socket `port`) until it closes.
pub(crate) async fn serve(port: PathBuf, proxy: PathBuf) {
    let stream = match UnixStream::connect(&port).await {
        Ok(stream) => stream,
        Err(err) => {
            tracing::warn!(%err, "cannot reach the VM's network port; it has no way out");
            return;
        }
    };
    let (mut read, write) = stream.into_split();
    let write: Port = Arc::new(tokio::sync::Mutex::new(write));
    let mut streams: HashMap<u32, UnboundedSender<Vec<u8>>> = HashMap::new();
    loop {
        let mut header = [0u8; 4];
        if read.read_exact(&mut header).await.is_err() {
            return;
        }
        let Ok(len) = protocol::frame_len(header) else {
            return;
        };
        let mut frame = vec![0u8; len];
        if read.read_exact(&mut frame).await.is_err() {
            return;
        }
        match NetFrame::decode(&frame) {
            Ok(NetFrame::Open { stream }) => {
                let (tx, rx) = unbounded_channel();
                streams.insert(stream, tx);
                tokio::spawn(connection(stream, proxy.clone(), rx, Arc::clone(&write)));
            }
            Ok(NetFrame::Data { stream, bytes }) => {
                if let Some(tx) = streams.get(&stream) {
                    let _gone = tx.send(bytes);
                }
            }
            // Dropping the sender ends the upstream half.
            Ok(NetFrame::Close { stream }) => drop(streams.remove(&stream)),
            Err(err) => {
                tracing::warn!(%err, "the VM sent a damaged network frame; closing its port");
                return;
            }
        }
    }
}

async fn send(port: &Port, frame: NetFrame) -> bool {
    let message = frame.encode();
    let mut bytes = Vec::with_capacity(4 + message.len());
    bytes.extend_from_slice(&(message.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&message);
    port.lock().await.write_all(&bytes).await.is_ok()
}

/// One guest connection joined to a new connection to the proxy.
async fn connection(
    stream: u32,
    proxy: PathBuf,
    mut from_guest: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    port: Port,
) {
    let Ok(conn) = UnixStream::connect(&proxy).await else {
        send(&port, NetFrame::Close { stream }).await;
        return;
    };
    let (mut proxy_read, mut proxy_write) = conn.into_split();
    let upstream = async move {
        while let Some(bytes) = from_guest.recv().await {
            if proxy_write.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _closed = proxy_write.shutdown().await;
    };
    let downstream = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match proxy_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let data = NetFrame::Data {
                        stream,
                        bytes: buf[..n].to_vec(),
                    };
                    if !send(&port, data).await {
                        return;
                    }
                }
            }
        }
        send(&port, NetFrame::Close { stream }).await;
    };
    tokio::join!(upstream, downstream);
}
