//! [`IrcChannel`]: reef on one IRC server. The overseer is one connection in the control
//! room; every agent present is a connection of its own, as its own nick, in the agents'
//! room. Lines from all of them arrive on one queue, so `recv` is cancel-safe; a connection
//! that ends ends the channel, and the supervisor connects it again.

use super::conn::{Conn, ConnEvent, Registration};
use super::{Casemapping, Message, mask_matches, text_budget};
use crate::text;
use async_trait::async_trait;
use reef_config::IrcConfig;
use reef_core::{
    Author, Channel, ChannelError, ChannelHealth, Conversation, Inbound, Outbound, Speaker,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a departing nick's QUIT may take to go out.
const QUIT_WAIT: Duration = Duration::from_secs(3);
/// What the server adds to a relayed line besides the nick: `!user@host`, the user at most
/// ten bytes and the host at most 63.
const PREFIX_SLACK: usize = 1 + 10 + 1 + 63;

/// Passwords, read from `[secrets]` by the caller.
#[derive(Clone, Default)]
pub struct Credentials {
    /// For SASL PLAIN, with the overseer's nick as the account.
    pub sasl_password: Option<String>,
    /// Sent to NickServ (`IDENTIFY`) once the overseer is registered.
    pub nickserv_password: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("sasl_password", &self.sasl_password.as_ref().map(|_| "…"))
            .field(
                "nickserv_password",
                &self.nickserv_password.as_ref().map(|_| "…"),
            )
            .finish()
    }
}

/// reef's identities on one IRC server.
pub struct IrcChannel {
    config: IrcConfig,
    operators: Vec<String>,
    credentials: Credentials,
    tls: Option<Arc<rustls::ClientConfig>>,
    conns: BTreeMap<Speaker, Conn>,
    next_id: u64,
    events_tx: mpsc::Sender<(u64, ConnEvent)>,
    events_rx: mpsc::Receiver<(u64, ConnEvent)>,
    casemapping: Casemapping,
}

impl IrcChannel {
    /// A channel for `config`, with `operators` masks; `tls_roots` replaces the system's
    /// certificate roots (tests, private servers).
    pub fn new(
        config: IrcConfig,
        operators: Vec<String>,
        credentials: Credentials,
        tls_roots: Option<rustls::RootCertStore>,
    ) -> Result<Self, ChannelError> {
        let tls = if config.tls {
            Some(Arc::new(crate::tls::client_config(tls_roots)?))
        } else {
            None
        };
        let (events_tx, events_rx) = mpsc::channel(1024);
        Ok(Self {
            config,
            operators,
            credentials,
            tls,
            conns: BTreeMap::new(),
            next_id: 0,
            events_tx,
            events_rx,
            casemapping: Casemapping::default(),
        })
    }

    async fn open(&mut self, speaker: &Speaker) -> Result<Conn, ChannelError> {
        let (nick, sasl) = match speaker {
            Speaker::Overseer => (
                self.config.nick.clone(),
                self.credentials.sasl_password.as_deref(),
            ),
            Speaker::Agent(name) => (agent_nick(name), None),
        };
        let realname = match speaker {
            Speaker::Overseer => "reef overseer".to_owned(),
            Speaker::Agent(name) => format!("reef agent {name}"),
        };
        self.next_id += 1;
        let reg = Registration {
            host: &self.config.host,
            port: self.config.port,
            tls: self.tls.clone(),
            nick: &nick,
            realname: &realname,
            sasl_password: sasl,
            flood_burst: self.config.flood_burst,
            flood_interval: Duration::from_millis(self.config.flood_interval_ms),
        };
        Conn::open(&reg, self.next_id, self.events_tx.clone()).await
    }

    async fn arrive(&mut self, agent: &str, rooms: &[String]) -> Result<(), ChannelError> {
        let speaker = Speaker::Agent(agent.to_owned());
        if !self.conns.contains_key(&speaker) {
            let conn = self.open(&speaker).await?;
            self.conns.insert(speaker.clone(), conn);
        }
        for room in rooms {
            self.join(&speaker, room).await?;
        }
        Ok(())
    }

    async fn join(&self, speaker: &Speaker, room: &str) -> Result<(), ChannelError> {
        let conn = self.conn(speaker)?;
        let join = Message::new("JOIN", &[room])
            .map_err(|e| ChannelError::Invalid(format!("cannot join `{room}`: {e}")))?;
        conn.send(&join).await
    }

    fn conn(&self, speaker: &Speaker) -> Result<&Conn, ChannelError> {
        self.conns.get(speaker).ok_or_else(|| {
            ChannelError::Invalid(match speaker {
                Speaker::Overseer => "the overseer is not connected".to_owned(),
                Speaker::Agent(name) => format!("agent `{name}` is not on IRC"),
            })
        })
    }

    async fn say(&self, from: &Speaker, to: &Conversation, body: &str) -> Result<(), ChannelError> {
        let conn = self.conn(from)?;
        let target = to.name();
        let budget = text_budget(conn.nick.len() + PREFIX_SLACK, "PRIVMSG", target);
        for piece in text::split(&outbound_text(body), budget) {
            let line = Message::new("PRIVMSG", &[target, &piece])
                .map_err(|e| ChannelError::Invalid(format!("cannot send to `{target}`: {e}")))?;
            conn.send(&line).await?;
        }
        Ok(())
    }

    /// Turns a line from `speaker`'s connection into what happened, if it concerns reef.
    fn interpret(&mut self, speaker: &Speaker, message: &Message, lossy: bool) -> Option<Inbound> {
        let own = self.conns.get(speaker)?.nick.clone();
        match message.command() {
            "PRIVMSG" => {
                let nick = message.nick()?;
                if nick == own {
                    return None;
                }
                let target = message.param(0);
                let conversation = if target.starts_with(['#', '&', '+', '!']) {
                    Conversation::Room(target.to_owned())
                } else {
                    Conversation::Direct(nick.to_owned())
                };
                let raw = message.param(1);
                let raw = match ctcp(raw) {
                    Ctcp::None => raw,
                    Ctcp::Action(action) => action,
                    Ctcp::Other => return None,
                };
                let clean = text::sanitize(raw.as_bytes());
                let sanitized = clean.changed || lossy;
                if sanitized {
                    tracing::info!(from = %nick, to = %target, "sanitized an inbound IRC line");
                }
                if clean.text.trim().is_empty() {
                    return None;
                }
                // IRC has no message ids or replayable history: a room line is for reef only
                // when the gateway finds an agent named in it.
                let addressed = matches!(conversation, Conversation::Direct(_));
                Some(Inbound::Message {
                    listener: speaker.clone(),
                    conversation,
                    author: author(message),
                    text: clean.text,
                    sanitized,
                    addressed,
                    key: None,
                    cursor: None,
                    files: Vec::new(),
                })
            }
            "INVITE" => match speaker {
                Speaker::Agent(agent) => Some(Inbound::Invited {
                    agent: agent.clone(),
                    room: message.param(1).to_owned(),
                    author: author(message),
                }),
                Speaker::Overseer => None,
            },
            "NICK" if message.nick() == Some(own.as_str()) => {
                if let Some(conn) = self.conns.get_mut(speaker) {
                    conn.nick = message.param(0).to_owned();
                }
                None
            }
            "KICK" if message.param(1) == own => {
                tracing::warn!(room = %message.param(0), nick = %own, by = ?message.nick(),
                               "kicked from a room");
                None
            }
            _ => None,
        }
    }
}

#[async_trait]
impl Channel for IrcChannel {
    async fn connect(&mut self, agents: &[(String, Vec<String>)]) -> Result<(), ChannelError> {
        self.conns.clear();
        // Lines from connections just dropped are stale.
        while self.events_rx.try_recv().is_ok() {}
        let overseer = self.open(&Speaker::Overseer).await?;
        self.casemapping = overseer.casemapping;
        if let Some(password) = &self.credentials.nickserv_password {
            let identify = Message::new("PRIVMSG", &["NickServ", &format!("IDENTIFY {password}")])
                .map_err(|e| ChannelError::Invalid(format!("the NickServ password: {e}")))?;
            overseer.send(&identify).await?;
        }
        self.conns.insert(Speaker::Overseer, overseer);
        let control = self.config.control.clone();
        self.join(&Speaker::Overseer, &control).await?;
        for (agent, rooms) in agents {
            match self.arrive(agent, rooms).await {
                Ok(()) => {}
                // One agent's nick refused: the others still come.
                Err(ChannelError::Invalid(e) | ChannelError::Refused(e)) => {
                    tracing::warn!(%agent, error = %e, "an agent cannot join IRC");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn recv(&mut self) -> Result<Inbound, ChannelError> {
        loop {
            let Some((id, event)) = self.events_rx.recv().await else {
                return Err(ChannelError::Connection("every connection is gone".into()));
            };
            let Some(speaker) = self
                .conns
                .iter()
                .find_map(|(s, c)| (c.id == id).then(|| s.clone()))
            else {
                continue;
            };
            match event {
                ConnEvent::Closed(reason) => {
                    let who = self.conns.get(&speaker).map(|c| c.nick.clone());
                    return Err(ChannelError::Connection(format!(
                        "{}: {reason}",
                        who.unwrap_or_default()
                    )));
                }
                ConnEvent::Line { message, lossy } => {
                    if let Some(inbound) = self.interpret(&speaker, &message, lossy) {
                        return Ok(inbound);
                    }
                }
            }
        }
    }

    async fn send(&mut self, out: Outbound) -> Result<(), ChannelError> {
        match out {
            Outbound::Say { from, to, text } => self.say(&from, &to, &text).await,
            Outbound::Arrive { agent, rooms } => self.arrive(&agent, &rooms).await,
            Outbound::Join { agent, room } => self.join(&Speaker::Agent(agent), &room).await,
            Outbound::Depart { agent, reason } => {
                if let Some(conn) = self.conns.remove(&Speaker::Agent(agent)) {
                    conn.quit(&reason, QUIT_WAIT).await;
                }
                Ok(())
            }
        }
    }

    async fn close(&mut self, reason: &str) {
        // Agents first, the overseer last, each QUIT on its own connection.
        let overseer = self.conns.remove(&Speaker::Overseer);
        let conns = std::mem::take(&mut self.conns);
        let quits = conns.into_values().map(|conn| conn.quit(reason, QUIT_WAIT));
        futures::future::join_all(quits).await;
        if let Some(conn) = overseer {
            conn.quit(reason, QUIT_WAIT).await;
        }
    }

    fn handle(&self, speaker: &Speaker) -> Option<String> {
        self.conns.get(speaker).map(|c| c.nick.clone())
    }

    fn is_operator(&self, author: &Author) -> bool {
        self.operators
            .iter()
            .any(|mask| mask_matches(mask, &author.identity, self.casemapping))
    }

    fn same_name(&self, a: &str, b: &str) -> bool {
        super::eq_ignore_case(a, b, self.casemapping)
    }

    fn health(&self) -> ChannelHealth {
        ChannelHealth {
            connected: self.conns.len(),
            queued: self.conns.values().map(Conn::queued).sum(),
        }
    }
}

/// An agent's nick: its name, which is already IRC-safe, behind `_` when it starts with a
/// digit (nicks may not).
pub fn agent_nick(name: &str) -> String {
    if name.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
        format!("_{name}")
    } else {
        name.to_owned()
    }
}

fn author(message: &Message) -> Author {
    Author {
        name: message.nick().unwrap_or_default().to_owned(),
        identity: message.prefix().unwrap_or_default().to_owned(),
    }
}

enum Ctcp<'a> {
    None,
    Action(&'a str),
    Other,
}

/// CTCP inside a PRIVMSG: `/me` actions become their text, every other request (VERSION,
/// PING, DCC…) is not for an agent.
fn ctcp(text: &str) -> Ctcp<'_> {
    let Some(inner) = text.strip_prefix('\x01') else {
        return Ctcp::None;
    };
    let inner = inner.strip_suffix('\x01').unwrap_or(inner);
    match inner.strip_prefix("ACTION ") {
        Some(action) => Ctcp::Action(action),
        None => Ctcp::Other,
    }
}

/// What an agent wrote, as IRC can carry it: tabs become spaces, CR LF and lone CRs become
/// line breaks (where `split` cuts), every other control character but IRC's formatting codes
/// goes.
fn outbound_text(text: &str) -> String {
    text.replace("\r\n", "\n")
        .chars()
        .filter_map(|c| match c {
            '\t' => Some(' '),
            '\r' | '\n' => Some('\n'),
            '\x02' | '\x03' | '\x0f' | '\x16' | '\x1d' | '\x1f' => Some(c),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_nicks_never_start_with_a_digit() {
        assert_eq!(agent_nick("ada"), "ada");
        assert_eq!(agent_nick("7up"), "_7up");
    }

    #[test]
    fn ctcp_actions_become_text_and_other_requests_are_dropped() {
        assert!(matches!(
            ctcp("\x01ACTION waves\x01"),
            Ctcp::Action("waves")
        ));
        assert!(matches!(ctcp("\x01VERSION\x01"), Ctcp::Other));
        assert!(matches!(ctcp("hello"), Ctcp::None));
    }

    #[test]
    fn outbound_text_keeps_lines_and_formatting_but_no_other_control() {
        assert_eq!(
            outbound_text("a\tb\r\nc\rd\x01e\x07\x02bold\x02"),
            "a b\nc\nde\x02bold\x02"
        );
    }
}
