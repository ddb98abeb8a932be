//! The grammar of `reef secrets …`.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Stores a secret in the vault ($REEF_HOME/vault, encrypted). The value is read from the
    /// terminal (not echoed) or from stdin, never from the command line.
    Set {
        /// The secret's name: letters, digits and _, also the environment variable a command
        /// is given it in.
        name: String,
        /// always (default): any call the agent's capabilities allow; with-approval: each use
        /// waits for the operator's approval.
        #[arg(long, value_name = "POLICY", conflicts_with = "only_for")]
        policy: Option<String>,
        /// Only these may be given it: tool:NAME, skill:NAME or domain:HOST (repeat or
        /// separate with commas).
        #[arg(long = "only-for", value_name = "SCOPE", value_delimiter = ',')]
        only_for: Vec<String>,
        /// What the secret is for (shown to the model beside its name).
        #[arg(long)]
        description: Option<String>,
    },
    /// Every secret agents may use: name, where it lives, its policy and its last use.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Removes a secret from the vault.
    Rm { name: String },
    /// Replaces a vault secret's value (read like `set`), keeping its policy; or, with
    /// --passphrase, seals the whole vault again under a new passphrase.
    Rotate {
        /// The secret to give a new value.
        #[arg(required_unless_present = "passphrase", conflicts_with = "passphrase")]
        name: Option<String>,
        /// Change the vault's passphrase instead.
        #[arg(long)]
        passphrase: bool,
    },
}
