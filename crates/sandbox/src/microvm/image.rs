//! The guest image: a kernel and an initramfs in one directory, with the SHA-256 of each in
//! `SHA256SUMS` (as `sha256sum` writes it). Both are checked before a VM boots from them, and
//! must be regular files that only their owner (this user or root) can change.

use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

pub(crate) const KERNEL: &str = "vmlinux";
pub(crate) const INITRD: &str = "initramfs.cpio";
const SUMS: &str = "SHA256SUMS";

/// A checked guest image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GuestImage {
    pub(crate) kernel: PathBuf,
    pub(crate) initrd: PathBuf,
}

impl GuestImage {
    /// Checks the image in `dir`: what is wrong is said with the file it concerns.
    pub(crate) fn open(dir: &Path) -> Result<GuestImage, String> {
        if dir.as_os_str().is_empty() {
            return Err(
                "no guest image is configured (sandbox.microvm.image); build one with \
                 scripts/microvm-image"
                    .into(),
            );
        }
        let sums_path = dir.join(SUMS);
        let sums = std::fs::read_to_string(&sums_path).map_err(|e| {
            format!(
                "cannot read {}: {e} (build the image with scripts/microvm-image {})",
                sums_path.display(),
                dir.display()
            )
        })?;
        let expected = |name: &str| {
            sums.lines()
                .filter_map(|l| l.split_once("  "))
                .find(|(_, file)| file.trim() == name)
                .map(|(sum, _)| sum.trim().to_ascii_lowercase())
                .ok_or_else(|| format!("{} has no checksum for {name}", sums_path.display()))
        };
        for name in [KERNEL, INITRD] {
            let path = dir.join(name);
            check_owner(&path)?;
            let want = expected(name)?;
            let got = sha256_file(&path)?;
            if got != want {
                return Err(format!(
                    "{} does not match its checksum in {} (expected {want}, found {got}); \
                     rebuild the image",
                    path.display(),
                    sums_path.display()
                ));
            }
        }
        Ok(GuestImage {
            kernel: dir.join(KERNEL),
            initrd: dir.join(INITRD),
        })
    }
}

/// A regular file (not a link), owned by this user or root, writable by no one else.
fn check_owner(path: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.file_type().is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "{} belongs to user {}, not to this user or root",
            path.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is writable by its group or others",
            path.display()
        ));
    }
    Ok(())
}

fn sha256_file(path: &Path) -> Result<String, String> {
    let mut file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
