//! The grammar of `reef token …`, `reef gateway token …` and `reef connect`.

use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Makes a scoped API token and prints it once (only its hash is kept).
    Create {
        /// A name for the token, to list and revoke it by.
        name: String,
        /// operator (everything), read-only (every read, no change) or agent:NAME (read that
        /// agent, talk to it, follow its events).
        #[arg(long)]
        scope: String,
        /// Requests per minute (a sliding window); default daemon.rate_limit, 0 for none.
        #[arg(long, value_name = "PER_MINUTE")]
        rate: Option<u32>,
    },
    /// Every scoped token: id, name, scope, rate limit, when made and when revoked.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revokes a token (by name or id): its next request is refused.
    Revoke {
        /// The token's name or id.
        token: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// The gateway's client tokens: the daemon's API tokens (`reef token`), by another name.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The gateway's address, HOST:PORT (`[gateway.quic] listen` of the daemon).
    pub addr: String,
    /// The SHA-256 fingerprint of the gateway's certificate, as `reef serve` printed it
    /// (AB:CD:…); any other certificate is refused.
    #[arg(long)]
    pub fingerprint: String,
    /// The agent to talk to.
    #[arg(long)]
    pub agent: String,
    /// A file holding the token (instead of the REEF_TOKEN environment variable).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Send this one message, print the answer and leave (otherwise lines are read from the
    /// terminal or standard input until /quit or end of input).
    #[arg(long, short)]
    pub message: Option<String>,
    /// Print the protocol events as JSON lines, as `reef run --json` does.
    #[arg(long)]
    pub json: bool,
}
