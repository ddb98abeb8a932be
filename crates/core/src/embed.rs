//! The `Embedder` trait: turns texts into fixed-length vectors for semantic search. Implemented
//! by the in-process MiniLM model and by OpenAI-compatible `/embeddings` endpoints.

use crate::model::ModelError;
use async_trait::async_trait;

/// Maps texts to unit-length vectors of `dimensions()` floats; similar meanings give vectors
/// with a high dot product. Errors reuse the model error kinds (and their recovery hints).
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Identifies the vector space: vectors from different ids are never compared. Stored next
    /// to every vector, so switching models re-embeds instead of mixing spaces.
    fn id(&self) -> &str;

    /// Length of every vector `embed` returns.
    fn dimensions(&self) -> usize;

    /// One vector per text, in order, each L2-normalised.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError>;
}

/// Scales `v` to unit length (left unchanged when it is all zeros).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn normalize_gives_unit_length_and_keeps_zero() {
        let mut v = [3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut zero = [0.0f32; 3];
        normalize(&mut zero);
        assert_eq!(zero, [0.0; 3]);
    }
}
