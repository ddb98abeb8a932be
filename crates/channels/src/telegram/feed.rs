//! Where updates come from. Long polling: a task asks `getUpdates` from the offset after the
//! last update the gateway handled and hands the updates over one at a time, each with an
//! acknowledgement; only when every update of a batch is acknowledged does it ask again with
//! a higher offset (which tells the platform to forget them). Webhook: the daemon's route
//! hands each delivery over the same way and answers the platform once it is acknowledged,
//! so the platform delivers again whatever reef did not finish.

use super::api::{ApiError, BotApi};
use super::types::Update;
use reef_core::ChannelError;
use serde_json::json;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// One update, and the acknowledgement sent once the gateway has handled it.
pub struct Delivery {
    pub update: Update,
    pub done: oneshot::Sender<()>,
}

/// What a webhook route hands a channel: the raw update, and the acknowledgement it waits
/// for before answering the platform.
pub type WebhookFeed = mpsc::Receiver<(serde_json::Value, oneshot::Sender<()>)>;

pub(super) enum FeedItem {
    Update(Box<Delivery>),
    Failed(ChannelError),
}

/// The running long poll.
pub(super) struct Poller {
    pub rx: mpsc::Receiver<FeedItem>,
    task: JoinHandle<()>,
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The update kinds reef asks for.
pub(super) const ALLOWED_UPDATES: &[&str] = &["message"];

impl Poller {
    /// Polls from `offset` (the update id after the last one handled; `None`: whatever the
    /// platform still holds).
    pub fn start(api: BotApi, offset: Option<i64>, timeout_secs: u32) -> Poller {
        let (tx, rx) = mpsc::channel(1);
        let task = tokio::spawn(poll(api, offset, timeout_secs, tx));
        Poller { rx, task }
    }
}

async fn poll(api: BotApi, mut offset: Option<i64>, timeout_secs: u32, tx: mpsc::Sender<FeedItem>) {
    // The HTTP exchange may take the long poll's time and a margin for the network.
    let wait = Duration::from_secs(u64::from(timeout_secs) + 15);
    loop {
        let mut body = json!({"timeout": timeout_secs, "allowed_updates": ALLOWED_UPDATES});
        if let Some(offset) = offset {
            body["offset"] = json!(offset);
        }
        let updates: Vec<Update> = match api.call("getUpdates", &body, wait).await {
            Ok(updates) => updates,
            Err(err) => {
                let _closed = tx.send(FeedItem::Failed(channel_error(err))).await;
                return;
            }
        };
        for update in updates {
            offset = Some(update.update_id + 1);
            let (done, handled) = oneshot::channel();
            if tx
                .send(FeedItem::Update(Box::new(Delivery { update, done })))
                .await
                .is_err()
            {
                return;
            }
            // Dropped unacknowledged: the channel is gone, and so is this poll.
            if handled.await.is_err() {
                return;
            }
        }
    }
}

/// A Bot API failure as the gateway's supervisor sees it.
pub(super) fn channel_error(err: ApiError) -> ChannelError {
    match err {
        ApiError::Transport(m) | ApiError::Conflict(m) => ChannelError::Connection(m),
        ApiError::RateLimited { .. } => ChannelError::Connection(err.to_string()),
        ApiError::Unauthorized(_) => ChannelError::Refused(err.to_string()),
        ApiError::Refused { .. } => ChannelError::Invalid(err.to_string()),
    }
}
