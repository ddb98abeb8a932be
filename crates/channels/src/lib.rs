//! reef's channels, the doors through which people reach agents: the text rules every channel
//! shares ([`text`]: splitting a long reply, making inbound text safe to hand a model) and the
//! IRC protocol ([`irc`]: messages, masks, line budgets).

pub mod irc;
pub mod text;
