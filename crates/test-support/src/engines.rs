//! Cluster mode's engines for tests: a throwaway PostgreSQL and NATS JetStream on loopback
//! ports, started by `scripts/engines` (which a user trying cluster mode runs too) in a
//! temporary directory and stopped on drop.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// One of the two engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Postgres,
    Nats,
}

/// A running PostgreSQL and NATS server; both stop (and their data goes) on drop.
pub struct Engines {
    dir: tempfile::TempDir,
    database_url: String,
    nats_url: String,
}

impl Engines {
    /// Starts both engines and waits until they accept connections.
    ///
    /// # Panics
    /// When a program is missing (the message names the Debian package) or does not start.
    pub fn start() -> Engines {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary directory: {e}"));
        let out = run_with(script(), &["start"], dir.path(), &[], &[]);
        Engines::from_output(dir, &out)
    }

    fn from_output(dir: tempfile::TempDir, out: &str) -> Engines {
        let value = |name: &str| {
            out.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("scripts/engines printed no {name}:\n{out}"))
                .to_owned()
        };
        Engines {
            database_url: value("REEF_DATABASE_URL"),
            nats_url: value("REEF_NATS_URL"),
            dir,
        }
    }

    /// Engines shared by every test of this process, started by the first that asks: they
    /// stop, and their directory goes, once the process has exited (`REEF_ENGINES_OWNER`).
    /// Tests sharing them keep apart by using databases and subjects of their own.
    ///
    /// # Panics
    /// As [`Engines::start`].
    pub fn shared() -> &'static Engines {
        static SHARED: OnceLock<Engines> = OnceLock::new();
        SHARED.get_or_init(|| Engines::start_shared(&[]))
    }

    /// As [`Engines::shared`], with a PostgreSQL that has the pgvector extension (installed
    /// by `scripts/pgvector-postgres`, which `.ci/run` runs; see [`pgvector_bin`]).
    ///
    /// # Panics
    /// When that PostgreSQL is not installed, naming the script; as [`Engines::start`].
    pub fn shared_pgvector() -> &'static Engines {
        static SHARED: OnceLock<Engines> = OnceLock::new();
        SHARED.get_or_init(|| {
            let bin = pgvector_bin();
            Engines::start_shared(&[("REEF_PG_BIN", &bin.display().to_string())])
        })
    }

    /// Engines in a directory of their own, which the watcher removes once this process
    /// exits; the `TempDir` is kept so that nothing removes it while the process runs.
    fn start_shared(env: &[(&str, &str)]) -> Engines {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary directory: {e}"));
        let owner = std::process::id().to_string();
        let mut env = env.to_vec();
        env.push(("REEF_ENGINES_OWNER", &owner));
        let out = run_with(script(), &["start"], dir.path(), &[], &env);
        Engines::from_output(dir, &out)
    }

    /// Stops one engine alone (`scripts/engines stop DIR ENGINE`), as an outage would.
    ///
    /// # Panics
    /// When the script fails.
    pub fn stop_one(&self, engine: Engine) {
        let name = match engine {
            Engine::Postgres => "postgres",
            Engine::Nats => "nats",
        };
        run_with(script(), &["stop"], self.dir.path(), &[name], &[]);
    }

    /// Starts again what is not running, on the ports it had (`scripts/engines start DIR`).
    ///
    /// # Panics
    /// As [`Engines::start`].
    pub fn start_again(&self) {
        run_with(script(), &["start"], self.dir.path(), &[], &[]);
    }

    /// `postgres://USER@127.0.0.1:PORT/reef`.
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn nats_url(&self) -> &str {
        &self.nats_url
    }
}

impl Drop for Engines {
    fn drop(&mut self) {
        // A failed stop leaves servers running: a failure of the test, unless it is already
        // failing (a second panic while unwinding would abort).
        let stopped = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .output();
        if !std::thread::panicking() {
            match stopped {
                Ok(out) => assert!(
                    out.status.success(),
                    "scripts/engines stop failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
                Err(e) => panic!("cannot run scripts/engines stop: {e}"),
            }
        }
    }
}

/// The programs of the PostgreSQL with pgvector: `REEF_PGVECTOR_BIN`, else where `.ci/run`
/// installs it (`/opt/reef/pg16-vector` as root, `~/.cache/reef/pg16-vector` otherwise).
///
/// # Panics
/// When none is installed, saying how to install it.
fn pgvector_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("REEF_PGVECTOR_BIN") {
        return PathBuf::from(bin);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    [
        PathBuf::from("/opt/reef/pg16-vector/bin"),
        home.join(".cache/reef/pg16-vector/bin"),
    ]
    .into_iter()
    .find(|bin| bin.join("postgres").is_file())
    .unwrap_or_else(|| {
        panic!(
            "no PostgreSQL with pgvector: run `scripts/pgvector-postgres /opt/reef/pg16-vector` \
             (as root; otherwise into ~/.cache/reef/pg16-vector), or set REEF_PGVECTOR_BIN"
        )
    })
}

/// `scripts/engines` of this checkout.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/engines")
}

/// Runs `script command dir after` with `env` and returns its stdout.
///
/// # Panics
/// When it fails, with its stderr.
fn run_with(
    script: PathBuf,
    command: &[&str],
    dir: &Path,
    after: &[&str],
    env: &[(&str, &str)],
) -> String {
    let out = Command::new(&script)
        .args(command)
        .arg(dir)
        .args(after)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} {} failed ({}):\n{}",
        script.display(),
        command.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
