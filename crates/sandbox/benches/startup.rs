//! Cost of a sandboxed command inside a session: the wall time to start and finish `true`
//! (1) through `Sandbox::run` with the plain backend, (2) with the landlock backend building a
//! sandbox per command (helper, namespaces, filesystem view, Landlock, seccomp, limits, PID 1),
//! (3) with the landlock backend forking it from the session's warm sandbox, and (4) as a
//! baseline, a plain fork/exec: `std::process::Command::new("true").status()`.
//!
//! Run with `cargo build --release -p reef-sandbox --bins && cargo bench -p reef-sandbox
//! --bench startup`. The three variants are interleaved in blocks, so drift in machine load
//! affects them alike.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(clippy::print_stderr, reason = "a benchmark reports its setup errors")]

use reef_sandbox::{
    ExecRequest, HelperCommand, Sandbox, SandboxBackend, SandboxError, SandboxPolicy,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const WARMUP: usize = 20;
const ITERATIONS: usize = 200;
/// Iterations of one variant in a row before switching to the next.
const BLOCK: usize = 10;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("startup bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The helper binary: cargo puts benches in `target/<profile>/deps/`, bins in
/// `target/<profile>/`. Benches get no `CARGO_BIN_EXE_*`, so it is looked up there.
fn helper_path() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("locate the bench executable: {e}"))?;
    let helper = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("reef-sandbox-exec"))
        .ok_or_else(|| format!("unexpected bench location {}", exe.display()))?;
    if helper.is_file() {
        Ok(helper)
    } else {
        Err(format!(
            "the helper {} is missing: run `cargo build --release -p reef-sandbox --bins` first",
            helper.display()
        ))
    }
}

#[derive(Clone, Copy)]
enum Variant {
    Plain,
    PerCommand,
    Warm,
    Raw,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::Plain,
        Variant::PerCommand,
        Variant::Warm,
        Variant::Raw,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain (Sandbox::run, backend none)",
            Variant::PerCommand => "landlock, a sandbox per command",
            Variant::Warm => "landlock, warm sandbox",
            Variant::Raw => "raw (Command::new(\"true\").status())",
        }
    }
}

struct Bench {
    rt: tokio::runtime::Runtime,
    plain: Sandbox,
    per_command: Sandbox,
    warm: Sandbox,
    workspace: tempfile::TempDir,
}

impl Bench {
    /// One start-to-finish of `true`; fails unless it exits 0.
    fn once(&self, variant: Variant) -> Result<Duration, String> {
        let started = Instant::now();
        let outcome = match variant {
            Variant::Plain => self.sandboxed(&self.plain),
            Variant::PerCommand => self.sandboxed(&self.per_command),
            Variant::Warm => self.sandboxed(&self.warm),
            Variant::Raw => match std::process::Command::new("true").status() {
                Ok(status) if status.success() => Ok(()),
                Ok(status) => Err(status.to_string()),
                Err(e) => Err(format!("spawn: {e}")),
            },
        };
        let elapsed = started.elapsed();
        outcome
            .map(|()| elapsed)
            .map_err(|e| format!("`true` failed under {}: {e}", variant.name()))
    }

    fn sandboxed(&self, sandbox: &Sandbox) -> Result<(), String> {
        let req = ExecRequest::new(
            "true",
            vec![],
            self.workspace.path().to_path_buf(),
            Duration::from_secs(30),
        );
        let out = self
            .rt
            .block_on(sandbox.run(req))
            .map_err(|e: SandboxError| e.to_string())?;
        if !out.success() {
            return Err(format!(
                "exit {:?}, signal {:?}, stderr {:?}",
                out.exit_code, out.signal, out.stderr
            ));
        }
        Ok(())
    }
}

fn run() -> Result<(), String> {
    let helper = helper_path()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let landlock = |warm: bool| {
        Sandbox::new(SandboxPolicy {
            backend: SandboxBackend::Landlock,
            helper: Some(HelperCommand {
                program: helper.clone(),
                args: vec![],
            }),
            warm,
            ..SandboxPolicy::default()
        })
    };
    let bench = Bench {
        rt,
        plain: Sandbox::new(SandboxPolicy::default()),
        per_command: landlock(false),
        warm: landlock(true),
        workspace: tempfile::tempdir().map_err(|e| format!("workspace tempdir: {e}"))?,
    };

    for _ in 0..WARMUP {
        for variant in Variant::ALL {
            bench.once(variant)?;
        }
    }
    let mut samples: [Vec<Duration>; 4] = Default::default();
    let mut done = 0;
    while done < ITERATIONS {
        let block = BLOCK.min(ITERATIONS - done);
        for (i, variant) in Variant::ALL.into_iter().enumerate() {
            for _ in 0..block {
                samples[i].push(bench.once(variant)?);
            }
        }
        done += block;
    }

    println!(
        "`true` inside a session: median (min-max) of {ITERATIONS} runs after {WARMUP} warm-up, \
         in blocks of {BLOCK}"
    );
    let stats = samples.map(Stats::of);
    for (variant, s) in Variant::ALL.into_iter().zip(&stats) {
        println!(
            "  {:<40} {:>8.3} ms ({:.3}-{:.3})",
            variant.name(),
            ms(s.median),
            ms(s.min),
            ms(s.max)
        );
    }
    let [plain, per_command, warm, raw] = stats.map(|s| s.median);
    println!("  warm / raw fork+exec     {:>8.2}x", ratio(warm, raw));
    println!("  warm / plain             {:>8.2}x", ratio(warm, plain));
    println!(
        "  per command / raw        {:>8.2}x",
        ratio(per_command, raw)
    );
    println!(
        "  per command / warm       {:>8.2}x",
        ratio(per_command, warm)
    );
    if let Some(pid) = bench.rt.block_on(bench.warm.warm_pid()) {
        let (count, rss, pss) = tree_memory(pid);
        println!("  the idle warm sandbox: {count} processes, RSS {rss} KiB, PSS {pss} KiB in all");
    }
    Ok(())
}

/// The processes of the tree under `root` (itself included), and their summed resident and
/// proportional set sizes in KiB, from `/proc`.
fn tree_memory(root: u32) -> (usize, u64, u64) {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    let mut tree = vec![root];
    loop {
        let more: Vec<u32> = all
            .iter()
            .copied()
            .filter(|p| !tree.contains(p) && parent_of(*p).is_some_and(|pp| tree.contains(&pp)))
            .collect();
        if more.is_empty() {
            break;
        }
        tree.extend(more);
    }
    let field = |text: &str, name: &str| -> u64 {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    let (mut rss, mut pss) = (0, 0);
    for pid in &tree {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        rss += field(&text, "Rss:");
        pss += field(&text, "Pss:");
    }
    (tree.len(), rss, pss)
}

struct Stats {
    median: Duration,
    min: Duration,
    max: Duration,
}

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Stats {
        samples.sort_unstable();
        Stats {
            median: samples.get(samples.len() / 2).copied().unwrap_or_default(),
            min: samples.first().copied().unwrap_or_default(),
            max: samples.last().copied().unwrap_or_default(),
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(f64::MIN_POSITIVE)
}
