//! The page's static files, embedded in the binary and served under names that carry a hash
//! of their content, so a browser may keep them forever and an upgraded daemon is never
//! answered from a stale cache.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

/// One embedded file.
pub(crate) struct Asset {
    /// The name it is served under: `stem.HASH.ext`.
    pub url: String,
    pub bytes: &'static [u8],
    pub content_type: &'static str,
}

/// The files, by their plain name.
const FILES: &[(&str, &[u8], &str)] = &[
    (
        "htmx.js",
        include_bytes!("../assets/vendor/htmx-2.0.11.min.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "htmx-sse.js",
        include_bytes!("../assets/vendor/htmx-ext-sse-2.2.4.min.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "xterm.js",
        include_bytes!("../assets/vendor/xterm-6.0.0.min.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "xterm-fit.js",
        include_bytes!("../assets/vendor/xterm-addon-fit-0.11.0.min.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "xterm.css",
        include_bytes!("../assets/vendor/xterm-6.0.0.css"),
        "text/css; charset=utf-8",
    ),
    (
        "terminal.js",
        include_bytes!("../assets/terminal.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "reef.js",
        include_bytes!("../assets/reef.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "reef.css",
        include_bytes!("../assets/reef.css"),
        "text/css; charset=utf-8",
    ),
    (
        "favicon.svg",
        include_bytes!("../assets/favicon.svg"),
        "image/svg+xml",
    ),
];

static ASSETS: LazyLock<Vec<(&'static str, Asset)>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|&(name, bytes, content_type)| {
            let hash = Sha256::digest(bytes);
            let short: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
            let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
            let asset = Asset {
                url: format!("/assets/{stem}.{short}.{ext}"),
                bytes,
                content_type,
            };
            (name, asset)
        })
        .collect()
});

/// The URL of the embedded file `name` (one of [`FILES`]).
pub(crate) fn url(name: &str) -> &'static str {
    ASSETS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("/assets/missing", |(_, a)| a.url.as_str())
}

/// `GET /assets/{file}`: only the current hashed names exist.
pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    let wanted = format!("/assets/{file}");
    match ASSETS.iter().find(|(_, a)| a.url == wanted) {
        Some((_, asset)) => (
            [
                (header::CONTENT_TYPE, asset.content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            asset.bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

/// Every embedded file with its URL (for tests and the page-weight benchmark).
pub fn all() -> impl Iterator<Item = (&'static str, &'static str, usize)> {
    ASSETS
        .iter()
        .map(|(name, a)| (*name, a.url.as_str(), a.bytes.len()))
}
