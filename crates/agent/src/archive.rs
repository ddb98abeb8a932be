//! The workspace's archive of compacted conversation: `memory/YYYY-MM-DD.md`, appended to
//! through the workspace's link-refusing file access (the agent writes that directory too).

use reef_workspace::Workspace;
use std::path::Path;

/// The archive directory, relative to the workspace.
pub const ARCHIVE_DIR: &str = "memory";

/// Appends `entry` to today's (UTC) archive file, creating the directory and file as needed.
pub(crate) fn append_to_day_file(workspace: &Path, entry: &str) -> Result<(), String> {
    let ws = Workspace::open(workspace).map_err(|e| e.to_string())?;
    let dir = ws.resolve(ARCHIVE_DIR).map_err(|e| e.to_string())?;
    ws.create_dir_all(&dir).map_err(|e| e.to_string())?;
    // The store's timestamps start with the UTC date: `2026-11-23T…`.
    let now = reef_store::timestamp_ago(std::time::Duration::ZERO);
    let day = now.get(..10).unwrap_or("undated");
    let file = ws
        .resolve(&format!("{ARCHIVE_DIR}/{day}.md"))
        .map_err(|e| e.to_string())?;
    ws.append(&file, entry.as_bytes())
        .map_err(|e| e.to_string())
}
