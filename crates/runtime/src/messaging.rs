//! Messaging: direct messages, requests that expect a reply (with a deadline), and room
//! posts. Delivery is durable and idempotent per key, so a sender that retries after a
//! crash does not deliver twice.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_store::{AgentRecord, Letter, NewPending, PendingKind, RoomRecord};
use serde::Serialize;
use serde_json::json;

/// Who sends a message.
#[derive(Clone, Debug)]
pub enum Sender<'a> {
    Operator,
    Agent(&'a AgentRecord),
    /// Someone on a channel, as a label the channel can route the answer back by
    /// (`irc:alice@#agents`); the agent sees it as the sender.
    Channel(&'a str),
}

impl Sender<'_> {
    fn name(&self) -> &str {
        match self {
            Sender::Operator => "operator",
            Sender::Agent(a) => &a.name,
            Sender::Channel(label) => label,
        }
    }
}

/// What a send did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sent {
    /// The message's id in the recipient's inbox.
    pub inbox_id: Option<u64>,
    /// The key had been delivered before; nothing new was sent.
    pub duplicate: bool,
    /// For a request: the pending item the reply resolves.
    pub request_id: Option<String>,
}

/// Maximum length of a message body, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

impl Runtime {
    /// Puts `text` in agent `to`'s inbox and wakes it. `key` makes the delivery idempotent;
    /// `reply_within` (seconds) turns it into a request whose answer reaches the sender (the
    /// operator reads it from the request) or expires.
    pub async fn send_message(
        &self,
        to: &str,
        from: Sender<'_>,
        text: &str,
        key: &str,
        reply_within: Option<u64>,
    ) -> Result<Sent, RuntimeError> {
        check_text("text", text)?;
        if let Some(secs) = reply_within
            && !(1..=crate::questions::MAX_TTL_SECS).contains(&secs)
        {
            return Err(RuntimeError::invalid(
                "timeout_secs",
                format!("must be between 1 and {}", crate::questions::MAX_TTL_SECS),
            ));
        }
        let target = self.agent(to).await?;
        if target.state.is_final() {
            return Err(RuntimeError::Conflict(format!(
                "agent `{}` is {}; it reads no more messages",
                target.name, target.state
            )));
        }
        let letter = Letter {
            to: target.id.clone(),
            sender: from.name().to_owned(),
            body: text.to_owned(),
            dedup_key: key.to_owned(),
            request_id: None,
        };
        let sent = match reply_within {
            None => {
                let delivery = self.inner.store.send(letter).await?;
                Sent {
                    inbox_id: Some(delivery.id),
                    duplicate: delivery.duplicate,
                    request_id: None,
                }
            }
            Some(secs) => {
                let id = pending_id("rq", key, &target.id);
                if let Ok(existing) = self.inner.store.get_pending(&id).await {
                    return Ok(Sent {
                        inbox_id: None,
                        duplicate: true,
                        request_id: Some(existing.id),
                    });
                }
                let item = self
                    .inner
                    .store
                    .create_pending(NewPending {
                        id,
                        kind: PendingKind::Request,
                        agent_id: match from {
                            Sender::Agent(a) => Some(a.id.clone()),
                            Sender::Operator | Sender::Channel(_) => None,
                        },
                        target_id: Some(target.id.clone()),
                        payload: json!({"from": from.name(), "to": target.name, "text": text}),
                        expires_at: Some(
                            crate::expiry::now_unix()
                                .saturating_add(secs.try_into().unwrap_or(i64::MAX)),
                        ),
                        letter: Some(letter),
                        followup_request: None,
                    })
                    .await?;
                Sent {
                    inbox_id: None,
                    duplicate: false,
                    request_id: Some(item.id),
                }
            }
        };
        self.wake(&target.id);
        self.inner.bus.poke();
        Ok(sent)
    }

    /// Delivers `text` to every member of `room` but the sender; returns how many got it.
    pub async fn post_to_room(
        &self,
        room: &str,
        from: Sender<'_>,
        text: &str,
        key: &str,
    ) -> Result<u64, RuntimeError> {
        check_text("text", text)?;
        if let Sender::Agent(agent) = &from {
            if room == crate::agents::ROOM_CONTROL {
                let why = format!(
                    "only the operator posts to {room}; agent `{}` may not",
                    agent.name
                );
                self.audit_denial(
                    agent,
                    serde_json::json!({"right": "room", "room": room, "reason": why}),
                )
                .await;
                return Err(RuntimeError::Denied(why));
            }
            let member = self
                .inner
                .store
                .list_rooms()
                .await?
                .into_iter()
                .any(|r| r.name == room && r.members.contains(&agent.name));
            if !member {
                let why = format!("agent `{}` is not a member of {room}", agent.name);
                self.audit_denial(
                    agent,
                    serde_json::json!({"right": "room", "room": room, "reason": why}),
                )
                .await;
                return Err(RuntimeError::Denied(why));
            }
        }
        let from_id = match from {
            Sender::Agent(a) => Some(a.id.clone()),
            Sender::Operator | Sender::Channel(_) => None,
        };
        let delivered = self
            .inner
            .store
            .post_room(room, from_id.as_ref(), text, key)
            .await?;
        for record in self.inner.store.list_rooms().await? {
            if record.name == room {
                for member in &record.members {
                    if let Ok(agent) = self.agent(member).await
                        && agent.state == reef_core::AgentState::Running
                    {
                        self.wake(&agent.id);
                    }
                }
            }
        }
        self.inner.bus.poke();
        Ok(delivered)
    }

    pub async fn list_rooms(&self) -> Result<Vec<RoomRecord>, RuntimeError> {
        Ok(self.inner.store.list_rooms().await?)
    }

    /// Creates a room (`#name`).
    pub async fn create_room(&self, name: &str) -> Result<RoomRecord, RuntimeError> {
        let ok = name.len() >= 2
            && name.len() <= 41
            && name.starts_with('#')
            && name[1..]
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !ok {
            return Err(RuntimeError::invalid(
                "room",
                format!("{name:?} is not a room name like #ops (a-z 0-9 - _ after the #)"),
            ));
        }
        let room = self.inner.store.create_room(name).await?;
        self.inner.bus.poke();
        Ok(room)
    }

    /// Adds an agent to a room.
    pub async fn join_room(&self, room: &str, agent: &str) -> Result<(), RuntimeError> {
        let agent = self.agent(agent).await?;
        self.inner.store.join_room(room, &agent.id).await?;
        self.inner.bus.poke();
        Ok(())
    }
}

/// A pending id: `PREFIX_` and 16 hex digits. Derived from the idempotency key, so the same
/// request retried maps to the same item.
pub(crate) fn pending_id(prefix: &str, key: &str, scope: &reef_core::AgentId) -> String {
    format!("{prefix}_{:016x}", fnv64(&format!("{scope}\0{key}")))
}

/// FNV-1a, 64 bits: a hash that is stable across processes and versions (ids and keys that
/// must come out the same after a restart).
pub(crate) fn fnv64(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

pub(crate) fn check_text(field: &str, text: &str) -> Result<(), RuntimeError> {
    if text.trim().is_empty() {
        return Err(RuntimeError::invalid(field, "must not be empty"));
    }
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(RuntimeError::invalid(
            field,
            format!("is {} bytes; the limit is {MAX_MESSAGE_BYTES}", text.len()),
        ));
    }
    Ok(())
}
