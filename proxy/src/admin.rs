//! The admin HTTP endpoint (`[listen] admin`), shaped for Kubernetes' three probes:
//!
//! - `GET /startup` (startupProbe) 200 once freshet is listening with a valid config and the
//!   upstream answers a login and ping; with `?caches` also once every `[[cache]]` is built
//!   and the binlog is caught up to within `[consistency] max_lag` (for users who want the
//!   application to start only with warm, fresh caches). Else 503 with the reason.
//! - `GET /live` (livenessProbe) 200 unless the process is stuck: the runtime's heartbeat (a
//!   timer task) has not run for [`STUCK_AFTER`]. Nothing outside the process (upstream down,
//!   lag) fails it: restarting freshet would not fix those and would cut the application's
//!   connections.
//! - `GET /ready` (readinessProbe) 200 while freshet takes new connections; 503 from the
//!   moment a shutdown begins (so that traffic moves away while sessions drain) and while all
//!   `[limits] max_connections` are in use. Replication lag and an unreachable upstream do
//!   not fail it: freshet relays every query then, and taking the pod out of service would
//!   stop an application that still works (or fails on its own, visibly).
//! - `GET /health` 200 when the upstream is reachable and, with caches, the binlog is caught
//!   up within `[consistency] max_lag`; else 503 with the reason. For people and alerts, not
//!   for a probe.
//! - `GET /metrics` Prometheus text format, every freshet metric.
//!
//! A deliberately small HTTP/1.1 server: one request per connection, GET and HEAD only, a
//! bounded request head read under a timeout, the response written under another. It serves probes and scrapers on a private port,
//! not browsers, and keeps an HTTP framework out of the dependency tree.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use crate::health::Health;
use crate::metrics::{family, sample};
use crate::session::Shared;

const MAX_HEAD: usize = 8 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a response may take to write: a client that asks and does not read (a
/// /metrics of thousands of caches is megabytes) holds its connection and the body until then.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the liveness heartbeat ticks.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// A heartbeat older than this means the runtime is stuck (blocked workers, a busy loop):
/// /live fails. Far above any scheduling delay of a loaded but working process.
pub const STUCK_AFTER: Duration = Duration::from_secs(10);

pub struct Admin {
    shared: Arc<Shared>,
    health: Arc<Health>,
    started: Instant,
    /// Milliseconds from `started` to the heartbeat task's last tick.
    heartbeat: AtomicU64,
    shutting_down: AtomicBool,
}

impl Admin {
    pub fn new(shared: Arc<Shared>, health: Arc<Health>) -> Self {
        Admin { shared, health, started: Instant::now(), heartbeat: AtomicU64::new(0), shutting_down: AtomicBool::new(false) }
    }

    /// From now on /ready answers 503.
    pub fn shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    /// Serves the endpoint, and ticks the liveness heartbeat, until aborted.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        let beating = self.clone();
        let heartbeat = tokio::spawn(async move {
            let mut tick = tokio::time::interval(HEARTBEAT);
            loop {
                tick.tick().await;
                let now = u64::try_from(beating.started.elapsed().as_millis()).unwrap_or(u64::MAX);
                beating.heartbeat.store(now, Ordering::Relaxed);
            }
        });
        // Aborted with this task: the heartbeat must not outlive the endpoint.
        let _guard = AbortOnDrop(heartbeat);
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
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let head_only = method == "HEAD";
        if method != "GET" && !head_only {
            return respond(&mut stream, 405, "text/plain", "only GET and HEAD\n", head_only).await;
        }
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if path == "/metrics" {
            let body = self.render_metrics().await;
            return respond(&mut stream, 200, "text/plain; version=0.0.4; charset=utf-8", &body, head_only).await;
        }
        let wait_for_caches = query.split('&').any(|p| p == "caches" || p.starts_with("caches="));
        let (verdict, word) = match path {
            "/startup" => (self.startup(wait_for_caches).await, "started"),
            "/live" => (self.live(), "live"),
            "/ready" => (self.ready(), "ready"),
            "/health" => (self.healthy().await, "healthy"),
            _ => {
                let body = "not found; try /startup, /live, /ready, /health or /metrics\n";
                return respond(&mut stream, 404, "text/plain", body, head_only).await;
            }
        };
        match verdict {
            Ok(()) => respond(&mut stream, 200, "text/plain", &format!("{word}\n"), head_only).await,
            Err(reason) => respond(&mut stream, 503, "text/plain", &format!("not {word}: {reason}\n"), head_only).await,
        }
    }

    /// Listening (this is answering), config valid (it was loaded), upstream reachable; with
    /// `caches`, every cache built and the binlog caught up.
    async fn startup(&self, caches: bool) -> Result<(), String> {
        self.health.check().await?;
        if !caches {
            return Ok(());
        }
        let Some(engine) = self.shared.engine.get() else {
            return if self.shared.config.caches.is_empty() { Ok(()) } else { Err("the cache engine is not started".into()) };
        };
        if let Some((cache, reason)) = engine.caches().iter().find_map(|c| c.live().err().map(|r| (c.name.clone(), r))) {
            return Err(format!("cache {cache} is not available: {reason}"));
        }
        self.binlog_ready()
    }

    fn live(&self) -> Result<(), String> {
        let beat = Duration::from_millis(self.heartbeat.load(Ordering::Relaxed));
        let silent = self.started.elapsed().saturating_sub(beat);
        if silent > STUCK_AFTER {
            return Err(format!("stuck: the runtime's heartbeat has not run for {}s", silent.as_secs()));
        }
        Ok(())
    }

    fn ready(&self) -> Result<(), String> {
        if self.shutting_down.load(Ordering::Relaxed) {
            return Err("shutting down".into());
        }
        let max = self.shared.config.limits.max_connections;
        if self.shared.metrics.connections_open.get() >= i64::from(max) {
            return Err(format!("all [limits] max_connections = {max} are in use"));
        }
        Ok(())
    }

    async fn healthy(&self) -> Result<(), String> {
        self.health.check().await?;
        self.binlog_ready()
    }

    /// With caches, Ok only once the binlog is caught up to within max_lag, and while the
    /// server's binlog settings are what freshet needs (an operator may change them while it
    /// runs: with `binlog_format = MIXED` every write empties every cache).
    fn binlog_ready(&self) -> Result<(), String> {
        let Some(engine) = self.shared.engine.get() else { return Ok(()) };
        let settings = engine.lag_handle().get().settings;
        if !settings.is_empty() {
            return Err(format!("the server's binlog settings changed since start-up: {}", settings.join("; ")));
        }
        let fresh = engine.freshness();
        if fresh.caught_up {
            return Ok(());
        }
        Err(match fresh.lag {
            Some(lag) => format!("binlog lag {lag:?} over [consistency] max_lag {:?}", engine.settings.max_lag),
            None if !fresh.stream_up => "the binlog stream is down".to_string(),
            None if !fresh.server_polled => "the server's binlog position could not be read lately".to_string(),
            // A restart resumed at a stored position, behind what the server wrote meanwhile.
            None => "the binlog stream is catching up with writes whose age is unknown".to_string(),
        })
    }

    async fn render_metrics(&self) -> String {
        // Checked now (at most one ping a second, as /health): the last probe's answer may be
        // from start-up, Kubernetes' probes asking /live and /ready only. Checked first: the
        // check may wait for a frozen server up to `connect_timeout`, and gauges read before it
        // would be that old when sent (an audit: `stream_up 1` and lag 0, 5 s into a freeze).
        let ready = self.health.check().await.is_ok();
        let mut out = String::with_capacity(8 * 1024);
        self.shared.metrics.render(&mut out);
        if let Some(engine) = self.shared.engine.get() {
            engine.render_metrics(&mut out);
        }
        family(&mut out, "freshet_upstream_ready", "gauge", "1 if the upstream answered a login and a ping within the last second.");
        sample(&mut out, "freshet_upstream_ready", &[], u8::from(ready));
        family(&mut out, "freshet_shutting_down", "gauge", "1 once a shutdown signal has been received.");
        sample(&mut out, "freshet_shutting_down", &[], u8::from(self.shutting_down.load(Ordering::Relaxed)));
        family(&mut out, "freshet_uptime_seconds", "gauge", "Seconds since freshet started.");
        sample(&mut out, "freshet_uptime_seconds", &[], self.started.elapsed().as_secs());
        out
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        if !head_only {
            stream.write_all(body.as_bytes()).await?;
        }
        stream.shutdown().await
    };
    match tokio::time::timeout(WRITE_TIMEOUT, write).await {
        Ok(written) => written,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that asks for /metrics and never reads held its connection, and the rendered
    /// body, for as long as it stayed (an audit: 300 such clients of a 2.7 MB body, 317
    /// descriptors and +335 MB for a minute and more). A response is written within a bound.
    #[tokio::test]
    async fn a_response_nobody_reads_is_given_up() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let body = "x".repeat(64 << 20);
        let written = tokio::time::timeout(Duration::from_secs(30), respond(&mut server, 200, "text/plain", &body, false)).await;
        assert!(written.is_ok(), "the response waited for a client that does not read");
        drop(client);
    }
}
