//! The vault's passphrase and secret values typed on the terminal: read from `/dev/tty` with
//! echo off, never from the command line.

use reef_config::{Vault, VaultAccessError};
use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
use std::io::{BufRead as _, BufReader, Write as _};
use zeroize::Zeroizing;

/// How many times a wrong passphrase may be typed before giving up.
const ATTEMPTS: usize = 3;

/// One line typed on the terminal without echo; `None` when there is no terminal.
pub fn read_hidden(prompt: &str) -> anyhow::Result<Option<Zeroizing<String>>> {
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return Ok(None);
    };
    let saved = tcgetattr(&tty)?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&tty, OptionalActions::Flush, &quiet)?;
    let read = (|| -> std::io::Result<Zeroizing<String>> {
        (&tty).write_all(prompt.as_bytes())?;
        (&tty).flush()?;
        let mut line = Zeroizing::new(String::new());
        BufReader::new(&tty).read_line(&mut line)?;
        (&tty).write_all(b"\n")?;
        Ok(Zeroizing::new(
            line.trim_end_matches(['\n', '\r']).to_owned(),
        ))
    })();
    // Echo comes back even when reading failed.
    tcsetattr(&tty, OptionalActions::Flush, &saved)?;
    Ok(Some(read?))
}

/// Unlocks `vault`: with `[vault] key_file` or `REEF_VAULT_PASSPHRASE` when set, else by
/// asking on the terminal (twice for a vault that does not exist yet). Without a terminal or
/// either setting, the error says how to give the passphrase.
pub fn unlock(vault: &Vault) -> anyhow::Result<()> {
    if vault.is_unlocked() {
        return Ok(());
    }
    if vault.has_passphrase_source() {
        return Ok(vault.unlock()?);
    }
    let exists = vault.load()?.is_some();
    for attempt in 1..=ATTEMPTS {
        let prompt = if exists {
            "vault passphrase: "
        } else {
            "new vault passphrase: "
        };
        let Some(pass) = read_hidden(prompt)? else {
            return Err(VaultAccessError::Locked.into());
        };
        if !exists {
            let Some(again) = read_hidden("the same passphrase again: ")? else {
                return Err(VaultAccessError::Locked.into());
            };
            if *again != *pass {
                anyhow::bail!("the two passphrases differ; the vault was not created");
            }
        }
        match vault.unlock_with(&pass) {
            Ok(()) => return Ok(()),
            Err(err) if err.is_wrong_passphrase() && attempt < ATTEMPTS => {
                eprintln!("reef: {err}; try again");
            }
            Err(err) => return Err(err.into()),
        }
    }
    Err(VaultAccessError::Locked.into())
}

/// Unlocks `vault` before agents run, when it holds secrets and this process can ask or has a
/// passphrase; a vault no one can unlock is left locked (its secrets then fail by name).
pub fn unlock_if_used(vault: &Vault) -> anyhow::Result<()> {
    let holds = vault.load()?.is_some_and(|f| !f.secrets.is_empty());
    let can_ask = std::io::IsTerminal::is_terminal(&std::io::stdin());
    if holds && (vault.has_passphrase_source() || can_ask) {
        unlock(vault)?;
    }
    Ok(())
}
