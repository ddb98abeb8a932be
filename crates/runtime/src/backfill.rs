//! The daemon's background embedder: chunks saved without a vector (an import, memory written
//! while the embedder was down, a model changed) are embedded here a batch at a time, so a
//! search never waits for them: it answers at once, by keyword for what is not embedded yet.

use crate::kernel::{Inner, Runtime};
use std::sync::Weak;
use std::time::Duration;

/// Chunks embedded between two looks at whether the daemon is still wanted.
const BATCH: usize = 16;

/// How long the task rests when nothing waits, or after a failure.
const IDLE: Duration = Duration::from_secs(2);

pub(crate) async fn run(inner: Weak<Inner>) {
    loop {
        let Ok(runtime) = Runtime::from_weak(&inner) else {
            return;
        };
        let busy = match embed_some(&runtime).await {
            Ok(busy) => busy,
            Err(err) => {
                tracing::warn!(error = %err, "background embedding failed; retrying");
                false
            }
        };
        drop(runtime);
        if !busy {
            tokio::time::sleep(IDLE).await;
        }
    }
}

/// Embeds up to one batch of waiting chunks; whether there was anything to embed.
async fn embed_some(runtime: &Runtime) -> Result<bool, String> {
    let memory = runtime.memory();
    let Ok(embedder) = memory.embedder() else {
        return Ok(false);
    };
    let namespaces = memory
        .store()
        .namespaces_to_embed(embedder.id())
        .await
        .map_err(|e| e.to_string())?;
    if namespaces.is_empty() {
        return Ok(false);
    }
    let (done, _) = memory
        .embed_pending(namespaces, BATCH)
        .await
        .map_err(|e| e.0)?;
    tracing::debug!(chunks = done, "embedded in the background");
    Ok(done > 0)
}
