//! The grammar of `reef cap …`.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum CapCommand {
    /// An agent's capability token in words: each block's rights and who stated them, the
    /// blocks' revocation ids, and whether the token verifies and is revoked.
    Show {
        /// The agent's name.
        agent: String,
        #[arg(long)]
        json: bool,
    },
    /// Widens an agent's rights by minting it a new token from the root key. RIGHT is one of
    /// tool:NAME, read:PATH, write:PATH, domain:HOST, secret:NAME, channel:ROOM,
    /// spawn:TEMPLATE, schedule, skill_write, shared_memory_write. With no RIGHT, mints a new
    /// token for the rights the agent has (after its token was damaged).
    Grant {
        /// The agent's name.
        agent: String,
        #[arg(value_name = "RIGHT")]
        rights: Vec<String>,
    },
    /// Revokes an agent's token (its newest block, or the block --id names): the agent and
    /// every agent whose token descends from it fail their next check.
    Revoke {
        /// The agent's name.
        agent: String,
        /// One of the revocation ids `reef cap show` lists.
        #[arg(long, value_name = "REVOCATION_ID")]
        id: Option<String>,
    },
}
