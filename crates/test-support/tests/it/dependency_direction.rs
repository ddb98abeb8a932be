//! The dependency-direction rule of docs/ARCHITECTURE.md: every internal dependency of every
//! crate must be in the allowed table, so leaves never depend on each other or upward.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Internal crates each crate may depend on (normal dependencies). `None` means any.
fn allowed() -> BTreeMap<&'static str, Option<&'static [&'static str]>> {
    BTreeMap::from([
        ("reef-core", Some(&[][..])),
        (
            "reef-config",
            Some(&["reef-core", "reef-schedule", "reef-security"][..]),
        ),
        ("reef-schedule", Some(&["reef-core"][..])),
        (
            "reef-llm",
            Some(&["reef-core", "reef-local", "reef-embed"][..]),
        ),
        ("reef-embed", Some(&["reef-core"][..])),
        ("reef-local", Some(&["reef-core"][..])),
        (
            "reef-models",
            Some(&["reef-core", "reef-config", "reef-llm"][..]),
        ),
        (
            "reef-sandbox",
            Some(&["reef-core", "reef-security", "reef-vm-agent"][..]),
        ),
        // The guest's /init: linked statically into the VM image, so it uses nothing of reef.
        ("reef-vm-agent", Some(&[][..])),
        ("reef-security", Some(&["reef-core"][..])),
        ("reef-store", Some(&["reef-core", "reef-security"][..])),
        (
            "reef-skills",
            Some(
                &[
                    "reef-core",
                    "reef-sandbox",
                    "reef-security",
                    "reef-tools",
                    "reef-wasm",
                    "reef-workspace",
                ][..],
            ),
        ),
        (
            "reef-mcp",
            Some(
                &[
                    "reef-core",
                    "reef-config",
                    "reef-llm",
                    "reef-sandbox",
                    "reef-workspace",
                ][..],
            ),
        ),
        ("reef-wasm", Some(&[][..])),
        ("reef-workspace", Some(&[][..])),
        ("reef-channels", Some(&["reef-core", "reef-config"][..])),
        // The QUIC gateway's wire and client: a leaf beside core.
        ("reef-quic", Some(&["reef-core"][..])),
        (
            "reef-gateway",
            Some(
                &[
                    "reef-core",
                    "reef-config",
                    "reef-channels",
                    "reef-llm",
                    "reef-runtime",
                    "reef-security",
                    "reef-store",
                ][..],
            ),
        ),
        (
            "reef-tools",
            Some(
                &[
                    "reef-core",
                    "reef-config",
                    "reef-sandbox",
                    "reef-security",
                    "reef-store",
                    "reef-workspace",
                ][..],
            ),
        ),
        (
            "reef-agent",
            Some(
                &[
                    "reef-core",
                    "reef-config",
                    "reef-llm",
                    "reef-tools",
                    "reef-sandbox",
                    "reef-security",
                    "reef-skills",
                    "reef-mcp",
                    "reef-store",
                    "reef-workspace",
                ][..],
            ),
        ),
        (
            "reef-runtime",
            Some(
                &[
                    "reef-core",
                    "reef-config",
                    "reef-agent",
                    "reef-store",
                    "reef-sandbox",
                    "reef-security",
                    "reef-llm",
                    "reef-schedule",
                    "reef-skills",
                    "reef-mcp",
                    "reef-workspace",
                ][..],
            ),
        ),
        (
            "reef-dashboard",
            Some(
                &[
                    "reef-core",
                    "reef-config",
                    "reef-runtime",
                    "reef-store",
                    "reef-workspace",
                ][..],
            ),
        ),
        (
            "reef-server",
            Some(
                &[
                    "reef-core",
                    "reef-config",
                    "reef-runtime",
                    "reef-store",
                    "reef-security",
                    "reef-mcp",
                    "reef-dashboard",
                    // The QUIC gateway's wire (frames, protocol, endpoints).
                    "reef-quic",
                    // The HTTP client that pins the daemon's certificate, in its tests.
                    "reef-llm",
                ][..],
            ),
        ),
        ("reef-test-support", Some(&["reef-core", "reef-config"][..])),
        ("reef-cli", None),
    ])
}

fn workspace_root() -> PathBuf {
    crate_dir().ancestors().nth(2).unwrap().to_owned()
}

fn internal_deps(manifest: &toml::Table, section: &str) -> BTreeSet<String> {
    manifest
        .get(section)
        .and_then(toml::Value::as_table)
        .map(|deps| {
            deps.keys()
                .filter(|k| k.starts_with("reef-"))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn internal_dependencies_point_one_way() {
    let allowed = allowed();
    let mut seen = BTreeSet::new();
    let mut violations = Vec::new();
    for entry in std::fs::read_dir(workspace_root().join("crates")).unwrap() {
        let path = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let manifest: toml::Table = text.parse().unwrap();
        let name = manifest["package"]["name"].as_str().unwrap().to_owned();
        let Some(rule) = allowed.get(name.as_str()) else {
            violations.push(format!("{name}: not in the dependency table; add it"));
            continue;
        };
        seen.insert(name.clone());
        let deps = internal_deps(&manifest, "dependencies");
        if let Some(ok) = rule {
            for dep in &deps {
                if !ok.contains(&dep.as_str()) {
                    violations.push(format!("{name} depends on {dep}, which it may not"));
                }
            }
        }
        // Tests may additionally use the test helpers, and nothing else new.
        for dep in internal_deps(&manifest, "dev-dependencies") {
            let permitted = dep == "reef-test-support"
                || deps.contains(&dep)
                || rule.is_none_or(|ok| ok.contains(&dep.as_str()));
            if !permitted {
                violations.push(format!("{name} has a dev-dependency on {dep}"));
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(
        seen.len() >= 10,
        "expected every crate to be checked, saw {seen:?}"
    );
}

#[test]
fn the_table_rejects_an_upward_edge() {
    // The rule itself must be able to fail: a leaf depending on the turn engine is refused.
    let allowed = allowed();
    let store_rule = allowed["reef-store"].unwrap();
    assert!(!store_rule.contains(&"reef-agent"));
    assert!(!allowed["reef-core"].unwrap().contains(&"reef-store"));
}

/// The directory of the crate under test: from cargo at run time (a test binary reused from
/// another checkout of the workspace would otherwise look in that checkout), else from the
/// build.
fn crate_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(
        || env!("CARGO_MANIFEST_DIR").into(),
        std::path::PathBuf::from,
    )
}
