//! One connected channel at work: what people write goes to the overseer (operator commands)
//! or to the agent it names; what agents answer goes back where the question came from;
//! agents come and go with their state; the control room hears of stops and questions.
//! Events are read in order from the runtime's history, so nothing said while the channel
//! was down is lost: it goes out after the next connect.

use crate::address::{Origin, conversation_agent, mentions};
use crate::announce::announcement;
use crate::cooldown::Cooldown;
use reef_config::Route;
use reef_core::{
    AgentState, Author, Channel, ChannelError, Conversation, Inbound, Outbound, Speaker,
    TurnOutcome,
};
use reef_runtime::{Runtime, RuntimeError, Sender, SpawnRequest};
use reef_store::StoredEvent;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch};

/// The longest answer sent to a channel, in bytes; the transcript keeps all of it.
const MAX_ANSWER_BYTES: usize = 4000;
/// How often one person is answered a refusal or a hint.
const QUIET: Duration = Duration::from_secs(10);
/// Events read from the history at once when catching up.
const CATCH_UP: usize = 1000;

/// How a channel is laid out, from its configuration.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The `[channels.NAME]` table's name.
    pub name: String,
    /// Where operator commands are taken and announcements made.
    pub control: String,
    /// Where agents appear.
    pub room: String,
    pub route: Option<Route>,
    pub cooldown: Duration,
}

/// Why serving ended.
pub enum Ended {
    /// Asked to stop; the channel was closed politely.
    Stopped,
    /// The channel failed; reconnect.
    Failed(ChannelError),
}

/// A connected channel and what it remembers between lines.
pub struct Door<'a> {
    rt: &'a Runtime,
    channel: &'a mut dyn Channel,
    layout: &'a Layout,
    /// Agents present on the channel, by reef name.
    present: BTreeSet<String>,
    cooldown: Cooldown,
    /// The last event handled; the next connect catches up from here.
    last_seq: &'a mut u64,
    keys: u64,
    /// Refusals and hints, per person.
    quiet: crate::cooldown::Quiet,
}

impl<'a> Door<'a> {
    /// Connects `channel` with every agent that belongs on it.
    pub async fn open(
        rt: &'a Runtime,
        channel: &'a mut dyn Channel,
        layout: &'a Layout,
        last_seq: &'a mut u64,
    ) -> Result<Door<'a>, ChannelError> {
        let present = present_agents(rt, &layout.name)
            .await
            .map_err(|e| ChannelError::Connection(format!("cannot list agents: {e}")))?;
        let arrivals: Vec<(String, Vec<String>)> = present
            .iter()
            .map(|name| (name.clone(), vec![layout.room.clone()]))
            .collect();
        channel.connect(&arrivals).await?;
        Ok(Door {
            rt,
            channel,
            layout,
            present,
            cooldown: Cooldown::new(layout.cooldown),
            last_seq,
            keys: 0,
            quiet: crate::cooldown::Quiet::new(QUIET),
        })
    }

    /// Serves until the channel fails or `stop` turns true.
    pub async fn serve(
        mut self,
        events: &mut broadcast::Receiver<StoredEvent>,
        stop: &mut watch::Receiver<bool>,
    ) -> Ended {
        let health = self.channel.health();
        self.rt
            .channel_counts(&self.layout.name, health.connected, health.queued);
        // What happened while the channel was down.
        if let Err(e) = self.catch_up().await {
            return Ended::Failed(e);
        }
        loop {
            let result = tokio::select! {
                inbound = self.channel.recv() => match inbound {
                    Ok(inbound) => self.inbound(inbound).await,
                    Err(e) => Err(e),
                },
                event = events.recv() => match event {
                    Ok(event) if event.seq > *self.last_seq + 1 => self.catch_up().await,
                    Ok(event) if event.seq == *self.last_seq + 1 => self.event(event).await,
                    Ok(_) => Ok(()),
                    Err(broadcast::error::RecvError::Lagged(_)) => self.catch_up().await,
                    Err(broadcast::error::RecvError::Closed) => {
                        self.channel.close("reef is shutting down").await;
                        return Ended::Stopped;
                    }
                },
                _ = stop.changed() => {
                    self.channel.close("reef is shutting down").await;
                    return Ended::Stopped;
                }
            };
            if let Err(e) = result {
                match e {
                    ChannelError::Invalid(message) => {
                        self.channel_error(&message).await;
                    }
                    fatal => return Ended::Failed(fatal),
                }
            }
            let health = self.channel.health();
            self.rt
                .channel_counts(&self.layout.name, health.connected, health.queued);
        }
    }

    /// Handles every event after `last_seq` from the history.
    async fn catch_up(&mut self) -> Result<(), ChannelError> {
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

    async fn inbound(&mut self, inbound: Inbound) -> Result<(), ChannelError> {
        match inbound {
            Inbound::Invited {
                agent,
                room,
                author,
            } => {
                let accepted = self.channel.is_operator(&author);
                self.record(
                    "channel.invited",
                    json!({"agent": agent, "room": room, "by": author.identity,
                           "accepted": accepted}),
                )
                .await;
                if !accepted {
                    // Only an operator decides which rooms an agent reads.
                    return Ok(());
                }
                self.channel.send(Outbound::Join { agent, room }).await
            }
            Inbound::Message {
                listener: Speaker::Overseer,
                conversation,
                author,
                text,
                ..
            } => self.for_overseer(conversation, author, &text).await,
            Inbound::Message {
                listener: Speaker::Agent(agent),
                conversation,
                author,
                text,
                ..
            } => self.for_agent(&agent, conversation, author, &text).await,
        }
    }

    async fn for_overseer(
        &mut self,
        conversation: Conversation,
        author: Author,
        text: &str,
    ) -> Result<(), ChannelError> {
        if let Some(line) = text.trim_start().strip_prefix('!') {
            if !self.channel.is_operator(&author) {
                // Answered (and recorded) at most once per QUIET per person, so nobody can
                // fill the send queue or the history with refusals.
                let Some(held) = self.quiet.pass(&author.identity, Instant::now()) else {
                    return Ok(());
                };
                let command = line.split_whitespace().next().unwrap_or_default();
                self.record(
                    "operator.refused",
                    json!({"identity": author.identity, "command": command,
                           "held_before": held}),
                )
                .await;
                let refusal = format!("{}: only operators may run commands here", author.name);
                return self.say(Speaker::Overseer, conversation, &refusal).await;
            }
            let who = format!("{}:{}", self.layout.name, author.identity);
            let reply = self.rt.operate(line, &who).await;
            return self
                .say(Speaker::Overseer, conversation, &reply.lines.join("\n"))
                .await;
        }
        let Conversation::Direct(peer) = &conversation else {
            // Talk in the control room is between people.
            return Ok(());
        };
        let agent = match &self.layout.route {
            Some(Route::Agent(name)) => name.clone(),
            Some(Route::Spawn(template)) => {
                let name = conversation_agent(&self.layout.name, peer);
                if let Err(e) = self.spawn_for(&name, template).await {
                    let line = format!("cannot start an agent for you: {e}");
                    return self.say(Speaker::Overseer, conversation, &line).await;
                }
                name
            }
            None => {
                if self.quiet.pass(&author.identity, Instant::now()).is_none() {
                    return Ok(());
                }
                let hint = format!(
                    "I take operator commands (!help lists them). To talk to an agent, name it \
                     in {} or message it directly.",
                    self.layout.room
                );
                return self.say(Speaker::Overseer, conversation, &hint).await;
            }
        };
        self.deliver(&agent, &conversation, &author, text).await
    }

    async fn for_agent(
        &mut self,
        agent: &str,
        conversation: Conversation,
        author: Author,
        text: &str,
    ) -> Result<(), ChannelError> {
        let from_agent = self.agent_by_handle(&author.name);
        if from_agent.as_deref() == Some(agent) {
            return Ok(());
        }
        if let Conversation::Room(_) = conversation {
            let handle = self
                .channel
                .handle(&Speaker::Agent(agent.to_owned()))
                .unwrap_or_default();
            let names = [agent, handle.as_str()];
            if !mentions(text, &names, |a, b| self.channel.same_name(a, b)) {
                return Ok(());
            }
        }
        if let Some(from) = &from_agent
            && !self.cooldown.pass(from, agent, Instant::now())
        {
            tracing::info!(%from, to = %agent, "agent-to-agent message held by the cooldown");
            self.record("channel.cooldown", json!({"from": from, "to": agent}))
                .await;
            return Ok(());
        }
        self.deliver(agent, &conversation, &author, text).await
    }

    /// Puts `text` in `agent`'s inbox with the conversation as its sender label.
    async fn deliver(
        &mut self,
        agent: &str,
        conversation: &Conversation,
        author: &Author,
        text: &str,
    ) -> Result<(), ChannelError> {
        let origin = Origin::new(&self.layout.name, &author.name, conversation);
        self.keys += 1;
        let key = format!(
            "{}:{}:{}",
            self.layout.name,
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            self.keys
        );
        let sent = self
            .rt
            .send_message(agent, Sender::Channel(&origin.label()), text, &key, None)
            .await;
        if let Err(e) = sent {
            let line = format!("{}: {agent} cannot take messages: {e}", author.name);
            let speaker = self.speaker_for(agent);
            return self.say(speaker, conversation.clone(), &line).await;
        }
        Ok(())
    }

    async fn spawn_for(&self, name: &str, template: &str) -> Result<(), RuntimeError> {
        match self.rt.get_agent(name).await {
            Ok(agent) if !agent.state.is_final() => Ok(()),
            Ok(agent) => Err(RuntimeError::Conflict(format!(
                "your agent {name} is {}; an operator can `!destroy {name}` to start afresh",
                agent.state
            ))),
            Err(RuntimeError::NotFound(_)) => {
                let request = SpawnRequest {
                    name: name.to_owned(),
                    template: template.to_owned(),
                    ..SpawnRequest::default()
                };
                self.rt.spawn_agent(request, None).await.map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// One event from the history.
    async fn event(&mut self, event: StoredEvent) -> Result<(), ChannelError> {
        let seq = event.seq;
        self.handle_event(event).await?;
        // Only a handled event counts: one that failed is handled again after reconnecting.
        *self.last_seq = seq;
        Ok(())
    }

    async fn handle_event(&mut self, event: StoredEvent) -> Result<(), ChannelError> {
        let Some(agent_id) = &event.agent_id else {
            return Ok(());
        };
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
                let text = match origin.room {
                    Some(_) if !named => format!("{}: {text}", origin.author),
                    _ => text,
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

    /// Says `text` (cut to [`MAX_ANSWER_BYTES`]) as `from`.
    async fn say(
        &mut self,
        from: Speaker,
        to: Conversation,
        text: &str,
    ) -> Result<(), ChannelError> {
        let text = cut(text);
        self.channel.send(Outbound::Say { from, to, text }).await
    }

    /// The agent speaks for itself when it is on the channel, else the overseer relays.
    fn speaker_for(&self, agent: &str) -> Speaker {
        let speaker = Speaker::Agent(agent.to_owned());
        if self.present.contains(agent) && self.channel.handle(&speaker).is_some() {
            Speaker::Agent(agent.to_owned())
        } else {
            Speaker::Overseer
        }
    }

    /// The present agent whose nick is `handle`.
    fn agent_by_handle(&self, handle: &str) -> Option<String> {
        self.present
            .iter()
            .find(|name| {
                self.channel
                    .handle(&Speaker::Agent((*name).clone()))
                    .is_some_and(|h| self.channel.same_name(&h, handle))
            })
            .cloned()
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

    async fn channel_error(&self, message: &str) {
        tracing::warn!(channel = %self.layout.name, %message, "channel error");
        self.record("channel.error", json!({"error": message}))
            .await;
    }

    async fn record(&self, kind: &str, mut data: serde_json::Value) {
        data["channel"] = json!(self.layout.name);
        if let Err(e) = self.rt.record_event(kind, None, data).await {
            tracing::warn!(channel = %self.layout.name, error = %e, "cannot record an event");
        }
    }
}

/// The agents that belong on channel `name`: running or paused, from a template that does
/// not leave the channel out.
async fn present_agents(rt: &Runtime, name: &str) -> Result<BTreeSet<String>, RuntimeError> {
    Ok(rt
        .list_agents()
        .await?
        .into_iter()
        .filter(|a| matches!(a.state, AgentState::Running | AgentState::Paused))
        .filter(|a| !a.ephemeral && on_channel(rt, &a.template, name))
        .map(|a| a.name)
        .collect())
}

/// Whether agents of `template` appear on channel `name` (an unknown template: yes).
fn on_channel(rt: &Runtime, template: &str, name: &str) -> bool {
    rt.templates()
        .get(template)
        .is_none_or(|t| t.on_channel(name))
}

fn cut(text: &str) -> String {
    if text.len() <= MAX_ANSWER_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_ANSWER_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut; the transcript has all of it)", &text[..end])
}
