//! Webhook deliveries already accepted: a signature is accepted once, so a replayed delivery
//! is refused even after a restart.

use crate::clock::timestamp_ago;
use crate::error::StoreError;
use crate::sql::params;
use crate::store::Store;
use std::time::Duration;

impl Store {
    /// Records that `hook` accepts a delivery with `signature`; `false` when that signature
    /// was accepted before. Records older than `keep` are forgotten in the same transaction.
    pub async fn accept_hook_delivery(
        &self,
        hook: &str,
        signature: &str,
        keep: Duration,
    ) -> Result<bool, StoreError> {
        let key = format!("{hook}:{signature}");
        let hook = hook.to_owned();
        let cutoff = timestamp_ago(keep);
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db.conn.transaction()?;
            tx.prepare_cached("DELETE FROM hook_deliveries WHERE received_at < ?1")?
                .execute(params![cutoff])?;
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO hook_deliveries (signature, hook, received_at)
                     VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                )?
                .execute(params![key, hook, now])?;
            tx.commit()?;
            Ok(inserted == 1)
        })
        .await
    }

    /// Forgets an accepted signature (its delivery failed after all, so the sender's retry
    /// is not a replay).
    pub async fn forget_hook_delivery(
        &self,
        hook: &str,
        signature: &str,
    ) -> Result<(), StoreError> {
        let key = format!("{hook}:{signature}");
        self.run(move |db| {
            db.conn
                .prepare_cached("DELETE FROM hook_deliveries WHERE signature = ?1")?
                .execute(params![key])?;
            Ok(())
        })
        .await
    }
}
