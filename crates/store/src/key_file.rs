//! The secret keys kept beside the database (mode 0600), each 32 random bytes in hex, made on
//! the first open and never read through a link: `audit.key`, which chains the audit log (kept
//! out of the database so that someone who can edit the database but not read the key cannot
//! rewrite a record and its hash to match), and `cap.key`, the root of capability tokens.

use reef_security::audit::{decode_hex, hex};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The audit key's file name, in the database's directory.
pub const AUDIT_KEY_FILE: &str = "audit.key";
/// The capability root key's file name, in the database's directory.
pub const CAP_KEY_FILE: &str = "cap.key";

/// Where the audit key of the database at `db` lives: `audit.key` in the same directory.
pub fn audit_key_path(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new("")).join(AUDIT_KEY_FILE)
}

/// Where the capability root key of the database at `db` lives: `cap.key` in the same
/// directory.
pub fn cap_key_path(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new("")).join(CAP_KEY_FILE)
}

/// Which key a file holds, for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Audit,
    CapabilityRoot,
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeyKind::Audit => "audit key",
            KeyKind::CapabilityRoot => "capability root key",
        })
    }
}

impl KeyKind {
    fn without_it(self) -> &'static str {
        match self {
            KeyKind::Audit => "without it the audit log cannot be verified",
            KeyKind::CapabilityRoot => {
                "without it every agent's token must be minted again with `reef cap grant AGENT`"
            }
        }
    }
}

/// Why a key cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read or create the {kind} {}: {source}", path.display())]
    Io {
        kind: KeyKind,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the {kind} {} is not 64 hex digits; restore it from a backup ({}), or move the file \
         aside",
        path.display(), kind.without_it()
    )]
    Malformed { kind: KeyKind, path: PathBuf },
    #[error("the {kind} {} is not a regular file owned by this user (a link is refused)", path.display())]
    NotRegular { kind: KeyKind, path: PathBuf },
    #[error(
        "the audit log in this database has records, but its key {} is missing: restore the \
         key from a backup of the reef home. Without it the log cannot be verified; to give \
         up on the old records, move them aside in SQL (DELETE FROM audit; DELETE FROM \
         audit_checkpoint) and open the store again",
        path.display()
    )]
    Missing { path: PathBuf },
}

/// The key at `path`, made (and written with mode 0600) if there is none yet, and whether it
/// was made now. Two processes opening a new store at once agree on one key: it is written
/// to a temporary file and linked into place, which fails for the second.
pub(crate) fn load_or_create(path: &Path, kind: KeyKind) -> Result<([u8; 32], bool), KeyError> {
    let io = |source| KeyError::Io {
        kind,
        path: path.to_path_buf(),
        source,
    };
    match read(path, kind) {
        Err(KeyError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        other => return other.map(|key| (key, false)),
    }
    let key = random_key().map_err(io)?;
    // A name of its own, so a temporary file a killed process left behind is never in the way.
    let suffix = hex(&random_key().map_err(io)?);
    let tmp = path.with_extension(format!("key.{}.tmp", &suffix[..16]));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc_nofollow())
        .open(&tmp)
        .map_err(io)?;
    let written = file
        .write_all(format!("{}\n", hex(&key)).as_bytes())
        .and_then(|()| file.sync_all());
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    if let Err(err) = std::fs::remove_file(&tmp) {
        tracing::warn!(path = %tmp.display(), error = %err, "cannot remove a temporary key file");
    }
    match linked {
        Ok(()) => {
            // The link itself must survive a power loss.
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::File::open(dir)
                    .and_then(|d| d.sync_all())
                    .map_err(io)?;
            }
            Ok((key, true))
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            read(path, kind).map(|key| (key, false))
        }
        Err(err) => Err(io(err)),
    }
}

/// A key for a store that lives in memory only.
pub fn ephemeral() -> Result<[u8; 32], KeyError> {
    random_key().map_err(|source| KeyError::Io {
        kind: KeyKind::Audit,
        path: PathBuf::from("/dev/urandom"),
        source,
    })
}

fn read(path: &Path, kind: KeyKind) -> Result<[u8; 32], KeyError> {
    let io = |source| KeyError::Io {
        kind,
        path: path.to_path_buf(),
        source,
    };
    // Not through a link, and without blocking on a FIFO put in its place.
    let nonblock = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_nofollow() | nonblock)
        .open(path)
        .map_err(|err| {
            if err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                KeyError::NotRegular {
                    kind,
                    path: path.to_path_buf(),
                }
            } else {
                io(err)
            }
        })?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(KeyError::NotRegular {
            kind,
            path: path.to_path_buf(),
        });
    }
    if meta.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io)?;
    }
    let mut text = String::new();
    (&file).take(256).read_to_string(&mut text).map_err(io)?;
    decode_hex(text.trim()).ok_or_else(|| KeyError::Malformed {
        kind,
        path: path.to_path_buf(),
    })
}

fn random_key() -> Result<[u8; 32], std::io::Error> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// `O_NOFOLLOW`: the key is never read or written through a symbolic link.
fn libc_nofollow() -> i32 {
    i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0)
}
