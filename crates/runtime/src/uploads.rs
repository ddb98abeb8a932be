//! Files people send an agent through a channel: saved beneath its workspace in `uploads/`,
//! each under a name of its own (never over an existing file, never through a link the agent
//! left), so the agent can open them with its file tools.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_workspace::{Workspace, WorkspaceError};

/// The folder uploads go to, relative to the workspace.
pub const UPLOADS: &str = "uploads";

impl Runtime {
    /// Saves `bytes` as `uploads/NAME` (or `NAME-1`, `NAME-2`, … when taken) in `agent`'s
    /// workspace and returns the path relative to it. `name` must be a plain file name.
    pub async fn save_upload(
        &self,
        agent: &str,
        name: &str,
        bytes: &[u8],
    ) -> Result<String, RuntimeError> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(RuntimeError::invalid(
                "name",
                format!("{name:?} is not a plain file name"),
            ));
        }
        let record = self.get_agent(agent).await?;
        let root = std::path::PathBuf::from(&record.workspace);
        let (name, bytes) = (name.to_owned(), bytes.to_vec());
        tokio::task::spawn_blocking(move || save(&root, &name, &bytes))
            .await
            .map_err(|e| RuntimeError::Setup(format!("saving an upload stopped: {e}")))?
            .map_err(|e| RuntimeError::Setup(format!("cannot save an upload: {e}")))
    }
}

fn save(root: &std::path::Path, name: &str, bytes: &[u8]) -> Result<String, WorkspaceError> {
    let ws = Workspace::open(root)?;
    let dir = ws.resolve(UPLOADS)?;
    ws.create_dir_all(&dir)?;
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem, format!(".{ext}")),
        _ => (name, String::new()),
    };
    let mut last = None;
    for n in 0..100 {
        let candidate = match n {
            0 => format!("{UPLOADS}/{name}"),
            n => format!("{UPLOADS}/{stem}-{n}{ext}"),
        };
        let rel = ws.resolve(&candidate)?;
        match ws.create_new(&rel, bytes) {
            Ok(()) => return Ok(rel.display()),
            Err(err @ WorkspaceError::Exists { .. }) => last = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last.unwrap_or(WorkspaceError::Exists {
        path: format!("{UPLOADS}/{name}"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_never_replace_a_file_or_follow_a_link() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(save(dir.path(), "a.txt", b"one").unwrap(), "uploads/a.txt");
        assert_eq!(
            save(dir.path(), "a.txt", b"two").unwrap(),
            "uploads/a-1.txt"
        );
        assert_eq!(
            std::fs::read(dir.path().join("uploads/a.txt")).unwrap(),
            b"one"
        );
        // A link the agent put where the next name would go is not written through.
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("stolen"),
            dir.path().join("uploads/a-2.txt"),
        )
        .unwrap();
        assert_eq!(
            save(dir.path(), "a.txt", b"three").unwrap(),
            "uploads/a-3.txt"
        );
        assert!(!outside.path().join("stolen").exists());
        // An uploads folder that is a link is refused.
        let other = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), other.path().join("uploads")).unwrap();
        assert!(save(other.path(), "b.txt", b"x").is_err());
        assert!(!outside.path().join("b.txt").exists());
    }
}
