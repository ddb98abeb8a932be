//! `reef skills list|show|add|rm|update|verify`.

use crate::exit::Exit;
use crate::home;
use crate::render::clean;
use crate::skill_args::SkillsCommand;
use anyhow::Context as _;
use reef_config::Config;
use reef_skills::{Catalog, Found, Installer, Origin, Roots, SkillError, Source, State, discover};
use serde_json::json;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;

pub async fn skills(overrides: &[String], command: SkillsCommand) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    match command {
        SkillsCommand::List { json, workspace } => {
            let catalog = catalog(&config, workspace)?;
            if json {
                let rows: Vec<_> = catalog.found.iter().map(row).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print_list(&catalog);
            }
        }
        SkillsCommand::Show { name, workspace } => show(&catalog(&config, workspace)?, &name)?,
        SkillsCommand::Add { source, skill } => {
            let cwd = std::env::current_dir().context("cannot read the current directory")?;
            let source = Source::parse(&source, &cwd).map_err(usage)?;
            let report = installer(&config)
                .await?
                .add(&source, skill.as_deref())
                .await
                .map_err(usage)?;
            for (name, reason) in &report.skipped {
                eprintln!("skipped {name}: {reason}");
            }
            for s in &report.installed {
                let at = s.commit.as_deref().map(|c| format!(" at {}", short(c)));
                println!(
                    "installed {}{}: {}",
                    s.name,
                    at.unwrap_or_default(),
                    s.description
                );
            }
        }
        SkillsCommand::Rm { name } => {
            installer(&config).await?.remove(&name).map_err(usage)?;
            println!("removed {name}");
        }
        SkillsCommand::Update { name, yes } => update(&config, name.as_deref(), yes).await?,
        SkillsCommand::Verify { accept } => {
            let installer = installer(&config).await?;
            if let Some(name) = accept {
                let hashes = installer.accept(&name).map_err(usage)?;
                println!(
                    "accepted {name} as it is now ({} files, blake3 {})",
                    hashes.files.len(),
                    short(&hashes.hash)
                );
                return Ok(crate::exit::OK);
            }
            let mut bad = 0;
            for (name, result) in installer.verify()? {
                match result {
                    Ok(changes) if changes.is_empty() => println!("{name}: ok"),
                    Ok(changes) => {
                        bad += 1;
                        let list: Vec<String> = changes.iter().map(ToString::to_string).collect();
                        println!("{name}: CHANGED since install: {}", list.join(", "));
                    }
                    Err(reason) => {
                        bad += 1;
                        println!("{name}: cannot be read: {reason}");
                    }
                }
            }
            if bad > 0 {
                eprintln!(
                    "{bad} skill(s) are refused until checked and accepted with `reef skills verify --accept NAME`"
                );
                return Ok(crate::exit::RUNTIME);
            }
        }
    }
    Ok(crate::exit::OK)
}

fn usage(err: SkillError) -> anyhow::Error {
    match err {
        SkillError::Io { .. } | SkillError::Sandbox(_) => anyhow::Error::new(err),
        other => Exit::usage(other.to_string()),
    }
}

fn catalog(config: &Config, workspace: Option<PathBuf>) -> anyhow::Result<Catalog> {
    let workspace = match workspace {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    Ok(discover(&Roots {
        workspace: Some(workspace),
        home: config.home.clone(),
    }))
}

/// An installer whose git runs in the configured sandbox (checked to work here first).
async fn installer(config: &Config) -> anyhow::Result<Installer> {
    let helper = super::sandbox::helper()?;
    let (policy, warning) = reef_agent::sandbox_policy(config, Some(helper)).await?;
    if let Some(warning) = warning {
        eprintln!("warning: {warning}");
    }
    Ok(Installer::new(config.home.clone(), policy))
}

fn row(f: &Found) -> serde_json::Value {
    let (valid, reason, active, shadowed_by, description) = match &f.state {
        State::Active(s) => (true, None, true, None, Some(s.manifest.description.clone())),
        State::Shadowed { skill, by } => (
            true,
            None,
            false,
            Some(by.to_string()),
            Some(skill.manifest.description.clone()),
        ),
        State::Invalid { reason } => (false, Some(reason.clone()), false, None, None),
    };
    json!({
        "name": f.name,
        "description": description,
        "origin": f.origin.kind(),
        "source": f.origin.to_string(),
        "path": f.path,
        "valid": valid,
        "reason": reason,
        "active": active,
        "shadowed_by": shadowed_by,
    })
}

fn print_list(catalog: &Catalog) {
    if catalog.found.is_empty() {
        println!(
            "no skills: put skill folders in ./skills/, ./.agents/skills/ or $REEF_HOME/skills/, \
             or install some with `reef skills add`"
        );
        return;
    }
    for f in &catalog.found {
        match &f.state {
            State::Active(s) => {
                let tool = if s.manifest.is_tool() { " [tool]" } else { "" };
                println!(
                    "{}{tool}  ({})\n    {}",
                    f.name,
                    f.origin,
                    clean(&s.manifest.description)
                );
                let lost: Vec<String> = catalog
                    .found
                    .iter()
                    .filter(|o| o.name == f.name && matches!(o.state, State::Shadowed { .. }))
                    .map(|o| o.origin.to_string())
                    .collect();
                if !lost.is_empty() {
                    println!(
                        "    used over {} (workspace > home > installed)",
                        lost.join(", ")
                    );
                }
            }
            State::Shadowed { by, .. } => {
                println!(
                    "{}  ({})\n    not used: the one in {by} comes first",
                    f.name, f.origin
                );
            }
            State::Invalid { reason } => {
                println!(
                    "{}  ({})  INVALID\n    {}: {}",
                    clean(&f.name),
                    f.origin,
                    clean(&f.path.display().to_string()),
                    clean(reason)
                );
            }
        }
    }
}

fn show(catalog: &Catalog, name: &str) -> anyhow::Result<()> {
    let found = catalog
        .found
        .iter()
        .find(|f| f.name == name && matches!(f.state, State::Active(_)))
        .or_else(|| catalog.found.iter().find(|f| f.name == name))
        .ok_or_else(|| {
            Exit::usage(format!(
                "no skill is named `{name}`; see `reef skills list`"
            ))
        })?;
    let skill = match &found.state {
        State::Active(s) | State::Shadowed { skill: s, .. } => s,
        State::Invalid { reason } => {
            println!(
                "{name} ({}) is INVALID: {reason}\n  {}",
                found.origin,
                found.path.display()
            );
            return Ok(());
        }
    };
    let m = &skill.manifest;
    println!(
        "name: {}\norigin: {}\npath: {}",
        m.name,
        found.origin,
        found.path.display()
    );
    println!("description: {}", clean(&m.description));
    if let Some(l) = &m.license {
        println!("license: {l}");
    }
    if let Some(c) = &m.compatibility {
        println!("compatibility: {c}");
    }
    for (k, v) in &m.metadata {
        println!("metadata.{k}: {v}");
    }
    if !m.allowed_tools.is_empty() {
        println!("allowed-tools: {}", m.allowed_tools.join(" "));
    }
    if m.is_tool() {
        println!(
            "tool: {} ({}), arguments: {}",
            m.name,
            m.tool_mode().as_str(),
            reef_skills::schema(m.parameters.as_deref())
        );
    }
    let files: Vec<&str> = skill.files.iter().map(|f| f.path.as_str()).collect();
    println!(
        "files: {}\n\n{}",
        files.join(", "),
        clean(m.body.trim_end())
    );
    if let Origin::Installed { .. } = found.origin {
        println!("\n(installed: pinned in skills.lock)");
    }
    Ok(())
}

async fn update(config: &Config, name: Option<&str>, yes: bool) -> anyhow::Result<()> {
    let installer = installer(config).await?;
    let plans = installer.plan_update(name).await.map_err(usage)?;
    if plans.is_empty() {
        println!("no installed skills");
    }
    for plan in plans {
        let to = plan.to_commit.as_deref().map(short).unwrap_or_default();
        if plan.changes.is_empty() {
            println!(
                "{}: up to date{}",
                plan.name,
                if to.is_empty() {
                    String::new()
                } else {
                    format!(" ({to})")
                }
            );
            continue;
        }
        let from = plan.from_commit.as_deref().map(short).unwrap_or_default();
        println!(
            "{}: {} file(s) changed {from} -> {to}",
            plan.name,
            plan.changes.len()
        );
        for change in &plan.changes {
            println!("  {}", clean(&change.to_string()));
        }
        println!("{}", clean(&plan.diff));
        if !yes && !confirm(&format!("replace {} with this version?", plan.name))? {
            println!("{}: kept as it was", plan.name);
            continue;
        }
        let name = plan.name.clone();
        installer.apply(plan).map_err(usage)?;
        println!("{name}: updated to {to}");
    }
    Ok(())
}

/// Asks on the terminal; without one, the answer is no (use --yes).
fn confirm(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        eprintln!("{question} not without a terminal: run with --yes to accept");
        return Ok(false);
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

fn short(commit: &str) -> String {
    commit.chars().take(12).collect()
}
