//! QEMU's command line for one VM: the `microvm` machine without default devices, the
//! kernel booted directly, the agent's virtio-serial port on a unix socket, the workspace and
//! each read-only folder as a 9p share (the read-only ones refused writes by QEMU itself), a
//! user-mode network only when the policy gives the full network, and QEMU's own seccomp
//! sandbox on.

use super::accel::Acceleration;
use super::image::GuestImage;
use crate::policy::NetworkMode;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The host's system directories every VM gets read-only, by 9p tag, where the host has them:
/// its programs and libraries (so commands can run the host's `python3` or `git` inside) and
/// what they read in `/etc` besides files the guest has of its own.
const SYSTEM_SHARES: &[(&str, &str)] = &[
    ("usr", "/usr"),
    ("alternatives", "/etc/alternatives"),
    ("certs", "/etc/ssl/certs"),
];

/// [`SYSTEM_SHARES`] that exist on this host, as (tag, path).
pub(crate) fn system_shares() -> Vec<(&'static str, &'static Path)> {
    SYSTEM_SHARES
        .iter()
        .map(|(tag, path)| (*tag, Path::new(*path)))
        .filter(|(_, path)| path.is_dir())
        .collect()
}

/// The 9p tag of the workspace share; read-only folders are `ro0`, `ro1`, …
pub(crate) const WORKSPACE_TAG: &str = "ws";
/// The agent's socket in a VM's run directory.
pub(crate) const AGENT_SOCKET: &str = "agent";
/// The guest's serial console, kept for diagnostics, in the run directory.
pub(crate) const SERIAL_LOG: &str = "serial.log";
/// The network port's socket of an `allowlist` VM, in the run directory.
pub(crate) const NET_SOCKET: &str = "net";
/// QEMU's machine protocol socket (for snapshots), in the run directory.
pub(crate) const QMP_SOCKET: &str = "qmp";

/// How every VM of a backend is started.
#[derive(Clone, Debug)]
pub(crate) struct Launch {
    pub(crate) qemu: PathBuf,
    pub(crate) image: GuestImage,
    pub(crate) acceleration: Acceleration,
    pub(crate) memory_mib: u32,
    pub(crate) cpus: u32,
    pub(crate) tsc_khz: Option<u64>,
}

/// What one VM shares with the host: the VMs of a pool are interchangeable only for the same
/// key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VmKey {
    /// Resolved; shared read-write and mounted at the same path inside.
    pub(crate) workspace: PathBuf,
    /// Resolved; shared read-only, each at its own path.
    pub(crate) read_only: Vec<PathBuf>,
    pub(crate) network: NetworkMode,
}

/// QEMU's arguments for a VM of `key` whose sockets and log live in `dir`, restored from the
/// snapshot `restore` when given.
pub(crate) fn arguments(
    launch: &Launch,
    key: &VmKey,
    dir: &Path,
    restore: Option<&Path>,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |items: &[&str]| args.extend(items.iter().map(OsString::from));
    let (accel, cpu) = match launch.acceleration {
        Acceleration::Kvm => ("kvm", "host"),
        Acceleration::Tcg => ("tcg,tb-size=64", "max"),
    };
    let mut append = String::from("console=ttyS0 quiet nokaslr panic=-1");
    if let Some(khz) = launch.tsc_khz {
        append.push_str(&format!(" tsc_early_khz={khz}"));
    }
    push(&[
        "-M",
        "microvm,rtc=on,pit=on,pic=on",
        "-bios",
        "qboot.rom",
        "-accel",
        accel,
        "-cpu",
        cpu,
        "-smp",
        &launch.cpus.max(1).to_string(),
        "-m",
        &launch.memory_mib.max(64).to_string(),
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-monitor",
        "none",
        "-no-reboot",
        // QEMU's own seccomp filter: no obsolete calls, no privilege changes, no new
        // processes, no scheduler or resource changes.
        "-sandbox",
        "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
        "-append",
        &append,
    ]);
    let path_arg = |prefix: &str, path: &Path, suffix: &str| {
        let mut arg = OsString::from(prefix);
        arg.push(escape(path));
        arg.push(suffix);
        arg
    };
    args.push("-kernel".into());
    args.push(launch.image.kernel.clone().into_os_string());
    args.push("-initrd".into());
    args.push(launch.image.initrd.clone().into_os_string());
    args.push("-serial".into());
    args.push(path_arg("file:", &dir.join(SERIAL_LOG), ""));
    args.push("-qmp".into());
    args.push(path_arg(
        "unix:",
        &dir.join(QMP_SOCKET),
        ",server=on,wait=off",
    ));
    if let Some(snapshot) = restore {
        args.push("-incoming".into());
        args.push(path_arg("file:", snapshot, ""));
    }
    args.push("-device".into());
    args.push("virtio-serial-device".into());
    // A virtio-serial port named `name` inside, a unix socket QEMU serves outside.
    let mut port = |id: &str, socket: &str, name: &str| {
        args.push("-chardev".into());
        args.push(path_arg(
            &format!("socket,id={id},path="),
            &dir.join(socket),
            ",server=on,wait=off",
        ));
        args.push("-device".into());
        args.push(format!("virtserialport,chardev={id},name={name}").into());
    };
    port("agent", AGENT_SOCKET, reef_vm_agent::protocol::PORT_NAME);
    if key.network == NetworkMode::Allowlist {
        port("net", NET_SOCKET, reef_vm_agent::protocol::NET_PORT_NAME);
    }
    let mut share = |tag: &str, path: &Path, read_only: bool| {
        args.push("-fsdev".into());
        let options = if read_only {
            ",security_model=none,readonly=on"
        } else {
            ",security_model=none"
        };
        args.push(path_arg(&format!("local,id={tag},path="), path, options));
        args.push("-device".into());
        args.push(format!("virtio-9p-device,fsdev={tag},mount_tag={tag}").into());
    };
    for (tag, path) in system_shares() {
        share(tag, path, true);
    }
    share(WORKSPACE_TAG, &key.workspace, false);
    for (i, path) in key.read_only.iter().enumerate() {
        share(&read_only_tag(i), path, true);
    }
    if key.network == NetworkMode::Full {
        for item in [
            "-netdev",
            "user,id=net",
            "-device",
            "virtio-net-device,netdev=net",
        ] {
            args.push(item.into());
        }
    }
    args
}

/// The 9p tag of the `i`th read-only folder.
pub(crate) fn read_only_tag(i: usize) -> String {
    format!("ro{i}")
}

/// A path inside a QEMU option value: commas doubled.
fn escape(path: &Path) -> OsString {
    use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
    let mut out = Vec::new();
    for b in path.as_os_str().as_bytes() {
        out.push(*b);
        if *b == b',' {
            out.push(b',');
        }
    }
    OsString::from_vec(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commas_in_paths_are_doubled_and_the_network_is_off_unless_full() {
        let launch = Launch {
            qemu: "qemu".into(),
            image: GuestImage {
                kernel: "/i/vmlinux".into(),
                initrd: "/i/initramfs.cpio".into(),
            },
            acceleration: Acceleration::Tcg,
            memory_mib: 128,
            cpus: 1,
            tsc_khz: Some(1000),
        };
        let mut key = VmKey {
            workspace: "/w,x".into(),
            read_only: vec!["/skills/a".into()],
            network: NetworkMode::None,
        };
        let joined = |args: Vec<OsString>| {
            args.iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let args = joined(arguments(&launch, &key, Path::new("/run/vm"), None));
        assert!(
            args.contains("local,id=ws,path=/w,,x,security_model=none "),
            "{args}"
        );
        assert!(
            args.contains("path=/skills/a,security_model=none,readonly=on"),
            "{args}"
        );
        assert!(args.contains("tsc_early_khz=1000"), "{args}");
        assert!(!args.contains("-netdev"), "{args}");
        key.network = NetworkMode::Full;
        let args = joined(arguments(
            &launch,
            &key,
            Path::new("/run/vm"),
            Some(Path::new("/s")),
        ));
        assert!(args.contains("-netdev user"), "{args}");
        assert!(args.contains("-incoming file:/s"), "{args}");
    }
}
