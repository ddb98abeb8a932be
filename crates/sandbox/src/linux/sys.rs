//! The audited unsafe corner of reef: `fork` in the sandbox helper and the Landlock version
//! query.
//!
//! The helper is a freshly exec'd, single-threaded process (reef dispatches `sandbox-exec`
//! before starting any thread), so a child after `fork` may run arbitrary code; both
//! functions are only called from the helper's own code paths.
#![allow(
    unsafe_code,
    reason = "fork(2) is unsafe in nix; see the module docs for why it is sound here"
)]

use nix::unistd::{ForkResult, fork};

/// Forks the (single-threaded) helper.
pub(crate) fn fork_process() -> nix::Result<ForkResult> {
    // SAFETY: the helper process is single-threaded when it forks (it is exec'd fresh and
    // starts no threads), so the child cannot inherit locks held by other threads.
    unsafe { fork() }
}

/// The Landlock ABI version the running kernel supports, or the errno explaining why none
/// (`EOPNOTSUPP`: built in but disabled at boot; `ENOSYS`: not built in).
pub(crate) fn landlock_abi() -> Result<i64, nix::errno::Errno> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attribute pointer, size 0 and the VERSION flag, the kernel only
    // returns the ABI version; no memory is read or written and no descriptor is created.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 {
        Err(nix::errno::Errno::last())
    } else {
        Ok(ret)
    }
}
