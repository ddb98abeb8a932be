//! One module per subcommand; `dispatch` routes the parsed command line to it.

mod chat;
mod config;
mod doctor;
mod run;
mod session;
mod sessions;

use crate::args::{Cli, Command, ConfigCommand};

/// Runs the chosen command and returns its exit code.
pub async fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Run(args) => run::run(&cli.overrides, args).await,
        Command::Chat(args) => chat::chat(&cli.overrides, args).await,
        Command::Sessions { command } => sessions::sessions(&cli.overrides, command).await,
        Command::Config {
            command: ConfigCommand::Show(flag),
        } => config::show(&cli.overrides, flag.json),
        Command::Doctor(flag) => doctor::doctor(&cli.overrides, flag.json).await,
    }
}
