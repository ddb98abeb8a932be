//! PostgreSQL, the store of cluster mode: a pool of connections (TLS by rustls on ring unless
//! the URL says `sslmode=disable`) to a database whose schema is reef's, migrated under an
//! advisory lock so that nodes starting together apply each migration once.

mod cluster;
mod pgvector;

pub(crate) use pgvector::literal as vector_literal;

pub use cluster::{AgentLease, ClusterNode, NodeStatus};
use std::sync::Arc;
use std::time::Duration;

/// reef's PostgreSQL migrations, in order: (version, SQL).
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("0001_baseline.sql")),
    (2, include_str!("0002_cluster.sql")),
    (3, include_str!("0003_rooms.sql")),
    (4, include_str!("0004_bus.sql")),
    (5, include_str!("0005_fingerprint_times.sql")),
    (6, include_str!("0006_bus_lag.sql")),
];

/// The advisory lock migrations run under (any fixed number; "reef" in ASCII).
const MIGRATION_LOCK: i64 = 0x7265_6566;

/// How long connecting waits when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections in the pool.
const POOL_SIZE: usize = 16;

/// What went wrong with PostgreSQL, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The database URL does not parse; fix `cluster.database_url`.
    #[error("database_url: {0}")]
    Url(String),
    /// The server could not be reached or refused the login; it may come back (retry), or the
    /// URL names the wrong host, port, user or database.
    #[error(
        "cannot reach PostgreSQL at {target}: {source} (is it running, and does database_url \
         name the right host, port, user and database?)"
    )]
    Connect {
        target: String,
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement failed.
    #[error("PostgreSQL at {target}: {}", detail(source))]
    Query {
        target: String,
        #[source]
        source: tokio_postgres::Error,
    },
    /// A migration failed and was rolled back; the database is as it was.
    #[error("PostgreSQL at {target}: migration {version} failed (rolled back): {source}")]
    Migration {
        target: String,
        version: i64,
        #[source]
        source: tokio_postgres::Error,
    },
    /// The database was migrated by a newer reef; upgrade this node.
    #[error(
        "PostgreSQL at {target}: the schema is at version {found}, newer than this reef's \
         {known}; upgrade reef on this node"
    )]
    Newer {
        target: String,
        found: i64,
        known: i64,
    },
    /// Another live node has this name; choose another `cluster.node_name`, or stop that node.
    #[error(
        "another live node is named {name}: choose another cluster.node_name, or stop that node"
    )]
    NameTaken { name: String },
    /// Another process took over this node's name after its heartbeats stopped for longer
    /// than its lease; its agents may run elsewhere now, so this node must stop running them.
    #[error(
        "node {name} was taken over by another process (its heartbeats stopped for longer than \
         its lease): this node must stop running agents"
    )]
    Superseded { name: String },
    /// No node of the cluster has this name; `reef cluster status` lists them.
    #[error("no node of the cluster is named {name} (`reef cluster status` lists them)")]
    UnknownNode { name: String },
    /// No connection came free in time (the pool is exhausted or the server is gone).
    #[error("PostgreSQL at {target}: no connection: {message}")]
    Pool { target: String, message: String },
}

impl PgError {
    /// Whether the server could not be reached, or went away or refused work for now
    /// (connection exceptions, an administrator's shutdown, a server starting up), so that the
    /// same call may succeed once it is back.
    pub fn is_unavailable(&self) -> bool {
        match self {
            PgError::Connect { .. } | PgError::Pool { .. } => true,
            PgError::Query { source, .. } | PgError::Migration { source, .. } => {
                if source.is_closed() {
                    return true;
                }
                match source.code() {
                    Some(code) => {
                        let code = code.code();
                        code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
                    }
                    // No answer from the server at all: the connection failed under the call.
                    None => {
                        source.as_db_error().is_none()
                            && std::error::Error::source(source)
                                .is_some_and(|s| s.is::<std::io::Error>())
                    }
                }
            }
            _ => false,
        }
    }
}

/// A pool of connections to reef's PostgreSQL database. Cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    pool: deadpool_postgres::Pool,
    /// `host:port/database`, for messages (never the password).
    target: Arc<str>,
    /// pgvector's version when the database has the extension (vectors are searched there).
    pgvector: Option<Arc<str>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .field("pgvector", &self.pgvector)
            .finish()
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user[:password]@host[:port]/database`,
    /// with libpq's parameters such as `sslmode`), logging in with `password` when given, and
    /// migrates it to reef's schema. Fails when the server cannot be reached: the caller
    /// decides whether to wait and retry.
    pub async fn connect(url: &str, password: Option<&str>) -> Result<PgStore, PgError> {
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e: tokio_postgres::Error| {
                PgError::Url(format!("not a PostgreSQL URL: {e}"))
            })?;
        if config.get_hosts().is_empty() {
            return Err(PgError::Url("names no host".into()));
        }
        if config.get_dbname().is_none() {
            return Err(PgError::Url("names no database".into()));
        }
        if let Some(password) = password {
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let target: Arc<str> = describe(&config).into();
        let manager_config = deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        };
        let manager = if config.get_ssl_mode() == tokio_postgres::config::SslMode::Disable {
            deadpool_postgres::Manager::from_config(config, tokio_postgres::NoTls, manager_config)
        } else {
            deadpool_postgres::Manager::from_config(config, tls()?, manager_config)
        };
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| PgError::Pool {
                target: target.to_string(),
                message: e.to_string(),
            })?;
        let mut store = PgStore {
            pool,
            target,
            pgvector: None,
        };
        store.pgvector = store.migrate().await?.map(Arc::from);
        Ok(store)
    }

    /// `host:port/database` of the server (no password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The version of pgvector when the database has it: vector searches then run in the
    /// database; without it each node scans the vectors in RAM.
    pub fn pgvector(&self) -> Option<&str> {
        self.pgvector.as_deref()
    }

    /// The number of migrations applied to the database.
    pub async fn schema_version(&self) -> Result<i64, PgError> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT coalesce(max(version), 0) FROM reef_schema", &[])
            .await
            .map_err(|source| self.query_error(source))?;
        Ok(row.get(0))
    }

    /// Applies the migrations the database lacks, in one transaction under the migration lock:
    /// a node that starts beside another waits for it and then finds nothing to do. Then
    /// enables pgvector if the server has it, returning its version.
    async fn migrate(&self) -> Result<Option<String>, PgError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|source| self.query_error(source))?;
        tx.batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
             CREATE TABLE IF NOT EXISTS reef_schema (
                 version    BIGINT PRIMARY KEY,
                 applied_at TEXT NOT NULL
             );"
        ))
        .await
        .map_err(|source| self.query_error(source))?;
        let found: i64 = tx
            .query_one("SELECT coalesce(max(version), 0) FROM reef_schema", &[])
            .await
            .map_err(|source| self.query_error(source))?
            .get(0);
        let known = MIGRATIONS.last().map_or(0, |(v, _)| *v);
        if found > known {
            return Err(PgError::Newer {
                target: self.target.to_string(),
                found,
                known,
            });
        }
        for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
            let failed = |source| PgError::Migration {
                target: self.target.to_string(),
                version,
                source,
            };
            tx.batch_execute(sql).await.map_err(failed)?;
            let now = crate::clock::format_rfc3339_ms(time::OffsetDateTime::now_utc());
            tx.execute(
                "INSERT INTO reef_schema (version, applied_at) VALUES ($1, $2)",
                &[&version, &now],
            )
            .await
            .map_err(failed)?;
        }
        let pgvector = pgvector::enable(&tx)
            .await
            .map_err(|source| self.query_error(source))?;
        tx.commit()
            .await
            .map_err(|source| self.query_error(source))?;
        Ok(pgvector)
    }

    /// A connection of the pool for the store's statements, which run on blocking threads.
    pub(crate) async fn blocking_conn(&self) -> Result<crate::sql::PgConn, PgError> {
        Ok(crate::sql::PgConn::new(
            self.client().await?,
            self.pool.clone(),
            tokio::runtime::Handle::current(),
            Arc::clone(&self.target),
        ))
    }

    /// A connection from the pool.
    async fn client(&self) -> Result<deadpool_postgres::Object, PgError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(source) => PgError::Connect {
                target: self.target.to_string(),
                source,
            },
            other => PgError::Pool {
                target: self.target.to_string(),
                message: other.to_string(),
            },
        })
    }

    fn query_error(&self, source: tokio_postgres::Error) -> PgError {
        PgError::Query {
            target: self.target.to_string(),
            source,
        }
    }
}

/// What PostgreSQL said about a failed statement (its message and SQLSTATE code), or the
/// client's own error.
fn detail(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => err.to_string(),
    }
}

/// `host:port/database` of `config`, for messages.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(name)) => name.clone(),
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => String::new(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config.get_dbname().unwrap_or_default();
    format!("{host}:{port}/{database}")
}

/// rustls on ring with the system's trusted roots; a server without TLS is still reached
/// unless the URL asks for `sslmode=require`.
fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect, PgError> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        // A certificate the store cannot parse is skipped, as every TLS client does.
        if let Err(e) = roots.add(cert) {
            tracing::debug!(error = %e, "skipping a system root certificate");
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| PgError::Url(format!("TLS: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
