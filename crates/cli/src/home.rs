//! What every command needs first: the resolved configuration (with a private reef home) and,
//! when asked, the store.

use anyhow::Context as _;
use reef_config::{Config, LoadOptions};
use reef_store::Store;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Loads the configuration for the current directory and environment, and makes sure the reef
/// home exists and is private.
pub fn load_config(overrides: &[String]) -> anyhow::Result<Config> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let opts = LoadOptions::from_env(std::env::vars(), Some(cwd), overrides.to_vec())?;
    let config = Config::load(&opts)?;
    private_home(&config.home)?;
    Ok(config)
}

/// Creates the reef home with mode 0700, or tightens an existing one that other users could
/// read (it holds transcripts, memory, the API token), saying so.
fn private_home(home: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(home) {
        Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
            std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("cannot make {} private (mode 0700)", home.display()))?;
            eprintln!(
                "reef: made {} private (mode 0700): other users of this machine could read it",
                home.display()
            );
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(home)
            .with_context(|| format!("cannot create {}", home.display())),
        Err(err) => Err(err).with_context(|| format!("cannot read {}", home.display())),
    }
}

/// Opens (creating if needed) the store named by the configuration.
pub fn open_store(config: &Config) -> anyhow::Result<Store> {
    Ok(Store::open(&config.store_path)?)
}
