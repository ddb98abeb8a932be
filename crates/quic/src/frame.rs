//! Frames on a QUIC stream: a 4-byte big-endian length, then that many bytes of JSON, at most
//! [`MAX_FRAME`]. Reading the length apart from the body lets a reader refuse an oversized
//! frame before it buffers it.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// The largest body a frame may have: 1 MiB.
pub const MAX_FRAME: usize = 1 << 20;

/// Why a frame could not be read or written. After any of these the stream's framing is
/// lost: close it.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The length prefix announces more than [`MAX_FRAME`] bytes.
    #[error("a frame of {len} bytes is over the limit of {MAX_FRAME} bytes")]
    TooLarge { len: usize },
    /// The body is not the JSON expected.
    #[error("the frame is not valid JSON for this protocol: {0}")]
    Json(#[from] serde_json::Error),
    /// The stream ended inside a frame.
    #[error("the stream ended inside a frame")]
    Truncated,
    /// The stream failed (reset, connection lost).
    #[error("the stream failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The next frame's body, or `None` when the stream ended cleanly between frames.
pub async fn read_body<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<Vec<u8>>, FrameError> {
    let mut prefix = [0u8; 4];
    let mut filled = 0;
    while filled < prefix.len() {
        let n = r.read(&mut prefix[filled..]).await?;
        if n == 0 {
            return match filled {
                0 => Ok(None),
                _ => Err(FrameError::Truncated),
            };
        }
        filled += n;
    }
    let len = usize::try_from(u32::from_be_bytes(prefix)).unwrap_or(usize::MAX);
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge { len });
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(e),
    })?;
    Ok(Some(body))
}

/// The next frame as a `T`, or `None` at a clean end of the stream.
pub async fn read_frame<R: AsyncRead + Unpin, T: DeserializeOwned>(
    r: &mut R,
) -> Result<Option<T>, FrameError> {
    match read_body(r).await? {
        None => Ok(None),
        Some(body) => Ok(Some(serde_json::from_slice(&body)?)),
    }
}

/// `value` as a frame: its length and its JSON.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, FrameError> {
    let body = serde_json::to_vec(value)?;
    if body.len() > MAX_FRAME {
        return Err(FrameError::TooLarge { len: body.len() });
    }
    let len = u32::try_from(body.len()).map_err(|_| FrameError::TooLarge { len: body.len() })?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Writes `value` as one frame.
pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    value: &T,
) -> Result<(), FrameError> {
    w.write_all(&encode(value)?).await?;
    Ok(())
}
