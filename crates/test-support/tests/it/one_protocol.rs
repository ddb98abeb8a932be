//! Every front end drives sessions through the `Submission`/`Op` protocol: only reef-agent
//! (which implements it) calls `Session::run_turn`, and no source file of reef-runtime grows
//! past 400 lines.

use std::path::{Path, PathBuf};

fn crates_dir() -> PathBuf {
    crate_dir().parent().expect("crates/").to_owned()
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_reef_agent_calls_run_turn() {
    let crates = crates_dir();
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    let agent = crates.join("agent");
    let this_file = crates.join("test-support/tests/it/one_protocol.rs");
    // Positive control: the engine itself defines and uses it.
    let in_agent = files
        .iter()
        .filter(|f| f.starts_with(&agent))
        .filter(|f| std::fs::read_to_string(f).unwrap().contains("run_turn("))
        .count();
    assert!(in_agent > 0, "the scan does not see reef-agent's own use");
    let outside: Vec<&PathBuf> = files
        .iter()
        .filter(|f| !f.starts_with(&agent) && **f != this_file)
        .filter(|f| std::fs::read_to_string(f).unwrap().contains("run_turn("))
        .collect();
    assert!(
        outside.is_empty(),
        "these files drive a session around the protocol (use reef_agent::spawn and Op): \
         {outside:?}"
    );
}

#[test]
fn no_runtime_source_file_is_over_400_lines() {
    let mut files = Vec::new();
    rust_files(&crates_dir().join("runtime/src"), &mut files);
    assert!(files.len() > 5, "{files:?}");
    let long: Vec<(PathBuf, usize)> = files
        .into_iter()
        .map(|f| {
            let lines = std::fs::read_to_string(&f).unwrap().lines().count();
            (f, lines)
        })
        .filter(|(_, lines)| *lines > 400)
        .collect();
    assert!(long.is_empty(), "{long:?}");
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
