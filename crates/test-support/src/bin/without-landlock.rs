//! `without-landlock PROGRAM ARGS…`: runs PROGRAM (found on PATH) under a seccomp filter that
//! makes `landlock_create_ruleset`, `landlock_add_rule` and `landlock_restrict_self` fail with
//! ENOSYS, as on a kernel without Landlock. The filter is inherited by everything PROGRAM
//! starts, so reef's sandbox helper sees the same kernel.
#![allow(
    clippy::print_stderr,
    reason = "a test program reports its own usage errors"
)]

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: without-landlock PROGRAM [ARGS…]");
        std::process::exit(2);
    };
    let rules = BTreeMap::from([
        (libc::SYS_landlock_create_ruleset, Vec::new()),
        (libc::SYS_landlock_add_rule, Vec::new()),
        (libc::SYS_landlock_restrict_self, Vec::new()),
    ]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        ARCH,
    )
    .and_then(BpfProgram::try_from);
    let installed = filter
        .map_err(|e| e.to_string())
        .and_then(|program| seccompiler::apply_filter(&program).map_err(|e| e.to_string()));
    if let Err(e) = installed {
        eprintln!("without-landlock: cannot install the seccomp filter: {e}");
        std::process::exit(125);
    }
    let err = std::process::Command::new(&program).args(args).exec();
    eprintln!(
        "without-landlock: cannot run {}: {err}",
        program.to_string_lossy()
    );
    std::process::exit(127);
}
