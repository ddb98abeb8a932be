//! A spare of a warm sandbox: a process PID 1 forks ahead of need. It reports ready (reef
//! reads its pid and moves it into its cgroup), waits for its request with its standard
//! streams, takes the clean-up lock, confines itself further from the session's other
//! commands, applies its limits and becomes the program.

use super::spec::{HelperSpec, WarmCommand};
use super::zygote::{MAX_REQUEST, PLACE, PLACED, READY};
use super::{confine, init, sys};
use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
use nix::unistd::{dup2_stderr, dup2_stdin, dup2_stdout, execve};
use std::ffi::{CStr, CString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Where a program is looked up when the request sets no `PATH`.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Runs the spare; returns an exit code only when the program could not be run. `lock` is
/// the zygote's clean-up lock, `started` is closed by the exec (telling the zygote it runs).
pub(crate) fn run(spec: &HelperSpec, socket: OwnedFd, lock: &OwnedFd, started: OwnedFd) -> i32 {
    let fail = |message: String| {
        let _ = writeln!(std::io::stderr(), "reef-sandbox: {message}");
        init::SETUP_FAILED
    };
    if sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).is_err()
        || nix::unistd::setsid().is_err()
    {
        return init::SETUP_FAILED;
    }
    let mut socket = UnixStream::from(socket);
    if socket.write_all(&[READY]).is_err() {
        return init::SETUP_FAILED;
    }
    // Into its own cgroup before anything else: through the `tasks` files reef sends (cgroup
    // v1), or reef has moved it already.
    let placed = take_place(&socket);
    let answer = match &placed {
        Ok(()) => vec![PLACED],
        Err(why) => [b"E".as_slice(), why.as_bytes()].concat(),
    };
    if socket.write_all(&answer).is_err() || placed.is_err() {
        return init::SETUP_FAILED;
    }
    let Ok((request, [stdin, stdout, stderr])) = read_request(&socket) else {
        // reef dropped the spare (its session ended) or sent something else: nothing to run.
        return init::SETUP_FAILED;
    };
    // Held until the exec (the lock is this process's, released when the descriptor closes):
    // the zygote does not clean up while this starts.
    if sys::lock_record(lock, true, true).is_err() {
        return init::SETUP_FAILED;
    }
    let stdio = dup2_stdin(&stdin)
        .and_then(|()| dup2_stdout(&stdout))
        .and_then(|()| dup2_stderr(&stderr));
    if let Err(e) = stdio {
        return fail(format!("take the command's standard streams: {e}"));
    }
    drop((stdin, stdout, stderr, socket));
    if let Err(message) = confine::isolate().and_then(|()| confine::rlimits(&spec.limits)) {
        return fail(message);
    }
    let argv: Result<Vec<CString>, _> = std::iter::once(request.program.as_bytes())
        .chain(request.args.iter().map(String::as_bytes))
        .map(|a| CString::new(a.to_vec()))
        .collect();
    let path = request
        .env
        .iter()
        .find_map(|entry| entry.strip_prefix(b"PATH="))
        .map(<[u8]>::to_vec)
        .unwrap_or_else(|| DEFAULT_PATH.as_bytes().to_vec());
    let env: Result<Vec<CString>, _> = request.env.into_iter().map(CString::new).collect();
    let (Ok(argv), Ok(env)) = (argv, env) else {
        return fail("an argument or variable contains a NUL byte".into());
    };
    let dir = spec.workspace.join(&request.cwd);
    if let Err(e) = nix::unistd::chdir(&dir) {
        return fail(format!("chdir {}: {e}", dir.display()));
    }
    let code = exec_on_path(&argv, &env, &path);
    drop(started);
    code
}

/// Becomes `argv[0]`, looked up on `path` (the request's `PATH`, not this process's) unless
/// it names a path, as a shell would: the first candidate that is executable; a file without
/// a `#!` line runs under `/bin/sh`. Returns an exit code when it could not.
fn exec_on_path(argv: &[CString], env: &[CString], path: &[u8]) -> i32 {
    let Some(program) = argv.first() else {
        return init::EXEC_FAILED;
    };
    let name = program.as_bytes();
    let candidates: Vec<Vec<u8>> = if name.contains(&b'/') {
        vec![name.to_vec()]
    } else {
        path.split(|b| *b == b':')
            .map(|dir| {
                let dir = if dir.is_empty() { b".".as_slice() } else { dir };
                let mut full = dir.to_vec();
                full.push(b'/');
                full.extend_from_slice(name);
                full
            })
            .collect()
    };
    let mut denied = None;
    for candidate in candidates {
        let Ok(file) = CString::new(candidate) else {
            continue;
        };
        match execve(&file, argv, env) {
            Err(Errno::ENOEXEC) => return run_as_script(&file, argv, env),
            Err(e @ (Errno::EACCES | Errno::EPERM)) => denied = Some(e),
            Err(_) => {}
            Ok(never) => match never {},
        }
    }
    let why = denied.map_or("No such file or directory", |e| e.desc());
    let _ = writeln!(
        std::io::stderr(),
        "reef-sandbox: cannot execute {}: {why}",
        program.to_string_lossy()
    );
    init::EXEC_FAILED
}

/// Runs a file without a `#!` line under `/bin/sh`, as `execvp` does.
fn run_as_script(file: &CStr, argv: &[CString], env: &[CString]) -> i32 {
    let mut sh_argv = vec![c"/bin/sh".to_owned(), file.to_owned()];
    sh_argv.extend(argv.iter().skip(1).cloned());
    let err = execve(c"/bin/sh", &sh_argv, env).err();
    let _ = writeln!(
        std::io::stderr(),
        "reef-sandbox: cannot execute {}: {}",
        Path::new(std::ffi::OsStr::from_bytes(file.to_bytes())).display(),
        err.map_or("unknown error", |e| e.desc())
    );
    init::EXEC_FAILED
}

/// Reads reef's word that the spare's cgroup is ready and writes this process into each
/// `tasks` file that came with it.
fn take_place(socket: &UnixStream) -> Result<(), String> {
    let mut byte = [0u8; 1];
    let (bytes, files) =
        sys::recv_with_fds(socket.as_fd(), &mut byte).map_err(|e| e.to_string())?;
    if bytes != 1 || byte[0] != PLACE {
        return Err("reef did not place the process".into());
    }
    for file in files {
        std::fs::File::from(file)
            .write_all(b"0")
            .map_err(|e| format!("join the command's cgroup: {e}"))?;
    }
    Ok(())
}

/// Reads the request reef writes on a spare's socket: its length (4 bytes, little-endian),
/// carrying the command's stdin, stdout and stderr, then the request itself.
fn read_request(socket: &UnixStream) -> Result<(WarmCommand, [OwnedFd; 3]), String> {
    let mut len = [0u8; 4];
    let mut got = 0;
    let mut fds = Vec::new();
    while got < len.len() {
        let (bytes, more) =
            sys::recv_with_fds(socket.as_fd(), &mut len[got..]).map_err(|e| e.to_string())?;
        fds.extend(more);
        if bytes == 0 {
            return Err("the socket closed".into());
        }
        got += bytes;
    }
    let fds: [OwnedFd; 3] = fds
        .try_into()
        .map_err(|_| "the request did not carry three streams".to_owned())?;
    let len = u32::from_le_bytes(len);
    if len > MAX_REQUEST {
        return Err(format!("a request of {len} bytes"));
    }
    let mut body = vec![0u8; len as usize];
    (&*socket)
        .read_exact(&mut body)
        .map_err(|e| e.to_string())?;
    let request = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    Ok((request, fds))
}
