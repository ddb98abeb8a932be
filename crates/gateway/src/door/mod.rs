//! One connected channel at work: what people write goes to the overseer (operator commands)
//! or to the agent it names; what agents answer goes back where the question came from;
//! agents come and go with their state; the control room hears of stops and questions.
//! This module reads the channel; [`events`] reads the runtime's history, in order, so what
//! is said while the channel is down goes out after the next connect.

use crate::address::{Origin, conversation_agent, mentions};
use crate::cooldown::Cooldown;
use reef_config::Route;
use reef_core::{
    AgentState, Author, Channel, ChannelError, Conversation, Inbound, Outbound, Speaker,
};
use reef_runtime::{Runtime, RuntimeError, Sender, SpawnRequest};
use reef_store::StoredEvent;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch};

mod events;

/// How often one person is answered a refusal or a hint.
const QUIET: Duration = Duration::from_secs(10);
/// Events read from the history at once when catching up.
pub(super) const CATCH_UP: usize = 1000;

/// One message, as the door routes it.
struct Said {
    conversation: Conversation,
    author: Author,
    text: String,
    addressed: bool,
    key: Option<String>,
    files: Vec<reef_core::Upload>,
}

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
        // A channel whose platform replays what was not confirmed resumes after the last
        // message handled.
        let cursor = rt.store().channel_cursor(&layout.name).await.map_err(|e| {
            ChannelError::Connection(format!("cannot read the channel's place: {e}"))
        })?;
        channel.resume(cursor);
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
                    Ok(inbound) => self.handle(inbound).await,
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

    /// Handles `inbound`, then keeps the channel's cursor past it.
    async fn handle(&mut self, inbound: Inbound) -> Result<(), ChannelError> {
        let cursor = match &inbound {
            Inbound::Message { cursor, .. } => cursor.clone(),
            Inbound::Invited { .. } => None,
        };
        if matches!(inbound, Inbound::Message { .. }) {
            self.rt.channel_traffic(&self.layout.name, 1, 0);
        }
        let handled = self.inbound(inbound).await;
        // A message refused as invalid is handled too; one that broke the connection is not.
        if !matches!(
            handled,
            Err(ChannelError::Connection(_) | ChannelError::Refused(_))
        ) && let Some(cursor) = cursor
            && let Err(e) = self
                .rt
                .store()
                .set_channel_cursor(&self.layout.name, &cursor)
                .await
        {
            return Err(ChannelError::Connection(format!(
                "cannot keep the channel's place: {e}"
            )));
        }
        handled
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
                listener,
                conversation,
                author,
                text,
                addressed,
                key,
                files,
                ..
            } => {
                let said = Said {
                    conversation,
                    author,
                    text,
                    addressed,
                    key,
                    files,
                };
                match listener {
                    Speaker::Overseer => self.for_overseer(said).await,
                    Speaker::Agent(agent) => self.for_agent(&agent, said).await,
                }
            }
        }
    }

    async fn for_overseer(&mut self, said: Said) -> Result<(), ChannelError> {
        let (conversation, author) = (said.conversation.clone(), said.author.clone());
        if let Some(line) = said.text.trim_start().strip_prefix('!') {
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
        if !said.addressed {
            // Talk in a room that does not address reef is between people.
            return Ok(());
        }
        let agent = match &self.layout.route {
            Some(Route::Agent(name)) => name.clone(),
            Some(Route::Spawn(template)) => {
                let name = conversation_agent(&self.layout.name, conversation.name());
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
        self.deliver(&agent, said).await
    }

    async fn for_agent(&mut self, agent: &str, said: Said) -> Result<(), ChannelError> {
        let from_agent = self.agent_by_handle(&said.author.name);
        if from_agent.as_deref() == Some(agent) {
            return Ok(());
        }
        if let Conversation::Room(_) = said.conversation {
            let handle = self
                .channel
                .handle(&Speaker::Agent(agent.to_owned()))
                .unwrap_or_default();
            let names = [agent, handle.as_str()];
            if !mentions(&said.text, &names, |a, b| self.channel.same_name(a, b)) {
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
        self.deliver(agent, said).await
    }

    /// Puts what was said in `agent`'s inbox with the conversation as its sender label, and
    /// the files that came with it in the agent's workspace.
    async fn deliver(&mut self, agent: &str, said: Said) -> Result<(), ChannelError> {
        let Said {
            conversation,
            author,
            mut text,
            key,
            files,
            ..
        } = said;
        let conversation = &conversation;
        let author = &author;
        let origin = Origin::new(&self.layout.name, &author.name, conversation);
        // The platform's id of the message makes a second delivery of it (after a restart)
        // a no-op; without one, a key of this process.
        let key = match key {
            Some(id) => format!("{}:msg:{id}", self.layout.name),
            None => {
                self.keys += 1;
                format!(
                    "{}:{}:{}",
                    self.layout.name,
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos()),
                    self.keys
                )
            }
        };
        for file in files {
            match self.rt.save_upload(agent, &file.name, &file.bytes).await {
                Ok(path) => text.push_str(&format!(
                    "\n[{} sent a file: {path} in your workspace, {} bytes]",
                    author.name,
                    file.bytes.len()
                )),
                Err(e) => text.push_str(&format!(
                    "\n[{} sent a file ({}) that could not be saved: {e}]",
                    author.name, file.name
                )),
            }
        }
        let text = text.as_str();
        // Someone who is not an operator is outside the operator's control: fenced.
        let fenced;
        let text = if self.channel.is_operator(author) {
            text
        } else {
            fenced = self
                .rt
                .fence_incoming(
                    reef_core::ContentSource::Channel,
                    &origin.label(),
                    text,
                    Some(agent),
                )
                .await;
            fenced.as_str()
        };
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

    /// Says `text` (cut to the channel's answer limit) as `from`.
    async fn say(
        &mut self,
        from: Speaker,
        to: Conversation,
        text: &str,
    ) -> Result<(), ChannelError> {
        // What leaves for the channel is looked at first.
        let place = format!("channel:{}", self.layout.name);
        let agent = match &from {
            Speaker::Agent(name) => Some(name.as_str()),
            Speaker::Overseer => None,
        };
        let limit = self.channel.answer_limit();
        let text = match self.rt.screen_outgoing(text, &place, agent).await {
            reef_runtime::Outgoing::Send(text) => cut(&text, limit),
            reef_runtime::Outgoing::Withheld(why) => format!("[message withheld: {why}]"),
        };
        self.channel.send(Outbound::Say { from, to, text }).await?;
        self.rt.channel_traffic(&self.layout.name, 0, 1);
        Ok(())
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
pub(super) fn on_channel(rt: &Runtime, template: &str, name: &str) -> bool {
    rt.templates()
        .get(template)
        .is_none_or(|t| t.on_channel(name))
}

fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut; the transcript has all of it)", &text[..end])
}
