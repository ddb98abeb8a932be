//! `[mcp]`: servers run as programs or reached by URL, secrets by name, sandbox changes per
//! server, and errors that name the key.

use crate::{Fixture, MAIN};
use reef_config::{ConfigValue, McpTransport, NetworkModeName};
use std::path::{Path, PathBuf};

fn load(extra: &str) -> Result<reef_config::Config, String> {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!("{MAIN}\n[secrets.GH_TOKEN]\nenv = \"GH_TOKEN\"\n\n{extra}"),
    );
    fx.load(&[("HOME", "/home/ada")], &[])
        .map_err(|e| e.to_string())
}

#[test]
fn a_program_server_and_a_url_server_resolve_with_their_defaults() {
    let config = load(
        "[mcp]\nmax_tools_per_server = 40\n\n\
         [mcp.servers.fs]\ncommand = \"node\"\nargs = [\"server.js\", \"/data\"]\n\
         env = { MODE = \"ro\", TOKEN = { secret = \"GH_TOKEN\" } }\n\
         network = \"allowlist\"\nallow_domains = [\"api.github.com\"]\nwritable = [\"~/notes\"]\nread_only = [\"/opt/venv\"]\n\
         templates = [\"coder\"]\n\n\
         [mcp.servers.hosted]\nurl = \"https://mcp.example.com/mcp\"\n\
         headers = { X-Team = \"blue\" }\nbearer_token_secret = \"GH_TOKEN\"\ntimeout_secs = 5\n\
         enabled = false\n",
    )
    .unwrap();
    assert_eq!(config.mcp.max_tools_per_server, 40);
    let fs = &config.mcp.servers["fs"];
    assert_eq!(
        fs.transport,
        McpTransport::Stdio {
            command: "node".into(),
            args: vec!["server.js".into(), "/data".into()],
            env: vec![
                ("MODE".into(), ConfigValue::Plain("ro".into())),
                ("TOKEN".into(), ConfigValue::Secret("GH_TOKEN".into())),
            ],
        }
    );
    assert_eq!(fs.timeout_secs, 60);
    assert_eq!(fs.network, Some(NetworkModeName::Allowlist));
    assert_eq!(fs.writable, Some(vec![PathBuf::from("/home/ada/notes")]));
    assert_eq!(fs.read_only, vec![PathBuf::from("/opt/venv")]);
    assert!(fs.offered_to("coder") && !fs.offered_to("manager"));
    let hosted = &config.mcp.servers["hosted"];
    assert_eq!(
        hosted.transport,
        McpTransport::Http {
            url: "https://mcp.example.com/mcp".into(),
            headers: vec![("X-Team".into(), ConfigValue::Plain("blue".into()))],
            bearer_token_secret: Some("GH_TOKEN".into()),
        }
    );
    assert_eq!(hosted.timeout_secs, 5);
    assert!(
        !hosted.offered_to("coder"),
        "a disabled server goes to no agent"
    );
}

#[test]
fn no_mcp_section_means_no_servers_and_the_default_tool_cap() {
    let config = load("").unwrap();
    assert!(config.mcp.servers.is_empty());
    assert_eq!(config.mcp.max_tools_per_server, 128);
}

#[test]
fn bad_servers_are_refused_naming_the_key() {
    let cases = [
        (
            "[mcp.servers.x]\ntimeout_secs = 5\n",
            "mcp.servers.x",
            "needs `command`",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\nurl = \"https://h/\"\n",
            "mcp.servers.x.url",
            "not both",
        ),
        (
            "[mcp.servers.a__b]\ncommand = \"a\"\n",
            "mcp.servers.a__b",
            "NAME__TOOL",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\nenv = { T = { secret = \"NOPE\" } }\n",
            "mcp.servers.x.env.T",
            "no [secrets.NOPE]",
        ),
        (
            "[mcp.servers.x]\nurl = \"https://h/\"\nbearer_token_secret = \"NOPE\"\n",
            "mcp.servers.x.bearer_token_secret",
            "no [secrets.NOPE]",
        ),
        (
            "[mcp.servers.x]\nurl = \"ftp://h/\"\n",
            "mcp.servers.x.url",
            "not an http",
        ),
        (
            "[mcp.servers.x]\nurl = \"https://h/\"\nnetwork = \"full\"\n",
            "mcp.servers.x.network",
            "not to a `url`",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\nheaders = { A = \"b\" }\n",
            "mcp.servers.x.headers",
            "not to a `command`",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\ntimeout_secs = 0\n",
            "mcp.servers.x.timeout_secs",
            "between 1 and 3600",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\nwritable = [\"rel/path\"]\n",
            "mcp.servers.x.writable",
            "not an absolute path",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\nallow_domains = [\"https://x\"]\n",
            "mcp.servers.x.allow_domains",
            "not a domain",
        ),
        (
            "[mcp]\nmax_tools_per_server = 0\n",
            "mcp.max_tools_per_server",
            "between 1 and 10000",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\nport = 3\n",
            "port",
            "unknown field",
        ),
    ];
    for (toml, key, message) in cases {
        let err = load(toml).unwrap_err();
        assert!(err.contains(key), "{toml}: {err}");
        assert!(err.contains(message), "{toml}: {err}");
    }
}

#[test]
fn a_project_file_cannot_add_a_server_without_trust() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    fx.write(
        Path::new("project/reef.toml"),
        "[mcp.servers.evil]\ncommand = \"sh\"\n",
    );
    let err = fx.load(&[], &[]).unwrap_err().to_string();
    assert!(err.contains("mcp.servers.evil"), "{err}");
    assert!(err.contains("start programs"), "{err}");
}
