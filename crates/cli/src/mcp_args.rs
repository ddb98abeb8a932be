//! The grammar of `reef mcp …`.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// The configured servers: how each is reached, its state in the running daemon (when
    /// there is one), its tool count and its last error.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// A server's tools, as agents see them (the server is started here, in the sandbox).
    Tools {
        server: String,
        /// Machine-readable output, with each tool's input schema.
        #[arg(long)]
        json: bool,
    },
    /// Call a tool of a server by hand: `reef mcp call fs read_file '{"path": "/data/a"}'`.
    Call {
        server: String,
        /// The tool's own name (without the `SERVER__` prefix).
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        args: String,
    },
    /// A server's resources, or the contents of one.
    Resources { server: String, uri: Option<String> },
    /// A server's prompts, or one filled in with `--arg NAME=VALUE`.
    Prompts {
        server: String,
        name: Option<String>,
        #[arg(long = "arg", value_name = "NAME=VALUE")]
        args: Vec<String>,
    },
    /// Add a server to $REEF_HOME/reef.toml, keeping its comments and layout:
    /// `reef mcp add fs -- npx -y @modelcontextprotocol/server-filesystem /data`, or
    /// `reef mcp add hosted --url https://example.com/mcp --bearer-secret TOKEN`.
    Add {
        name: String,
        /// A server reached over streamable HTTP.
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// A `[secrets]` name sent as the bearer token (with --url).
        #[arg(long, requires = "url", value_name = "SECRET")]
        bearer_secret: Option<String>,
        /// An environment variable of the program, `KEY=VALUE` or `KEY=secret:NAME`.
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// Only agents of these templates get it (default: every agent).
        #[arg(long = "template", value_name = "TEMPLATE")]
        templates: Vec<String>,
        /// The program and its arguments, after `--`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Remove a server from $REEF_HOME/reef.toml.
    Rm { name: String },
    /// Serve reef to an MCP host on stdin and stdout: its agents, questions and memory,
    /// through the running daemon.
    Serve,
}
