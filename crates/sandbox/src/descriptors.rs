//! reef's own descriptor limit. Every sandboxed command costs reef pipes, and every proxied
//! connection two sockets; the soft limit most systems start a process with (1024) is far
//! below the hard one, so reef raises it once at start.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit and returns the new soft
/// limit. Children inherit it; the landlock backend sets each command's own limit from the
/// policy.
pub fn raise_open_files_limit() -> Result<u64, nix::Error> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(hard.max(soft))
}
