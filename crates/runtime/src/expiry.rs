//! The clock of the daemon: once a second, pending items past their deadline expire (the
//! waiting agent is told and woken); now and then stuck jobs are failed; once a minute, the
//! event history is cut to its bound.

use crate::kernel::{Inner, Runtime};
use reef_store::PendingStatus;
use std::sync::Weak;
use std::time::Duration;

/// Seconds since the Unix epoch.
pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// How long routine fires and ended jobs are kept.
const HISTORY: Duration = Duration::from_secs(30 * 24 * 3600);

pub(crate) async fn run(inner: Weak<Inner>) {
    let mut tick: u64 = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Ok(runtime) = Runtime::from_weak(&inner) else {
            return;
        };
        if let Err(err) = runtime.expire_due().await {
            tracing::warn!(error = %err, "expiring pending items failed; retrying in a second");
        }
        tick += 1;
        // Stuck jobs are looked for four times per `stuck_after`, at most once a minute.
        let every = (runtime.config().jobs.stuck_after.as_secs() / 4).clamp(1, 60);
        if tick.is_multiple_of(every)
            && let Err(err) = runtime.fail_stuck_jobs().await
        {
            tracing::warn!(error = %err, "looking for stuck jobs failed");
        }
        // Fires and jobs older than a month are forgotten once an hour.
        if tick.is_multiple_of(3600)
            && let Err(err) = runtime
                .store()
                .prune_routine_history(&reef_store::timestamp_ago(HISTORY))
                .await
        {
            tracing::warn!(error = %err, "pruning routine history failed");
        }
        if tick.is_multiple_of(60) {
            let keep = runtime.config().daemon.event_history;
            if let Err(err) = runtime.store().prune_events(keep).await {
                tracing::warn!(error = %err, "pruning the event history failed");
            }
        }
    }
}

impl Runtime {
    /// Expires every pending item whose deadline has passed; returns how many.
    pub async fn expire_due(&self) -> Result<usize, crate::RuntimeError> {
        let due = self.store().due_pending(now_unix()).await?;
        let mut expired = 0;
        for item in due {
            if self.inner.in_flight.contains(&item.id) {
                // Approved and running: its result resolves it.
                continue;
            }
            match self.resolve(&item.id, PendingStatus::Expired, None).await {
                Ok(_) => expired += 1,
                // Answered between the query and now: nothing to expire.
                Err(crate::RuntimeError::Conflict(_)) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(expired)
    }
}
