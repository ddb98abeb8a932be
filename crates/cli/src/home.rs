//! What every command needs first: the resolved configuration and, when asked, the store.

use anyhow::Context as _;
use reef_config::{Config, LoadOptions};
use reef_store::Store;

/// Loads the configuration for the current directory and environment.
pub fn load_config(overrides: &[String]) -> anyhow::Result<Config> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let opts = LoadOptions::from_env(std::env::vars(), Some(cwd), overrides.to_vec())?;
    Ok(Config::load(&opts)?)
}

/// Opens (creating if needed) the store named by the configuration.
pub fn open_store(config: &Config) -> anyhow::Result<Store> {
    Ok(Store::open(&config.store_path)?)
}
