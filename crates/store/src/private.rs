//! The database holds transcripts, memory and tool outputs: its files are the user's alone.
//! SQLite creates the write-ahead log and shared-memory files with the database file's mode,
//! so the database file is created 0600 before SQLite opens it, and files an older reef left
//! readable by others are tightened.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The files SQLite keeps for the database at `path`.
const SUFFIXES: [&str; 4] = ["", "-wal", "-shm", "-journal"];

/// Creates the database file at `path` with mode 0600 if it is missing, and sets mode 0600
/// on it and its journal files where group or others had any access. Returns the files whose
/// mode was changed.
pub(crate) fn make_private(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    let mut tightened = Vec::new();
    for suffix in SUFFIXES {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let file = PathBuf::from(file);
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
            tightened.push(file);
        }
    }
    Ok(tightened)
}
