//! `reef config show`: every resolved value with its origin, secrets masked.

use crate::home;

pub fn show(overrides: &[String], json: bool) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    if json {
        println!("{}", serde_json::to_string_pretty(config.entries())?);
        return Ok(crate::exit::OK);
    }
    let width = config
        .entries()
        .iter()
        .map(|e| e.key.len())
        .max()
        .unwrap_or(0);
    for entry in config.entries() {
        println!(
            "{key:<width$} = {value:<30}  # {origin}",
            key = entry.key,
            value = entry.value,
            origin = entry.origin
        );
    }
    if config.files.is_empty() {
        println!(
            "# no config file found; looked in {}",
            config.home.display()
        );
    }
    Ok(crate::exit::OK)
}
