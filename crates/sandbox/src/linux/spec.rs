//! What the runner tells the helper: the confinement to build and the command to run, passed
//! as `--policy JSON -- PROGRAM ARGS…` on the helper's command line.

use crate::policy::{Limits, NetworkMode};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::PathBuf;

/// The version of what reef and its helper say to each other. A helper that receives another
/// refuses to run (a `reef-sandbox-exec` left from another build would otherwise apply a
/// confinement it does not fully understand); unknown fields are refused for the same reason.
/// Raise it whenever a field of the spec (or of `Limits`) changes or changes meaning.
pub const HELPER_PROTOCOL: u32 = 2;

/// The confinement of one command, as the helper receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelperSpec {
    /// [`HELPER_PROTOCOL`] of the reef that built the spec.
    pub protocol: u32,
    /// The workspace (resolved): mounted read-write at the same path.
    pub workspace: PathBuf,
    /// Where the command starts, relative to the workspace; entered inside the sandbox.
    #[serde(default)]
    pub cwd: PathBuf,
    /// Further read-write paths.
    pub writable: Vec<PathBuf>,
    /// Host paths (resolved) bound read-only at the same path, even inside a hidden one.
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Paths hidden even when they lie inside a mounted directory (secrets), system secrets
    /// included, each followed by where it leads when it is a link.
    pub hidden: Vec<PathBuf>,
    pub network: NetworkMode,
    pub limits: Limits,
    /// cgroup directories of the session to join (pids, memory).
    pub cgroups: Vec<PathBuf>,
    /// In `NetworkMode::Allowlist`: the host-side proxy's unix socket, bound into the view at
    /// `PROXY_SOCKET_INSIDE` and reached through a relay on `127.0.0.1:PROXY_PORT`.
    #[serde(default)]
    pub proxy_socket: Option<PathBuf>,
    /// The command's stdin is a pseudo-terminal: it gets a session of its own with that
    /// terminal as its controlling terminal (an interactive shell).
    #[serde(default)]
    pub terminal: bool,
    /// A warm sandbox: PID 1 serves commands sent on the control socket (`CONTROL_FD`) until
    /// reef closes it, instead of running the command given after `--` (there is none).
    #[serde(default)]
    pub warm: bool,
}

/// The descriptor on which a warm sandbox's helper receives its control socket.
pub const CONTROL_FD: i32 = 3;

/// One command of a warm sandbox, as reef writes it on the command's own socket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmCommand {
    pub program: String,
    pub args: Vec<String>,
    /// `NAME=value` entries, as bytes (a value need not be UTF-8).
    pub env: Vec<Vec<u8>>,
    /// Where the command starts, relative to the workspace.
    pub cwd: PathBuf,
}

/// The loopback port inside the sandbox where the allow-list proxy is reachable.
pub const PROXY_PORT: u16 = 3128;
/// Where the host proxy's socket appears inside the sandbox.
pub const PROXY_SOCKET_INSIDE: &str = "/run/reef-proxy.sock";

/// Builds the helper's arguments for `spec` and a command.
///
/// The policy travels in `POLICY_ENV`, not on the command line: a sandboxed command can read
/// PID 1's command line in `/proc/1/cmdline`, but not its environment.
pub fn encode(
    spec: &HelperSpec,
    program: &str,
    args: &[String],
) -> Result<(String, Vec<String>), String> {
    let json = serde_json::to_string(spec).map_err(|e| format!("cannot encode the policy: {e}"))?;
    let mut out = vec![
        "--policy-env".to_owned(),
        "--".to_owned(),
        program.to_owned(),
    ];
    out.extend(args.iter().cloned());
    Ok((json, out))
}

/// The environment variable that carries the policy to the helper; the command does not
/// inherit it.
pub const POLICY_ENV: &str = "REEF_SANDBOX_POLICY";

/// Parses the helper's arguments back into the spec and the command (program first).
pub fn decode(args: Vec<OsString>) -> Result<(HelperSpec, Vec<OsString>), String> {
    let mut it = args.into_iter();
    let json = match it.next() {
        Some(flag) if flag == "--policy" => it
            .next()
            .ok_or("--policy needs a JSON value")?
            .into_string()
            .map_err(|_| "--policy is not valid UTF-8")?,
        Some(flag) if flag == "--policy-env" => std::env::var(POLICY_ENV)
            .map_err(|_| format!("--policy-env is given but {POLICY_ENV} is not set"))?,
        _ => {
            return Err(
                "usage: sandbox-exec (--policy JSON | --policy-env) -- PROGRAM [ARGS…]".into(),
            );
        }
    };
    let spec: HelperSpec = serde_json::from_str(&json).map_err(|e| {
        format!("the policy is not valid (is this helper from the same build as reef?): {e}")
    })?;
    if spec.protocol != HELPER_PROTOCOL {
        return Err(format!(
            "the policy is of protocol {}, this helper speaks {HELPER_PROTOCOL}: install the \
             reef-sandbox-exec of the same build as reef, or remove it (reef then runs itself \
             as the helper)",
            spec.protocol
        ));
    }
    if it.next().is_none_or(|sep| sep != "--") {
        return Err("expected `--` before the command".into());
    }
    let command: Vec<OsString> = it.collect();
    if command.is_empty() && !spec.warm {
        return Err("no command to run after `--`".into());
    }
    Ok((spec, command))
}

#[cfg(test)]
mod tests {
    use super::{HELPER_PROTOCOL, HelperSpec, decode, encode};
    use crate::policy::{Limits, NetworkMode};
    use std::ffi::OsString;

    fn spec() -> HelperSpec {
        HelperSpec {
            protocol: HELPER_PROTOCOL,
            workspace: "/work".into(),
            cwd: "sub".into(),
            writable: Vec::new(),
            read_only: Vec::new(),
            hidden: vec!["/secret".into()],
            network: NetworkMode::None,
            limits: Limits::default(),
            cgroups: Vec::new(),
            proxy_socket: None,
            terminal: false,
            warm: false,
        }
    }

    /// `--policy JSON -- true` as the helper receives it.
    fn args(json: &str) -> Vec<OsString> {
        ["--policy", json, "--", "true"]
            .into_iter()
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn a_spec_reads_back_as_it_was_written() {
        let (json, rest) = encode(&spec(), "true", &[]).unwrap();
        assert_eq!(rest, ["--policy-env", "--", "true"]);
        let (back, command) = decode(args(&json)).unwrap();
        assert_eq!(back, spec());
        assert_eq!(command, [OsString::from("true")]);
    }

    #[test]
    fn a_spec_from_another_protocol_or_with_unknown_fields_is_refused() {
        let mut other = spec();
        other.protocol = HELPER_PROTOCOL + 1;
        let json = serde_json::to_string(&other).unwrap();
        let err = decode(args(&json)).unwrap_err();
        assert!(err.contains("this helper speaks"), "{err}");
        assert!(err.contains("same build"), "{err}");

        let mut value = serde_json::to_value(spec()).unwrap();
        value["mask_everything"] = serde_json::json!(true);
        let err = decode(args(&value.to_string())).unwrap_err();
        assert!(err.contains("unknown field `mask_everything`"), "{err}");
    }
}
