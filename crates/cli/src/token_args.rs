//! The grammar of `reef token …`.

use clap::Subcommand;

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
