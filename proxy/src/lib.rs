//! freshet-proxy: the MySQL-protocol front of freshet and the `freshet` binary's wiring.
//!
//! Owns the wire protocol ([`protocol`]), client sessions ([`session`]) with their upstream
//! connections ([`upstream`], [`tls`]), the cached reads ([`cache`], [`matching`], [`encode`],
//! [`admin_sql`]), and the admin HTTP endpoint ([`admin`], [`health`], [`metrics`]).
//! [`Server`] binds the listeners and runs everything until a shutdown signal, then stops as
//! [`shutdown`] describes; the binary only parses its arguments and calls it, and tests run
//! the same [`Server`] in-process.

pub mod admin;
pub mod admin_sql;
pub mod cache;
pub mod check;
pub mod encode;
pub mod health;
pub mod matching;
pub mod metrics;
pub mod protocol;
pub mod session;
pub mod shutdown;
pub mod tls;
pub mod upstream;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::Semaphore;
use tracing::{info, warn};

use freshet_config::Config;

use crate::admin::Admin;
use crate::cache::Engine;
use crate::health::Health;
use crate::metrics::ProxyMetrics;
use crate::session::{EngineCell, Shared};
use crate::shutdown::Stop;
use crate::upstream::UpstreamConnector;

/// freshet, bound to its listeners and ready to run.
pub struct Server {
    mysql: TcpListener,
    admin: TcpListener,
    shared: Arc<Shared>,
    health: Arc<Health>,
    /// One permit per client session; all of them back means no session is left.
    sessions: Arc<Semaphore>,
}

impl Server {
    pub async fn bind(config: Config) -> anyhow::Result<Server> {
        let upstream = UpstreamConnector::new(&config.upstream).context("upstream TLS")?;
        let mysql = listen(config.listen.mysql).with_context(|| format!("binding [listen] mysql = {}", config.listen.mysql))?;
        let admin =
            TcpListener::bind(config.listen.admin).await.with_context(|| format!("binding [listen] admin = {}", config.listen.admin))?;
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
            stop: Arc::new(Stop::default()),
        });
        let sessions = Arc::new(Semaphore::new(shared.config.limits.max_connections as usize));
        Ok(Server { mysql, admin, shared, health, sessions })
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

    /// Serves until `shutdown` completes, then stops as [`shutdown`] describes: drains for
    /// `[shutdown] drain`, closes the listener and idle sessions, and waits for busy sessions
    /// until `[shutdown] grace` after the signal.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        info!(mysql = %self.mysql_addr(), admin = %self.admin_addr(), upstream = %self.shared.config.upstream.url, "freshet is listening");
        let admin = Arc::new(Admin::new(self.shared.clone(), self.health.clone()));
        let admin_task = tokio::spawn(admin.clone().serve(self.admin));
        let (sessions, shared) = (self.sessions, self.shared);
        let mut accept = Box::pin(accept_loop(self.mysql, sessions.clone(), shared.clone()));
        tokio::select! {
            _ = &mut accept => {}
            _ = shutdown => {}
        }
        let settings = shared.config.shutdown;
        let deadline = tokio::time::Instant::now() + settings.grace;
        admin.shutting_down();
        if !settings.drain.is_zero() {
            info!(drain = ?settings.drain, "shutting down: /ready says 503; still serving and accepting while the application drains");
            let _ = tokio::time::timeout(settings.drain, &mut accept).await;
        }
        // Dropping the accept loop closes the listener: new clients are refused instead of
        // waiting in a backlog nobody serves.
        drop(accept);
        let open = shared.metrics.connections_open.get();
        info!(open, grace_left = ?deadline.saturating_duration_since(tokio::time::Instant::now()), "shutting down: no new connections; idle sessions close, busy ones finish their command");
        shared.stop.cancel();
        let all = shared.config.limits.max_connections;
        match tokio::time::timeout_at(deadline, sessions.acquire_many(all)).await {
            Ok(_) => info!("every session has ended"),
            Err(_) => {
                warn!(open = shared.metrics.connections_open.get(), "[shutdown] grace is over with sessions still busy; exiting anyway")
            }
        }
        if let Some(engine) = shared.engine.get() {
            engine.stop();
        }
        admin_task.abort();
        Ok(())
    }
}

/// Connections the kernel completes and queues while the accept loop catches up. A pool of a
/// thousand connections opened at once (an application starting) overflowed the 128 that
/// std's listeners ask for: the kernel dropped handshakes it had half completed, and those
/// clients waited for a greeting that never came (`scripts/figures` at 1,000 connections hung
/// so). The kernel caps it at `net.core.somaxconn` (4,096 on current kernels).
const BACKLOG: u32 = 4096;

/// The MySQL listener on `addr`, with [`BACKLOG`] (and SO_REUSEADDR, as std's listeners).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Accepts clients, each served by its own task holding one of `sessions`' permits, until
/// dropped.
async fn accept_loop(listener: TcpListener, sessions: Arc<Semaphore>, shared: Arc<Shared>) {
    loop {
        // Take the permit before accepting: over the limit, clients wait in the kernel's
        // backlog instead of holding a socket and an upstream connection.
        let Ok(permit) = sessions.clone().acquire_owned().await else { return };
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
}
