//! `LlmError`: failures to set up a model client (configuration, TLS), before any request.

/// A client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// `base_url` is not an absolute http(s) URL.
    #[error("provider `{provider}`: invalid base_url `{url}`: {reason}")]
    InvalidBaseUrl {
        provider: String,
        url: String,
        reason: String,
    },
    /// No trusted root certificates could be loaded from the system.
    #[error(
        "no trusted root certificates found ({details}); install the system CA bundle \
         (e.g. ca-certificates) or point SSL_CERT_FILE / SSL_CERT_DIR at one"
    )]
    NoRootCertificates { details: String },
    /// The TLS configuration could not be built.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The HTTP client could not be built.
    #[error("HTTP client setup failed: {0}")]
    HttpClient(String),
    /// A local model could not be set up (its file is missing, or reef was built without it).
    #[error("provider `{provider}`: {message}")]
    Local { provider: String, message: String },
}
