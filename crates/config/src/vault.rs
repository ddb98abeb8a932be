//! `$REEF_HOME/vault`: the encrypted secrets file on disk, and the process's key for it.
//! The file is read and written without following links, only if it is reef's own regular
//! file, and replaced whole (a temporary file renamed into place under a lock), so a crash
//! leaves the old vault or the new one. The key is derived once per process from the
//! passphrase: `[vault] key_file`, else `REEF_VAULT_PASSPHRASE`, else whatever the front end
//! asked on the terminal ([`Vault::unlock_with`]).

use crate::secret::Secret;
use reef_core::{SecretPolicy, SecretSource, SecretSpec};
use reef_security::vault::{VaultError, VaultFile, VaultKey};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{
    DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use zeroize::Zeroizing;

/// The environment variable a service or script gives the passphrase in.
pub const PASSPHRASE_ENV: &str = "REEF_VAULT_PASSPHRASE";

/// The vault file's name in `$REEF_HOME`.
pub const VAULT_FILE: &str = "vault";

/// The largest vault file read.
const MAX_VAULT_BYTES: u64 = 16 * 1024 * 1024;

/// Why the vault could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum VaultAccessError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Someone else's file, a link or a device where the vault should be: remove it.
    #[error("{path} is not reef's own regular file; refusing to use it as the vault")]
    NotRegular { path: PathBuf },
    #[error("{path}: {source}")]
    Vault { path: PathBuf, source: VaultError },
    /// No passphrase is available to this process.
    #[error(
        "the vault is locked: give its passphrase in {PASSPHRASE_ENV}, name a key file in \
         [vault] key_file, or run reef from a terminal to be asked"
    )]
    Locked,
    #[error("there is no vault yet at {0}; add a secret with `reef secrets set NAME`")]
    Missing(PathBuf),
    /// Other users may read the key file: `chmod 600` it.
    #[error("{path} (the vault's key file) has mode {mode:o}; others may read it: chmod 600 it")]
    LooseKeyFile { path: PathBuf, mode: u32 },
}

impl VaultAccessError {
    /// The passphrase was wrong (the front end may ask again).
    pub fn is_wrong_passphrase(&self) -> bool {
        matches!(
            self,
            VaultAccessError::Vault {
                source: VaultError::WrongPassphrase,
                ..
            }
        )
    }
}

/// The vault of one `$REEF_HOME` and the key this process unlocked it with.
pub struct Vault {
    path: PathBuf,
    key_file: Option<PathBuf>,
    env_passphrase: Option<Secret>,
    key: Mutex<Option<VaultKey>>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault")
            .field("path", &self.path)
            .field("key_file", &self.key_file)
            .field("unlocked", &self.is_unlocked())
            .finish()
    }
}

impl Vault {
    pub fn new(path: PathBuf, key_file: Option<PathBuf>, env_passphrase: Option<Secret>) -> Self {
        Self {
            path,
            key_file,
            env_passphrase,
            key: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `[vault] key_file`.
    pub fn key_file(&self) -> Option<&Path> {
        self.key_file.as_deref()
    }

    /// Whether a key file or `REEF_VAULT_PASSPHRASE` can unlock the vault without asking.
    pub fn has_passphrase_source(&self) -> bool {
        self.key_file.is_some() || self.env_passphrase.is_some()
    }

    pub fn is_unlocked(&self) -> bool {
        self.key
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// The vault file, or `None` when there is none yet.
    pub fn load(&self) -> Result<Option<VaultFile>, VaultAccessError> {
        let Some(text) = read_own_file(&self.path, MAX_VAULT_BYTES)? else {
            return Ok(None);
        };
        let text = String::from_utf8(text).map_err(|_| VaultAccessError::Vault {
            path: self.path.clone(),
            source: VaultError::Malformed("not UTF-8".into()),
        })?;
        VaultFile::parse(&text)
            .map(Some)
            .map_err(|source| self.vault_error(source))
    }

    fn vault_error(&self, source: VaultError) -> VaultAccessError {
        VaultAccessError::Vault {
            path: self.path.clone(),
            source,
        }
    }

    /// The secrets the vault holds, as specs (no value is read).
    pub fn specs(&self) -> Result<Vec<SecretSpec>, VaultAccessError> {
        let Some(file) = self.load()? else {
            return Ok(Vec::new());
        };
        Ok(file
            .secrets
            .into_iter()
            .map(|(name, entry)| SecretSpec {
                name,
                source: SecretSource::Vault,
                description: entry.description,
                policy: entry.policy,
            })
            .collect())
    }

    /// The passphrase from the key file or the environment, if either is configured.
    fn configured_passphrase(&self) -> Result<Option<Zeroizing<String>>, VaultAccessError> {
        if let Some(path) = &self.key_file {
            let bytes = read_own_file(path, 64 * 1024)?.ok_or_else(|| VaultAccessError::Io {
                path: path.clone(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })?;
            // Like an SSH key: a passphrase others may read is refused.
            let mode = std::fs::symlink_metadata(path)
                .map(|m| m.permissions().mode())
                .unwrap_or(0);
            if mode & 0o077 != 0 {
                return Err(VaultAccessError::LooseKeyFile {
                    path: path.clone(),
                    mode: mode & 0o777,
                });
            }
            let text = Zeroizing::new(String::from_utf8_lossy(&bytes).into_owned());
            return Ok(Some(Zeroizing::new(
                text.trim_end_matches(['\n', '\r']).to_owned(),
            )));
        }
        Ok(self
            .env_passphrase
            .as_ref()
            .map(|p| Zeroizing::new(p.expose().to_owned())))
    }

    /// Unlocks the vault with `passphrase` (asked on the terminal). A vault that does not
    /// exist yet is created with it.
    pub fn unlock_with(&self, passphrase: &str) -> Result<(), VaultAccessError> {
        let key = match self.load()? {
            Some(file) => file
                .unlock(passphrase)
                .map_err(|source| self.vault_error(source))?,
            None => self.create(passphrase)?,
        };
        *self.key.lock().unwrap_or_else(PoisonError::into_inner) = Some(key);
        Ok(())
    }

    /// Unlocks with the key file or `REEF_VAULT_PASSPHRASE`; `Locked` when neither is set.
    pub fn unlock(&self) -> Result<(), VaultAccessError> {
        if self.is_unlocked() {
            return Ok(());
        }
        let passphrase = self
            .configured_passphrase()?
            .ok_or(VaultAccessError::Locked)?;
        self.unlock_with(&passphrase)
    }

    /// A new empty vault file for `passphrase`; its key.
    fn create(&self, passphrase: &str) -> Result<VaultKey, VaultAccessError> {
        let _lock = self.lock()?;
        if let Some(file) = self.load()? {
            // Made by another process meanwhile.
            return file
                .unlock(passphrase)
                .map_err(|source| self.vault_error(source));
        }
        let (file, key) = VaultFile::create(passphrase).map_err(|s| self.vault_error(s))?;
        self.write(&file)?;
        Ok(key)
    }

    fn key(&self) -> Result<VaultKey, VaultAccessError> {
        self.unlock()?;
        self.key
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or(VaultAccessError::Locked)
    }

    /// The value of `name`, read from the file as it is now.
    pub fn read(&self, name: &str) -> Result<Zeroizing<String>, VaultAccessError> {
        self.read_entry(name).map(|(value, _)| value)
    }

    /// The value of `name` and its policy as the file holds them now (the policy is bound
    /// to the value, so an edited one fails to open).
    pub fn read_entry(
        &self,
        name: &str,
    ) -> Result<(Zeroizing<String>, SecretPolicy), VaultAccessError> {
        let file = self
            .load()?
            .ok_or_else(|| VaultAccessError::Missing(self.path.clone()))?;
        let key = self.key()?;
        let value = file.get(&key, name).map_err(|s| self.vault_error(s))?;
        let policy = file
            .secrets
            .get(name)
            .map(|e| e.policy.clone())
            .unwrap_or_default();
        Ok((value, policy))
    }

    /// Changes the file under the vault's lock: `change` gets the current file (a new one if
    /// there is none) and the key; the result is written in place of the old file.
    pub fn update<T>(
        &self,
        change: impl FnOnce(&mut VaultFile, &VaultKey) -> Result<T, VaultError>,
    ) -> Result<T, VaultAccessError> {
        let key = self.key()?;
        let _lock = self.lock()?;
        let mut file = self
            .load()?
            .ok_or_else(|| VaultAccessError::Missing(self.path.clone()))?;
        let out = change(&mut file, &key).map_err(|s| self.vault_error(s))?;
        self.write(&file)?;
        Ok(out)
    }

    /// Seals every secret again under `passphrase`; the process keeps the new key.
    pub fn rekey(&self, passphrase: &str) -> Result<usize, VaultAccessError> {
        let key = self.key()?;
        let _lock = self.lock()?;
        let file = self
            .load()?
            .ok_or_else(|| VaultAccessError::Missing(self.path.clone()))?;
        let (fresh, new_key) = file
            .rekey(&key, passphrase)
            .map_err(|s| self.vault_error(s))?;
        self.write(&fresh)?;
        *self.key.lock().unwrap_or_else(PoisonError::into_inner) = Some(new_key);
        Ok(fresh.secrets.len())
    }

    /// An exclusive lock on `vault.lock` beside the file, held until dropped.
    fn lock(&self) -> Result<std::fs::File, VaultAccessError> {
        let path = self.path.with_extension("lock");
        let io = |source| VaultAccessError::Io {
            path: path.clone(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io)?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| io(e.into()))?;
        Ok(file)
    }

    /// Replaces the file: a temporary file (0600, never through a link) renamed into place.
    fn write(&self, file: &VaultFile) -> Result<(), VaultAccessError> {
        let io = |source| VaultAccessError::Io {
            path: self.path.clone(),
            source,
        };
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".vault.")
            .permissions(std::fs::Permissions::from_mode(0o600))
            .tempfile_in(dir)
            .map_err(io)?;
        tmp.write_all(file.to_text().as_bytes()).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        Ok(())
    }
}

/// The file at `path` if it is this user's regular file (not a link, FIFO or device), at most
/// `max` bytes; `None` when there is no file.
fn read_own_file(path: &Path, max: u64) -> Result<Option<Vec<u8>>, VaultAccessError> {
    let io = |source| VaultAccessError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
            return Err(VaultAccessError::NotRegular {
                path: path.to_path_buf(),
            });
        }
        Err(err) => return Err(io(err)),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(VaultAccessError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    let mut bytes = Vec::new();
    (&file).take(max).read_to_end(&mut bytes).map_err(io)?;
    Ok(Some(bytes))
}

/// `policy = …` and `only_for = […]` of a `[secrets.NAME]` entry.
pub(crate) fn policy_of(
    policy: Option<&str>,
    only_for: Option<Vec<String>>,
) -> Result<SecretPolicy, String> {
    match (policy, only_for) {
        (None | Some("always"), None) => Ok(SecretPolicy::Always),
        (Some("with-approval"), None) => Ok(SecretPolicy::WithApproval),
        (None | Some("only-for"), Some(scopes)) if !scopes.is_empty() => scopes
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<_>, String>>()
            .map(SecretPolicy::OnlyFor),
        (Some("only-for"), _) | (None, Some(_)) => {
            Err("only_for must name at least one tool:, skill: or domain:".into())
        }
        (Some("always" | "with-approval"), Some(_)) => {
            Err("only_for goes with policy = \"only-for\" (or no policy)".into())
        }
        (Some(other), _) => Err(format!(
            "policy = {other:?}; use \"always\", \"with-approval\" or \"only-for\""
        )),
    }
}
