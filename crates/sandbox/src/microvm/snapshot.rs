//! Snapshots of a booted VM, to restore instead of booting: QEMU saves a VM whose agent has
//! answered but that has mounted nothing (QEMU refuses to save a VM with a 9p share in use),
//! and later VMs with the same devices start from it with `-incoming`, each with a workspace
//! of its own. One snapshot per device shape (the number of read-only shares, and whether
//! there is a network), kept in a private directory for the pool's life. QEMU is driven over
//! its machine protocol (QMP): stop, migrate to a file, wait for completion, continue.

use super::qemu::VmKey;
use super::vm::{RunDir, Vm};
use crate::policy::NetworkMode;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// How long saving a snapshot may take.
const SAVE_TIMEOUT: Duration = Duration::from_secs(60);

/// The devices a snapshot fixes: VMs differing only in their share paths can share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    read_only_shares: usize,
    network: NetworkMode,
}

impl Shape {
    pub(crate) fn of(key: &VmKey) -> Shape {
        Shape {
            read_only_shares: key.read_only.len(),
            network: key.network,
        }
    }
}

/// A pool's snapshots, by shape.
pub(crate) struct Snapshots {
    dir: RunDir,
    files: HashMap<Shape, PathBuf>,
}

impl Snapshots {
    pub(crate) fn new() -> std::io::Result<Snapshots> {
        Ok(Snapshots {
            dir: RunDir::create("vm-snapshots")?,
            files: HashMap::new(),
        })
    }

    pub(crate) fn get(&self, shape: Shape) -> Option<PathBuf> {
        self.files.get(&shape).cloned()
    }

    /// Where the snapshot of `shape` goes (recorded with [`Snapshots::saved`] once written).
    pub(crate) fn path_for(&self, shape: Shape) -> PathBuf {
        self.dir.0.join(format!(
            "ro{}-{:?}.state",
            shape.read_only_shares, shape.network
        ))
    }

    pub(crate) fn saved(&mut self, shape: Shape, path: PathBuf) {
        self.files.insert(shape, path);
    }

    /// Forgets a snapshot that failed to restore.
    pub(crate) fn forget(&mut self, shape: Shape) {
        if let Some(path) = self.files.remove(&shape)
            && let Err(err) = std::fs::remove_file(&path)
        {
            tracing::debug!(%err, path = %path.display(), "cannot remove a VM snapshot");
        }
    }
}

/// Saves `vm` (booted, nothing mounted) to `path`, then lets it run on.
pub(crate) async fn save(vm: &Vm, path: &Path) -> Result<(), String> {
    let mut qmp = Qmp::connect(&vm.qmp_socket()).await?;
    qmp.execute("stop", json!({})).await?;
    let saved = async {
        qmp.execute(
            "migrate",
            json!({ "uri": format!("file:{}", path.display()) }),
        )
        .await?;
        let started = Instant::now();
        loop {
            let state = qmp.execute("query-migrate", json!({})).await?;
            match state["status"].as_str() {
                Some("completed") => return Ok(()),
                Some("failed" | "cancelled") => {
                    return Err(format!(
                        "QEMU could not save the VM: {}",
                        state["error-desc"].as_str().unwrap_or("no reason given")
                    ));
                }
                _ if started.elapsed() > SAVE_TIMEOUT => {
                    return Err(format!("saving the VM took over {SAVE_TIMEOUT:?}"));
                }
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }
    .await;
    // The VM goes on either way.
    qmp.execute("cont", json!({})).await?;
    saved
}

/// Starts a VM that QEMU is restoring (`-incoming`): waits for the restore to finish, then
/// lets it run (a VM saved stopped is restored stopped).
pub(crate) async fn run_restored(socket: &Path, timeout: Duration) -> Result<(), String> {
    let started = Instant::now();
    let mut qmp = loop {
        match Qmp::connect(socket).await {
            Ok(qmp) => break qmp,
            Err(_) if started.elapsed() < timeout => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(err) => return Err(err),
        }
    };
    loop {
        let status = qmp.execute("query-status", json!({})).await?;
        match status["status"].as_str() {
            Some("inmigrate") if started.elapsed() < timeout => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Some("inmigrate") => {
                return Err(format!("the restore took over {timeout:?}"));
            }
            Some("running") => return Ok(()),
            Some("paused" | "prelaunch" | "postmigrate") => {
                qmp.execute("cont", json!({})).await?;
                return Ok(());
            }
            other => {
                return Err(format!(
                    "the restored VM is in state {}",
                    other.unwrap_or("(none)")
                ));
            }
        }
    }
}

/// A QMP conversation: one JSON object per line each way; events are skipped.
struct Qmp {
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
}

impl Qmp {
    async fn connect(socket: &Path) -> Result<Qmp, String> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|e| format!("cannot reach QEMU's QMP socket {}: {e}", socket.display()))?;
        let (read, write) = stream.into_split();
        let mut qmp = Qmp {
            read: BufReader::new(read),
            write,
        };
        // The greeting, then capabilities negotiation.
        qmp.line().await?;
        qmp.execute("qmp_capabilities", json!({})).await?;
        Ok(qmp)
    }

    async fn line(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        let n = self
            .read
            .read_line(&mut line)
            .await
            .map_err(|e| format!("QMP: {e}"))?;
        if n == 0 {
            return Err("QEMU closed its QMP socket".into());
        }
        serde_json::from_str(&line).map_err(|e| format!("QMP sent something else than JSON: {e}"))
    }

    async fn execute(&mut self, command: &str, arguments: Value) -> Result<Value, String> {
        let mut request = json!({ "execute": command, "arguments": arguments }).to_string();
        request.push('\n');
        self.write
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("QMP: {e}"))?;
        loop {
            let answer = self.line().await?;
            if let Some(ret) = answer.get("return") {
                return Ok(ret.clone());
            }
            if let Some(error) = answer.get("error") {
                return Err(format!(
                    "QEMU refused {command}: {}",
                    error["desc"].as_str().unwrap_or("no reason given")
                ));
            }
            // An event: not the answer.
        }
    }
}
