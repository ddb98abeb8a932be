//! The command-line grammar of the daemon and its clients: `serve`, `agent …`, `send`,
//! `questions`, `answer`, `approve`, `deny`.

use clap::{Args, Subcommand};
use std::net::SocketAddr;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address of the HTTP API (default: daemon.listen); port 0 picks a free one.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Run as a node of the cluster described by `[cluster]` (as `cluster.enabled = true`).
    #[arg(long)]
    pub cluster: bool,
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Create an agent from a template and start it.
    Spawn {
        name: String,
        #[arg(long, short = 't', default_value = "worker")]
        template: String,
        /// A configured provider (default: the template's, then the default provider).
        #[arg(long)]
        model: Option<String>,
        /// Replaces the template's persona.
        #[arg(long)]
        persona: Option<String>,
        /// A first message for the agent.
        #[arg(long)]
        task: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Every agent with its state.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One agent in detail.
    Status {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// The agent's events: turns, tool calls, messages, questions.
    Logs {
        name: String,
        /// Only the last N events.
        #[arg(long, default_value_t = 50)]
        tail: usize,
        #[arg(long)]
        json: bool,
    },
    /// No new turns until resumed.
    Pause {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Run turns again.
    Resume {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Terminate (a running turn is interrupted).
    Stop {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove the agent; --purge also deletes its transcript and directory.
    Destroy {
        name: String,
        #[arg(long)]
        purge: bool,
        #[arg(long)]
        json: bool,
    },
    /// Switch the agent to another configured provider.
    Model {
        name: String,
        model: String,
        #[arg(long)]
        json: bool,
    },
    /// Compact the agent's context now (after its running turn): older turns are replaced by
    /// a summary (agent.compaction); the transcript keeps them.
    Compact {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Give the agent a fresh session (after its running turn): a new transcript; its
    /// workspace, notes and long-term memory stay.
    Reset {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Step through the agent's turns: pause before tool calls (--break tool=shell) or
    /// model requests (--break round), then step, continue, skip, edit or inspect. Without
    /// COMMAND: an interactive session on stdin (end of input clears the breakpoints).
    Debug {
        name: String,
        /// Where to stop: `round`, `tool` (any tool) or `tool=NAME`; repeatable. Replaces
        /// the agent's breakpoints.
        #[arg(long = "break", value_name = "SPEC")]
        breaks: Vec<String>,
        /// With `wait`: give up after this many seconds.
        #[arg(long, value_name = "SECS", default_value_t = 60)]
        timeout: u64,
        #[arg(long)]
        json: bool,
        /// status | wait | step | continue | skip TEXT | edit JSON | inspect | off
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Replace the agent's persona.
    Persona {
        name: String,
        persona: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The agent's name.
    pub agent: String,
    pub text: String,
    /// Wait for the agent's answer and print it.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this many seconds (default: daemon.request_timeout_secs).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct QuestionsArgs {
    /// Include answered, cancelled and expired items.
    #[arg(long)]
    pub all: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The question's id (a unique prefix works).
    pub id: String,
    pub text: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The approval's id (a unique prefix works).
    pub id: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DenyArgs {
    /// The approval's id (a unique prefix works).
    pub id: String,
    /// Why; the agent is told.
    #[arg(long)]
    pub reason: Option<String>,
    #[arg(long)]
    pub json: bool,
}
