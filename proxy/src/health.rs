//! Is the upstream reachable? Answered by logging in with the configured credentials and
//! pinging, over one pooled connection, at most once a second however often /ready is asked.
//!
//! A full login, not a bare TCP connect: a connection dropped before authenticating counts
//! against the server's max_connect_errors, and enough of them would get freshet's host
//! blocked. The result is cached so that probes cannot load the upstream.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{OptsBuilder, Pool, PoolConstraints, PoolOpts, SslOpts};
use tokio::sync::Mutex;

use freshet_config::{TlsMode, Upstream};

const CACHE_FOR: Duration = Duration::from_secs(1);

pub struct Health {
    pool: Pool,
    timeout: Duration,
    last: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Health {
    pub fn new(config: &Upstream) -> Self {
        let constraints = PoolConstraints::new(0, 1).unwrap_or_default();
        let opts = upstream_opts(config).pool_opts(PoolOpts::default().with_constraints(constraints));
        Health { pool: Pool::new(opts), timeout: config.connect_timeout, last: Mutex::new(None) }
    }

    /// Ok when the upstream answered a ping within the connect timeout, recently.
    pub async fn check(&self) -> Result<(), String> {
        let mut last = self.last.lock().await;
        if let Some((at, result)) = &*last
            && at.elapsed() < CACHE_FOR
        {
            return result.clone();
        }
        let result = match tokio::time::timeout(self.timeout, self.ping()).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {:?}", self.timeout)),
        };
        *last = Some((Instant::now(), result.clone()));
        result
    }

    /// The last result, without checking again (for /metrics).
    pub async fn last(&self) -> Option<bool> {
        self.last.lock().await.as_ref().map(|(_, r)| r.is_ok())
    }

    async fn ping(&self) -> Result<(), String> {
        let mut conn = self.pool.get_conn().await.map_err(|e| format!("upstream unreachable: {e}"))?;
        conn.ping().await.map_err(|e| format!("upstream ping failed: {e}"))
    }
}

/// Connection options for freshet's own connections to the upstream (health, binlog, fills):
/// the url's credentials and database, TCP even to localhost, TLS as `[upstream] tls` says.
pub fn upstream_opts(config: &Upstream) -> OptsBuilder {
    let url = &config.url;
    let ssl = match config.tls {
        TlsMode::Disabled | TlsMode::Preferred => None,
        TlsMode::Required => Some(SslOpts::default().with_danger_accept_invalid_certs(true)),
        TlsMode::VerifyCa => Some(ca_opts(config).with_danger_skip_domain_validation(true)),
        TlsMode::VerifyIdentity => Some(ca_opts(config)),
    };
    OptsBuilder::default()
        .ip_or_hostname(url.host.clone())
        .tcp_port(url.port)
        .user(Some(url.user.clone()))
        .pass(url.password.clone())
        .db_name(url.database.clone())
        .prefer_socket(false)
        .ssl_opts(ssl)
}

fn ca_opts(config: &Upstream) -> SslOpts {
    let roots = config.tls_ca.iter().map(|p| p.clone().into()).collect::<Vec<_>>();
    SslOpts::default().with_root_certs(roots)
}
