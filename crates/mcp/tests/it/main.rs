//! reef-mcp integration tests: reef's client against third-party servers (the Python SDK's,
//! the npm reference servers, misbehaving ones) run in the real default sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod agent_tools;
mod bad;
mod confined;
mod everything;
mod http;
mod python;

use reef_config::{ConfigValue, McpConfig, McpServerConfig, McpTransport};
use reef_core::{SecretSource, SecretSpec};
use reef_mcp::{Launcher, McpHub};
use reef_sandbox::{HelperCommand, NetworkMode, SandboxBackend, SandboxPolicy};
use reef_test_support::mcp::{mcp_python, mcp_script};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The kernel-confined policy reef runs servers under by default (network none).
pub fn confined(hidden: Vec<PathBuf>) -> SandboxPolicy {
    SandboxPolicy {
        backend: SandboxBackend::Landlock,
        network: NetworkMode::None,
        helper: Some(HelperCommand {
            program: reef_test_support::sandbox_helper(),
            args: vec![],
        }),
        hidden,
        ..SandboxPolicy::default()
    }
}

/// A server reached through `transport`, with the defaults of the configuration.
pub fn server(name: &str, transport: McpTransport) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        transport,
        timeout_secs: 20,
        enabled: true,
        templates: None,
        network: None,
        allow_domains: None,
        writable: None,
        read_only: Vec::new(),
    }
}

/// A server run as `program args…`.
pub fn stdio(name: &str, program: &Path, args: &[&str]) -> McpServerConfig {
    let transport = McpTransport::Stdio {
        command: program.display().to_string(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: Vec::new(),
    };
    server(name, transport)
}

/// The Python SDK test server over stdio.
pub fn python_server(name: &str) -> McpServerConfig {
    let script = mcp_script("py_server.py");
    python(name, &[script.to_str().unwrap()])
}

/// A misbehaving server in `mode` (see `bad_server.py`).
pub fn bad_server(name: &str, mode: &str) -> McpServerConfig {
    let script = mcp_script("bad_server.py");
    python(name, &[script.to_str().unwrap(), mode])
}

/// `python args…` with what it needs to read shown to the sandbox, as a user configures
/// `read_only` for such a server.
fn python(name: &str, args: &[&str]) -> McpServerConfig {
    let mut config = stdio(name, &mcp_python(), args);
    config.read_only = reef_test_support::mcp::python_read_only();
    config
}

/// `node args…` with the npm reference servers shown read-only.
pub fn node(name: &str, package: &str, args: &[&str]) -> McpServerConfig {
    let entry = reef_test_support::mcp::node_server(package);
    let mut all = vec![entry.to_str().unwrap()];
    all.extend_from_slice(args);
    let mut config = stdio(name, Path::new("node"), &all);
    let modules = entry.ancestors().nth(4).unwrap().to_path_buf();
    config.read_only = vec![modules];
    config
}

pub fn with_env(mut config: McpServerConfig, key: &str, value: &str) -> McpServerConfig {
    if let McpTransport::Stdio { env, .. } = &mut config.transport {
        env.push((key.into(), ConfigValue::Plain(value.into())));
    }
    config
}

/// A hub of `servers`, confined by `policy`, their directories in `dir`.
pub fn hub_in(dir: &Path, policy: SandboxPolicy, servers: Vec<McpServerConfig>) -> Arc<McpHub> {
    hub_with(dir, policy, servers, Vec::new(), 128)
}

pub fn hub_with(
    dir: &Path,
    policy: SandboxPolicy,
    servers: Vec<McpServerConfig>,
    secrets: Vec<SecretSpec>,
    max_tools: usize,
) -> Arc<McpHub> {
    let config = McpConfig {
        max_tools_per_server: max_tools,
        servers: servers.into_iter().map(|s| (s.name.clone(), s)).collect(),
    };
    let launcher = Launcher {
        policy,
        servers_dir: dir.join("servers"),
        secrets,
        vault: None,
    };
    Arc::new(McpHub::new(&config, launcher))
}

/// A secret whose value is read from a file.
pub fn file_secret(dir: &Path, name: &str, value: &str) -> SecretSpec {
    let path = dir.join(format!("{name}.secret"));
    std::fs::write(&path, value).unwrap();
    SecretSpec {
        name: name.into(),
        source: SecretSource::File(path),
        description: None,
        policy: Default::default(),
    }
}

/// JSON arguments as a map.
pub fn args(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// Polls `check` every 50 ms for up to 20 s.
pub async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..400 {
        if check() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// Host processes descending from `pid` whose command line contains `needle`.
pub fn descendants_with(pid: u32, needle: &str) -> Vec<i32> {
    let parent_of = |p: i32| -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            if !String::from_utf8_lossy(&cmdline).contains(needle) {
                return false;
            }
            let mut cur = p;
            for _ in 0..16 {
                match parent_of(cur) {
                    Some(pp) if pp == pid as i32 => return true,
                    Some(pp) if pp > 1 => cur = pp,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}
