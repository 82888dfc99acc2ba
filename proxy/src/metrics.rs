//! The proxy's Prometheus metrics (prefix `freshet_proxy_`), rendered by the admin endpoint.
//!
//! Plain atomics in fixed arrays indexed by enums: recording is one relaxed atomic add, never
//! a lock or an allocation, and label values come from closed sets (command names, error
//! kinds), never from query text. Every family is written by [`family`] and [`sample`] (and
//! [`Histogram::render`]), here, by the engine (`cache::metrics`) and by the admin endpoint;
//! why not the prometheus-client crate is in docs/decisions.md.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::protocol::Command;

#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    pub fn inc(&self) {
        self.add(1);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

#[derive(Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    pub fn inc(&self) {
        self.0.fetch_add(1, Relaxed);
    }

    pub fn dec(&self) {
        self.0.fetch_sub(1, Relaxed);
    }

    pub fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

/// Upper bounds of the latency buckets, in seconds: 50µs to 10s.
const LATENCY_BUCKETS: [f64; 16] =
    [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: std::array::from_fn(|_| AtomicU64::new(0)), count: AtomicU64::new(0), sum_nanos: AtomicU64::new(0) }
    }
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_nanos.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.buckets) {
            cumulative += bucket.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum_nanos.load(Relaxed) as f64 / 1e9);
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// Why freshet's side of the upstream failed (not errors the server reports to clients).
#[derive(Clone, Copy, Debug)]
pub enum UpstreamFailure {
    /// TCP connect failed or timed out.
    Connect,
    /// TLS was required but not offered, or its handshake failed.
    Tls,
    /// The server sent something freshet could not parse.
    Protocol,
    /// The connection broke or the server sent no complete reply in the middle of a session.
    Lost,
}

impl UpstreamFailure {
    pub const ALL: [UpstreamFailure; 4] = [Self::Connect, Self::Tls, Self::Protocol, Self::Lost];

    fn label(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Tls => "tls",
            Self::Protocol => "protocol",
            Self::Lost => "lost",
        }
    }
}

/// How a client session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionEnd {
    /// COM_QUIT.
    Quit,
    /// The client closed the connection without COM_QUIT (or while a reply was being sent).
    ClientGone,
    /// The client broke the protocol: malformed or out-of-order packet, unknown command.
    ClientProtocol,
    /// The client sent a packet over `[limits] max_packet`.
    PacketTooLarge,
    /// Authentication failed at the upstream.
    AuthFailed,
    /// The upstream failed or broke the connection in the middle of a command.
    Upstream,
    /// The upstream closed the connection while it was idle (wait_timeout, KILL, shutdown).
    UpstreamClosed,
    /// freshet shut down while the session waited for a command.
    Shutdown,
}

impl SessionEnd {
    const ALL: [SessionEnd; 8] = [
        Self::Quit,
        Self::ClientGone,
        Self::ClientProtocol,
        Self::PacketTooLarge,
        Self::AuthFailed,
        Self::Upstream,
        Self::UpstreamClosed,
        Self::Shutdown,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Self::Quit => "quit",
            Self::ClientGone => "client_gone",
            Self::ClientProtocol => "client_protocol",
            Self::PacketTooLarge => "packet_too_large",
            Self::AuthFailed => "auth_failed",
            Self::Upstream => "upstream",
            Self::UpstreamClosed => "upstream_closed",
            Self::Shutdown => "shutdown",
        }
    }
}

pub struct ProxyMetrics {
    pub connections_open: Gauge,
    pub connections_total: Counter,
    commands: [Counter; Command::ALL.len()],
    latency: [Histogram; Command::ALL.len()],
    pub bytes_from_clients: Counter,
    pub bytes_to_clients: Counter,
    pub bytes_from_upstream: Counter,
    pub bytes_to_upstream: Counter,
    /// ERR packets the upstream sent to clients (query errors, denied access, ...).
    pub server_errors: Counter,
    upstream_failures: [Counter; UpstreamFailure::ALL.len()],
    sessions_ended: [Counter; SessionEnd::ALL.len()],
}

impl Default for ProxyMetrics {
    fn default() -> Self {
        ProxyMetrics {
            connections_open: Gauge::default(),
            connections_total: Counter::default(),
            commands: std::array::from_fn(|_| Counter::default()),
            latency: std::array::from_fn(|_| Histogram::default()),
            bytes_from_clients: Counter::default(),
            bytes_to_clients: Counter::default(),
            bytes_from_upstream: Counter::default(),
            bytes_to_upstream: Counter::default(),
            server_errors: Counter::default(),
            upstream_failures: Default::default(),
            sessions_ended: Default::default(),
        }
    }
}

/// Writes a metric family's `# HELP` and `# TYPE` lines. Every family freshet exposes is
/// written through this and [`sample`], so that the exposition format lives in one place.
pub fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Writes one sample line. Label values come from closed sets or validated names (letters,
/// digits, underscores), so they never need escaping.
pub fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (label, value)) in labels.iter().enumerate() {
            let _ = write!(out, "{}{label}=\"{value}\"", if i == 0 { "" } else { "," });
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

impl ProxyMetrics {
    /// A command read at `started` has its reply written completely. One answered from a cache
    /// (`cached`) is counted but not timed here (the clock is not read for it): the cache's own
    /// histogram times it (`freshet_proxy_cache_hit_duration_seconds`), so a hit is in one
    /// histogram, not two.
    pub fn command(&self, command: Command, started: Instant, cached: bool) {
        if cached {
            self.commands[command.index()].inc();
        } else {
            self.relayed_command(command, started.elapsed());
        }
    }

    fn relayed_command(&self, command: Command, elapsed: Duration) {
        self.commands[command.index()].inc();
        self.latency[command.index()].observe(elapsed);
    }

    pub fn commands_relayed(&self, command: Command) -> u64 {
        self.commands[command.index()].get()
    }

    pub fn upstream_failure(&self, kind: UpstreamFailure) {
        self.upstream_failures[kind as usize].inc();
    }

    pub fn session_ended(&self, end: SessionEnd) {
        self.sessions_ended[end as usize].inc();
    }

    pub fn sessions_ended(&self, end: SessionEnd) -> u64 {
        self.sessions_ended[end as usize].get()
    }

    /// Appends the Prometheus text exposition of every metric to `out`.
    pub fn render(&self, out: &mut String) {
        family(out, "freshet_proxy_client_connections_open", "gauge", "Client connections open now.");
        sample(out, "freshet_proxy_client_connections_open", &[], self.connections_open.get());
        family(out, "freshet_proxy_client_connections_total", "counter", "Client connections accepted.");
        sample(out, "freshet_proxy_client_connections_total", &[], self.connections_total.get());
        family(
            out,
            "freshet_proxy_commands_total",
            "counter",
            "Commands received from clients, by type (relayed or answered by freshet; a byte no command has, or none, counts as sleep, which the server answers alike).",
        );
        for c in Command::ALL {
            let n = self.commands[c.index()].get();
            if n > 0 {
                sample(out, "freshet_proxy_commands_total", &[("command", c.label())], n);
            }
        }
        let help = "From a command's arrival to the end of its reply, relayed or answered by freshet's admin statements; reads answered from a cache are timed in freshet_proxy_cache_hit_duration_seconds instead.";
        family(out, "freshet_proxy_relay_duration_seconds", "histogram", help);
        for c in Command::ALL {
            if self.commands[c.index()].get() > 0 {
                self.latency[c.index()].render(out, "freshet_proxy_relay_duration_seconds", &format!("command=\"{}\"", c.label()));
            }
        }
        family(out, "freshet_proxy_bytes_total", "counter", "Bytes on the wire, by peer and direction.");
        for (peer, direction, c) in [
            ("client", "in", &self.bytes_from_clients),
            ("client", "out", &self.bytes_to_clients),
            ("upstream", "in", &self.bytes_from_upstream),
            ("upstream", "out", &self.bytes_to_upstream),
        ] {
            sample(out, "freshet_proxy_bytes_total", &[("peer", peer), ("direction", direction)], c.get());
        }
        family(
            out,
            "freshet_proxy_upstream_failures_total",
            "counter",
            "Client sessions ended by a failure of freshet's connection to the upstream, by kind.",
        );
        for kind in UpstreamFailure::ALL {
            sample(out, "freshet_proxy_upstream_failures_total", &[("kind", kind.label())], self.upstream_failures[kind as usize].get());
        }
        family(out, "freshet_proxy_server_errors_total", "counter", "ERR packets the upstream sent to clients.");
        sample(out, "freshet_proxy_server_errors_total", &[], self.server_errors.get());
        family(out, "freshet_proxy_sessions_ended_total", "counter", "Client sessions ended, by reason.");
        for end in SessionEnd::ALL {
            sample(out, "freshet_proxy_sessions_ended_total", &[("reason", end.label())], self.sessions_ended[end as usize].get());
        }
    }

    pub fn upstream_failures(&self, kind: UpstreamFailure) -> u64 {
        self.upstream_failures[kind as usize].get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = ProxyMetrics::default();
        m.connections_total.inc();
        m.relayed_command(Command::Query, Duration::from_micros(300));
        m.relayed_command(Command::Query, Duration::from_millis(20));
        m.session_ended(SessionEnd::Quit);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains("freshet_proxy_commands_total{command=\"query\"} 2\n"));
        assert!(out.contains("freshet_proxy_relay_duration_seconds_bucket{command=\"query\",le=\"0.0005\"} 1\n"));
        assert!(out.contains("freshet_proxy_relay_duration_seconds_bucket{command=\"query\",le=\"+Inf\"} 2\n"));
        assert!(out.contains("freshet_proxy_sessions_ended_total{reason=\"quit\"} 1\n"));
        assert!(!out.contains("command=\"ping\""));
    }
}
