//! `ModelStore`: the models directory (`$REEF_HOME/models`): what is installed, where a model's
//! files live, removing one. A model is installed when its main file (`NAME.gguf`, or
//! `NAME.safetensors` for embedding models) and its companions are there; downloads in progress
//! live under `.partial/` and never count.

use crate::catalogue;
use crate::error::ModelsError;
use std::path::{Path, PathBuf};

/// One installed model file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct InstalledModel {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    /// Whether the name is in the catalogue (files put there by hand are listed too).
    pub catalogued: bool,
}

/// The models directory.
#[derive(Clone, Debug)]
pub struct ModelStore {
    dir: PathBuf,
}

impl ModelStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where model `name`'s main file is (or would be) stored.
    pub fn path(&self, name: &str) -> PathBuf {
        let extension = catalogue::find(name).map_or("gguf", |e| e.extension);
        self.dir.join(format!("{name}.{extension}"))
    }

    /// Where the companion `suffix` of model `name` is stored.
    pub fn companion_path(&self, name: &str, suffix: &str) -> PathBuf {
        self.dir.join(format!("{name}.{suffix}"))
    }

    /// Where downloads in progress are kept.
    pub(crate) fn partial_dir(&self) -> PathBuf {
        self.dir.join(".partial")
    }

    pub fn is_installed(&self, name: &str) -> bool {
        self.path(name).is_file()
            && catalogue::find(name).is_none_or(|e| {
                e.companions
                    .iter()
                    .all(|c| self.companion_path(name, c.suffix).is_file())
            })
    }

    /// Installed models, by name.
    pub fn list(&self) -> Result<Vec<InstalledModel>, ModelsError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ModelsError::io(&self.dir, e)),
        };
        let mut models = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| ModelsError::io(&self.dir, e))?;
            let path = entry.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| {
                n.strip_suffix(".gguf")
                    .or_else(|| n.strip_suffix(".safetensors"))
            }) else {
                continue;
            };
            // Follows symlinks: a model linked in from elsewhere counts.
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            models.push(InstalledModel {
                name: name.to_owned(),
                catalogued: catalogue::find(name).is_some(),
                size: meta.len(),
                path,
            });
        }
        models.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(models)
    }

    /// Deletes model `name` and any partial download of it; returns the bytes freed.
    pub fn remove(&self, name: &str) -> Result<u64, ModelsError> {
        let path = self.path(name);
        let size = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let partial = self.partial_dir().join(name);
                if partial.exists() {
                    std::fs::remove_dir_all(&partial).map_err(|e| ModelsError::io(&partial, e))?;
                    return Ok(0);
                }
                return Err(ModelsError::NotInstalled(name.to_owned()));
            }
            Err(e) => return Err(ModelsError::io(&path, e)),
        };
        std::fs::remove_file(&path).map_err(|e| ModelsError::io(&path, e))?;
        for companion in catalogue::find(name).map_or(&[][..], |e| e.companions) {
            let path = self.companion_path(name, companion.suffix);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(ModelsError::io(&path, e));
                }
                _ => {}
            }
        }
        let partial = self.partial_dir().join(name);
        if partial.exists() {
            std::fs::remove_dir_all(&partial).map_err(|e| ModelsError::io(&partial, e))?;
        }
        Ok(size)
    }
}
