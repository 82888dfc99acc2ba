//! Is the upstream reachable? Answered by logging in with the configured credentials and
//! pinging, over one pooled connection, at most once a second however often /ready is asked.
//!
//! A full login, not a bare TCP connect: a connection dropped before authenticating counts
//! against the server's max_connect_errors, and enough of them would get freshet's host
//! blocked. The result is cached so that probes cannot load the upstream. The connection is
//! made as all of freshet's own are ([`crate::upstream::connect_own`]: TLS as `[upstream] tls`
//! says); the pool is made on the first probe that reaches the server.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{OptsBuilder, Pool, PoolConstraints, PoolOpts};
use tokio::sync::{Mutex, OnceCell};

use freshet_config::Upstream;

use crate::upstream::connect_own;

const CACHE_FOR: Duration = Duration::from_secs(1);

pub struct Health {
    config: Upstream,
    pool: OnceCell<Pool>,
    timeout: Duration,
    last: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Health {
    pub fn new(config: &Upstream) -> Self {
        Health { config: config.clone(), pool: OnceCell::new(), timeout: config.connect_timeout, last: Mutex::new(None) }
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

    async fn ping(&self) -> Result<(), String> {
        let pool = self.pool.get_or_try_init(|| self.make_pool()).await.map_err(|e| format!("upstream unreachable: {e}"))?;
        let mut conn = pool.get_conn().await.map_err(|e| format!("upstream unreachable: {e}"))?;
        conn.ping().await.map_err(|e| format!("upstream ping failed: {e}"))
    }

    /// A pool of one connection, with the options [`connect_own`] settled on.
    async fn make_pool(&self) -> Result<Pool, mysql_async::Error> {
        let (conn, opts) = connect_own(&self.config).await?;
        let _ = conn.disconnect().await;
        let constraints = PoolConstraints::new(0, 1).unwrap_or_default();
        Ok(Pool::new(OptsBuilder::from_opts(opts).pool_opts(PoolOpts::default().with_constraints(constraints))))
    }
}
