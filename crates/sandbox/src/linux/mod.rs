//! The `landlock` backend: a helper that reef re-executes (`reef sandbox-exec`, or the
//! `reef-sandbox-exec` program) confines itself and then runs the command, so reef itself is
//! never confined. See `init` for PID 1 and `mounts`/`confine` for the layers.

mod as_root;
pub(crate) mod cgroup;
mod cleanup;
mod confine;
mod init;
mod layers;
mod mounts;
mod relay;
mod spare;
pub(crate) mod spec;
mod sys;
mod zygote;

pub(crate) use sys::{async_fd, die_with_parent, give_fd, landlock_abi, new_session};
pub(crate) use zygote::{ENDED, MAX_REQUEST, PLACE, PLACED, READY, SERVING, SPARE};

use nix::sched::{CloneFlags, unshare};
use nix::sys::prctl;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, getegid, geteuid};
use std::ffi::OsString;
use std::io::Write;

use crate::policy::NetworkMode;

/// Entry point of the helper. `args` are `--policy JSON -- PROGRAM ARGS…`. Returns the exit
/// code: the command's own, 128 + signal when it was killed, 125 when the sandbox could not be
/// built (with a `reef-sandbox:` line on stderr naming the failed step), 127 when the command
/// could not be executed. Must be called in a single-threaded process.
pub fn helper_main(args: Vec<OsString>) -> i32 {
    match outer(args) {
        Ok(code) => code,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "reef-sandbox: {message}");
            init::SETUP_FAILED
        }
    }
}

/// The helper's outer process: creates the namespaces, then waits for PID 1.
fn outer(args: Vec<OsString>) -> Result<i32, String> {
    let (spec, command) = spec::decode(args)?;
    // If reef dies, the helper dies, and with it PID 1 and the whole sandbox.
    prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| format!("set the parent-death signal: {e}"))?;
    // As root: the host paths the view binds, opened (and the writable ones idmapped) while
    // still root; exactly those of the view's plan, none inside the workspace.
    let plan = layers::plan(
        &spec.workspace,
        &spec.writable,
        &spec.read_only,
        &spec.hidden,
    );
    let bound = |kind: layers::Kind| -> Vec<&std::path::Path> {
        plan.iter()
            .filter(|l| l.kind == kind)
            .map(|l| l.path.as_path())
            .collect()
    };
    let mut writable = bound(layers::Kind::Bind);
    writable.extend(spec.proxy_socket.as_deref());
    let trees = as_root::prepare(&writable, &bound(layers::Kind::BindReadOnly))?;
    // Join the session's cgroups while still in the host's user namespace. The session lists
    // only cgroups it did set up (it recorded the controllers it could not), so failing to
    // join one means a limit would silently not apply: refuse instead.
    cgroup::join(&spec.cgroups)?;
    if trees.is_some() {
        as_root::drop_root()?;
    }
    let (uid, gid) = (geteuid().as_raw(), getegid().as_raw());
    confined(&spec, &command, uid, gid, trees)
}

/// Waits for `child` and turns its end into an exit code (128 + signal when killed).
fn wait_code(child: nix::unistd::Pid, what: &str) -> Result<i32, String> {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Ok(128 + signal as i32),
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("wait for {what}: {e}")),
        }
    }
}

/// Creates the namespaces, forks PID 1 and waits for it.
fn confined(
    spec: &spec::HelperSpec,
    command: &[OsString],
    uid: u32,
    gid: u32,
    trees: Option<as_root::Trees>,
) -> Result<i32, String> {
    let mut flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if spec.network != NetworkMode::Full {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| {
        format!(
            "unshare namespaces: {e} (are unprivileged user namespaces enabled? see `reef doctor`)"
        )
    })?;
    // Root inside the first namespace (to build the view), mapped to the caller outside.
    confine::write_id_maps((0, uid), (0, gid))?;
    match sys::fork_process().map_err(|e| format!("fork PID 1: {e}"))? {
        ForkResult::Child => {
            let code = match init::run(spec, command, trees) {
                Ok(code) => code,
                Err(message) => {
                    let _ = writeln!(std::io::stderr(), "reef-sandbox: {message}");
                    init::SETUP_FAILED
                }
            };
            std::process::exit(code);
        }
        ForkResult::Parent { child } => {
            // Only PID 1 of a warm sandbox talks to reef: with this copy closed, reef sees
            // the control socket close when PID 1 ends.
            if spec.warm {
                drop(sys::control_socket());
            }
            // PID 1 (forked dumpable, to write its own maps) mounts the trees; this process
            // has no use for them, and seals itself.
            if trees.is_some() {
                drop(trees);
                as_root::seal()?;
            }
            wait_code(child, "PID 1")
        }
    }
}
