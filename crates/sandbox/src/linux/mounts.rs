//! The filesystem view of a sandbox: a fresh tmpfs root where system directories are bound
//! read-only, the workspace (and configured paths) read-write, `/tmp` is private, `/dev` holds
//! only harmless devices, `/proc` belongs to the new PID namespace, and nothing else of the
//! host (home directories, /root, /run, /var, /srv…) exists. The request's own layers
//! (workspace, writable paths, hidden paths, protected workspace files) are in `layers`.

use super::as_root::Trees;
use super::layers;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::{chdir, pivot_root};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// Host directories made visible read-only (when they exist).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// Devices bound from the host into the sandbox's `/dev`.
/// No `tty`: a command has no controlling terminal but a pseudo-terminal reef hands it (an
/// operator's shell, see `Sandbox::terminal`), and must never reach reef's own.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

/// Parts of `/proc` that configure the host kernel: read-only inside. Root-owned, they would
/// otherwise be writable by the sandbox user of a reef running as root (whose files it owns).
const PROC_READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs", "acpi"];
/// Parts of `/proc` that expose the host kernel's memory, keys or timers: hidden.
const PROC_HIDDEN: &[&str] = &[
    "kcore",
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "latency_stats",
    "kmsg",
];

/// Where the new root is assembled: the first of these that exists and is not an ancestor of
/// a path the sandbox needs (the mount hides it only inside the sandbox's mount namespace).
const STAGING: &[&str] = &["/mnt", "/media", "/srv", "/opt", "/var/tmp", "/tmp"];

type Step = Result<(), String>;

fn step<T>(what: &str, path: &Path, r: nix::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{what} {}: {e}", path.display()))
}

fn io<T>(what: &str, path: &Path, r: std::io::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{what} {}: {e}", path.display()))
}

/// Builds the view and makes it the root of this process's mount namespace. Must run as root
/// of a user namespace that owns the current (fresh) mount namespace, inside the new PID
/// namespace (for `/proc`).
pub(crate) fn enter_view(
    workspace: &Path,
    writable: &[PathBuf],
    read_only: &[PathBuf],
    hidden: &[PathBuf],
    proxy_socket: Option<&Path>,
    trees: Option<&Trees>,
) -> Step {
    step(
        "make mounts private",
        Path::new("/"),
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        ),
    )?;
    let needed: Vec<&Path> = std::iter::once(workspace)
        .chain(writable.iter().map(PathBuf::as_path))
        .chain(read_only.iter().map(PathBuf::as_path))
        .collect();
    let base = STAGING
        .iter()
        .map(Path::new)
        .find(|dir| dir.is_dir() && !needed.iter().any(|n| n.starts_with(dir)))
        .ok_or("no staging directory for the sandbox root (need one of /mnt, /media, /srv…)")?;
    step(
        "mount tmpfs on",
        base,
        mount(
            Some("tmpfs"),
            base,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=0755,size=16m"),
        ),
    )?;

    for dir in SYSTEM_DIRS.iter().map(Path::new) {
        bind_system(base, dir)?;
    }
    // A private /tmp first: a workspace under the host's /tmp is bound on top of it.
    let tmp = base.join("tmp");
    io("create", &tmp, fs::create_dir_all(&tmp))?;
    step(
        "mount /tmp at",
        &tmp,
        mount(
            Some("tmpfs"),
            &tmp,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=1777,size=512m"),
        ),
    )?;
    make_dev(base)?;
    if let Some(socket) = proxy_socket {
        bind_socket(base, socket, trees)?;
    }
    let proc_dir = base.join("proc");
    io("create", &proc_dir, fs::create_dir_all(&proc_dir))?;
    step(
        "mount /proc at",
        &proc_dir,
        mount(
            Some("proc"),
            &proc_dir,
            Some("proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            None::<&str>,
        ),
    )?;
    protect_proc(&proc_dir)?;
    let open_masks = layers::apply(
        base,
        &layers::plan(workspace, writable, read_only, hidden),
        trees,
    )?;
    layers::seal(base, &open_masks)?;

    let old = base.join(".old-root");
    io("create", &old, fs::create_dir_all(&old))?;
    step("pivot_root to", base, pivot_root(base, &old))?;
    step("chdir", Path::new("/"), chdir("/"))?;
    step(
        "detach the old root",
        Path::new("/.old-root"),
        umount2("/.old-root", MntFlags::MNT_DETACH),
    )?;
    io(
        "remove",
        Path::new("/.old-root"),
        fs::remove_dir("/.old-root"),
    )?;
    // The assembled root itself is read-only: only the bound writable paths and /tmp accept writes.
    step(
        "remount / read-only",
        Path::new("/"),
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REMOUNT
                | MsFlags::MS_BIND
                | MsFlags::MS_RDONLY
                | MsFlags::MS_NOSUID
                | MsFlags::MS_NODEV,
            None::<&str>,
        ),
    )?;
    // So is /dev (its devices are mounts of their own and stay writable, as does /dev/shm):
    // nothing there can be replaced or added, such as a `/dev/fd` leading elsewhere for the
    // next command of a warm sandbox.
    step(
        "remount /dev read-only",
        Path::new("/dev"),
        mount(
            None::<&str>,
            "/dev",
            None::<&str>,
            MsFlags::MS_REMOUNT
                | MsFlags::MS_BIND
                | MsFlags::MS_RDONLY
                | MsFlags::MS_NOSUID
                | MsFlags::MS_NOEXEC,
            None::<&str>,
        ),
    )?;
    Ok(())
}

/// Binds the host system directory `path` read-only at the same place under `base`; symlinks
/// (merged /usr) are recreated.
fn bind_system(base: &Path, path: &Path) -> Step {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(()); // absent on this host
    };
    let target = base.join(path.strip_prefix("/").unwrap_or(path));
    if meta.file_type().is_symlink() {
        let link = io("read link", path, fs::read_link(path))?;
        if let Some(parent) = target.parent() {
            io("create", parent, fs::create_dir_all(parent))?;
        }
        return io("link", &target, symlink(link, &target));
    }
    if meta.is_dir() {
        io("create", &target, fs::create_dir_all(&target))?;
    } else {
        if let Some(parent) = target.parent() {
            io("create", parent, fs::create_dir_all(parent))?;
        }
        io("create", &target, fs::write(&target, b""))?;
    }
    step(
        "bind",
        path,
        mount(
            Some(path),
            &target,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        ),
    )?;
    let mut flags = MsFlags::MS_REMOUNT
        | MsFlags::MS_BIND
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV
        | MsFlags::MS_RDONLY;
    flags |= locked_flags(&target);
    step(
        "remount",
        path,
        mount(None::<&str>, &target, None::<&str>, flags, None::<&str>),
    )
}

/// Binds the host proxy's unix socket at `PROXY_SOCKET_INSIDE`.
fn bind_socket(base: &Path, socket: &Path, trees: Option<&Trees>) -> Step {
    let inside = Path::new(super::spec::PROXY_SOCKET_INSIDE);
    let target = base.join(inside.strip_prefix("/").unwrap_or(inside));
    if let Some(parent) = target.parent() {
        io("create", parent, fs::create_dir_all(parent))?;
    }
    io("create", &target, fs::write(&target, b""))?;
    if let Some(tree) = trees.and_then(|t| t.get(socket)) {
        return layers::attach(tree, &target, socket);
    }
    step(
        "bind the proxy socket",
        socket,
        mount(
            Some(socket),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        ),
    )
}

/// Makes the kernel's knobs under `/proc` read-only and hides what exposes host internals.
fn protect_proc(proc_dir: &Path) -> Step {
    for name in PROC_READ_ONLY {
        let path = proc_dir.join(name);
        if fs::symlink_metadata(&path).is_err() {
            continue; // not on this kernel
        }
        step(
            "bind",
            &path,
            mount(
                Some(&path),
                &path,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            ),
        )?;
        step(
            "make read-only",
            &path,
            mount(
                None::<&str>,
                &path,
                None::<&str>,
                MsFlags::MS_REMOUNT
                    | MsFlags::MS_BIND
                    | MsFlags::MS_RDONLY
                    | MsFlags::MS_NOSUID
                    | MsFlags::MS_NODEV
                    | MsFlags::MS_NOEXEC,
                None::<&str>,
            ),
        )?;
    }
    for name in PROC_HIDDEN {
        mask(&proc_dir.join(name))?;
    }
    Ok(())
}

/// Hides `path` (a file of the view being built, made by reef) under `/dev/null`.
fn mask(path: &Path) -> Step {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(());
    };
    if meta.is_dir() {
        return Ok(());
    }
    step(
        "hide",
        path,
        mount(
            Some("/dev/null"),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        ),
    )
}

fn make_dev(base: &Path) -> Step {
    let dev = base.join("dev");
    io("create", &dev, fs::create_dir_all(&dev))?;
    step(
        "mount /dev at",
        &dev,
        mount(
            Some("tmpfs"),
            &dev,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            Some("mode=0755,size=64k"),
        ),
    )?;
    for name in DEVICES {
        let host = Path::new("/dev").join(name);
        if !host.exists() {
            continue;
        }
        let node = dev.join(name);
        io("create", &node, fs::write(&node, b""))?;
        step(
            "bind device",
            &host,
            mount(
                Some(&host),
                &node,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            ),
        )?;
    }
    let shm = dev.join("shm");
    io("create", &shm, fs::create_dir_all(&shm))?;
    step(
        "mount /dev/shm at",
        &shm,
        mount(
            Some("tmpfs"),
            &shm,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=1777,size=64m"),
        ),
    )?;
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let link = dev.join(name);
        io("link", &link, symlink(target, &link))?;
    }
    Ok(())
}

/// The flags of the mount at `target` that a user namespace may not clear (the host locked
/// them on the mount it came from): a remount must repeat them.
pub(super) fn locked_flags(target: &Path) -> MsFlags {
    let mut flags = MsFlags::empty();
    if let Ok(st) = statvfs(target) {
        let f = st.flags();
        if f.contains(FsFlags::ST_NOEXEC) {
            flags |= MsFlags::MS_NOEXEC;
        }
        if f.contains(FsFlags::ST_NOATIME) {
            flags |= MsFlags::MS_NOATIME;
        }
        if f.contains(FsFlags::ST_RDONLY) {
            flags |= MsFlags::MS_RDONLY;
        }
    }
    flags
}
