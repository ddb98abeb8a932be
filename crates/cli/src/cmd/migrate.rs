//! `reef migrate --to postgres URL`: copies this home's SQLite store into an empty PostgreSQL
//! database for cluster mode, with the daemon stopped, and checks the copy: every table's
//! rows counted on both sides and the audit chain verified on PostgreSQL under the same key.

use crate::exit::{self, Exit};
use crate::home;
use clap::{Args, ValueEnum};

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Where to copy the store.
    #[arg(long, value_enum)]
    pub to: MigrateTarget,
    /// The database, `postgres://USER@HOST:PORT/DATABASE` (no password: see --password-env).
    #[arg(value_name = "URL")]
    pub url: String,
    /// The environment variable holding the database password.
    #[arg(long, value_name = "VAR")]
    pub password_env: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum MigrateTarget {
    Postgres,
}

pub async fn migrate(overrides: &[String], args: MigrateArgs) -> anyhow::Result<u8> {
    let MigrateTarget::Postgres = args.to;
    let config = home::load_config(overrides)?;
    let password =
        match &args.password_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                Exit::usage(format!("--password-env: the variable {var} is not set"))
            })?),
            None => None,
        };
    // The daemon writes the store: it must not run while it is copied.
    let _pid = super::serve::PidFile::acquire(&config.home.join("reef.pid"))?;
    let source = home::open_store(&config)?;
    // The audit chain was made with the key beside the SQLite file: PostgreSQL's copy is
    // verified with the same one.
    let key_dir = config
        .store_path
        .parent()
        .map_or_else(|| config.home.clone(), std::path::Path::to_path_buf);
    let target = reef_store::Store::connect_postgres(&args.url, password.as_deref(), &key_dir)
        .await
        .map_err(|e| match e {
            reef_store::StoreError::Postgres(reef_store::PgError::Url(message)) => {
                Exit::usage(format!("URL: {message}"))
            }
            other => Exit::runtime(other.to_string()),
        })?;
    let copied = source
        .copy_to_postgres(&target)
        .await
        .map_err(|e| match e {
            reef_store::StoreError::Conflict(_) => Exit::usage(e.to_string()),
            other => Exit::runtime(other.to_string()),
        })?;
    let verdict = target
        .verify_audit()
        .await
        .map_err(|e| Exit::runtime(e.to_string()))?;
    if let Some(broken) = verdict.broken {
        return Err(Exit::runtime(format!(
            "the copy's audit log does not verify on PostgreSQL ({broken})"
        )));
    }
    let total: u64 = copied.iter().map(|c| c.rows).sum();
    for c in copied.iter().filter(|c| c.rows > 0) {
        println!("{:<24} {:>10}", c.table, c.rows);
    }
    println!(
        "copied {total} rows in {} tables from {} to PostgreSQL {}; every count matches, and the \
         audit log verifies ({} records)",
        copied.len(),
        config.store_path.display(),
        target.postgres().map_or("", |pg| pg.target()),
        verdict.checked
    );
    println!(
        "next: set [cluster] database_url and nats_url, give every node this home's audit.key \
         and cap.key, and start the nodes with reef serve --cluster"
    );
    Ok(exit::OK)
}
