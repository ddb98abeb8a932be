//! The command-line grammar of `reef` (clap derive).

use clap::{Args, Parser, Subcommand};

/// reef: a self-hosted operating system for autonomous AI agents.
#[derive(Debug, Parser)]
#[command(
    name = "reef",
    version,
    about = "reef: a self-hosted operating system for autonomous AI agents",
    long_about = None,
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// Override a config value for this command, e.g. `-c agent.max_rounds=10` (repeatable).
    #[arg(short = 'c', long = "config", value_name = "KEY=VALUE", global = true)]
    pub overrides: Vec<String>,

    /// More logging on stderr (-v, -vv); REEF_LOG takes a tracing filter.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

pub const EXIT_CODES: &str = "Exit codes: 0 ok, 1 runtime error, 2 usage or config error, \
3 model provider error, 4 turn stopped by a budget (rounds or time), 130 interrupted.";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one turn: the agent works on PROMPT in the current directory until it answers.
    Run(RunArgs),
    /// Talk with an agent interactively (slash commands: /quit /new /model /cost /help).
    Chat(ChatArgs),
    /// Inspect stored sessions and their transcripts.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Inspect the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Check config, store, the model provider and this machine's isolation features.
    Doctor(JsonFlag),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task. Read from stdin when omitted or `-`.
    pub prompt: Vec<String>,
    /// Print protocol events as JSON lines instead of human output.
    #[arg(long)]
    pub json: bool,
    /// Continue a stored session (an id or a unique prefix of one).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Resume a stored session (an id or a unique prefix of one).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List sessions, most recently active first.
    List {
        #[arg(long)]
        json: bool,
        /// How many to show.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Show a session's whole transcript.
    Show {
        /// A session id or a unique prefix of one.
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Show every resolved value and where it came from (secrets masked).
    Show(JsonFlag),
}
