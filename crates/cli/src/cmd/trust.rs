//! `reef trust`: allow a project reef.toml to set keys that could widen the sandbox or redirect
//! credentials (`sandbox.*`, `providers.*`, …), for its exact bytes; list and forget trusted files.

use anyhow::Context as _;
use clap::Args;
use reef_config::{LoadOptions, TrustStatus};
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The project file to trust, or a directory holding one (default: ./reef.toml).
    #[arg(value_name = "PATH", conflicts_with_all = ["list", "remove"])]
    pub path: Option<PathBuf>,
    /// Show the trusted files and whether each is unchanged since it was trusted.
    #[arg(long)]
    pub list: bool,
    /// Forget a trusted file (or a directory's reef.toml).
    #[arg(long, value_name = "PATH", conflicts_with = "list")]
    pub remove: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

pub fn trust(args: TrustArgs) -> anyhow::Result<u8> {
    let home = LoadOptions::from_env(std::env::vars(), None, Vec::new())?.home;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    if args.list {
        return list(&home, args.json);
    }
    if let Some(path) = args.remove {
        let removed = reef_config::untrust(&home, &cwd.join(path))?;
        if args.json {
            let out = serde_json::json!({"removed": removed});
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!("no longer trusted: {}", removed.display());
        }
        return Ok(crate::exit::OK);
    }
    let path = args
        .path
        .map_or_else(|| cwd.join(reef_config::CONFIG_FILE), |p| cwd.join(p));
    let trusted = reef_config::trust(&home, &path)?;
    if args.json {
        let out = serde_json::json!({
            "path": trusted.path,
            "sha256": trusted.sha256,
            "restricted_keys": trusted.restricted_keys,
            "already": trusted.already,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(crate::exit::OK);
    }
    let verb = if trusted.already {
        "already trusted"
    } else {
        "trusted"
    };
    println!(
        "{verb}: {} (sha256 {})",
        trusted.path.display(),
        trusted.sha256
    );
    if trusted.restricted_keys.is_empty() {
        println!("it sets no key that needs trust; any later change untrusts it");
    } else {
        println!(
            "it may now set: {}; any change to the file untrusts it",
            trusted.restricted_keys.join(", ")
        );
    }
    Ok(crate::exit::OK)
}

fn list(home: &Path, json: bool) -> anyhow::Result<u8> {
    let files = reef_config::trusted_files(home)?;
    if json {
        let out: Vec<serde_json::Value> = files
            .iter()
            .map(|f| {
                let detail = match &f.status {
                    TrustStatus::Unreadable(why) => Some(why.as_str()),
                    _ => None,
                };
                serde_json::json!({
                    "path": f.path,
                    "sha256": f.sha256,
                    "status": f.status.as_str(),
                    "detail": detail,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(crate::exit::OK);
    }
    if files.is_empty() {
        println!("no trusted project files (trust one with `reef trust` in its directory)");
        return Ok(crate::exit::OK);
    }
    for f in &files {
        let note = match &f.status {
            TrustStatus::Unchanged => String::new(),
            TrustStatus::Changed => "  # changed since trusted: run `reef trust` again".into(),
            TrustStatus::Missing => "  # gone: `reef trust --remove` forgets it".into(),
            TrustStatus::Unreadable(why) => format!("  # {why}"),
        };
        println!(
            "{status:<10} {path}{note}",
            status = f.status.as_str(),
            path = f.path.display()
        );
    }
    Ok(crate::exit::OK)
}
