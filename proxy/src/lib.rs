//! freshet-proxy: the MySQL-protocol front of freshet and the `freshet` binary's wiring.
//!
//! Owns the wire protocol ([`protocol`]), client sessions ([`session`]) with their upstream
//! connections ([`upstream`], [`tls`]), and the admin HTTP endpoint ([`admin`], [`health`],
//! [`metrics`]). [`Server`] binds the listeners and runs everything; the binary only parses
//! its arguments and calls it, and tests run the same [`Server`] in-process.

pub mod admin;
pub mod admin_sql;
pub mod cache;
pub mod encode;
pub mod health;
pub mod matching;
pub mod metrics;
pub mod protocol;
pub mod session;
pub mod tls;
pub mod upstream;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{info, warn};

use freshet_config::Config;

use crate::admin::Admin;
use crate::cache::Engine;
use crate::health::Health;
use crate::metrics::ProxyMetrics;
use crate::session::{EngineCell, Shared};
use crate::upstream::UpstreamConnector;

/// How long sessions may go on after a shutdown signal before the process exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// freshet, bound to its listeners and ready to run.
pub struct Server {
    mysql: TcpListener,
    admin: TcpListener,
    shared: Arc<Shared>,
    health: Arc<Health>,
}

impl Server {
    pub async fn bind(config: Config) -> anyhow::Result<Server> {
        let upstream = UpstreamConnector::new(&config.upstream).context("upstream TLS")?;
        let mysql = TcpListener::bind(config.listen.mysql).await.with_context(|| format!("binding [listen] mysql = {}", config.listen.mysql))?;
        let admin = TcpListener::bind(config.listen.admin).await.with_context(|| format!("binding [listen] admin = {}", config.listen.admin))?;
        let client_tls = match &config.listen.tls {
            _ if !config.listen.offer_tls => None,
            Some(tls) => Some(tokio_rustls::TlsAcceptor::from(tls::server_config(&tls.cert, &tls.key)?)),
            None => Some(tokio_rustls::TlsAcceptor::from(tls::generated_server_config()?)),
        };
        let packet_limit = upstream::PacketLimit::new(config.limits.max_packet);
        if packet_limit.due() {
            // Best effort: while the upstream cannot be asked, sessions use PacketLimit::UNKNOWN
            // and a session that connects a minute later or more asks again.
            match tokio::time::timeout(config.upstream.connect_timeout, packet_limit.read_from_server(&config.upstream)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => warn!(error = %e, "cannot read the upstream's max_allowed_packet"),
                Err(_) => warn!("reading the upstream's max_allowed_packet timed out"),
            }
        }
        let health = Arc::new(Health::new(&config.upstream));
        let engine: EngineCell = Default::default();
        if !config.caches.is_empty() {
            let started = Engine::start(&config).await?;
            let _ = engine.set(started);
        }
        let shared = Arc::new(Shared {
            config: Arc::new(config),
            upstream,
            metrics: Arc::new(ProxyMetrics::default()),
            client_tls,
            packet_limit,
            sha2_key: Default::default(),
            engine,
        });
        Ok(Server { mysql, admin, shared, health })
    }

    pub fn mysql_addr(&self) -> SocketAddr {
        self.mysql.local_addr().unwrap_or_else(|_| self.shared.config.listen.mysql)
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin.local_addr().unwrap_or_else(|_| self.shared.config.listen.admin)
    }

    pub fn metrics(&self) -> Arc<ProxyMetrics> {
        self.shared.metrics.clone()
    }

    /// The cache engine, once started (at bind when `[[cache]]` entries exist, else by the
    /// first CREATE CACHE).
    pub fn engine(&self) -> EngineCell {
        self.shared.engine.clone()
    }

    /// Serves until `shutdown` completes, then stops accepting and gives open sessions a grace
    /// period to finish.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        info!(mysql = %self.mysql_addr(), admin = %self.admin_addr(), upstream = %self.shared.config.upstream.url, "freshet is listening");
        let admin = Arc::new(Admin::new(self.shared.metrics.clone(), self.health.clone(), self.shared.engine.clone()));
        let admin_task = tokio::spawn(admin.clone().serve(self.admin));
        let limit = Arc::new(Semaphore::new(self.shared.config.limits.max_connections as usize));
        let (listener, shared) = (self.mysql, self.shared);
        // The accept loop owns the listener: when the loop is dropped at shutdown the socket
        // closes, and new clients are refused instead of waiting in a backlog nobody serves.
        let accept = async move {
            loop {
                // Take the permit before accepting: over the limit, clients wait in the
                // kernel's backlog instead of holding a socket and an upstream connection.
                let Ok(permit) = limit.clone().acquire_owned().await else { return };
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        let shared = shared.clone();
                        tokio::spawn(async move {
                            session::serve(stream, peer, shared).await;
                            drop(permit);
                        });
                    }
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        };
        let metrics = admin.metrics.clone();
        tokio::select! {
            _ = accept => {}
            _ = shutdown => info!("shutting down: no new connections, open sessions may finish"),
        }
        admin.shutting_down();
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        while metrics.connections_open.get() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        admin_task.abort();
        Ok(())
    }
}
