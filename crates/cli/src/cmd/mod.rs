//! One module per subcommand; `dispatch` routes the parsed command line to it.

mod agent_suite;
mod agents;
mod audit;
#[cfg(feature = "local")]
mod bench;
mod bench_agent;
mod bench_dashboard;
mod bench_index;
mod bench_memory;
mod cap;
mod channels;
mod chat;
mod client;
mod cluster;
mod config;
mod connect;
mod cost;
mod dashboard;
mod debug;
mod doctor;
mod mcp;
mod mcp_config;
mod memory;
pub mod migrate;
mod models;
mod replay;
mod routines;
mod run;
pub mod sandbox;
mod sandbox_works;
mod secrets;
mod serve;
mod session;
mod sessions;
mod skills;
mod token;
pub mod trust;

use crate::args::{BenchCommand, ChannelsCommand, Cli, Command, ConfigCommand, SandboxCommand};

/// The task `reef bench model` runs by default (the README's first command).
pub const BENCH_TASK: &str = "How much free disk space is there?";

/// Runs the chosen command and returns its exit code.
pub async fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Run(args) => run::run(&cli.overrides, args).await,
        Command::Chat(args) => chat::chat(&cli.overrides, args).await,
        Command::Cost(args) => cost::cost(&cli.overrides, args).await,
        Command::Dashboard(args) => dashboard::dashboard(&cli.overrides, args).await,
        Command::Sessions { command } => sessions::sessions(&cli.overrides, command).await,
        Command::Config {
            command: ConfigCommand::Show(flag),
        } => config::show(&cli.overrides, flag.json),
        Command::Sandbox {
            command: SandboxCommand::Run(args),
        } => sandbox::run(&cli.overrides, args).await,
        Command::Sandbox {
            command: SandboxCommand::Status(flag),
        } => sandbox::status(&cli.overrides, flag.json).await,
        Command::Doctor(flag) => doctor::doctor(&cli.overrides, flag.json).await,
        Command::Serve(args) => serve::serve(&cli.overrides, args).await,
        Command::Agent { command } => agents::agent(&cli.overrides, command).await,
        Command::Send(args) => agents::send(&cli.overrides, args).await,
        Command::Questions(args) => agents::questions(&cli.overrides, args).await,
        Command::Answer(args) => agents::answer(&cli.overrides, args).await,
        Command::Approve(args) => agents::approve(&cli.overrides, args).await,
        Command::Deny(args) => agents::deny(&cli.overrides, args).await,
        Command::Routine { command } => routines::routine(&cli.overrides, command).await,
        Command::Job { command } => routines::job(&cli.overrides, command).await,
        Command::Channels {
            command: ChannelsCommand::Status(flag),
        } => channels::status(&cli.overrides, flag.json).await,
        Command::Cluster {
            command: crate::args::ClusterCommand::Status(flag),
        } => cluster::status(&cli.overrides, flag.json).await,
        Command::Cluster {
            command: crate::args::ClusterCommand::Drain { node, wait_secs },
        } => cluster::drain(&cli.overrides, &node, wait_secs).await,
        Command::Models { command } => models::models(&cli.overrides, command).await,
        Command::Memory { command } => memory::memory(&cli.overrides, command).await,
        Command::Audit { command } => audit::audit(&cli.overrides, command).await,
        Command::Cap { command } => cap::cap(&cli.overrides, command).await,
        Command::Secrets { command } => secrets::secrets(&cli.overrides, command).await,
        Command::Token { command } => token::token(&cli.overrides, command).await,
        Command::Gateway {
            command: crate::token_args::GatewayCommand::Token { command },
        } => token::token(&cli.overrides, command).await,
        Command::Connect(args) => connect::connect(args).await,
        Command::Skills { command } => skills::skills(&cli.overrides, command).await,
        Command::Mcp { command } => mcp::mcp(&cli.overrides, command).await,
        Command::Trust(args) => trust::trust(args),
        Command::Migrate(args) => migrate::migrate(&cli.overrides, args).await,
        Command::Bench {
            command: BenchCommand::Model(args),
        } => bench_model(&cli.overrides, args).await,
        Command::Bench {
            command: BenchCommand::Memory(args),
        } => bench_memory::memory(&cli.overrides, args).await,
        Command::Bench {
            command: BenchCommand::Agent(args),
        } => bench_agent::agent(&cli.overrides, args).await,
        Command::Bench {
            command: BenchCommand::Dashboard(args),
        } => bench_dashboard::dashboard(&cli.overrides, args).await,
    }
}

#[cfg(feature = "local")]
async fn bench_model(
    overrides: &[String],
    args: crate::args::BenchModelArgs,
) -> anyhow::Result<u8> {
    bench::model(overrides, args).await
}

#[cfg(not(feature = "local"))]
async fn bench_model(_: &[String], _: crate::args::BenchModelArgs) -> anyhow::Result<u8> {
    Err(crate::exit::Exit::usage(
        "this reef was built without the `local` feature (embedded models)",
    ))
}
