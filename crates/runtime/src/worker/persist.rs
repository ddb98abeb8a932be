//! The writes a worker must not drop: a claimed message put back in the inbox or finished.
//! Dropped, the message would stay claimed on a node that goes on running, and nothing but a
//! restart would put it back; so while the store cannot be reached the worker waits for it.

use super::STORE_RETRY;
use crate::kernel::Runtime;
use reef_core::AgentId;
use reef_store::StoreError;

/// Runs `write` until the store takes it. While the database cannot be reached or is busy
/// (`StoreError::is_unavailable`: PostgreSQL restarting, SQLite locked) it tries again every
/// `STORE_RETRY`, so the agent's turns pause rather than lose the message. It gives up, with
/// `None`, on any other error, and when this process no longer runs the agent (the daemon
/// stops, or in a cluster its lease moved): whoever runs the agent next puts back what was
/// left claimed.
pub(super) async fn until_stored<T, F, Fut>(
    rt: &Runtime,
    agent: &AgentId,
    what: &'static str,
    mut write: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut failures = 0_u32;
    loop {
        match write().await {
            Ok(value) => {
                if failures > 0 {
                    tracing::info!(%agent, what, failures, "stored once the store answered again");
                }
                return Some(value);
            }
            Err(err) if err.is_unavailable() && rt.runs_here(agent) => {
                if failures == 0 {
                    tracing::warn!(%agent, what, error = %err,
                                   "the store cannot be reached; trying again until it answers");
                }
                failures += 1;
                tokio::time::sleep(STORE_RETRY).await;
            }
            Err(err) => {
                tracing::warn!(%agent, what, error = %err, "cannot store; left for the next start");
                return None;
            }
        }
    }
}
