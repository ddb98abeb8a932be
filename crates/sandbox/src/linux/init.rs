//! PID 1 of the sandbox's PID namespace: builds the view, confines itself, forks the command,
//! reaps every process, and when the command ends kills whatever it left behind. When PID 1
//! exits, the kernel kills every process left in the namespace, so nothing outlives a run.

use super::{as_root::Trees, confine, mounts, relay, spec::HelperSpec, sys};
use crate::policy::NetworkMode;
use nix::sys::prctl;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, chdir, execvpe, sethostname};
use std::ffi::{CString, OsString};
use std::net::TcpListener;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Exit code when the sandbox could not be set up (the command never ran).
pub(crate) const SETUP_FAILED: i32 = 125;
/// Exit code when the command could not be executed (not found, not executable).
pub(crate) const EXEC_FAILED: i32 = 127;

/// Runs as PID 1; returns the exit code for the helper. A warm sandbox serves commands from
/// here on (see `zygote`); otherwise the one command runs.
pub(crate) fn run(
    spec: &HelperSpec,
    command: &[OsString],
    trees: Option<Trees>,
) -> Result<i32, String> {
    let relay = build(spec, trees)?;
    if spec.warm {
        return super::zygote::serve(spec, relay);
    }
    confine::rlimits(&spec.limits)?;
    one_command(spec, command, relay)
}

/// Builds the view and confines this process (everything but the resource limits, which are
/// each command's own). Returns the proxy relay's listener in `allowlist` mode.
fn build(spec: &HelperSpec, trees: Option<Trees>) -> Result<Option<TcpListener>, String> {
    prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| format!("set the parent-death signal: {e}"))?;
    sethostname("reef-sandbox").map_err(|e| format!("sethostname: {e}"))?;
    mounts::enter_view(
        &spec.workspace,
        &spec.writable,
        &spec.read_only,
        &spec.hidden,
        spec.proxy_socket.as_deref(),
        trees.as_ref(),
    )?;
    // Mounted: the command must not find them among PID 1's descriptors.
    let as_root = trees.is_some();
    drop(trees);
    // In allowlist mode the namespace gets a loopback with the proxy relay on it; binding must
    // happen before Landlock, which leaves the command only `connect` to that port.
    let relay = if spec.network == NetworkMode::Allowlist {
        sys::loopback_up()?;
        Some(relay::listen()?)
    } else {
        None
    };
    confine::drop_to_user()?;
    if as_root {
        super::as_root::seal()?;
    }
    let mut writable: Vec<PathBuf> = vec![spec.workspace.clone(), "/tmp".into(), "/dev".into()];
    writable.extend(spec.writable.iter().cloned());
    confine::landlock(&writable, spec.network)?;
    prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    confine::seccomp(spec.network)?;
    Ok(relay)
}

/// Forks the one command, serves the relay, and reaps until the command ends.
fn one_command(
    spec: &HelperSpec,
    command: &[OsString],
    relay: Option<TcpListener>,
) -> Result<i32, String> {
    // The command's environment: the helper's own, without the policy.
    let env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| k != super::spec::POLICY_ENV)
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let argv: Vec<CString> = command
        .iter()
        .map(|a| {
            CString::new(a.as_bytes()).map_err(|_| "an argument contains a NUL byte".to_owned())
        })
        .collect::<Result<_, _>>()?;
    let child = match sys::fork_process().map_err(|e| format!("fork the command: {e}"))? {
        ForkResult::Child => {
            if spec.terminal
                && let Err(message) = sys::take_terminal()
            {
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "reef-sandbox: {message}");
                std::process::exit(SETUP_FAILED);
            }
            let code = exec(&spec.workspace.join(&spec.cwd), &argv, &env);
            std::process::exit(code);
        }
        ForkResult::Parent { child } => child,
    };
    // Threads only after the fork: the child must not inherit a multi-threaded state.
    if let Some(listener) = relay
        && let Err(message) = relay::serve(listener)
    {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "reef-sandbox: {message}");
    }
    Ok(reap_until(child))
}

/// In the forked child: enter the start directory (inside the view, where a link can only
/// lead to what the sandbox shows) and become the command.
pub(crate) fn exec(dir: &std::path::Path, argv: &[CString], env: &[CString]) -> i32 {
    use std::io::Write;
    if let Err(e) = chdir(dir) {
        let _ = writeln!(
            std::io::stderr(),
            "reef-sandbox: chdir {}: {e}",
            dir.display()
        );
        return SETUP_FAILED;
    }
    let Some(program) = argv.first() else {
        return EXEC_FAILED;
    };
    let err = execvpe(program, argv, env).err();
    let _ = writeln!(
        std::io::stderr(),
        "reef-sandbox: cannot execute {}: {}",
        program.to_string_lossy(),
        err.map(|e| e.desc()).unwrap_or("unknown error")
    );
    EXEC_FAILED
}

/// Reaps children until the command exits, then kills and reaps the rest of the namespace.
/// Returns the command's exit code (128 + signal when it was killed).
fn reap_until(command: Pid) -> i32 {
    let mut code = None;
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(WaitStatus::Exited(pid, status)) if pid == command => code = Some(status),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == command => {
                code = Some(128 + signal as i32);
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break, // ECHILD: nothing left
        }
        if code.is_some() {
            // The command is done: nothing it started may keep running.
            let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
        }
    }
    code.unwrap_or(SETUP_FAILED)
}
