//! The last steps before the command runs, in order: drop to an unprivileged uid in a nested
//! user namespace, Landlock (filesystem writes and TCP), resource limits, `no_new_privs`, and
//! a seccomp filter against the syscalls a confined process never needs.

use super::spec::PROXY_PORT;
use crate::policy::{Limits, NetworkMode};
use landlock::{
    ABI, Access, AccessFs, AccessNet, LandlockStatus, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, setrlimit};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The uid and gid the command runs as inside the sandbox.
pub(crate) const SANDBOX_ID: u32 = 1000;

/// Enters a nested user namespace in which this process is `SANDBOX_ID`: the command then
/// holds no capability over the mount, PID or network namespaces built for it.
pub(crate) fn drop_to_user() -> Result<(), String> {
    unshare(CloneFlags::CLONE_NEWUSER)
        .map_err(|e| format!("unshare(user) for the sandbox user: {e}"))?;
    write_id_maps((SANDBOX_ID, 0), (SANDBOX_ID, 0))
}

/// Maps one uid and one gid, each `(inside, outside)`, for this process's user namespace.
pub(crate) fn write_id_maps(uid: (u32, u32), gid: (u32, u32)) -> Result<(), String> {
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| format!("write {file}: {e}"))
    };
    // Required before an unprivileged gid_map; absent on very old kernels.
    if Path::new("/proc/self/setgroups").exists() {
        write("/proc/self/setgroups", "deny".into())?;
    }
    write("/proc/self/uid_map", format!("{} {} 1\n", uid.0, uid.1))?;
    write("/proc/self/gid_map", format!("{} {} 1\n", gid.0, gid.1))
}

/// Landlock: everything visible is readable and executable; only `writable` accepts writes;
/// TCP bind/connect is denied unless the network is `full`, except, in `allowlist` mode,
/// connecting to the proxy relay's port.
pub(crate) fn landlock(writable: &[PathBuf], network: NetworkMode) -> Result<(), String> {
    let abi = ABI::V5;
    let err = |e: landlock::RulesetError| format!("landlock: {e}");
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?;
    if network != NetworkMode::Full {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    if network == NetworkMode::Allowlist {
        created = created
            .add_rule(NetPort::new(PROXY_PORT, AccessNet::ConnectTcp))
            .map_err(err)?;
    }
    let read = AccessFs::from_read(abi);
    let fd = PathFd::new("/").map_err(|e| format!("landlock: open /: {e}"))?;
    created = created.add_rule(PathBeneath::new(fd, read)).map_err(err)?;
    for path in writable {
        if let Ok(fd) = PathFd::new(path) {
            created = created
                .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
                .map_err(err)?;
        }
    }
    let status = created.restrict_self().map_err(err)?;
    // Landlock is part of this backend, not an option of it: a kernel without it, or a
    // seccomp filter above reef that hides it, means the backend does not work here. A kernel
    // with an older Landlock enforces the filesystem rules it knows (partially enforced); the
    // rights it lacks (network ports, device ioctls) are covered by the empty network
    // namespace, seccomp and the read-only view.
    if status.ruleset == RulesetStatus::NotEnforced {
        let why = match status.landlock {
            LandlockStatus::NotEnabled => "built into the kernel but not enabled at boot (lsm=)",
            LandlockStatus::NotImplemented => {
                "not available: a kernel without Landlock, or a seccomp filter above reef that \
                 denies its system calls"
            }
            LandlockStatus::Available { .. } => "available but the ruleset was not applied",
        };
        return Err(format!("landlock is not enforced: Landlock is {why}"));
    }
    Ok(())
}

/// A further Landlock layer for one command of a warm sandbox, which takes away no file
/// access: the command gets a domain of its own, so it cannot trace or read the memory,
/// environment or descriptors of the session's other commands, spares, relay or PID 1 (nor
/// signal them, or reach their abstract unix sockets, where the kernel scopes those: Landlock
/// ABI 6, Linux 6.12).
pub(crate) fn isolate() -> Result<(), String> {
    let err = |e: landlock::RulesetError| format!("landlock (command's own domain): {e}");
    let execute = AccessFs::Execute;
    let root = PathFd::new("/").map_err(|e| format!("landlock: open /: {e}"))?;
    Ruleset::default()
        .handle_access(execute)
        .map_err(err)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rule(PathBeneath::new(root, execute))
        .map_err(err)?
        .restrict_self()
        .map_err(err)
        .map(drop)
}

/// Resource limits (soft = hard, so the command cannot raise them).
pub(crate) fn rlimits(limits: &Limits) -> Result<(), String> {
    let set = |res: Resource, value: Option<u64>, name: &str| match value {
        Some(v) => setrlimit(res, v, v).map_err(|e| format!("setrlimit {name}: {e}")),
        None => Ok(()),
    };
    set(Resource::RLIMIT_CPU, limits.cpu_secs, "cpu")?;
    set(Resource::RLIMIT_AS, limits.memory_bytes, "address space")?;
    set(Resource::RLIMIT_NPROC, limits.max_processes, "processes")?;
    set(Resource::RLIMIT_FSIZE, limits.file_size_bytes, "file size")?;
    set(Resource::RLIMIT_NOFILE, limits.open_files, "open files")?;
    set(Resource::RLIMIT_CORE, Some(0), "core")
}

/// Calls that take a file mode, and which argument holds it: each fails with EPERM when the
/// mode asks for the setuid or setgid bit.
const MODE_ARGS: &[(i64, u8)] = &[
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    (libc::SYS_open, 2),
    (libc::SYS_openat, 3),
    (libc::SYS_creat, 1),
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];

/// Syscalls that fail with EPERM inside the sandbox.
const DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
];

/// Namespace flags that `clone` may not carry.
const NEW_NAMESPACES: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

/// A condition on a 32-bit argument of `socket(2)`.
fn socket_arg(arg: u8, op: SeccompCmpOp, value: libc::c_int) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value as u64)
        .map_err(|e| format!("seccomp: {e}"))
}

/// Installs the seccomp filters. Requires `no_new_privs`.
pub(crate) fn seccomp(network: NetworkMode) -> Result<(), String> {
    let err = |e: seccompiler::BackendError| format!("seccomp: {e}");
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(err)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    let clone_rules = NEW_NAMESPACES
        .iter()
        .map(|flag| {
            SeccompRule::new(vec![cond(0, SeccompCmpOp::MaskedEq(*flag), *flag)?]).map_err(err)
        })
        .collect::<Result<Vec<_>, String>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    // Pushing characters into a terminal's input, the console's special commands, redirecting
    // the console, and switching a terminal's line discipline (which loads kernel code that is
    // rarely used and often buggy): a command must never type into someone else's terminal,
    // and one given a terminal of its own (an operator's shell) may only use it as one.
    let ioctl_rules = [
        libc::TIOCSTI,
        libc::TIOCLINUX,
        libc::TIOCCONS,
        libc::TIOCSETD,
    ]
    .iter()
    .map(|request| {
        let arg = SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            u64::from(*request as u32),
        )
        .map_err(err)?;
        SeccompRule::new(vec![arg]).map_err(err)
    })
    .collect::<Result<Vec<_>, String>>()?;
    rules.insert(libc::SYS_ioctl, ioctl_rules);
    // No setuid or setgid file: on a root host the workspace is shown through an idmapped
    // mount, where a file the command makes is root's on disk, and a set-id bit on it would
    // hand root to whoever runs it outside. The mode is argument `arg` of each call.
    for (nr, arg) in MODE_ARGS {
        let set_id = [libc::S_ISUID, libc::S_ISGID]
            .iter()
            .map(|bit| {
                let mode = SeccompCondition::new(
                    *arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(u64::from(*bit)),
                    u64::from(*bit),
                )
                .map_err(err)?;
                SeccompRule::new(vec![mode]).map_err(err)
            })
            .collect::<Result<Vec<_>, String>>()?;
        rules.insert(*nr, set_id);
    }
    match network {
        NetworkMode::Full => {}
        // Only unix sockets: no TCP, UDP, raw or netlink traffic of any kind.
        NetworkMode::None => {
            let rule = SeccompRule::new(vec![socket_arg(0, SeccompCmpOp::Ne, libc::AF_UNIX)?])
                .map_err(err)?;
            rules.insert(libc::SYS_socket, vec![rule]);
        }
        // Unix sockets and TCP over IPv4, which Landlock limits to the relay's port; no UDP
        // (DNS is the proxy's job), raw, IPv6 or netlink sockets.
        NetworkMode::Allowlist => {
            let other_family = SeccompRule::new(vec![
                socket_arg(0, SeccompCmpOp::Ne, libc::AF_UNIX)?,
                socket_arg(0, SeccompCmpOp::Ne, libc::AF_INET)?,
            ])
            .map_err(err)?;
            let mut socket_rules = vec![other_family];
            for kind in [libc::SOCK_DGRAM, libc::SOCK_RAW, libc::SOCK_SEQPACKET] {
                socket_rules.push(
                    SeccompRule::new(vec![
                        socket_arg(0, SeccompCmpOp::Eq, libc::AF_INET)?,
                        socket_arg(1, SeccompCmpOp::MaskedEq(0xf), kind)?,
                    ])
                    .map_err(err)?,
                );
            }
            rules.insert(libc::SYS_socket, socket_rules);
        }
    }
    let deny = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    // clone3 passes its flags in memory, out of a filter's reach: make callers fall back to clone;
    // openat2 its mode, likewise: callers fall back to openat.
    let clone3 = SeccompFilter::new(
        BTreeMap::from([
            (libc::SYS_clone3, Vec::new()),
            (libc::SYS_openat2, Vec::new()),
        ]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        ARCH,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    for filter in [deny, clone3] {
        let program: BpfProgram = filter.try_into().map_err(|e| format!("seccomp: {e}"))?;
        seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))?;
    }
    deny_x32()
}

/// On x86_64 the x32 ABI reaches the same system calls under numbers with bit 30 set, which
/// the filters above (keyed by the x86_64 numbers) would let through: refuse them all.
#[cfg(target_arch = "x86_64")]
fn deny_x32() -> Result<(), String> {
    use seccompiler::sock_filter;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let program = vec![
        // A = seccomp_data.nr
        sock_filter {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: 0,
        },
        // if A >= X32_SYSCALL_BIT: fall through to the refusal, else skip it
        sock_filter {
            code: 0x35,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: RET_ERRNO | libc::ENOSYS as u32,
        },
        sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: RET_ALLOW,
        },
    ];
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp (x32): {e}"))
}

#[cfg(not(target_arch = "x86_64"))]
fn deny_x32() -> Result<(), String> {
    Ok(())
}
