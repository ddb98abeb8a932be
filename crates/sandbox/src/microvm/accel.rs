//! Whether this machine offers usable KVM, and which accelerator a VM gets. `/dev/kvm`
//! existing is not enough: a host that is itself a guest may offer a paravirtual KVM
//! (`kvm_pvm`) without the CPU's virtualisation extensions, under which a Linux guest does
//! not boot.

use crate::policy::Accelerator;
use std::path::Path;

/// What a VM runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Acceleration {
    /// Hardware virtualisation.
    Kvm,
    /// Software emulation (QEMU's TCG): every guest instruction translated; boots take
    /// seconds and commands run several times slower than on the host.
    Tcg,
}

impl Acceleration {
    pub fn as_str(self) -> &'static str {
        match self {
            Acceleration::Kvm => "kvm",
            Acceleration::Tcg => "tcg",
        }
    }
}

/// The accelerator `choice` gives on this machine, and why; an error when `kvm` was asked
/// for and is not usable.
pub fn choose_acceleration(choice: Accelerator) -> Result<(Acceleration, String), String> {
    let kvm = kvm_usable(Path::new("/"));
    match (choice, kvm) {
        (Accelerator::Tcg, _) => Ok((
            Acceleration::Tcg,
            "software emulation, as configured (sandbox.microvm.accelerator = \"tcg\")".into(),
        )),
        (Accelerator::Auto | Accelerator::Kvm, Ok(())) => {
            Ok((Acceleration::Kvm, "KVM (hardware virtualisation)".into()))
        }
        (Accelerator::Kvm, Err(why)) => Err(format!(
            "sandbox.microvm.accelerator is \"kvm\" but KVM is not usable here: {why}"
        )),
        (Accelerator::Auto, Err(why)) => Ok((
            Acceleration::Tcg,
            format!("software emulation (slow): KVM is not usable here: {why}"),
        )),
    }
}

/// `Ok` when KVM can run a guest on the machine whose root is `root`: `/dev/kvm` opens for
/// reading and writing, the CPU has VMX or SVM, and the module is not the paravirtual one.
pub(crate) fn kvm_usable(root: &Path) -> Result<(), String> {
    let dev = root.join("dev/kvm");
    if !dev.exists() {
        return Err("/dev/kvm does not exist".into());
    }
    if root.join("sys/module/kvm_pvm").exists() {
        return Err(
            "/dev/kvm is the paravirtual kvm_pvm (this host is itself a guest without \
             nested virtualisation)"
                .into(),
        );
    }
    let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo"))
        .map_err(|e| format!("cannot read /proc/cpuinfo: {e}"))?;
    let extensions = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    if !extensions {
        return Err("the CPU offers neither VMX nor SVM".into());
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&dev)
        .map(drop)
        .map_err(|e| format!("cannot open /dev/kvm: {e}"))
}

/// The TSC frequency in kHz as the host reports it (`cpu MHz`): given to the guest kernel, so
/// it need not calibrate its clock, which under emulation on a loaded host can hang its boot.
pub(crate) fn tsc_khz() -> Option<u64> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mhz = cpuinfo
        .lines()
        .find(|l| l.starts_with("cpu MHz"))?
        .split(':')
        .nth(1)?
        .trim()
        .parse::<f64>()
        .ok()?;
    (mhz > 0.0).then_some((mhz * 1000.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_root(cpu_flags: &str, pvm: bool) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let write = |rel: &str, text: &str| {
            let path = root.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap_or(root.path()))
                .unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
        };
        write("dev/kvm", "");
        write(
            "proc/cpuinfo",
            &format!("processor\t: 0\nflags\t\t: fpu sse2 {cpu_flags}\n"),
        );
        if pvm {
            write("sys/module/kvm_pvm/refcnt", "1\n");
        }
        root
    }

    #[test]
    fn a_paravirtual_kvm_or_a_cpu_without_extensions_is_not_usable() {
        let pvm = kvm_usable(fake_root("vmx", true).path()).unwrap_err();
        assert!(pvm.contains("kvm_pvm"), "{pvm}");
        let plain = kvm_usable(fake_root("avx2", false).path()).unwrap_err();
        assert!(plain.contains("neither VMX nor SVM"), "{plain}");
        // With the extension and a /dev/kvm that opens, it is.
        assert_eq!(kvm_usable(fake_root("svm", false).path()), Ok(()));
        let none = kvm_usable(Path::new("/nonexistent-root")).unwrap_err();
        assert!(none.contains("does not exist"), "{none}");
    }
}
