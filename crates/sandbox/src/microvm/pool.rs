//! The warm pool: VMs booted ahead of need, `size` per workspace (and read-only folders and
//! network) a session has used or announced. Taking one hands out a booted VM if there is one,
//! else waits for one being booted, else boots one; each hand-out starts a boot to replace it.
//! VMs in the pool have their shares attached but not mounted, so the workspace is looked at
//! (for its read-only files) only when a VM is handed out.

use super::qemu::{Launch, VmKey};
use super::vm::Vm;
use crate::error::SandboxError;
use serde::Serialize;
use std::collections::HashMap;
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
    /// Booted on demand.
    Cold,
}

/// What the pool has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolStats {
    /// VMs handed out already booted.
    pub ready: u64,
    /// VMs handed out after waiting for the pool's boot.
    pub waited: u64,
    /// VMs booted on demand.
    pub cold: u64,
    /// Boots that failed.
    pub failed: u64,
    /// VMs booted and waiting now.
    pub idle: usize,
    /// The last boot's time, QEMU's start to the agent's answer.
    pub last_boot: Option<Duration>,
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
}

impl VmPool {
    pub(crate) fn new(launch: Launch, size: usize) -> Arc<VmPool> {
        Arc::new(VmPool {
            launch,
            size,
            state: Mutex::default(),
            changed: Notify::new(),
        })
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
            let launch = self.launch.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let booted = Vm::boot(&launch, key.clone(), BOOT_TIMEOUT).await;
                if let Some(pool) = Weak::upgrade(&pool) {
                    pool.booted(key, booted);
                }
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
                Ok(vm) => {
                    state.stats.last_boot = Some(vm.boot_took);
                    state.ready.entry(key).or_default().push(vm);
                }
                Err(err) => {
                    state.stats.failed += 1;
                    tracing::warn!(%err, "the microVM pool could not boot a VM");
                }
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
        let vm = Vm::boot(&self.launch, key.clone(), BOOT_TIMEOUT).await;
        {
            let mut state = self.lock();
            match &vm {
                Ok(vm) => {
                    state.stats.cold += 1;
                    state.stats.last_boot = Some(vm.boot_took);
                }
                Err(_) => state.stats.failed += 1,
            }
        }
        let vm = vm?;
        self.fill(key);
        Ok((vm, HandOut::Cold))
    }
}
