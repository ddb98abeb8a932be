//! Channels' resume points: the cursor after the last message the gateway handled on a
//! channel whose platform replays what was not confirmed (a bot API's update offset).

use crate::error::StoreError;
use crate::sql::{OptionalExtension, params};
use crate::store::Store;

impl Store {
    /// The cursor kept for channel `name`.
    pub async fn channel_cursor(&self, name: &str) -> Result<Option<String>, StoreError> {
        let name = name.to_owned();
        self.run(move |db| {
            Ok(db
                .conn
                .prepare_cached("SELECT cursor FROM channel_cursors WHERE channel = ?1")?
                .query_row(params![name], |r| r.get(0))
                .optional()?)
        })
        .await
    }

    /// Keeps `cursor` as channel `name`'s resume point.
    pub async fn set_channel_cursor(&self, name: &str, cursor: &str) -> Result<(), StoreError> {
        let (name, cursor) = (name.to_owned(), cursor.to_owned());
        self.run(move |db| {
            let now = db.clock.now();
            db.conn
                .prepare_cached(
                    "INSERT INTO channel_cursors (channel, cursor, updated_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (channel) DO UPDATE SET cursor = ?2, updated_at = ?3",
                )?
                .execute(params![name, cursor, now])?;
            Ok(())
        })
        .await
    }
}
