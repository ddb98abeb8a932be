//! The `[sandbox]` section: defaults, parsing, layering and errors naming the key.

use crate::{Fixture, MAIN};
use reef_config::{NetworkModeName, SandboxBackendName, SandboxConfig};
use std::path::{Path, PathBuf};

const GIB: u64 = 1024 * 1024 * 1024;

#[test]
fn defaults_confine_with_landlock_and_no_network() {
    let fx = Fixture::new();
    let config = fx.load(&[], &[]).unwrap();
    let s = &config.sandbox;
    assert_eq!(s, &SandboxConfig::default());
    assert_eq!(s.backend, SandboxBackendName::Landlock);
    assert!(!s.required);
    assert_eq!(s.network, NetworkModeName::None);
    assert!(s.allow_domains.is_empty() && s.writable.is_empty());
    assert_eq!(s.memory_bytes, 2 * GIB);
    assert_eq!(s.file_size_bytes, GIB);
    assert_eq!(
        (s.cpu_secs, s.max_processes, s.open_files),
        (300, 256, 1024)
    );
}

#[test]
fn defaults_are_listed_with_origin_default() {
    let fx = Fixture::new();
    let config = fx.load(&[], &[]).unwrap();
    let value = |key: &str| {
        let entry = config
            .entries()
            .iter()
            .find(|e| e.key == key)
            .unwrap_or_else(|| panic!("{key} missing from entries"));
        assert_eq!(entry.origin.to_string(), "default", "{key}");
        entry.value.clone()
    };
    assert_eq!(value("sandbox.backend"), "\"landlock\"");
    assert_eq!(value("sandbox.required"), "false");
    assert_eq!(value("sandbox.network"), "\"none\"");
    assert_eq!(value("sandbox.allow_domains"), "[]");
    assert_eq!(value("sandbox.writable"), "[]");
    assert_eq!(value("sandbox.memory"), "\"2G\"");
    assert_eq!(value("sandbox.file_size"), "\"1G\"");
    assert_eq!(value("sandbox.cpu_secs"), "300");
    assert_eq!(value("sandbox.max_processes"), "256");
    assert_eq!(value("sandbox.open_files"), "1024");
}

#[test]
fn a_file_sets_every_key() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!(
            "{MAIN}
[sandbox]
backend = \"none\"
required = false
network = \"allowlist\"
allow_domains = [\"pypi.org\", \"*.github.com\"]
writable = [\"/tmp/cache\", \"~/shared\"]
memory = \"512M\"
file_size = 4096
cpu_secs = 10
max_processes = 8
open_files = 64
"
        ),
    );
    let home_dir = fx.dir.path().join("userhome");
    let config = fx
        .load(&[("HOME", &home_dir.display().to_string())], &[])
        .unwrap();
    let s = &config.sandbox;
    assert_eq!(s.backend, SandboxBackendName::None);
    assert!(!s.required);
    assert_eq!(s.network, NetworkModeName::Allowlist);
    assert_eq!(s.allow_domains, ["pypi.org", "*.github.com"]);
    assert_eq!(
        s.writable,
        [PathBuf::from("/tmp/cache"), home_dir.join("shared")]
    );
    assert_eq!(s.memory_bytes, 512 * 1024 * 1024);
    assert_eq!(s.file_size_bytes, 4096);
    assert_eq!((s.cpu_secs, s.max_processes, s.open_files), (10, 8, 64));
}

#[test]
fn overrides_win_and_are_reported() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        "[sandbox]\nnetwork = \"full\"\nmemory = \"1G\"\n",
    );
    let config = fx
        .load(&[], &["sandbox.memory=3G", "sandbox.backend=none"])
        .unwrap();
    assert_eq!(config.sandbox.memory_bytes, 3 * GIB);
    assert_eq!(config.sandbox.backend, SandboxBackendName::None);
    assert_eq!(config.sandbox.network, NetworkModeName::Full);
    let origin = |key: &str| {
        config
            .entries()
            .iter()
            .find(|e| e.key == key)
            .unwrap()
            .origin
            .to_string()
    };
    assert_eq!(origin("sandbox.memory"), "-c");
    let required = fx.load(&[], &["sandbox.required=true"]).unwrap();
    assert!(required.sandbox.required);
    assert!(origin("sandbox.network").ends_with("reef.toml"));
}

fn error_for(toml: &str) -> String {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), toml);
    fx.load(&[], &[]).unwrap_err().to_string()
}

#[test]
fn bad_sizes_name_the_key_and_the_file() {
    let text = error_for("[sandbox]\nmemory = \"lots\"\n");
    assert!(text.contains("sandbox.memory"), "{text}");
    assert!(text.contains("reef.toml"), "{text}");
    assert!(text.contains("`lots` is not a size"), "{text}");

    let text = error_for("[sandbox]\nfile_size = \"1.5G\"\n");
    assert!(text.contains("sandbox.file_size"), "{text}");

    let text = error_for("[sandbox]\nmemory = 0\n");
    assert!(
        text.contains("sandbox.memory") && text.contains("greater than 0"),
        "{text}"
    );

    let text = error_for("[sandbox]\nmemory = -5\n");
    assert!(text.contains("sandbox.memory"), "{text}");
}

#[test]
fn bad_choices_list_the_valid_ones() {
    let text = error_for("[sandbox]\nbackend = \"docker\"\n");
    assert!(text.contains("sandbox.backend"), "{text}");
    assert!(text.contains("landlock") && text.contains("none"), "{text}");

    let text = error_for("[sandbox]\nnetwork = \"some\"\n");
    assert!(text.contains("sandbox.network"), "{text}");
    assert!(
        text.contains("allowlist") && text.contains("full"),
        "{text}"
    );

    let text = error_for("[sandbox]\nrequired = \"yes\"\n");
    assert!(text.contains("sandbox.required"), "{text}");

    let text = error_for("[sandbox]\nbackend = \"none\"\nmemroy = \"1G\"\n");
    assert!(text.contains("memroy"), "{text}");
}

#[test]
fn bad_limits_domains_and_paths_name_the_key() {
    let text = error_for("[sandbox]\ncpu_secs = 0\n");
    assert!(
        text.contains("sandbox.cpu_secs") && text.contains("at least 1"),
        "{text}"
    );
    let text = error_for("[sandbox]\nmax_processes = -1\n");
    assert!(text.contains("sandbox.max_processes"), "{text}");
    let text = error_for("[sandbox]\nopen_files = 0\n");
    assert!(text.contains("sandbox.open_files"), "{text}");

    let text = error_for("[sandbox]\nallow_domains = [\"https://pypi.org/simple\"]\n");
    assert!(
        text.contains("sandbox.allow_domains") && text.contains("https://pypi.org/simple"),
        "{text}"
    );
    assert!(text.contains("reef.toml"), "{text}");

    let text = error_for("[sandbox]\nwritable = [\"relative/dir\"]\n");
    assert!(
        text.contains("sandbox.writable") && text.contains("not an absolute path"),
        "{text}"
    );
}

#[test]
fn bad_override_names_the_flag_and_key() {
    let fx = Fixture::new();
    let text = fx
        .load(&[], &["sandbox.memory=12X"])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("-c") && text.contains("sandbox.memory"),
        "{text}"
    );
}

#[test]
fn required_forbids_backend_none() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), "[sandbox]\nrequired = true\n");
    let text = fx
        .load(&[], &["sandbox.backend=none"])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("sandbox.backend") && text.contains("sandbox.required = true"),
        "{text}"
    );
    assert!(
        text.contains("reef.toml"),
        "names where required came from: {text}"
    );
}

#[test]
fn the_microvm_section_is_read_with_defaults_and_its_errors_name_the_key() {
    use reef_config::AcceleratorName;
    let fx = Fixture::new();
    let config = fx.load(&[], &[]).unwrap();
    let vm = &config.sandbox.microvm;
    assert_eq!(vm.image, None);
    assert_eq!(vm.image_in(&config.home), config.home.join("microvm"));
    assert_eq!((vm.memory_mib, vm.cpus, vm.pool), (512, 1, 1));
    assert!(vm.snapshot);
    assert_eq!(vm.accelerator, AcceleratorName::Auto);

    fx.write(
        Path::new("home/reef.toml"),
        &format!(
            "{MAIN}
[sandbox]
backend = \"microvm\"
[sandbox.microvm]
qemu = \"/opt/qemu/bin/qemu-system-x86_64\"
image = \"images/vm\"
memory = \"1G\"
cpus = 2
pool = 0
snapshot = false
accelerator = \"tcg\"
"
        ),
    );
    let config = fx.load(&[], &[]).unwrap();
    let vm = &config.sandbox.microvm;
    assert_eq!(config.sandbox.backend, SandboxBackendName::Microvm);
    assert_eq!(vm.qemu, PathBuf::from("/opt/qemu/bin/qemu-system-x86_64"));
    assert_eq!(vm.image, Some(config.home.join("images/vm")));
    assert_eq!((vm.memory_mib, vm.cpus, vm.pool), (1024, 2, 0));
    assert!(!vm.snapshot);
    assert_eq!(vm.accelerator, AcceleratorName::Tcg);

    for (set, key, says) in [
        (
            "sandbox.microvm.memory=32M",
            "sandbox.microvm.memory",
            "at least 64M",
        ),
        (
            "sandbox.microvm.cpus=0",
            "sandbox.microvm.cpus",
            "between 1 and 64",
        ),
        (
            "sandbox.microvm.pool=17",
            "sandbox.microvm.pool",
            "limit of 16",
        ),
        (
            "sandbox.microvm.accelerator=\"xen\"",
            "sandbox.microvm.accelerator",
            "xen",
        ),
        (
            "sandbox.microvm.disk=\"1G\"",
            "sandbox.microvm.disk",
            "unknown field",
        ),
    ] {
        let err = fx.load(&[], &[set]).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains(says), "{set}: {err}");
    }
}
