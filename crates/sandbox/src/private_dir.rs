//! Private directories in the system's temporary directory (a session's proxy socket, a VM's
//! sockets and logs, a pool's snapshots): `$TMPDIR/reef-<what>-<pid>-<n>`, made with mode
//! 0700 by this call, never one that already existed (whoever made that could read or swap
//! what reef puts there).

use std::os::unix::fs::DirBuilderExt as _;
use std::path::PathBuf;

/// Creates a new private directory for `what`.
pub(crate) fn create(what: &str) -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    let pid = std::process::id();
    let mut last = None;
    for n in 0..1000u32 {
        let dir = base.join(format!("reef-{what}-{pid}-{n}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other(format!("no free {what} directory name"))))
}
