//! Rooms: named groups of agents (`#agents` for everyone, `#control` for operator commands,
//! more on demand). Posting to a room delivers one inbox message per member except the
//! sender, all in one transaction with a single `message.room` event.

use crate::agents::agent_name;
use crate::error::StoreError;
use crate::events::insert_event;
use crate::inbox::{Letter, deliver_in};
use crate::sql::{Conn, OptionalExtension, TransactionBehavior, params};
use crate::store::Store;
use reef_core::AgentId;
use serde::Serialize;
use serde_json::json;

/// A room and the names of its members.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RoomRecord {
    pub name: String,
    pub members: Vec<String>,
    pub created_at: String,
}

impl Store {
    /// Creates a room; `Conflict` when it exists.
    pub async fn create_room(&self, name: &str) -> Result<RoomRecord, StoreError> {
        let name = name.to_owned();
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            if room_exists(&tx, &name)? {
                return Err(StoreError::Conflict(format!("room {name} already exists")));
            }
            tx.prepare_cached("INSERT INTO rooms (name, created_at) VALUES (?1, ?2)")?
                .execute(params![name, now])?;
            insert_event(&tx, &now, "room.created", None, &json!({"room": name}))?;
            tx.commit()?;
            Ok(RoomRecord {
                name,
                members: Vec::new(),
                created_at: now,
            })
        })
        .await
    }

    /// Every room with its members, by name.
    pub async fn list_rooms(&self) -> Result<Vec<RoomRecord>, StoreError> {
        self.run(|db| {
            let mut stmt = db
                .conn
                .prepare_cached("SELECT name, created_at FROM rooms ORDER BY name")?;
            let rooms = stmt
                .query_map(params![], |r| {
                    Ok((r.get::<String>(0)?, r.get::<String>(1)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let mut out = Vec::with_capacity(rooms.len());
            for (name, created_at) in rooms {
                let members = db
                    .conn
                    .prepare_cached(
                        "SELECT a.name FROM room_members m JOIN agents a ON a.id = m.agent_id
                         WHERE m.room = ?1 ORDER BY a.name",
                    )?
                    .query_map(params![name], |r| r.get::<String>(0))?
                    .collect::<Result<Vec<_>, _>>()?;
                out.push(RoomRecord {
                    name,
                    members,
                    created_at,
                });
            }
            Ok(out)
        })
        .await
    }

    /// Adds `agent` to `room` (already a member is fine); `NotFound` for an unknown room.
    pub async fn join_room(&self, room: &str, agent: &AgentId) -> Result<(), StoreError> {
        let (room, agent) = (room.to_owned(), agent.clone());
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            if !room_exists(&tx, &room)? {
                return Err(StoreError::NotFound(format!("room {room}")));
            }
            let added = tx
                .prepare_cached(
                    "INSERT INTO room_members (room, agent_id) VALUES (?1, ?2)
                     ON CONFLICT DO NOTHING",
                )?
                .execute(params![room, agent.as_str()])?;
            if added > 0 {
                insert_event(
                    &tx,
                    &now,
                    "room.joined",
                    Some(&agent),
                    &json!({"room": room}),
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Delivers `body` to every member of `room` but `from` and returns how many got it.
    /// Idempotent per `dedup_key`: posting again with the same key delivers nothing new.
    pub async fn post_room(
        &self,
        room: &str,
        from: Option<&AgentId>,
        body: &str,
        dedup_key: &str,
    ) -> Result<u64, StoreError> {
        let (room, from, body, key) = (
            room.to_owned(),
            from.cloned(),
            body.to_owned(),
            dedup_key.to_owned(),
        );
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            if !room_exists(&tx, &room)? {
                return Err(StoreError::NotFound(format!("room {room}")));
            }
            let sender = match &from {
                Some(agent) => agent_name(&tx, agent)?,
                None => "operator".to_owned(),
            };
            let members = tx
                .prepare_cached(
                    "SELECT agent_id FROM room_members WHERE room = ?1 ORDER BY agent_id",
                )?
                .query_map(params![room], |r| r.get::<String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            let mut delivered = 0;
            for member in members {
                if from.as_ref().is_some_and(|f| f.as_str() == member) {
                    continue;
                }
                let letter = Letter {
                    to: AgentId::from_string(member),
                    sender: format!("{sender} in {room}"),
                    body: body.clone(),
                    dedup_key: key.clone(),
                    request_id: None,
                };
                if !deliver_in(&tx, &now, &letter)?.duplicate {
                    delivered += 1;
                }
            }
            if delivered > 0 {
                insert_event(
                    &tx,
                    &now,
                    "message.room",
                    from.as_ref(),
                    &json!({"room": room, "from": sender, "body": body, "recipients": delivered}),
                )?;
            }
            tx.commit()?;
            Ok(delivered)
        })
        .await
    }
}

fn room_exists(conn: &Conn, name: &str) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM rooms WHERE name = ?1")?
        .query_row(params![name], |r| r.get::<i64>(0))
        .optional()?
        .is_some())
}
