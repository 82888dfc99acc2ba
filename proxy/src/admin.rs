//! The admin HTTP endpoint (`[listen] admin`):
//!
//! - `GET /live`    200 while the process serves requests.
//! - `GET /ready`   200 when the upstream is reachable and, with caches, the binlog is caught
//!   up to within `[consistency] max_lag`; else 503 with the reason; 503 from the moment a
//!   shutdown begins, so that traffic moves away while sessions drain.
//! - `GET /metrics` Prometheus text format, every freshet metric.
//!
//! A deliberately small HTTP/1.1 server: one request per connection, GET and HEAD only, a
//! bounded request head read under a timeout. It serves probes and scrapers on a private port,
//! not browsers, and keeps an HTTP framework out of the dependency tree.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use crate::health::Health;
use crate::metrics::ProxyMetrics;
use crate::session::EngineCell;

const MAX_HEAD: usize = 8 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Admin {
    pub metrics: Arc<ProxyMetrics>,
    pub health: Arc<Health>,
    engine: EngineCell,
    started: std::time::Instant,
    shutting_down: AtomicBool,
}

impl Admin {
    pub fn new(metrics: Arc<ProxyMetrics>, health: Arc<Health>, engine: EngineCell) -> Self {
        Admin { metrics, health, engine, started: std::time::Instant::now(), shutting_down: AtomicBool::new(false) }
    }

    /// From now on /ready answers 503.
    pub fn shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors and the like: back off rather than spin.
                    debug!(error = %e, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let admin = self.clone();
            tokio::spawn(async move {
                if let Err(e) = admin.handle(stream).await {
                    debug!(%peer, error = %e, "admin request failed");
                }
            });
        }
    }

    async fn handle(&self, mut stream: TcpStream) -> std::io::Result<()> {
        let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
            Ok(Ok(Some(head))) => head,
            Ok(Ok(None)) => return respond(&mut stream, 400, "text/plain", "bad request\n", false).await,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        };
        let mut parts = head.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let head_only = method == "HEAD";
        if method != "GET" && !head_only {
            return respond(&mut stream, 405, "text/plain", "only GET and HEAD\n", head_only).await;
        }
        match path.split('?').next().unwrap_or("") {
            "/live" => respond(&mut stream, 200, "text/plain", "live\n", head_only).await,
            "/ready" if self.shutting_down.load(Ordering::Relaxed) => {
                respond(&mut stream, 503, "text/plain", "not ready: shutting down\n", head_only).await
            }
            "/ready" => match self.health.check().await.and_then(|()| self.binlog_ready()) {
                Ok(()) => respond(&mut stream, 200, "text/plain", "ready\n", head_only).await,
                Err(reason) => respond(&mut stream, 503, "text/plain", &format!("not ready: {reason}\n"), head_only).await,
            },
            "/metrics" => {
                let body = self.render_metrics().await;
                respond(&mut stream, 200, "text/plain; version=0.0.4; charset=utf-8", &body, head_only).await
            }
            _ => respond(&mut stream, 404, "text/plain", "not found; try /live, /ready or /metrics\n", head_only).await,
        }
    }

    /// With caches, ready only once the binlog is caught up: a new sidecar must not take
    /// traffic it would relay for lag anyway (or answer staler than max_lag).
    fn binlog_ready(&self) -> Result<(), String> {
        match self.engine.get() {
            None => Ok(()),
            Some(engine) if engine.caught_up() => Ok(()),
            Some(engine) => Err(match engine.lag() {
                None => "the binlog stream is down".to_string(),
                Some(lag) => format!("binlog lag {lag:?} over [consistency] max_lag {:?}", engine.settings.max_lag),
            }),
        }
    }

    async fn render_metrics(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        self.metrics.render(&mut out);
        if let Some(engine) = self.engine.get() {
            engine.render_metrics(&mut out);
        }
        use std::fmt::Write;
        let _ = writeln!(out, "# HELP freshet_upstream_ready 1 if the last readiness check reached the upstream.");
        let _ = writeln!(out, "# TYPE freshet_upstream_ready gauge");
        let _ = writeln!(out, "freshet_upstream_ready {}", u8::from(self.health.last().await.unwrap_or(false)));
        let _ = writeln!(out, "# HELP freshet_uptime_seconds Seconds since freshet started.");
        let _ = writeln!(out, "# TYPE freshet_uptime_seconds gauge");
        let _ = writeln!(out, "freshet_uptime_seconds {}", self.started.elapsed().as_secs());
        out
    }
}

/// The request line, once the whole head has arrived; None if the head is too large or the
/// connection closed early.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() + n > MAX_HEAD {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    Ok(std::str::from_utf8(line).ok().map(|l| l.trim_end().to_string()))
}

async fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &str, head_only: bool) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if !head_only {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
}
