//! The wire protocol between reef (the host) and the agent in a microVM, over one byte
//! stream (a virtio-serial port inside, a unix socket outside). A frame is a little-endian
//! `u32` length, then that many bytes: a kind byte and the message's fields in order. Numbers
//! are little-endian; byte strings and lists carry a `u32` count first; an optional value is a
//! presence byte then the value. Both sides refuse frames over [`MAX_FRAME`].

use std::io::{self, Read, Write};

/// The name of the virtio-serial port the agent listens on.
pub const PORT_NAME: &str = "reef.agent";
/// The name of the virtio-serial port that carries an `allowlist` VM's connections to reef's
/// proxy ([`NetFrame`]s).
pub const NET_PORT_NAME: &str = "reef.net";
/// The port on the guest's `127.0.0.1` where an `allowlist` VM's proxy listens (`http_proxy`).
pub const PROXY_PORT: u16 = 3128;
/// The protocol version both sides must speak, exchanged in `Hello`.
pub const VERSION: u32 = 3;
/// The largest frame either side accepts (a command's stdin and its two capped outputs fit).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// Resource limits of one command, each `None` for no limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandLimits {
    pub cpu_secs: Option<u64>,
    pub address_space_bytes: Option<u64>,
    pub processes: Option<u64>,
    pub file_size_bytes: Option<u64>,
    pub open_files: Option<u64>,
}

/// One command for the guest to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunCommand {
    /// A name looked up on the command's `PATH`, or a path.
    pub program: Vec<u8>,
    pub args: Vec<Vec<u8>>,
    /// `NAME=value` entries: the command's whole environment.
    pub env: Vec<Vec<u8>>,
    /// The absolute directory it starts in, inside the guest.
    pub cwd: Vec<u8>,
    /// Bytes fed to stdin; `None` gives it `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    pub timeout_ms: u64,
    /// After the timeout's SIGTERM, how long before SIGKILL.
    pub kill_grace_ms: u64,
    /// Bytes kept of stdout and of stderr each.
    pub max_output: u64,
    pub limits: CommandLimits,
}

/// How a command ended, with what it wrote (each stream capped).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exited {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

/// What the guest does to a path of a share once it is mounted (the share's own sandbox
/// layers: it runs commands without the capabilities to undo them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// Bind the directory onto itself, so it cannot be renamed away from what is mounted in it.
    Pin = 1,
    /// Bind the file or directory onto itself read-only.
    ReadOnly = 2,
    /// Hide it: an empty read-only tmpfs over a directory, `/dev/null` over a file.
    Mask = 3,
}

/// One layer over a share, at a path relative to its mount point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub kind: LayerKind,
    pub path: Vec<u8>,
}

/// What reef sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostMessage {
    /// Asks for the guest's `Hello`; the first message of a connection.
    Hello,
    /// Mount the 9p share `tag` at the absolute guest path `path` (created if missing), then
    /// apply `layers` in order (those whose path does not exist are skipped).
    Mount {
        id: u32,
        tag: String,
        path: Vec<u8>,
        read_only: bool,
        layers: Vec<Layer>,
    },
    /// Run a command; answered by `Exited` or `SpawnFailed` with the same id.
    Run { id: u32, command: RunCommand },
    /// Kill the process group of command `id` (its run was abandoned); its answer still comes.
    Cancel { id: u32 },
    /// Open the network port and listen on `127.0.0.1:PROXY_PORT` for connections to carry to
    /// reef's proxy (an `allowlist` VM). Answered by `Done`.
    Proxy { id: u32 },
    /// The VM was restored from a snapshot that other VMs share: mix `seed` into the kernel's
    /// random pool and reseed it, and set the clock to `unix_nanos`. Answered by `Done`.
    Resumed {
        id: u32,
        seed: Vec<u8>,
        unix_nanos: u64,
    },
}

/// What the guest sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuestMessage {
    Hello {
        version: u32,
    },
    /// A `Mount` is done; `error` is empty on success.
    Done {
        id: u32,
        error: String,
    },
    Exited {
        id: u32,
        exited: Exited,
    },
    /// The command could not be started: `errno` says why (as `execve`'s).
    SpawnFailed {
        id: u32,
        errno: i32,
    },
}

mod kind {
    pub const HELLO: u8 = 1;
    pub const MOUNT: u8 = 2;
    pub const RUN: u8 = 3;
    pub const CANCEL: u8 = 4;
    pub const DONE: u8 = 5;
    pub const EXITED: u8 = 6;
    pub const SPAWN_FAILED: u8 = 7;
    pub const RESUMED: u8 = 8;
    pub const PROXY: u8 = 9;
    pub const NET_OPEN: u8 = 1;
    pub const NET_DATA: u8 = 2;
    pub const NET_CLOSE: u8 = 3;
}

impl HostMessage {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            HostMessage::Hello => w.u8(kind::HELLO),
            HostMessage::Mount {
                id,
                tag,
                path,
                read_only,
                layers,
            } => {
                w.u8(kind::MOUNT);
                w.u32(*id);
                w.bytes(tag.as_bytes());
                w.bytes(path);
                w.flag(*read_only);
                w.u32(u32::try_from(layers.len()).unwrap_or(u32::MAX));
                for layer in layers {
                    w.u8(layer.kind as u8);
                    w.bytes(&layer.path);
                }
            }
            HostMessage::Run { id, command: c } => {
                w.u8(kind::RUN);
                w.u32(*id);
                w.bytes(&c.program);
                w.list(&c.args);
                w.list(&c.env);
                w.bytes(&c.cwd);
                w.opt_bytes(c.stdin.as_deref());
                w.u64(c.timeout_ms);
                w.u64(c.kill_grace_ms);
                w.u64(c.max_output);
                for limit in [
                    c.limits.cpu_secs,
                    c.limits.address_space_bytes,
                    c.limits.processes,
                    c.limits.file_size_bytes,
                    c.limits.open_files,
                ] {
                    w.opt_u64(limit);
                }
            }
            HostMessage::Cancel { id } => {
                w.u8(kind::CANCEL);
                w.u32(*id);
            }
            HostMessage::Proxy { id } => {
                w.u8(kind::PROXY);
                w.u32(*id);
            }
            HostMessage::Resumed {
                id,
                seed,
                unix_nanos,
            } => {
                w.u8(kind::RESUMED);
                w.u32(*id);
                w.bytes(seed);
                w.u64(*unix_nanos);
            }
        }
        w.0
    }

    pub fn decode(frame: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(frame);
        let message = match r.u8()? {
            kind::HELLO => HostMessage::Hello,
            kind::MOUNT => HostMessage::Mount {
                id: r.u32()?,
                tag: r.string()?,
                path: r.bytes()?,
                read_only: r.flag()?,
                layers: r.layers()?,
            },
            kind::RUN => HostMessage::Run {
                id: r.u32()?,
                command: RunCommand {
                    program: r.bytes()?,
                    args: r.list()?,
                    env: r.list()?,
                    cwd: r.bytes()?,
                    stdin: r.opt_bytes()?,
                    timeout_ms: r.u64()?,
                    kill_grace_ms: r.u64()?,
                    max_output: r.u64()?,
                    limits: CommandLimits {
                        cpu_secs: r.opt_u64()?,
                        address_space_bytes: r.opt_u64()?,
                        processes: r.opt_u64()?,
                        file_size_bytes: r.opt_u64()?,
                        open_files: r.opt_u64()?,
                    },
                },
            },
            kind::CANCEL => HostMessage::Cancel { id: r.u32()? },
            kind::PROXY => HostMessage::Proxy { id: r.u32()? },
            kind::RESUMED => HostMessage::Resumed {
                id: r.u32()?,
                seed: r.bytes()?,
                unix_nanos: r.u64()?,
            },
            other => return Err(DecodeError::UnknownKind(other)),
        };
        r.end()?;
        Ok(message)
    }
}

impl GuestMessage {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            GuestMessage::Hello { version } => {
                w.u8(kind::HELLO);
                w.u32(*version);
            }
            GuestMessage::Done { id, error } => {
                w.u8(kind::DONE);
                w.u32(*id);
                w.bytes(error.as_bytes());
            }
            GuestMessage::Exited { id, exited: e } => {
                w.u8(kind::EXITED);
                w.u32(*id);
                w.opt_u64(e.code.map(|c| u64::from(c as u32)));
                w.opt_u64(e.signal.map(|s| u64::from(s as u32)));
                w.flag(e.timed_out);
                w.bytes(&e.stdout);
                w.bytes(&e.stderr);
                w.flag(e.stdout_truncated);
                w.flag(e.stderr_truncated);
            }
            GuestMessage::SpawnFailed { id, errno } => {
                w.u8(kind::SPAWN_FAILED);
                w.u32(*id);
                w.u32(*errno as u32);
            }
        }
        w.0
    }

    pub fn decode(frame: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(frame);
        let message = match r.u8()? {
            kind::HELLO => GuestMessage::Hello { version: r.u32()? },
            kind::DONE => GuestMessage::Done {
                id: r.u32()?,
                error: r.string()?,
            },
            kind::EXITED => GuestMessage::Exited {
                id: r.u32()?,
                exited: Exited {
                    code: r.opt_u64()?.map(|c| c as u32 as i32),
                    signal: r.opt_u64()?.map(|s| s as u32 as i32),
                    timed_out: r.flag()?,
                    stdout: r.bytes()?,
                    stderr: r.bytes()?,
                    stdout_truncated: r.flag()?,
                    stderr_truncated: r.flag()?,
                },
            },
            kind::SPAWN_FAILED => GuestMessage::SpawnFailed {
                id: r.u32()?,
                errno: r.u32()? as i32,
            },
            other => return Err(DecodeError::UnknownKind(other)),
        };
        r.end()?;
        Ok(message)
    }
}

/// One frame on the network port: the guest's connections to reef's proxy, multiplexed. Each
/// side sends `Close` once it will send no more bytes on a connection (a half-close).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetFrame {
    /// The guest accepted connection `stream` (guest to reef only).
    Open {
        stream: u32,
    },
    Data {
        stream: u32,
        bytes: Vec<u8>,
    },
    Close {
        stream: u32,
    },
}

impl NetFrame {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            NetFrame::Open { stream } => {
                w.u8(kind::NET_OPEN);
                w.u32(*stream);
            }
            NetFrame::Data { stream, bytes } => {
                w.u8(kind::NET_DATA);
                w.u32(*stream);
                w.bytes(bytes);
            }
            NetFrame::Close { stream } => {
                w.u8(kind::NET_CLOSE);
                w.u32(*stream);
            }
        }
        w.0
    }

    pub fn decode(frame: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(frame);
        let message = match r.u8()? {
            kind::NET_OPEN => NetFrame::Open { stream: r.u32()? },
            kind::NET_DATA => NetFrame::Data {
                stream: r.u32()?,
                bytes: r.bytes()?,
            },
            kind::NET_CLOSE => NetFrame::Close { stream: r.u32()? },
            other => return Err(DecodeError::UnknownKind(other)),
        };
        r.end()?;
        Ok(message)
    }
}

/// A frame that is not a message of this protocol.
#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The frame ended inside a field.
    Short,
    /// Bytes were left after the last field.
    Trailing(usize),
    UnknownKind(u8),
    /// A text field was not UTF-8.
    NotUtf8,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Short => write!(f, "the frame ends inside a field"),
            DecodeError::Trailing(n) => write!(f, "{n} bytes follow the message"),
            DecodeError::UnknownKind(k) => write!(f, "unknown message kind {k}"),
            DecodeError::NotUtf8 => write!(f, "a text field is not UTF-8"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Writes one frame holding `message`.
pub fn write_frame(out: &mut impl Write, message: &[u8]) -> io::Result<()> {
    let len = u32::try_from(message.len())
        .ok()
        .filter(|n| *n as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    let mut frame = Vec::with_capacity(4 + message.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(message);
    out.write_all(&frame)?;
    out.flush()
}

/// Reads one frame; `Ok(None)` at a clean end of stream between frames.
pub fn read_frame(input: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = frame_len(len)?;
    let mut frame = vec![0u8; len];
    input.read_exact(&mut frame)?;
    Ok(Some(frame))
}

/// The length a frame's header announces, refused over [`MAX_FRAME`].
pub fn frame_len(header: [u8; 4]) -> io::Result<usize> {
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes is over the limit of {MAX_FRAME}"),
        ));
    }
    Ok(len)
}

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn flag(&mut self, v: bool) {
        self.0.push(u8::from(v));
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn opt_u64(&mut self, v: Option<u64>) {
        self.flag(v.is_some());
        if let Some(v) = v {
            self.u64(v);
        }
    }
    fn bytes(&mut self, v: &[u8]) {
        // Frames over MAX_FRAME (far below u32::MAX) are refused when written.
        self.u32(u32::try_from(v.len()).unwrap_or(u32::MAX));
        self.0.extend_from_slice(v);
    }
    fn opt_bytes(&mut self, v: Option<&[u8]>) {
        self.flag(v.is_some());
        if let Some(v) = v {
            self.bytes(v);
        }
    }
    fn list(&mut self, items: &[Vec<u8>]) {
        self.u32(u32::try_from(items.len()).unwrap_or(u32::MAX));
        for item in items {
            self.bytes(item);
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Short);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn flag(&mut self) -> Result<bool, DecodeError> {
        Ok(self.u8()? != 0)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }
    fn opt_u64(&mut self) -> Result<Option<u64>, DecodeError> {
        Ok(if self.flag()? {
            Some(self.u64()?)
        } else {
            None
        })
    }
    fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        Ok(if self.flag()? {
            Some(self.bytes()?)
        } else {
            None
        })
    }
    fn string(&mut self) -> Result<String, DecodeError> {
        String::from_utf8(self.bytes()?).map_err(|_| DecodeError::NotUtf8)
    }
    fn list(&mut self) -> Result<Vec<Vec<u8>>, DecodeError> {
        let n = self.u32()? as usize;
        // Each item takes at least its 4-byte count: a larger n is a lie.
        if n > self.0.len() / 4 {
            return Err(DecodeError::Short);
        }
        (0..n).map(|_| self.bytes()).collect()
    }
    fn layers(&mut self) -> Result<Vec<Layer>, DecodeError> {
        let n = self.u32()? as usize;
        // Each layer takes at least five bytes.
        if n > self.0.len() / 5 {
            return Err(DecodeError::Short);
        }
        (0..n)
            .map(|_| {
                let kind = match self.u8()? {
                    1 => LayerKind::Pin,
                    2 => LayerKind::ReadOnly,
                    3 => LayerKind::Mask,
                    other => return Err(DecodeError::UnknownKind(other)),
                };
                Ok(Layer {
                    kind,
                    path: self.bytes()?,
                })
            })
            .collect()
    }
    fn end(&self) -> Result<(), DecodeError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_survives_a_round_trip() {
        let run = HostMessage::Run {
            id: 7,
            command: RunCommand {
                program: b"/bin/sh".to_vec(),
                args: vec![b"-c".to_vec(), b"echo hi".to_vec()],
                env: vec![b"PATH=/bin".to_vec()],
                cwd: b"/work".to_vec(),
                stdin: Some(b"in".to_vec()),
                timeout_ms: 1_000,
                kill_grace_ms: 200,
                max_output: 64,
                limits: CommandLimits {
                    cpu_secs: Some(3),
                    address_space_bytes: None,
                    processes: Some(9),
                    file_size_bytes: None,
                    open_files: Some(1),
                },
            },
        };
        for m in [
            HostMessage::Hello,
            HostMessage::Mount {
                id: 1,
                tag: "ws".into(),
                path: b"/w".to_vec(),
                read_only: true,
                layers: vec![
                    Layer {
                        kind: LayerKind::Pin,
                        path: b".git".to_vec(),
                    },
                    Layer {
                        kind: LayerKind::Mask,
                        path: b"secret".to_vec(),
                    },
                ],
            },
            run,
            HostMessage::Cancel { id: 3 },
            HostMessage::Proxy { id: 9 },
            HostMessage::Resumed {
                id: 8,
                seed: vec![1, 2, 3],
                unix_nanos: 1_700_000_000_000_000_000,
            },
        ] {
            assert_eq!(HostMessage::decode(&m.encode()), Ok(m));
        }
        for m in [
            GuestMessage::Hello { version: VERSION },
            GuestMessage::Done {
                id: 2,
                error: "no".into(),
            },
            GuestMessage::Exited {
                id: 4,
                exited: Exited {
                    code: Some(-1),
                    signal: None,
                    timed_out: true,
                    stdout: b"out".to_vec(),
                    stderr: Vec::new(),
                    stdout_truncated: true,
                    stderr_truncated: false,
                },
            },
            GuestMessage::SpawnFailed { id: 5, errno: 2 },
        ] {
            assert_eq!(GuestMessage::decode(&m.encode()), Ok(m));
        }
    }

    #[test]
    fn network_frames_survive_a_round_trip() {
        for f in [
            NetFrame::Open { stream: 1 },
            NetFrame::Data {
                stream: 2,
                bytes: b"GET / HTTP/1.1\r\n".to_vec(),
            },
            NetFrame::Close { stream: 3 },
        ] {
            assert_eq!(NetFrame::decode(&f.encode()), Ok(f));
        }
        assert_eq!(NetFrame::decode(&[7]), Err(DecodeError::UnknownKind(7)));
    }

    #[test]
    fn damaged_frames_are_refused_not_panicked_on() {
        let full = GuestMessage::Done {
            id: 1,
            error: "x".into(),
        }
        .encode();
        for cut in 0..full.len() {
            assert!(GuestMessage::decode(&full[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = full.clone();
        long.push(0);
        assert_eq!(GuestMessage::decode(&long), Err(DecodeError::Trailing(1)));
        assert_eq!(
            HostMessage::decode(&[99]),
            Err(DecodeError::UnknownKind(99))
        );
        // A list claiming four billion items in a short frame.
        let mut lying = vec![kind::RUN, 0, 0, 0, 0, 0, 0, 0, 0];
        lying.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(HostMessage::decode(&lying), Err(DecodeError::Short));
    }

    #[test]
    fn frames_round_trip_and_oversized_ones_are_refused() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"abc").unwrap_or_else(|e| panic!("{e}"));
        let mut input = &buf[..];
        assert_eq!(
            read_frame(&mut input).unwrap_or_else(|e| panic!("{e}")),
            Some(b"abc".to_vec())
        );
        assert_eq!(
            read_frame(&mut input).unwrap_or_else(|e| panic!("{e}")),
            None
        );
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(read_frame(&mut &huge[..]).is_err());
        assert!(read_frame(&mut &[1u8, 0][..]).is_err());
    }
}
