//! Capped output capture: keep the first N bytes of a stream, read and discard the rest so
//! the writer never blocks on a full pipe.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes kept from one stream plus whether anything was discarded.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub(crate) bytes: Vec<u8>,
    pub(crate) truncated: bool,
}

impl Captured {
    fn push(&mut self, chunk: &[u8], cap: usize) {
        let room = cap.saturating_sub(self.bytes.len());
        if chunk.len() > room {
            self.truncated = true;
        }
        let take = chunk.len().min(room);
        self.bytes.extend_from_slice(&chunk[..take]);
    }

    pub(crate) fn into_string(self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Reads `reader` to EOF into `out`, keeping at most `cap` bytes. Read errors end the
/// capture (the process side is handled by the runner).
pub(crate) async fn drain<R: AsyncRead + Unpin>(reader: Option<R>, out: &mut Captured, cap: usize) {
    let Some(mut reader) = reader else { return };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => out.push(&buf[..n], cap),
        }
    }
}
