//! A connected channel's side of the event history: catching up from the last event
//! handled, agents arriving and departing with their state, answers routed back to where
//! their messages came from, announcements in the control room, and what the scheduler
//! reports: spawned runs' answers, routines disabled after failures, heartbeat findings.

use super::{CATCH_UP, Door, on_channel};
use crate::address::Origin;
use crate::announce::announcement;
use reef_core::{AgentState, ChannelError, Conversation, Outbound, Speaker, TurnOutcome};
use reef_store::StoredEvent;

/// The event kinds a channel acts on: presence, answers and announcements.
const HANDLED: &[&str] = &[
    "agent.state_changed",
    "agent.destroyed",
    "turn.ended",
    "question.created",
    "approval.created",
];

impl Door<'_> {
    /// Handles every event after `last_seq` from the history.
    pub(super) async fn catch_up(&mut self) -> Result<(), ChannelError> {
        loop {
            let events = self
                .rt
                .store()
                .events_after(*self.last_seq, None, CATCH_UP)
                .await
                .map_err(|e| ChannelError::Connection(format!("cannot read events: {e}")))?;
            let done = events.len() < CATCH_UP;
            for event in events {
                self.event(event).await?;
            }
            if done {
                return Ok(());
            }
        }
    }

    /// One event from the history.
    pub(super) async fn event(&mut self, event: StoredEvent) -> Result<(), ChannelError> {
        let seq = event.seq;
        self.handle_event(event).await?;
        // Only a handled event counts: one that failed is handled again after reconnecting.
        *self.last_seq = seq;
        Ok(())
    }

    async fn handle_event(&mut self, event: StoredEvent) -> Result<(), ChannelError> {
        let Some(agent_id) = &event.agent_id else {
            return self.scheduler_event(&event).await;
        };
        // Most events (tool calls, usage, deltas of state) concern no channel: skip them
        // before reading the store.
        if !HANDLED.contains(&event.kind.as_str()) {
            return Ok(());
        }
        let name = match event.kind.as_str() {
            "agent.destroyed" => event.data["name"].as_str().map(str::to_owned),
            _ => match self.rt.store().get_agent(agent_id).await {
                Ok(found) => found.map(|a| a.name),
                Err(e) => return Err(ChannelError::Connection(format!("cannot read agents: {e}"))),
            },
        };
        let Some(name) = name else {
            return Ok(());
        };
        if let Some(line) = announcement(&event, &name) {
            let control = Conversation::Room(self.layout.control.clone());
            self.say(Speaker::Overseer, control, &line).await?;
        }
        match event.kind.as_str() {
            "agent.state_changed" => {
                let to = event.data["to"].as_str().and_then(AgentState::parse);
                match to {
                    Some(AgentState::Running)
                        if !self.present.contains(&name) && self.belongs(&name).await =>
                    {
                        self.arrive(&name).await?;
                    }
                    Some(state) if state.is_final() => {
                        self.depart(&name, state.as_str()).await?;
                    }
                    _ => {}
                }
            }
            "agent.destroyed" => self.depart(&name, "destroyed").await?,
            "turn.ended" => self.answered(&name, &event).await?,
            _ => {}
        }
        Ok(())
    }

    /// Sends a finished turn's answer where its message came from: back to the conversation
    /// for a channel message, else (a task from the operator or another agent) into the
    /// agents' room when the agent is present.
    async fn answered(&mut self, agent: &str, event: &StoredEvent) -> Result<(), ChannelError> {
        let Ok(outcome) = serde_json::from_value::<TurnOutcome>(event.data["outcome"].clone())
        else {
            return Ok(());
        };
        let text = match outcome {
            TurnOutcome::Completed { text } => text,
            TurnOutcome::Failed { .. } | TurnOutcome::Interrupted => return Ok(()),
            other => format!(
                "I could not finish: {}",
                serde_json::to_value(&other)
                    .ok()
                    .and_then(|v| v["status"].as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
        };
        let from = event.data["from"].as_str().unwrap_or_default();
        if event.data["inbox_ids"]
            .as_array()
            .is_some_and(|ids| ids.len() > 1)
            && event.data["senders"]
                .as_array()
                .is_some_and(|s| s.iter().any(|x| x.as_str() != Some(from)))
        {
            // One answer to messages from several conversations (`collect`): sending it to
            // any of them could show one person what another said in private.
            let line = format!(
                "{agent} answered messages from several conversations at once; the answer is \
                 in its transcript (!logs {agent})"
            );
            let control = Conversation::Room(self.layout.control.clone());
            return self.say(Speaker::Overseer, control, &line).await;
        }
        match Origin::parse(&self.layout.name, from) {
            Some(origin) => {
                // In a room the answer names who asked, unless it already starts so.
                let named = text
                    .split([':', ',', ' '])
                    .next()
                    .is_some_and(|first| self.channel.same_name(first, &origin.author));
                let text = if origin.in_room() && !named {
                    format!("{}: {text}", origin.author)
                } else {
                    text
                };
                let speaker = self.speaker_for(agent);
                self.say(speaker, origin.conversation(), &text).await
            }
            // A task the operator gave (`!invoke`, the API) is reported in the room; answers
            // to other agents, webhooks and API clients go to them alone.
            None if from == "operator" && self.present.contains(agent) => {
                let room = Conversation::Room(self.layout.room.clone());
                self.say(Speaker::Agent(agent.to_owned()), room, &text)
                    .await
            }
            None => Ok(()),
        }
    }

    /// What the scheduler tells people: a spawned run's report in the agents' room, a
    /// routine disabled after failures and a heartbeat's finding in the control room.
    async fn scheduler_event(&mut self, event: &StoredEvent) -> Result<(), ChannelError> {
        let d = &event.data;
        let text = |key: &str| d[key].as_str().unwrap_or_default().to_owned();
        let (room, line) = match event.kind.as_str() {
            "routine.report" => (
                self.layout.room.clone(),
                format!(
                    "{} (routine {}): {}",
                    text("agent"),
                    text("routine"),
                    text("text")
                ),
            ),
            "routine.disabled" => (
                self.layout.control.clone(),
                format!(
                    "routine {} is disabled: {}",
                    text("routine"),
                    text("reason")
                ),
            ),
            "heartbeat.alert"
                if d["to"] == "#control"
                    && self
                        .rt
                        .config()
                        .heartbeat
                        .as_ref()
                        .and_then(|h| h.channel.as_deref())
                        .is_none_or(|c| c == self.layout.name) =>
            {
                (
                    self.layout.control.clone(),
                    format!("{} (heartbeat): {}", text("agent"), text("text")),
                )
            }
            _ => return Ok(()),
        };
        self.say(Speaker::Overseer, Conversation::Room(room), &line)
            .await
    }

    async fn arrive(&mut self, agent: &str) -> Result<(), ChannelError> {
        let out = Outbound::Arrive {
            agent: agent.to_owned(),
            rooms: vec![self.layout.room.clone()],
        };
        match self.channel.send(out).await {
            Ok(()) => {
                self.present.insert(agent.to_owned());
                Ok(())
            }
            Err(ChannelError::Invalid(e) | ChannelError::Refused(e)) => {
                self.channel_error(&format!("{agent} cannot join: {e}"))
                    .await;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    async fn depart(&mut self, agent: &str, reason: &str) -> Result<(), ChannelError> {
        if !self.present.remove(agent) {
            return Ok(());
        }
        self.channel
            .send(Outbound::Depart {
                agent: agent.to_owned(),
                reason: reason.to_owned(),
            })
            .await
    }

    /// Whether the agent's template puts it on this channel.
    async fn belongs(&self, agent: &str) -> bool {
        match self.rt.get_agent(agent).await {
            // A one-off agent (a webhook's, a request's) answers its caller, not a room.
            Ok(record) => {
                !record.ephemeral && on_channel(self.rt, &record.template, &self.layout.name)
            }
            Err(_) => false,
        }
    }
}
