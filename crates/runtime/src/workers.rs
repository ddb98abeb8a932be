//! The agents' workers as the kernel drives them: starting or waking one when its agent has
//! work (on the node that holds the agent, in cluster mode), handing it operator commands,
//! refreshing its settings, and stopping it.

use crate::error::RuntimeError;
use crate::kernel::{Runtime, lock};
use crate::worker::{self, Control, WorkerHandle};
use reef_core::AgentId;
use std::sync::Arc;

impl Runtime {
    /// Wakes the agent's worker, starting it if it has none.
    pub(crate) fn wake(&self, agent: &AgentId) {
        let mut workers = lock(&self.inner.workers);
        // Checked under the lock that `shutdown` drains, so no worker starts after it.
        if *self.inner.shutdown.borrow() {
            return;
        }
        // Another node runs it (or will): that node is told.
        if let Some(cluster) = &self.inner.cluster
            && !cluster.owns(agent)
        {
            cluster.announce_work(agent);
            return;
        }
        if let Some(worker) = workers.get(agent)
            && !worker.task.is_finished()
        {
            worker.wake.notify_one();
            return;
        }
        let handle = worker::start(Arc::downgrade(&self.inner), agent.clone());
        handle.wake.notify_one();
        workers.insert(agent.clone(), handle);
    }

    /// Whether this process still runs the agent: the daemon is not stopping and, in a
    /// cluster, this node holds its lease.
    pub(crate) fn runs_here(&self, agent: &AgentId) -> bool {
        !*self.inner.shutdown.borrow()
            && self
                .inner
                .cluster
                .as_ref()
                .is_none_or(|cluster| cluster.owns(agent))
    }

    /// Hands an operator command to the agent's worker, starting one if it has none.
    pub(crate) fn control(&self, agent: &AgentId, command: Control) -> Result<(), RuntimeError> {
        let mut workers = lock(&self.inner.workers);
        if *self.inner.shutdown.borrow() {
            return Err(RuntimeError::ShuttingDown);
        }
        if let Some(cluster) = &self.inner.cluster
            && !cluster.owns(agent)
        {
            return Err(RuntimeError::Conflict(format!(
                "agent {agent} does not run on node {} (`reef cluster status` shows where it \
                 runs): send operator commands to that node",
                cluster.name()
            )));
        }
        let command = match workers.get(agent) {
            Some(worker) if !worker.task.is_finished() => match worker.control(command) {
                Ok(()) => return Ok(()),
                Err(command) => command,
            },
            _ => command,
        };
        let handle = worker::start(Arc::downgrade(&self.inner), agent.clone());
        let sent = handle.control(command);
        workers.insert(agent.clone(), handle);
        sent.map_err(|_| RuntimeError::ShuttingDown)
    }

    /// Stops the agent's worker (a running turn is interrupted) and waits for it.
    pub(crate) async fn stop_worker(&self, agent: &AgentId) {
        let worker = lock(&self.inner.workers).remove(agent);
        if let Some(worker) = worker {
            worker.stop();
            join_worker(worker).await;
        }
    }

    /// Tells the worker to pick up changed settings (model, persona) before its next turn.
    pub(crate) fn refresh(&self, agent: &AgentId) {
        if let Some(worker) = lock(&self.inner.workers).get(agent) {
            worker.refresh();
        }
    }
}

/// Waits for a stopped worker; a worker that panicked is logged (its messages stay claimed
/// until the next start releases them).
pub(crate) async fn join_worker(worker: WorkerHandle) {
    if let Err(err) = worker.task.await {
        tracing::error!(error = %err, "an agent worker ended abnormally");
    }
}
