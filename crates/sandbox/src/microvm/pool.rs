//! The warm pool: VMs booted ahead of need, `size` per workspace (and read-only folders and
//! network) a session has used or announced. Taking one hands out a booted VM if there is one,
//! else waits for one being booted, else boots one; each hand-out starts a boot to replace it.
//! VMs in the pool have their shares attached but not mounted, so the workspace is looked at
//! (for its read-only files) only when a VM is handed out. With snapshots on, the pool's first
//! boot of each device shape is saved, and later VMs of that shape are restored from it
//! (`snapshot`), which takes a fraction of a boot.

use super::qemu::{Launch, VmKey};
use super::snapshot::{self, Shape, Snapshots};
use super::vm::Vm;
use crate::error::SandboxError;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a VM may take to boot before it counts as failed.
pub(crate) const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// How a VM was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandOut {
    /// Booted and waiting in the pool.
    Ready,
    /// Being booted by the pool; waited for.
    Waited,
    /// Started on demand (booted, or restored from a snapshot).
    Cold,
}

/// What the pool has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolStats {
    /// VMs handed out already booted.
    pub ready: u64,
    /// VMs handed out after waiting for the pool's boot.
    pub waited: u64,
    /// VMs started on demand.
    pub cold: u64,
    /// VMs booted from the kernel.
    pub boots: u64,
    /// VMs restored from a snapshot.
    pub restores: u64,
    /// Boots or restores that failed.
    pub failed: u64,
    /// VMs booted and waiting now.
    pub idle: usize,
    /// The last boot's time, QEMU's start to the agent's answer.
    pub last_boot: Option<Duration>,
    /// The last restore's time, QEMU's start to the agent's answer after reseeding.
    pub last_restore: Option<Duration>,
}

#[derive(Default)]
struct State {
    ready: HashMap<VmKey, Vec<Vm>>,
    booting: HashMap<VmKey, usize>,
    stats: PoolStats,
}

pub(crate) struct VmPool {
    launch: Launch,
    size: usize,
    state: Mutex<State>,
    changed: Notify,
    /// `None` when snapshots are off (or their directory could not be made).
    snapshots: Mutex<Option<Snapshots>>,
    /// Shapes whose snapshot is being saved.
    saving: Mutex<HashSet<Shape>>,
}

impl VmPool {
    /// A pool keeping `size` VMs per key; with `snapshots` (and a pool), VMs after the first of
    /// each shape are restored from a snapshot.
    pub(crate) fn new(launch: Launch, size: usize, snapshots: bool) -> Arc<VmPool> {
        let snapshots = (snapshots && size > 0)
            .then(|| {
                Snapshots::new()
                    .inspect_err(|err| tracing::warn!(%err, "VM snapshots are off"))
                    .ok()
            })
            .flatten();
        Arc::new(VmPool {
            launch,
            size,
            state: Mutex::default(),
            changed: Notify::new(),
            snapshots: Mutex::new(snapshots),
            saving: Mutex::default(),
        })
    }

    /// A new VM for `key`: restored from its shape's snapshot when there is one (booted if
    /// that fails), else booted, and then saved as its shape's snapshot if there is none yet.
    async fn start(&self, key: &VmKey) -> Result<Vm, SandboxError> {
        let shape = Shape::of(key);
        let snapshot = lock(&self.snapshots).as_ref().and_then(|s| s.get(shape));
        if let Some(snapshot) = snapshot {
            match Vm::boot(&self.launch, key.clone(), BOOT_TIMEOUT, Some(&snapshot)).await {
                Ok(vm) => {
                    let mut state = self.lock();
                    state.stats.restores += 1;
                    state.stats.last_restore = Some(vm.boot_took);
                    return Ok(vm);
                }
                Err(err) => {
                    tracing::warn!(%err, "a VM did not restore from its snapshot; booting instead");
                    if let Some(snapshots) = lock(&self.snapshots).as_mut() {
                        snapshots.forget(shape);
                    }
                }
            }
        }
        let vm = Vm::boot(&self.launch, key.clone(), BOOT_TIMEOUT, None).await;
        {
            let mut state = self.lock();
            match &vm {
                Ok(vm) => {
                    state.stats.boots += 1;
                    state.stats.last_boot = Some(vm.boot_took);
                }
                Err(_) => state.stats.failed += 1,
            }
        }
        let vm = vm?;
        self.save_snapshot(&vm, shape).await;
        Ok(vm)
    }

    /// Saves `vm` as the snapshot of `shape` unless there is one or one is being saved.
    async fn save_snapshot(&self, vm: &Vm, shape: Shape) {
        let path = {
            let snapshots = lock(&self.snapshots);
            let Some(snapshots) = snapshots.as_ref() else {
                return;
            };
            if snapshots.get(shape).is_some() || !lock(&self.saving).insert(shape) {
                return;
            }
            snapshots.path_for(shape)
        };
        match snapshot::save(vm, &path).await {
            Ok(()) => {
                if let Some(snapshots) = lock(&self.snapshots).as_mut() {
                    snapshots.saved(shape, path);
                }
            }
            Err(err) => tracing::warn!(%err, "cannot save a VM snapshot; VMs will boot"),
        }
        lock(&self.saving).remove(&shape);
    }

    pub(crate) fn launch(&self) -> &Launch {
        &self.launch
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn stats(&self) -> PoolStats {
        let state = self.lock();
        let mut stats = state.stats.clone();
        stats.idle = state.ready.values().map(Vec::len).sum();
        stats
    }

    /// Starts boots until `size` VMs for `key` are booted or booting.
    pub(crate) fn fill(self: &Arc<Self>, key: &VmKey) {
        let mut state = self.lock();
        let have =
            state.ready.get(key).map_or(0, Vec::len) + state.booting.get(key).copied().unwrap_or(0);
        for _ in have..self.size {
            *state.booting.entry(key.clone()).or_default() += 1;
            let pool = Arc::downgrade(self);
            let key = key.clone();
            tokio::spawn(async move {
                let Some(started) = Weak::upgrade(&pool) else {
                    return;
                };
                let booted = started.start(&key).await;
                started.booted(key, booted);
            });
        }
    }

    fn booted(&self, key: VmKey, booted: Result<Vm, SandboxError>) {
        {
            let mut state = self.lock();
            if let Some(n) = state.booting.get_mut(&key) {
                *n = n.saturating_sub(1);
            }
            match booted {
                Ok(vm) => state.ready.entry(key).or_default().push(vm),
                Err(err) => tracing::warn!(%err, "the microVM pool could not boot a VM"),
            }
        }
        self.changed.notify_waiters();
    }

    /// A VM for `key`, and how it was obtained; a replacement starts booting.
    pub(crate) async fn take(self: &Arc<Self>, key: &VmKey) -> Result<(Vm, HandOut), SandboxError> {
        let asked = Instant::now();
        let mut waited = false;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = self.lock();
                let ready = state.ready.entry(key.clone()).or_default();
                ready.retain(Vm::alive);
                if let Some(vm) = ready.pop() {
                    let how = if waited {
                        HandOut::Waited
                    } else {
                        HandOut::Ready
                    };
                    match how {
                        HandOut::Waited => state.stats.waited += 1,
                        _ => state.stats.ready += 1,
                    }
                    drop(state);
                    self.fill(key);
                    return Ok((vm, how));
                }
                let booting = state.booting.get(key).copied().unwrap_or(0);
                if booting == 0 || asked.elapsed() > BOOT_TIMEOUT {
                    break;
                }
            }
            waited = true;
            let _ = tokio::time::timeout(BOOT_TIMEOUT, changed).await;
        }
        let vm = self.start(key).await?;
        self.lock().stats.cold += 1;
        self.fill(key);
        Ok((vm, HandOut::Cold))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
