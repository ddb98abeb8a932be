//! The `reef` binary: parses the command line, runs one command, maps the result to an exit code.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "reef-cli is the one crate that prints to the terminal"
)]

mod args;
mod audit_args;
mod cap_args;
mod cmd;
mod daemon_args;
mod exit;
mod home;
mod mcp_args;
mod passphrase;
mod render;
mod routine_args;
mod secrets_args;
mod skill_args;
mod token_args;

use clap::Parser;
use std::ffi::OsStr;
use std::process::ExitCode;

fn main() -> ExitCode {
    // The sandbox helper re-executes this binary. It must run before clap (it has its own
    // arguments) and before the tokio runtime exists: it forks, so it stays single-threaded.
    if std::env::args_os().nth(1).as_deref() == Some(OsStr::new(cmd::sandbox::HELPER_SUBCOMMAND)) {
        std::process::exit(reef_sandbox::helper_main(
            std::env::args_os().skip(2).collect(),
        ));
    }
    let cli = args::Cli::parse();
    init_tracing(cli.verbose);
    // Every sandboxed command and every proxied connection costs descriptors.
    if let Err(err) = reef_sandbox::raise_open_files_limit() {
        tracing::debug!(%err, "cannot raise the open-files limit");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(2)
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("reef: cannot start the async runtime: {err}");
            return ExitCode::from(exit::RUNTIME);
        }
    };
    match runtime.block_on(cmd::dispatch(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            let code = exit::classify(&err);
            eprintln!("reef: error: {err:#}");
            ExitCode::from(code)
        }
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        // llama.cpp's loader warns about quirks of model files that are no concern of the user.
        0 => "warn,llama-cpp-2=error",
        1 => "info,reef=debug,llama-cpp-2=warn",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("REEF_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
