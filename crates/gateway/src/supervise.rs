//! Keeping one channel connected: connect, serve, and after a failure wait (1 s, doubling to
//! at most 20 s) and connect again, reporting every state on the runtime's board.

use crate::door::{Door, Ended, Layout};
use reef_core::{Channel, ChannelError};
use reef_runtime::{ChannelState, ChannelStatus, Runtime};
use std::time::Duration;
use tokio::sync::watch;

/// The first wait after a failure, and the longest.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(20);

/// What the supervisor needs of one channel besides the channel itself.
pub struct Supervised {
    pub layout: Layout,
    pub kind: &'static str,
    pub target: String,
}

/// Runs `channel` until `stop` turns true or the runtime stops.
pub async fn supervise(
    rt: Runtime,
    mut channel: Box<dyn Channel>,
    what: Supervised,
    mut stop: watch::Receiver<bool>,
) {
    let mut events = rt.bus().subscribe();
    let mut last_seq = match rt.store().last_event_seq().await {
        Ok(seq) => seq,
        Err(e) => {
            tracing::error!(channel = %what.layout.name, error = %e, "cannot read the event history");
            0
        }
    };
    let mut failures: u32 = 0;
    // Connections made so far; each after the first is a reconnect.
    let mut connections: u32 = 0;
    loop {
        if failures == 0 {
            // While retrying, the board keeps saying down (and why) until a connect works.
            let reconnects = connections.saturating_sub(1);
            report(
                &rt,
                &what,
                ChannelState::Connecting,
                None,
                failures,
                None,
                reconnects,
            )
            .await;
        }
        let ended = match Door::open(&rt, channel.as_mut(), &what.layout, &mut last_seq).await {
            Ok(door) => {
                failures = 0;
                connections = connections.saturating_add(1);
                let reconnects = connections - 1;
                report(&rt, &what, ChannelState::Up, None, 0, None, reconnects).await;
                door.serve(&mut events, &mut stop).await
            }
            Err(e) => Ended::Failed(e),
        };
        let error = match ended {
            Ended::Stopped => return,
            Ended::Failed(e) => e,
        };
        failures = failures.saturating_add(1);
        let wait = backoff(failures);
        let next = reef_store::unix_now() + i64::try_from(wait.as_secs()).unwrap_or(i64::MAX);
        tracing::warn!(channel = %what.layout.name, error = %error, retry_in = ?wait, "channel down");
        report(
            &rt,
            &what,
            ChannelState::Down,
            Some(&error),
            failures,
            Some(next),
            connections.saturating_sub(1),
        )
        .await;
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
    }
}

/// The wait after `failures` failures in a row.
fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

async fn report(
    rt: &Runtime,
    what: &Supervised,
    state: ChannelState,
    error: Option<&ChannelError>,
    failures: u32,
    next_attempt_unix: Option<i64>,
    reconnects: u32,
) {
    rt.report_channel(ChannelStatus {
        name: what.layout.name.clone(),
        kind: what.kind.to_owned(),
        target: what.target.clone(),
        state,
        since_unix: reef_store::unix_now(),
        error: error.map(ToString::to_string),
        failures,
        next_attempt_unix,
        connected: 0,
        queued: 0,
        reconnects,
        messages_in: 0,
        messages_out: 0,
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_to_twenty() {
        let waits: Vec<u64> = (1..=7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 20, 20]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
