//! What the runner tells the helper: the confinement to build and the command to run, passed
//! as `--policy JSON -- PROGRAM ARGS…` on the helper's command line.

use crate::policy::{Limits, NetworkMode};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::PathBuf;

/// The confinement of one command, as the helper receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperSpec {
    /// The working directory: mounted read-write at the same path.
    pub workspace: PathBuf,
    /// Further read-write paths.
    pub writable: Vec<PathBuf>,
    /// Paths hidden even when they lie inside a mounted directory (secrets).
    pub hidden: Vec<PathBuf>,
    pub network: NetworkMode,
    pub limits: Limits,
    /// cgroup directories of the session to join (pids, memory).
    pub cgroups: Vec<PathBuf>,
}

/// Builds the helper's arguments for `spec` and a command.
pub fn encode(spec: &HelperSpec, program: &str, args: &[String]) -> Result<Vec<String>, String> {
    let json = serde_json::to_string(spec).map_err(|e| format!("cannot encode the policy: {e}"))?;
    let mut out = vec![
        "--policy".to_owned(),
        json,
        "--".to_owned(),
        program.to_owned(),
    ];
    out.extend(args.iter().cloned());
    Ok(out)
}

/// Parses the helper's arguments back into the spec and the command (program first).
pub fn decode(args: Vec<OsString>) -> Result<(HelperSpec, Vec<OsString>), String> {
    let mut it = args.into_iter();
    match it.next() {
        Some(flag) if flag == "--policy" => {}
        _ => return Err("usage: sandbox-exec --policy JSON -- PROGRAM [ARGS…]".into()),
    }
    let json = it
        .next()
        .ok_or("--policy needs a JSON value")?
        .into_string()
        .map_err(|_| "--policy is not valid UTF-8")?;
    let spec: HelperSpec =
        serde_json::from_str(&json).map_err(|e| format!("--policy is not a valid policy: {e}"))?;
    if it.next().is_none_or(|sep| sep != "--") {
        return Err("expected `--` before the command".into());
    }
    let command: Vec<OsString> = it.collect();
    if command.is_empty() {
        return Err("no command to run after `--`".into());
    }
    Ok((spec, command))
}
