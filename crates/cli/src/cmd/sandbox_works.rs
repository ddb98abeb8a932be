//! What `reef sandbox run` remembers of the backend's self-test: that the landlock sandbox,
//! under this very policy and helper, ran `true` on this machine since it last booted. While
//! that holds, a one-shot run skips the self-test (one sandbox start of the two it would
//! otherwise pay). A sandbox that stopped working meanwhile (user namespaces switched off)
//! then fails the command with the helper's reason: it never falls back to running unconfined
//! on the strength of the record.

use reef_sandbox::SandboxPolicy;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// The record's file in reef's home (which no sandboxed command can see or write).
const FILE: &str = "sandbox-works";

/// Where the record lives for the home `home`.
fn path(home: &Path) -> PathBuf {
    home.join(FILE)
}

/// What the record must say for `policy` here: the kernel's boot id, reef's version, and a
/// digest of the whole policy (helper included). `None` when the boot id cannot be read.
fn key(policy: &SandboxPolicy) -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let digest = reef_security::audit::sha256_hex(format!("{policy:?}").as_bytes());
    Some(format!(
        "boot {}\nreef {}\npolicy {digest}\n",
        boot.trim(),
        env!("CARGO_PKG_VERSION")
    ))
}

/// Whether the self-test passed for `policy` since the machine booted.
pub(crate) fn remembered(home: &Path, policy: &SandboxPolicy) -> bool {
    let Some(key) = key(policy) else {
        return false;
    };
    std::fs::read_to_string(path(home)).is_ok_and(|text| text == key)
}

/// Records that the self-test passed for `policy`. Best effort: a home that cannot be written
/// only means the next run tests again.
pub(crate) fn remember(home: &Path, policy: &SandboxPolicy) {
    let Some(key) = key(policy) else {
        return;
    };
    let tmp = home.join(format!(".{FILE}.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut file| file.write_all(key.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, path(home)));
    if let Err(err) = written {
        tracing::debug!(error = %err, "cannot remember the sandbox self-test");
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::{remember, remembered};
    use reef_sandbox::{NetworkMode, SandboxBackend, SandboxPolicy};

    #[test]
    fn a_record_holds_for_the_same_policy_only() {
        let home = tempfile::tempdir().unwrap();
        let policy = SandboxPolicy {
            backend: SandboxBackend::Landlock,
            ..SandboxPolicy::default()
        };
        assert!(!remembered(home.path(), &policy));
        remember(home.path(), &policy);
        assert!(remembered(home.path(), &policy));
        let other = SandboxPolicy {
            network: NetworkMode::Full,
            ..policy.clone()
        };
        assert!(
            !remembered(home.path(), &other),
            "another policy tests again"
        );
        std::fs::write(home.path().join("sandbox-works"), "boot x\n").unwrap();
        assert!(
            !remembered(home.path(), &policy),
            "another boot tests again"
        );
    }
}
