//! Third-party MCP programs for tests: the official Python SDK (in the venv `.ci/run` makes)
//! running the scripts in `test-support/mcp/`, and the reference servers from npm
//! (`@modelcontextprotocol/server-everything`, `server-filesystem`), installed by `.ci/run`.

use std::path::PathBuf;

/// The Python that has the `mcp` SDK (2.x): `REEF_TEST_PYTHON`, else the venv `.ci/run`
/// makes in `~/.cache/reef/venv`.
///
/// # Panics
/// When that Python cannot import `mcp` (the message says how to install it).
pub fn mcp_python() -> PathBuf {
    crate::venv_python("mcp.server.mcpserver", "mcp>=2.3,<3")
}

/// A script of `test-support/mcp/` (`py_server.py`, `bad_server.py`).
///
/// Found from the running test's crate (`CARGO_MANIFEST_DIR`, which cargo sets when it runs
/// a test) rather than from where this library was compiled: a build reused from another
/// checkout of the workspace would otherwise point into that checkout.
pub fn mcp_script(name: &str) -> PathBuf {
    let compiled = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let here = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .and_then(|crate_dir| {
            crate_dir
                .ancestors()
                .map(|dir| dir.join("crates/test-support"))
                .find(|dir| dir.is_dir())
        })
        .unwrap_or(compiled);
    here.join("mcp").join(name)
}

/// The entry point of an npm reference server (`server-everything`, `server-filesystem`),
/// from `REEF_TEST_MCP_NODE` or `~/.cache/reef/mcp-node` (its `node_modules`).
///
/// # Panics
/// When it is not installed (the message says how).
pub fn node_server(package: &str) -> PathBuf {
    let root = std::env::var_os("REEF_TEST_MCP_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("mcp-node"));
    let entry = root
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        entry.is_file(),
        "{} is missing; install it with: mkdir -p ~/.cache/reef/mcp-node && cd \
         ~/.cache/reef/mcp-node && npm install @modelcontextprotocol/{package}@2026.8.31 (or set \
         REEF_TEST_MCP_NODE)",
        entry.display()
    );
    entry
}

fn cache_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".cache/reef")
}

/// The folders a sandboxed `mcp_python()` needs to read: the venv, the installation its
/// interpreter comes from, and the scripts of `test-support/mcp/`.
pub fn python_read_only() -> Vec<PathBuf> {
    let python = mcp_python();
    let real = std::fs::canonicalize(&python).unwrap_or_else(|_| python.clone());
    let prefix = real
        .ancestors()
        .nth(2)
        .map(PathBuf::from)
        .unwrap_or_default();
    let venv = python
        .ancestors()
        .nth(2)
        .map(PathBuf::from)
        .unwrap_or_default();
    vec![venv, prefix, mcp_script("")]
}

/// `[mcp.servers.NAME]` running `py_server.py` over stdio, as a user writes it, with `env`.
pub fn python_server_toml(name: &str, env: &[(&str, &str)]) -> String {
    let quote = |p: &std::path::Path| format!("{:?}", p.display().to_string());
    let read_only: Vec<String> = python_read_only().iter().map(|p| quote(p)).collect();
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
    format!(
        "[mcp.servers.{name}]\ncommand = {}\nargs = [{}]\nread_only = [{}]\nenv = {{ {} }}\n",
        quote(&mcp_python()),
        quote(&mcp_script("py_server.py")),
        read_only.join(", "),
        env.join(", ")
    )
}

/// `[mcp.servers.NAME]` running an npm reference server with node, as a user writes it.
pub fn node_server_toml(name: &str, package: &str, args: &[&str]) -> String {
    let entry = node_server(package);
    let modules = entry
        .ancestors()
        .nth(4)
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut all = vec![format!("{:?}", entry.display().to_string())];
    all.extend(args.iter().map(|a| format!("{a:?}")));
    format!(
        "[mcp.servers.{name}]\ncommand = \"node\"\nargs = [{}]\nread_only = [{:?}]\n",
        all.join(", "),
        modules.display().to_string()
    )
}
