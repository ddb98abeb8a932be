//! One VM: its QEMU process, its run directory (the agent's socket, the serial log and QEMU's
//! own), and the conversation with the agent inside: requests carry ids, one reader task hands
//! each answer to whoever waits for it, and when the stream ends every waiter learns it.

use super::qemu::{self, AGENT_SOCKET, Launch, SERIAL_LOG, VmKey};
use crate::error::SandboxError;
use reef_vm_agent::protocol::{self, GuestMessage, HostMessage};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;

/// How long QEMU may take to open the agent's socket.
const SOCKET_WAIT: Duration = Duration::from_secs(10);
/// The id of the `Hello` exchange (requests count from 1).
const HELLO_ID: u32 = 0;

/// Why a request to a VM failed.
pub(crate) enum VmFailure {
    /// The VM was gone before the request reached it: another VM may take it.
    Gone(String),
    /// The VM ended while the request was under way: not to be sent again.
    Ended(String),
}

/// A booted VM whose agent has answered.
pub(crate) struct Vm {
    pub(crate) key: VmKey,
    /// From QEMU's start to the agent's first answer.
    pub(crate) boot_took: Duration,
    conn: Connection,
    /// Whether the shares are mounted (done once, when the VM is handed out).
    pub(crate) mounted: tokio::sync::OnceCell<()>,
    /// The task joining an `allowlist` VM's connections to the session's proxy.
    pub(crate) net: Mutex<Option<tokio::task::JoinHandle<()>>>,
    // Last: the directory goes after QEMU (killed on drop) is gone.
    process: Mutex<tokio::process::Child>,
    dir: RunDir,
}

impl Drop for Vm {
    fn drop(&mut self) {
        if let Some(net) = self
            .net
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            net.abort();
        }
    }
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm")
            .field("key", &self.key)
            .field("boot_took", &self.boot_took)
            .field("dir", &self.dir.0)
            .finish_non_exhaustive()
    }
}

impl Vm {
    /// Starts QEMU for `key`, booting or restoring the snapshot `restore`, and waits (at most
    /// `timeout`) for the agent's `Hello`. A restored VM is told so, and reseeds its random
    /// generator and sets its clock before it is used.
    pub(crate) async fn boot(
        launch: &Launch,
        key: VmKey,
        timeout: Duration,
        restore: Option<&Path>,
    ) -> Result<Vm, SandboxError> {
        let started = Instant::now();
        let dir = RunDir::create("vm").map_err(|e| unavailable(format!("{e}")))?;
        let log = std::fs::File::create(dir.0.join("qemu.log"))
            .map_err(|e| unavailable(format!("cannot create QEMU's log: {e}")))?;
        let mut cmd = tokio::process::Command::new(&launch.qemu);
        cmd.args(qemu::arguments(launch, &key, &dir.0, restore))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true);
        crate::linux::new_session(&mut cmd);
        crate::linux::die_with_parent(&mut cmd);
        let mut process = cmd.spawn().map_err(|source| SandboxError::Spawn {
            program: launch.qemu.display().to_string(),
            source,
        })?;
        let socket = dir.0.join(AGENT_SOCKET);
        let stream = loop {
            if let Ok(stream) = UnixStream::connect(&socket).await {
                break stream;
            }
            if let Ok(Some(status)) = process.try_wait() {
                return Err(unavailable(format!(
                    "QEMU exited ({status}) before the VM started: {}",
                    dir.tail("qemu.log")
                )));
            }
            if started.elapsed() > SOCKET_WAIT {
                return Err(unavailable(format!(
                    "QEMU did not open the agent's socket within {SOCKET_WAIT:?}: {}",
                    dir.tail("qemu.log")
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let conn = Connection::new(stream);
        if restore.is_some() {
            let socket = dir.0.join(qemu::QMP_SOCKET);
            super::snapshot::run_restored(&socket, timeout)
                .await
                .map_err(|why| unavailable(format!("cannot restore the VM: {why}")))?;
        }
        let hello = tokio::time::timeout(timeout, conn.request(HELLO_ID, HostMessage::Hello));
        let version = match hello.await {
            Ok(Ok(GuestMessage::Hello { version })) => version,
            Ok(Ok(other)) => {
                return Err(unavailable(format!(
                    "the VM's agent answered Hello with {other:?}"
                )));
            }
            Ok(Err(VmFailure::Gone(why) | VmFailure::Ended(why))) => {
                return Err(unavailable(format!(
                    "the VM ended while booting ({why}); its console: {}",
                    dir.tail(SERIAL_LOG)
                )));
            }
            Err(_) => {
                return Err(unavailable(format!(
                    "the VM's agent did not answer within {timeout:?}; its console: {}",
                    dir.tail(SERIAL_LOG)
                )));
            }
        };
        if version != protocol::VERSION {
            return Err(unavailable(format!(
                "the guest image's agent speaks protocol {version}, this reef {}; rebuild the \
                 image with scripts/microvm-image",
                protocol::VERSION
            )));
        }
        if restore.is_some() {
            let resumed = conn
                .request(
                    HELLO_ID + 1,
                    HostMessage::Resumed {
                        id: HELLO_ID + 1,
                        seed: fresh_seed().map_err(|e| unavailable(e.to_string()))?,
                        unix_nanos: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
                    },
                )
                .await;
            match resumed {
                Ok(GuestMessage::Done { error, .. }) if error.is_empty() => {}
                Ok(other) => {
                    return Err(unavailable(format!(
                        "the restored VM could not reseed itself: {other:?}"
                    )));
                }
                Err(VmFailure::Gone(why) | VmFailure::Ended(why)) => {
                    return Err(unavailable(format!("the restored VM ended ({why})")));
                }
            }
        }
        Ok(Vm {
            key,
            boot_took: started.elapsed(),
            conn,
            mounted: tokio::sync::OnceCell::new(),
            net: Mutex::new(None),
            process: Mutex::new(process),
            dir,
        })
    }

    /// QEMU's process id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.process
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .id()
    }

    /// Whether QEMU still runs and the agent's stream is open.
    pub(crate) fn alive(&self) -> bool {
        let exited = matches!(
            self.process
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .try_wait(),
            Ok(Some(_)) | Err(_)
        );
        !exited && self.conn.open()
    }

    /// Sends the request `make(id)` and waits for its answer. If this future is dropped
    /// first, `cancel(id)` is sent.
    pub(crate) async fn request(
        &self,
        make: impl FnOnce(u32) -> HostMessage,
        cancel: Option<fn(u32) -> HostMessage>,
    ) -> Result<GuestMessage, VmFailure> {
        // A VM whose QEMU has exited cannot have received it, whatever the socket still takes.
        if !self.alive() {
            return Err(VmFailure::Gone("the VM has ended".into()));
        }
        let id = self.conn.next_id();
        let mut guard = CancelGuard {
            conn: &self.conn,
            id,
            cancel,
        };
        let answer = self.conn.request(id, make(id)).await;
        guard.cancel = None;
        answer
    }

    /// The network port's socket (an `allowlist` VM's).
    pub(crate) fn net_socket(&self) -> PathBuf {
        self.dir.0.join(qemu::NET_SOCKET)
    }

    /// QEMU's machine protocol socket.
    pub(crate) fn qmp_socket(&self) -> PathBuf {
        self.dir.0.join(qemu::QMP_SOCKET)
    }

    /// The end of the guest's console, for error messages.
    pub(crate) fn console(&self) -> String {
        self.dir.tail(SERIAL_LOG)
    }
}

fn unavailable(reason: String) -> SandboxError {
    SandboxError::Unavailable {
        backend: "microvm",
        reason,
    }
}

/// Sends a cancel for a request whose caller stopped waiting.
struct CancelGuard<'a> {
    conn: &'a Connection,
    id: u32,
    cancel: Option<fn(u32) -> HostMessage>,
}

impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            let writer = Arc::clone(&self.conn.writer);
            let frame = cancel(self.id).encode();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _sent = write_frame(&writer, &frame).await;
                });
            }
        }
    }
}

/// Waiters for answers, by request id; `closed` once the stream has ended.
#[derive(Default)]
struct Pending {
    waiting: HashMap<u32, oneshot::Sender<GuestMessage>>,
    closed: Option<String>,
}

struct Connection {
    writer: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
    pending: Arc<Mutex<Pending>>,
    reader: tokio::task::JoinHandle<()>,
    next: AtomicU32,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    fn new(stream: UnixStream) -> Connection {
        let (read, write) = stream.into_split();
        let pending: Arc<Mutex<Pending>> = Arc::default();
        let reader = tokio::spawn(read_answers(read, Arc::clone(&pending)));
        Connection {
            writer: Arc::new(tokio::sync::Mutex::new(write)),
            pending,
            reader,
            // Past `Hello` and a restored VM's `Resumed`.
            next: AtomicU32::new(HELLO_ID + 2),
        }
    }

    fn next_id(&self) -> u32 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn open(&self) -> bool {
        lock(&self.pending).closed.is_none()
    }

    async fn request(&self, id: u32, message: HostMessage) -> Result<GuestMessage, VmFailure> {
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if let Some(why) = &pending.closed {
                return Err(VmFailure::Gone(why.clone()));
            }
            pending.waiting.insert(id, tx);
        }
        if let Err(err) = write_frame(&self.writer, &message.encode()).await {
            lock(&self.pending).waiting.remove(&id);
            return Err(VmFailure::Gone(format!(
                "cannot write to the VM's agent: {err}"
            )));
        }
        rx.await.map_err(|_| {
            VmFailure::Ended(
                lock(&self.pending)
                    .closed
                    .clone()
                    .unwrap_or_else(|| "the VM's agent stopped answering".into()),
            )
        })
    }
}

fn lock(pending: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    pending.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn write_frame(
    writer: &tokio::sync::Mutex<OwnedWriteHalf>,
    message: &[u8],
) -> std::io::Result<()> {
    let len = u32::try_from(message.len())
        .ok()
        .filter(|n| *n as usize <= protocol::MAX_FRAME)
        .ok_or_else(|| std::io::Error::other("the request is over the frame limit"))?;
    let mut frame = Vec::with_capacity(4 + message.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(message);
    let mut writer = writer.lock().await;
    writer.write_all(&frame).await?;
    writer.flush().await
}

/// Hands each answer to its waiter until the stream ends or breaks the protocol.
async fn read_answers(mut read: OwnedReadHalf, pending: Arc<Mutex<Pending>>) {
    let why = loop {
        let mut header = [0u8; 4];
        if let Err(err) = read.read_exact(&mut header).await {
            break format!("the VM's agent closed its port ({err})");
        }
        let len = match protocol::frame_len(header) {
            Ok(len) => len,
            Err(err) => break format!("the VM's agent sent a bad frame: {err}"),
        };
        let mut frame = vec![0u8; len];
        if let Err(err) = read.read_exact(&mut frame).await {
            break format!("the VM's agent closed its port mid-message ({err})");
        }
        let message = match GuestMessage::decode(&frame) {
            Ok(message) => message,
            Err(err) => break format!("the VM's agent sent a bad message: {err}"),
        };
        let id = match &message {
            GuestMessage::Hello { .. } => HELLO_ID,
            GuestMessage::Done { id, .. }
            | GuestMessage::Exited { id, .. }
            | GuestMessage::SpawnFailed { id, .. } => *id,
        };
        if let Some(waiter) = lock(&pending).waiting.remove(&id) {
            let _unwanted = waiter.send(message);
        }
    };
    let mut pending = lock(&pending);
    pending.closed = Some(why);
    // Dropping the senders wakes every waiter with the news.
    pending.waiting.clear();
}

/// Fresh bytes from the host's generator, for a restored VM's random pool.
fn fresh_seed() -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut seed = vec![0u8; 64];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut seed)?;
    Ok(seed)
}

/// A private directory (one VM's sockets and logs, or a pool's snapshots), removed with it.
pub(crate) struct RunDir(pub(crate) PathBuf);

impl RunDir {
    pub(crate) fn create(what: &str) -> std::io::Result<RunDir> {
        crate::private_dir::create(what).map(RunDir)
    }

    /// The last lines of one of its files.
    fn tail(&self, name: &str) -> String {
        tail(&self.0.join(name))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.0) {
            tracing::debug!(%err, dir = %self.0.display(), "cannot remove a VM's run directory");
        }
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(8);
    match lines[start..].join(" | ") {
        empty if empty.is_empty() => "(empty)".into(),
        joined => joined,
    }
}
