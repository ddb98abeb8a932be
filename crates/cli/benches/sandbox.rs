//! One-shot sandbox start, as a user pays for it: the wall time of `reef sandbox run -- true`
//! (a fresh `reef` process: configuration, policy, cgroups, helper, namespaces, view,
//! Landlock, seccomp, PID 1) with the small helper `reef-sandbox-exec` beside `reef`, and with
//! `reef` as its own helper; next to `bwrap --unshare-all … true` (Debian's bubblewrap, which
//! builds namespaces and a view but no Landlock, seccomp or cgroup) and a plain fork/exec of
//! `true`; and, to show where reef's time goes, `reef --version` (the binary's own start) and
//! `reef sandbox run --backend none -- true` (everything but the sandbox). Medians with min and
//! max; the variants are interleaved in blocks so drift in the machine's load affects them
//! alike.
//!
//! Run with `cargo build --release -p reef-sandbox --bins && cargo bench -p reef-cli --bench
//! sandbox` (bubblewrap: `apt-get install bubblewrap`).
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(clippy::print_stderr, reason = "a benchmark reports its setup errors")]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const WARMUP: usize = 10;
const ITERATIONS: usize = 100;
/// Runs of one variant in a row before switching to the next.
const BLOCK: usize = 10;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sandbox bench: {message}");
            ExitCode::FAILURE
        }
    }
}

struct Variant {
    name: &'static str,
    command: Command,
    times: Vec<Duration>,
}

impl Variant {
    fn new(name: &'static str, program: &Path, args: &[&str], env: &[(&str, &Path)]) -> Variant {
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        Variant {
            name,
            command,
            times: Vec::with_capacity(ITERATIONS),
        }
    }

    /// One start to finish; fails unless it exits 0.
    fn once(&mut self) -> Result<Duration, String> {
        let started = Instant::now();
        let out = self
            .command
            .output()
            .map_err(|e| format!("{}: cannot start: {e}", self.name))?;
        let took = started.elapsed();
        if !out.status.success() {
            return Err(format!(
                "{}: {}: {}",
                self.name,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(took)
    }
}

fn run() -> Result<(), String> {
    let reef = PathBuf::from(env!("CARGO_BIN_EXE_reef"));
    let dir = reef
        .parent()
        .ok_or("the reef binary has no directory")?
        .to_owned();
    let small = dir.join("reef-sandbox-exec");
    if !small.is_file() {
        return Err(format!(
            "{} is missing: run `cargo build --release -p reef-sandbox --bins` first",
            small.display()
        ));
    }
    // reef alone in a directory of its own: it has no small helper beside it, so it runs
    // itself as the helper.
    let alone = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let lone_reef = alone.path().join("reef");
    std::fs::copy(&reef, &lone_reef).map_err(|e| format!("copy reef: {e}"))?;
    let home = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let workspace = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let reef_home = home.path().join(".reef");
    let env: [(&str, &Path); 2] = [("REEF_HOME", &reef_home), ("HOME", home.path())];
    let run_true = ["sandbox", "run", "--", "true"];
    let mut variants = vec![
        Variant::new(
            "reef sandbox run -- true (small helper)",
            &reef,
            &run_true,
            &env,
        ),
        Variant::new(
            "reef sandbox run -- true (reef as helper)",
            &lone_reef,
            &run_true,
            &env,
        ),
    ];
    // Where reef's time goes: its own start (loading and relocating the binary, nothing else)
    // and the same command run without a sandbox.
    variants.push(Variant::new(
        "reef --version (reef's own start)",
        &reef,
        &["--version"],
        &env,
    ));
    variants.push(Variant::new(
        "reef sandbox run --backend none -- true",
        &reef,
        &["sandbox", "run", "--backend", "none", "--", "true"],
        &env,
    ));
    let bwrap = Path::new("/usr/bin/bwrap");
    if bwrap.is_file() {
        variants.push(Variant::new(
            "bwrap --unshare-all ... true",
            bwrap,
            &[
                "--unshare-all",
                "--die-with-parent",
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--tmpfs",
                "/tmp",
                "true",
            ],
            &[],
        ));
    } else {
        eprintln!("sandbox bench: bubblewrap is not installed (apt-get install bubblewrap)");
    }
    variants.push(Variant::new("fork/exec true", Path::new("true"), &[], &[]));
    for variant in &mut variants {
        variant.command.current_dir(workspace.path());
        for _ in 0..WARMUP {
            variant.once()?;
        }
    }
    for _ in 0..ITERATIONS / BLOCK {
        for variant in &mut variants {
            for _ in 0..BLOCK {
                let took = variant.once()?;
                variant.times.push(took);
            }
        }
    }
    let median = |v: &Variant| {
        let mut t = v.times.clone();
        t.sort_unstable();
        (t[t.len() / 2], t[0], t[t.len() - 1])
    };
    let bwrap_median = variants
        .iter()
        .find(|v| v.name.starts_with("bwrap"))
        .map(|v| median(v).0);
    println!("sandbox one-shot bench: {ITERATIONS} runs each, in blocks of {BLOCK}");
    for variant in &variants {
        let (mid, min, max) = median(variant);
        let ratio = bwrap_median.map_or(String::new(), |b| {
            format!(
                "  ({:.2}x bwrap)",
                mid.as_secs_f64() / b.as_secs_f64().max(f64::EPSILON)
            )
        });
        println!(
            "  {:<44} median {:>7.2} ms  (min {:.2}, max {:.2}){ratio}",
            variant.name,
            ms(mid),
            ms(min),
            ms(max)
        );
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
