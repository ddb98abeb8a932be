//! The audited unsafe corner of reef: `fork` in the sandbox helper, handing descriptors to a
//! warm sandbox and taking those it receives, removing System V IPC objects, the Landlock version
//! query, idmapping a detached mount (`mount_setattr`, for a reef running as root), bringing up loopback in a new network namespace, `setsid` between fork and exec
//! of every command reef starts, the parent-death signal of a VM's QEMU, and a pseudo-terminal: taken as controlling terminal, and its
//! controlling side registered with tokio.
//!
//! The helper is a freshly exec'd, single-threaded process (reef dispatches `sandbox-exec`
//! before starting any thread), so a child after `fork` may run arbitrary code; both
//! functions are only called from the helper's own code paths.
#![allow(
    unsafe_code,
    reason = "fork(2) is unsafe in nix; see the module docs for why it is sound here"
)]

use nix::unistd::{ForkResult, fork};

/// Makes the child of `cmd` the leader of a new session (and so of a new process group, whose
/// id is its pid) with no controlling terminal.
pub(crate) fn new_session(cmd: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes one system call (setsid) and allocates
    // nothing (the error conversion builds an `io::Error` from a raw code, without allocating).
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
}

/// Makes the child of `cmd` receive SIGKILL when the thread that started it ends (reef's
/// runtime, or reef itself): a VM must not outlive the reef that started it.
pub(crate) fn die_with_parent(cmd: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the child between fork and exec and makes one
    // async-signal-safe system call (prctl), allocating nothing.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
}

/// In the helper's forked command: a session of its own whose controlling terminal is its
/// stdin (a pseudo-terminal), so an interactive shell has job control.
pub(crate) fn take_terminal() -> Result<(), String> {
    rustix::process::setsid().map_err(|e| format!("setsid: {e}"))?;
    // SAFETY: fd 0 is the command's stdin, open for the whole life of the process.
    let stdin = unsafe { std::os::fd::BorrowedFd::borrow_raw(0) };
    rustix::process::ioctl_tiocsctty(stdin).map_err(|e| format!("take the terminal: {e}"))
}

/// Registers a pseudo-terminal's controlling side with tokio's reactor.
pub(crate) fn async_fd(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    // SAFETY: an `OwnedFd` is open until dropped and always names the same descriptor, and the
    // `AsyncFd` owns it for its whole life.
    unsafe { Ok(tokio::io::unix::AsyncFd::register(fd)?) }
}

/// Makes `fd` (open in reef) descriptor `target` of the child of `cmd`, kept across exec: how
/// a warm sandbox's helper gets its control socket.
pub(crate) fn give_fd(cmd: &mut tokio::process::Command, fd: std::os::fd::RawFd, target: i32) {
    // SAFETY: the closure runs in the child between fork and exec and makes only
    // async-signal-safe system calls (dup2, or fcntl when the numbers match), allocating
    // nothing; `fd` stays open in reef until the child has been spawned.
    unsafe {
        cmd.pre_exec(move || {
            let ret = if fd == target {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if ret < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        });
    }
}

/// In a warm sandbox's PID 1: the control socket reef passed as `CONTROL_FD`, checked to be a
/// socket and made close-on-exec so that no command inherits it.
pub(crate) fn control_socket() -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::FromRawFd;
    let fd = super::spec::CONTROL_FD;
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(format!("/proc/self/fd/{fd}"))
        .map_err(|e| format!("the control socket (descriptor {fd}) is not open: {e}"))?;
    if !meta.file_type().is_socket() {
        return Err(format!("descriptor {fd} is not the control socket"));
    }
    // SAFETY: descriptor CONTROL_FD is open (it is a socket), was handed to this process by
    // reef for this purpose, and nothing else in the helper owns or closes it.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    nix::fcntl::fcntl(
        &owned,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|e| format!("make the control socket close-on-exec: {e}"))?;
    Ok(owned)
}

/// Receives into `buf` from `socket`, with the descriptors (at most four) the message
/// carries, taken close-on-exec. Returns the bytes read (0: the peer closed) and them.
pub(crate) fn recv_with_fds(
    socket: std::os::fd::BorrowedFd<'_>,
    buf: &mut [u8],
) -> nix::Result<(usize, Vec<std::os::fd::OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::AsRawFd;
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 4]);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            fds.extend(own_received(&raw));
        }
    }
    Ok((msg.bytes, fds))
}

/// Takes ownership of descriptors just received with `SCM_RIGHTS`.
pub(crate) fn own_received(fds: &[std::os::fd::RawFd]) -> Vec<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    fds.iter()
        // SAFETY: the kernel installed these descriptors in this process for this message;
        // nothing else refers to them yet.
        .map(|fd| unsafe { std::os::fd::OwnedFd::from_raw_fd(*fd) })
        .collect()
}

/// Takes (or, with `None`, releases) this process's lock on the whole of `file`: a POSIX record
/// lock, held by the process (not inherited by a fork) until it releases it or closes any
/// descriptor of the file (an exec closes the close-on-exec ones). `Some(true)` shares it,
/// `Some(false)` takes it alone; `wait` blocks until it is free, otherwise a taken lock fails
/// with `EAGAIN`/`EACCES`.
pub(crate) fn lock_record(
    file: &std::os::fd::OwnedFd,
    shared: bool,
    wait: bool,
) -> nix::Result<()> {
    set_record_lock(
        file,
        if shared { libc::F_RDLCK } else { libc::F_WRLCK },
        wait,
    )
}

/// Releases this process's record lock on `file`.
pub(crate) fn unlock_record(file: &std::os::fd::OwnedFd) -> nix::Result<()> {
    set_record_lock(file, libc::F_UNLCK, false)
}

fn set_record_lock(file: &std::os::fd::OwnedFd, kind: libc::c_int, wait: bool) -> nix::Result<()> {
    use nix::fcntl::{FcntlArg, fcntl};
    let lock = libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    let arg = if wait {
        FcntlArg::F_SETLKW(&lock)
    } else {
        FcntlArg::F_SETLK(&lock)
    };
    fcntl(file, arg).map(drop)
}

/// Removes every System V shared memory segment, semaphore set and message queue of this IPC
/// namespace that this process may remove (those the sandbox's commands made).
pub(crate) fn remove_ipc_objects() {
    for (file, kind) in [("shm", 0), ("sem", 1), ("msg", 2)] {
        let text = std::fs::read_to_string(format!("/proc/sysvipc/{file}")).unwrap_or_default();
        // A header line, then `key id …` per object.
        for id in text
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<libc::c_int>().ok())
        {
            // SAFETY: IPC_RMID takes no buffer (a null pointer, or no fourth argument for
            // semctl): the kernel reads and writes no memory of this process; an id that is
            // gone or not ours only fails.
            unsafe {
                match kind {
                    0 => libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                    1 => libc::semctl(id, 0, libc::IPC_RMID),
                    _ => libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                };
            }
        }
    }
}

/// Forks the (single-threaded) helper.
pub(crate) fn fork_process() -> nix::Result<ForkResult> {
    // SAFETY: the helper process is single-threaded when it forks (it is exec'd fresh and
    // starts no threads), so the child cannot inherit locks held by other threads.
    unsafe { fork() }
}

/// Sets the attributes of the detached mount tree `tree` (from `open_tree(OPEN_TREE_CLONE)`),
/// recursively: idmapped through the user namespace `userns` when given, read-only when
/// `read_only`.
pub(crate) fn set_tree_attributes(
    tree: std::os::fd::BorrowedFd<'_>,
    userns: Option<std::os::fd::BorrowedFd<'_>>,
    read_only: bool,
) -> Result<(), nix::errno::Errno> {
    use std::os::fd::AsRawFd;
    /// `struct mount_attr` of `<linux/mount.h>`.
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
    const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
    const AT_RECURSIVE: libc::c_int = 0x8000;
    let userns_fd = match userns {
        Some(fd) => u64::try_from(fd.as_raw_fd()).map_err(|_| nix::errno::Errno::EBADF)?,
        None => 0,
    };
    let attr = MountAttr {
        attr_set: if userns.is_some() {
            MOUNT_ATTR_IDMAP
        } else {
            0
        } | if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: 0,
        propagation: 0,
        userns_fd,
    };
    // SAFETY: `attr` is a live, correctly laid out `struct mount_attr` whose size is passed
    // with it, the path is an empty NUL-terminated string (AT_EMPTY_PATH: `tree` itself), and
    // the descriptors are borrowed for the call; the kernel only reads these.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | AT_RECURSIVE,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<MountAttr>(),
        )
    };
    if ret < 0 {
        Err(nix::errno::Errno::last())
    } else {
        Ok(())
    }
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

/// Brings the loopback interface of the current network namespace up (`ip link set lo up`).
/// Needs CAP_NET_ADMIN over the namespace: the helper's PID 1 holds it as root of the user
/// namespace that created it.
pub(crate) fn loopback_up() -> Result<(), String> {
    use std::os::fd::AsRawFd;
    // Any AF_INET datagram socket serves the ioctl (127.0.0.1 is not bindable while lo is down).
    let socket = std::net::UdpSocket::bind("0.0.0.0:0")
        .map_err(|e| format!("open a socket to configure lo: {e}"))?;
    // SAFETY: `ifreq` is plain old data (integers, arrays and a union of those); all zeros is
    // a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    let fd = socket.as_raw_fd();
    // SAFETY: `fd` is an open socket owned by `socket` for the duration of both calls, and
    // `req` is a valid, writable `ifreq` that SIOCGIFFLAGS/SIOCSIFFLAGS read and write.
    unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) < 0 {
            return Err(format!(
                "read the flags of lo: {}",
                std::io::Error::last_os_error()
            ));
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req) < 0 {
            return Err(format!("bring lo up: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}
