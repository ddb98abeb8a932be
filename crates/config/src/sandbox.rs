//! The `[sandbox]` section: which backend confines tool processes, what they may reach and
//! their resource limits. reef-config names the choices with its own enums (it depends only on
//! reef-core); reef-agent maps them onto the sandbox's policy.

use crate::error::ConfigError;
use crate::raw::SandboxToml;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The configured backend (`sandbox.backend`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxBackendName {
    /// Kernel-enforced confinement (namespaces, Landlock, seccomp, limits).
    #[default]
    Landlock,
    /// No kernel confinement: scrubbed environment, process group, timeout and output caps only.
    None,
    /// A lightweight VM per agent session (`[sandbox.microvm]`).
    Microvm,
}

impl SandboxBackendName {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxBackendName::Landlock => "landlock",
            SandboxBackendName::None => "none",
            SandboxBackendName::Microvm => "microvm",
        }
    }
}

impl fmt::Display for SandboxBackendName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The configured network access of sandboxed processes (`sandbox.network`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkModeName {
    /// No network at all.
    #[default]
    None,
    /// HTTP/HTTPS to the domains in `sandbox.allow_domains` only.
    Allowlist,
    /// The host's network.
    Full,
}

impl NetworkModeName {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkModeName::None => "none",
            NetworkModeName::Allowlist => "allowlist",
            NetworkModeName::Full => "full",
        }
    }
}

impl fmt::Display for NetworkModeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The virtualisation the microVM backend asks for (`sandbox.microvm.accelerator`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AcceleratorName {
    /// KVM where usable, else software emulation.
    #[default]
    Auto,
    Kvm,
    Tcg,
}

/// The resolved `[sandbox.microvm]` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MicrovmConfig {
    /// The QEMU program (a name looked up on `PATH`, or a path).
    pub qemu: PathBuf,
    /// The guest image's directory; `None` for `$REEF_HOME/microvm`.
    pub image: Option<PathBuf>,
    pub memory_mib: u32,
    pub cpus: u32,
    /// VMs kept booted ahead of need per workspace.
    pub pool: usize,
    /// Restore the pool's VMs from a snapshot of its first instead of booting each.
    pub snapshot: bool,
    pub accelerator: AcceleratorName,
}

impl MicrovmConfig {
    /// The guest image's directory, given reef's home.
    pub fn image_in(&self, home: &Path) -> PathBuf {
        self.image.clone().unwrap_or_else(|| home.join("microvm"))
    }
}

impl Default for MicrovmConfig {
    fn default() -> Self {
        Self {
            qemu: PathBuf::from("qemu-system-x86_64"),
            image: None,
            memory_mib: 512,
            cpus: 1,
            pool: 1,
            snapshot: true,
            accelerator: AcceleratorName::Auto,
        }
    }
}

/// The resolved `[sandbox]` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxConfig {
    pub backend: SandboxBackendName,
    /// Refuse to run tools unconfined when the backend does not work on this machine.
    pub required: bool,
    pub network: NetworkModeName,
    /// Domains reachable with `network = "allowlist"` (exact names or `*.suffix`).
    pub allow_domains: Vec<String>,
    /// Absolute paths writable besides the workspace.
    pub writable: Vec<PathBuf>,
    pub memory_bytes: u64,
    pub file_size_bytes: u64,
    pub cpu_secs: u64,
    pub max_processes: u64,
    pub open_files: u64,
    /// Fork each tool command from a sandbox built once per agent session (`sandbox.warm`).
    pub warm: bool,
    pub microvm: MicrovmConfig,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            backend: SandboxBackendName::Landlock,
            required: false,
            network: NetworkModeName::None,
            allow_domains: Vec::new(),
            writable: Vec::new(),
            memory_bytes: 2 * GIB,
            file_size_bytes: GIB,
            cpu_secs: 300,
            max_processes: 256,
            open_files: 1024,
            warm: true,
            microvm: MicrovmConfig::default(),
        }
    }
}

/// Applies defaults to the raw section and validates what a type cannot: limits above zero,
/// domain syntax, absolute writable paths (`~/` expands to `HOME`).
pub(crate) fn resolve(
    raw: SandboxToml,
    home: &Path,
    env: &BTreeMap<String, String>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<SandboxConfig, ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        origin: origin_of(&format!("sandbox.{key}")),
        key: format!("sandbox.{key}"),
        message,
    };
    let defaults = SandboxConfig::default();
    let positive = |key: &str, value: Option<u64>, default: u64| match value {
        Some(0) => Err(invalid(key, "must be at least 1".into())),
        Some(v) => Ok(v),
        None => Ok(default),
    };
    let allow_domains = raw.allow_domains.unwrap_or_default();
    for domain in &allow_domains {
        check_domain(domain).map_err(|message| invalid("allow_domains", message))?;
    }
    let writable = writable_paths(raw.writable.unwrap_or_default(), env)
        .map_err(|message| invalid("writable", message))?;
    let backend = raw.backend.unwrap_or(defaults.backend);
    let required = raw.required.unwrap_or(defaults.required);
    if required && backend == SandboxBackendName::None {
        return Err(invalid(
            "backend",
            format!(
                "\"none\" runs tools unconfined, but sandbox.required = true (from {}) \
                 forbids that; choose \"landlock\" or \"microvm\", or set sandbox.required = false",
                origin_of("sandbox.required")
            ),
        ));
    }
    Ok(SandboxConfig {
        backend,
        required,
        network: raw.network.unwrap_or(defaults.network),
        allow_domains,
        writable,
        memory_bytes: raw.memory.map_or(defaults.memory_bytes, |s| s.0),
        file_size_bytes: raw.file_size.map_or(defaults.file_size_bytes, |s| s.0),
        cpu_secs: positive("cpu_secs", raw.cpu_secs, defaults.cpu_secs)?,
        max_processes: positive("max_processes", raw.max_processes, defaults.max_processes)?,
        open_files: positive("open_files", raw.open_files, defaults.open_files)?,
        warm: raw.warm.unwrap_or(defaults.warm),
        microvm: resolve_microvm(raw.microvm.unwrap_or_default(), home, env, &invalid)?,
    })
}

fn resolve_microvm(
    raw: crate::raw::MicrovmToml,
    home: &Path,
    env: &BTreeMap<String, String>,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<MicrovmConfig, ConfigError> {
    let defaults = MicrovmConfig::default();
    let image = match raw.image {
        Some(path) if path.starts_with("~/") => {
            Some(expand_path(&path, env).map_err(|m| invalid("microvm.image", m))?)
        }
        // Relative to reef's home, as the store's path.
        Some(path) => Some(home.join(path)),
        None => None,
    };
    let memory_mib = match raw.memory {
        None => defaults.memory_mib,
        Some(size) if size.0 < 64 * MIB => {
            return Err(invalid(
                "microvm.memory",
                format!(
                    "{} is too little for a VM; give at least 64M",
                    format_size(size.0)
                ),
            ));
        }
        Some(size) => u32::try_from(size.0 / MIB)
            .map_err(|_| invalid("microvm.memory", "is too large".into()))?,
    };
    let cpus = match raw.cpus {
        None => defaults.cpus,
        Some(n @ 1..=64) => n,
        Some(n) => {
            return Err(invalid(
                "microvm.cpus",
                format!("{n} is not between 1 and 64"),
            ));
        }
    };
    let pool = match raw.pool {
        None => defaults.pool,
        Some(n @ 0..=16) => n,
        Some(n) => {
            return Err(invalid(
                "microvm.pool",
                format!("{n} VMs kept booted per workspace is over the limit of 16"),
            ));
        }
    };
    Ok(MicrovmConfig {
        qemu: raw.qemu.map_or(defaults.qemu, PathBuf::from),
        image,
        memory_mib,
        cpus,
        pool,
        snapshot: raw.snapshot.unwrap_or(defaults.snapshot),
        accelerator: raw.accelerator.unwrap_or(defaults.accelerator),
    })
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;
const TIB: u64 = 1024 * GIB;

/// Parses a size: plain bytes (`1048576`) or a number with a binary suffix `K`, `M`, `G` or `T`
/// (`512M`, `2G`; `KB`/`KiB` spellings and lower case are accepted too). Zero is refused.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let expected = || {
        format!(
            "`{text}` is not a size (expected bytes or a number with K, M, G or T, e.g. \"512M\")"
        )
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(split);
    let number: u64 = digits.parse().map_err(|_| expected())?;
    let unit = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => KIB,
        "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        "t" | "tb" | "tib" => TIB,
        _ => return Err(expected()),
    };
    let bytes = number
        .checked_mul(unit)
        .ok_or_else(|| format!("`{text}` is too large"))?;
    if bytes == 0 {
        return Err("must be greater than 0".into());
    }
    Ok(bytes)
}

/// Formats bytes the way a user would write them: `2G`, `512M`, `1536K`, or plain bytes.
pub fn format_size(bytes: u64) -> String {
    for (unit, suffix) in [(TIB, "T"), (GIB, "G"), (MIB, "M"), (KIB, "K")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// A size in the raw config: a string such as `"2G"` or an integer number of bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ByteSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"2G\", \"512M\" or a number of bytes")
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ByteSize, E> {
                if v == 0 {
                    return Err(E::custom("must be greater than 0"));
                }
                Ok(ByteSize(v))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ByteSize, E> {
                let v = u64::try_from(v)
                    .map_err(|_| E::custom(format!("{v} is negative; expected a size")))?;
                self.visit_u64(v)
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ByteSize, E> {
                parse_size(v).map(ByteSize).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// Configured paths made absolute: `~/` expands to `HOME`; anything else must be absolute.
pub(crate) fn writable_paths(
    paths: Vec<String>,
    env: &BTreeMap<String, String>,
) -> Result<Vec<PathBuf>, String> {
    paths.iter().map(|path| expand_path(path, env)).collect()
}

/// `path` with a leading `~/` expanded to `HOME`; refused unless absolute then.
fn expand_path(path: &str, env: &BTreeMap<String, String>) -> Result<PathBuf, String> {
    let expanded = match path.strip_prefix("~/") {
        Some(rest) => match env.get("HOME").filter(|h| !h.is_empty()) {
            Some(home) => Path::new(home).join(rest),
            None => return Err(format!("`{path}` starts with ~/ but HOME is not set")),
        },
        None => PathBuf::from(path),
    };
    if !expanded.is_absolute() {
        return Err(format!("`{path}` is not an absolute path"));
    }
    Ok(expanded)
}

/// Checks one `allow_domains` entry: a host name (`example.com`) or a suffix pattern
/// (`*.example.com`), without scheme, port or path.
pub fn check_domain(domain: &str) -> Result<(), String> {
    let host = domain.strip_prefix("*.").unwrap_or(domain);
    let valid = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{domain}` is not a domain (expected a host name such as \"example.com\" or a \
             pattern such as \"*.example.com\", without scheme, port or path)"
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;

    #[test]
    fn sizes_parse_with_and_without_suffixes() {
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("256M").unwrap(), 256 * MIB);
        assert_eq!(parse_size("2G").unwrap(), 2 * GIB);
        assert_eq!(parse_size("2g").unwrap(), 2 * GIB);
        assert_eq!(parse_size("2GiB").unwrap(), 2 * GIB);
        assert_eq!(parse_size("1T").unwrap(), TIB);
        for bad in ["", "abc", "G", "1.5G", "-1", "12X", "0", "0M"] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(
            parse_size("99999999999T")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn sizes_format_back_to_suffixes() {
        assert_eq!(format_size(2 * GIB), "2G");
        assert_eq!(format_size(512 * MIB), "512M");
        assert_eq!(format_size(1536 * KIB), "1536K");
        assert_eq!(format_size(1000), "1000");
    }

    #[test]
    fn domains_are_host_names_or_suffix_patterns() {
        for ok in [
            "example.com",
            "*.github.com",
            "pypi.org",
            "a-b.c_d.io",
            "localhost",
        ] {
            assert!(check_domain(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "https://example.com",
            "example.com:443",
            "example.com/path",
            "*.",
            "a..b",
            "-a.com",
            "*example.com",
        ] {
            assert!(check_domain(bad).is_err(), "{bad:?}");
        }
    }
}
