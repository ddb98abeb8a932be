//! Programs the tests run beside the crate under test, found in the cargo target directory:
//! the sandbox helper (so tests confine tools with the real default backend) and
//! `without-landlock` (which simulates a kernel without Landlock).
//!
//! `cargo test --workspace` builds every binary of the workspace before any test runs; a test
//! run limited to one package (`cargo test -p reef-tools`) needs them built first:
//! `cargo build -p reef-sandbox -p reef-test-support --bins`.

use std::path::PathBuf;

/// The `reef-sandbox-exec` helper of the `landlock` backend.
///
/// # Panics
/// When it has not been built (the message says how to build it).
pub fn sandbox_helper() -> PathBuf {
    program("reef-sandbox-exec", "reef-sandbox")
}

/// `without-landlock PROGRAM ARGS…`: runs PROGRAM with Landlock's system calls failing with
/// ENOSYS, as on a kernel built without Landlock.
///
/// # Panics
/// When it has not been built (the message says how to build it).
pub fn without_landlock() -> PathBuf {
    program("without-landlock", "reef-test-support")
}

fn program(name: &str, package: &str) -> PathBuf {
    // Test binaries live in `target/<profile>/deps/`; binaries in `target/<profile>/`.
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(PathBuf::from));
    let found = dir.map(|d| d.join(name)).filter(|p| p.is_file());
    match found {
        Some(path) => path,
        None => panic!(
            "{name} is not built next to this test; run the tests with `cargo test --workspace`, \
             or build it first: cargo build -p {package} --bins"
        ),
    }
}

/// Runs `git ARGS…` in `dir` with a fixed identity and `main` as the default branch, for tests
/// that build a repository (a skill registry).
///
/// # Panics
/// When git is missing or the command fails (its stderr is in the message).
pub fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=reef-test",
            "-c",
            "user.email=test@example.org",
        ])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("git is needed (apt-get install git): {e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Python of the tests' venv that can import `module`: `REEF_TEST_PYTHON`, else
/// `~/.cache/reef/venv` (made by `.ci/run`).
///
/// # Panics
/// When that Python cannot import `module` (the message says how to install `requirement`).
pub fn venv_python(module: &str, requirement: &str) -> PathBuf {
    let python = std::env::var_os("REEF_TEST_PYTHON").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/reef/venv/bin/python")
        },
        PathBuf::from,
    );
    let ok = std::process::Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import {module}; install it with: python3 -m venv ~/.cache/reef/venv && \
         ~/.cache/reef/venv/bin/pip install '{requirement}' (or set REEF_TEST_PYTHON)",
        python.display()
    );
    python
}
