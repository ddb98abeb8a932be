//! The guest's start: the kernel filesystems, the modules of its virtio devices (listed in
//! `/lib/modules/order` by the image builder), the loopback interface, the network when the VM
//! has one, and the virtio-serial port reef speaks on. Also the mounts made later: reef's 9p
//! shares, and a fresh `/tmp` between commands.

use crate::protocol::{Layer, LayerKind, PORT_NAME};
use nix::errno::Errno;
use nix::kmod::{ModuleInitFlags, finit_module};
use nix::mount::{MsFlags, mount};
use std::ffi::{CString, OsStr};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the port may take to appear after the modules are loaded.
const PORT_WAIT: Duration = Duration::from_secs(30);
/// Where the image builder lists the modules to load, in order.
const MODULE_ORDER: &str = "/lib/modules/order";

/// Prepares the guest and opens reef's port.
pub(super) fn boot() -> io::Result<File> {
    mount_kernel_filesystems()?;
    // The out-of-memory killer picks commands, never the agent.
    if let Err(err) = fs::write("/proc/self/oom_score_adj", "-1000") {
        super::log(&format!(
            "cannot protect the agent from the OOM killer: {err}"
        ));
    }
    load_modules()?;
    let _ = nix::unistd::sethostname("reef-vm");
    configure_network();
    open_port()
}

fn mount_at(
    source: &str,
    target: &str,
    fstype: &str,
    flags: MsFlags,
    data: Option<&str>,
) -> io::Result<()> {
    fs::create_dir_all(target)?;
    mount(Some(source), target, Some(fstype), flags, data)
        .map_err(|e| io::Error::other(format!("mount {fstype} on {target}: {e}")))
}

fn mount_kernel_filesystems() -> io::Result<()> {
    let quiet = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC | MsFlags::MS_NODEV;
    mount_at("proc", "/proc", "proc", quiet, None)?;
    mount_at("sysfs", "/sys", "sysfs", quiet, None)?;
    mount_at("devtmpfs", "/dev", "devtmpfs", MsFlags::MS_NOSUID, None)?;
    mount_at(
        "devpts",
        "/dev/pts",
        "devpts",
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        None,
    )?;
    // Scratch space is memory: bounded, so that filling it fails a write instead of leaving
    // the kernel nothing to free.
    mount_at(
        "shm",
        "/dev/shm",
        "tmpfs",
        quiet,
        Some("mode=1777,size=20%"),
    )?;
    mount_at(
        "tmp",
        "/tmp",
        "tmpfs",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777,size=30%"),
    )
}

/// Empties `/tmp` and `/dev/shm` of what commands wrote there. Shares mounted at or above
/// one of them (a workspace that is the host's `/tmp`) leave it alone; below, the mount points
/// in `keep` and the directories leading to them stay, and no other mount point is crossed.
/// Links are removed, never followed.
pub(super) fn clear_scratch(keep: &[PathBuf]) -> io::Result<()> {
    for dir in ["/tmp", "/dev/shm"] {
        let dir = Path::new(dir);
        if keep.iter().any(|k| dir.starts_with(k)) {
            continue;
        }
        clear_dir(dir, keep)?;
    }
    Ok(())
}

fn clear_dir(dir: &Path, keep: &[PathBuf]) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let device = fs::symlink_metadata(dir)?.dev();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let meta = fs::symlink_metadata(&path)?;
        if keep.contains(&path) || meta.dev() != device {
            continue;
        }
        if keep.iter().any(|k| k.starts_with(&path)) {
            clear_dir(&path, keep)?;
        } else if meta.is_dir() {
            fs::remove_dir_all(&path)?;
        } else {
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}

fn load_modules() -> io::Result<()> {
    let order = match fs::read_to_string(MODULE_ORDER) {
        Ok(order) => order,
        // A kernel with the drivers built in needs no modules.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let no_params = CString::default();
    for name in order.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let path = Path::new("/lib/modules").join(name);
        let file = File::open(&path)?;
        match finit_module(&file, &no_params, ModuleInitFlags::empty()) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => {
                return Err(io::Error::other(format!(
                    "load module {}: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(())
}

/// Brings up `lo`, and `eth0` when the VM has a network (QEMU's user network: a fixed
/// address, its gateway and its DNS relay).
fn configure_network() {
    ip(&["link", "set", "lo", "up"]);
    if Path::new("/sys/class/net/eth0").exists() {
        ip(&["addr", "add", "10.0.2.15/24", "dev", "eth0"]);
        ip(&["link", "set", "eth0", "up"]);
        ip(&["route", "add", "default", "via", "10.0.2.2"]);
        if let Err(err) = fs::write("/etc/resolv.conf", "nameserver 10.0.2.3\n") {
            super::log(&format!("cannot write /etc/resolv.conf: {err}"));
        }
    }
}

fn ip(args: &[&str]) {
    let ran = Command::new("/sbin/ip")
        .args(args)
        .stdin(Stdio::null())
        .status();
    match ran {
        Ok(status) if status.success() => {}
        Ok(status) => super::log(&format!("ip {}: {status}", args.join(" "))),
        Err(err) => super::log(&format!("ip {}: {err}", args.join(" "))),
    }
}

/// Opens the virtio-serial port named [`PORT_NAME`], waiting for it to appear.
fn open_port() -> io::Result<File> {
    open_named_port(PORT_NAME)
}

/// Opens the virtio-serial port named `name`, waiting for it to appear.
pub(super) fn open_named_port(name: &str) -> io::Result<File> {
    let started = Instant::now();
    loop {
        if let Some(dev) = find_port(name)? {
            return OpenOptions::new().read(true).write(true).open(dev);
        }
        if started.elapsed() > PORT_WAIT {
            return Err(io::Error::other(format!(
                "no virtio-serial port named {name} appeared"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn find_port(wanted: &str) -> io::Result<Option<PathBuf>> {
    let ports = match fs::read_dir("/sys/class/virtio-ports") {
        Ok(ports) => ports,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    for port in ports {
        let port = port?;
        let name = fs::read_to_string(port.path().join("name")).unwrap_or_default();
        if name.trim() == wanted {
            return Ok(Some(Path::new("/dev").join(port.file_name())));
        }
    }
    Ok(None)
}

/// Mounts the VM's 9p share `tag` at `path` (an absolute guest path, created if missing).
pub(super) fn mount_share(
    tag: &str,
    path: &[u8],
    read_only: bool,
    layers: &[Layer],
) -> io::Result<()> {
    let path = Path::new(OsStr::from_bytes(path));
    if !path.is_absolute() {
        return Err(io::Error::other(format!(
            "the mount point {} is not absolute",
            path.display()
        )));
    }
    fs::create_dir_all(path)?;
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    // A read-only share (the host's /usr, a skill's folder) is cached in the guest: programs
    // run from it load their libraries over 9p once, not on every exec. The workspace is not,
    // so both sides always see each other's writes.
    let cache = if read_only {
        flags |= MsFlags::MS_RDONLY;
        "loose"
    } else {
        "none"
    };
    let options = format!("trans=virtio,version=9p2000.L,msize=262144,cache={cache},access=any");
    mount(Some(tag), path, Some("9p"), flags, Some(options.as_str())).map_err(|e| {
        io::Error::other(format!("mount the share {tag} on {}: {e}", path.display()))
    })?;
    for layer in layers {
        apply_layer(path, layer)?;
    }
    Ok(())
}

/// Applies one layer under the share mounted at `base`; a path that does not exist, or is a
/// link, is left alone.
fn apply_layer(base: &Path, layer: &Layer) -> io::Result<()> {
    let rel = Path::new(OsStr::from_bytes(&layer.path));
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(io::Error::other(format!(
            "the layer path {} is not a plain relative path",
            rel.display()
        )));
    }
    let target = base.join(rel);
    let meta = match fs::symlink_metadata(&target) {
        Ok(meta) if !meta.file_type().is_symlink() => meta,
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let fail = |what: &str, e: Errno| io::Error::other(format!("{what} {}: {e}", target.display()));
    let bind = |source: &Path| {
        mount(
            Some(source),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| fail("bind", e))
    };
    match layer.kind {
        LayerKind::Pin if meta.is_dir() => bind(&target),
        LayerKind::Pin => Ok(()),
        LayerKind::ReadOnly => {
            bind(&target)?;
            let flags = MsFlags::MS_BIND
                | MsFlags::MS_REMOUNT
                | MsFlags::MS_RDONLY
                | MsFlags::MS_NOSUID
                | MsFlags::MS_NODEV;
            mount(None::<&str>, &target, None::<&str>, flags, None::<&str>)
                .map_err(|e| fail("make read-only", e))
        }
        LayerKind::Mask if meta.is_dir() => mount(
            Some("mask"),
            &target,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("mode=0,size=4k"),
        )
        .map_err(|e| fail("mask", e)),
        LayerKind::Mask => bind(Path::new("/dev/null")),
    }
}
