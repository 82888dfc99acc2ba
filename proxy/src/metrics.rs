//! The proxy's Prometheus metrics (prefix `freshet_proxy_`), rendered by the admin endpoint.
//!
//! Plain atomics in fixed arrays indexed by enums: recording is one relaxed atomic add, never
//! a lock or an allocation, and label values come from closed sets (command names, error
//! kinds), never from query text.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

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
    /// The connection broke in the middle of a session.
    Lost,
}

impl UpstreamFailure {
    const ALL: [UpstreamFailure; 4] = [Self::Connect, Self::Tls, Self::Protocol, Self::Lost];

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
}

impl SessionEnd {
    const ALL: [SessionEnd; 7] = [
        Self::Quit,
        Self::ClientGone,
        Self::ClientProtocol,
        Self::PacketTooLarge,
        Self::AuthFailed,
        Self::Upstream,
        Self::UpstreamClosed,
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

pub fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

impl ProxyMetrics {
    /// A command relayed and how long its reply took to relay completely.
    pub fn command(&self, command: Command, elapsed: Duration) {
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
        let _ = writeln!(out, "freshet_proxy_client_connections_open {}", self.connections_open.get());
        family(out, "freshet_proxy_client_connections_total", "counter", "Client connections accepted.");
        let _ = writeln!(out, "freshet_proxy_client_connections_total {}", self.connections_total.get());

        let _ = writeln!(out, "# HELP freshet_proxy_commands_total Commands received from clients, by type.");
        let _ = writeln!(out, "# TYPE freshet_proxy_commands_total counter");
        for c in Command::ALL {
            let n = self.commands[c.index()].get();
            if n > 0 {
                let _ = writeln!(out, "freshet_proxy_commands_total{{command=\"{}\"}} {n}", c.label());
            }
        }
        let _ = writeln!(out, "# HELP freshet_proxy_relay_duration_seconds From a command's arrival to the end of its relayed reply.");
        let _ = writeln!(out, "# TYPE freshet_proxy_relay_duration_seconds histogram");
        for c in Command::ALL {
            if self.commands[c.index()].get() > 0 {
                self.latency[c.index()].render(out, "freshet_proxy_relay_duration_seconds", &format!("command=\"{}\"", c.label()));
            }
        }
        let _ = writeln!(out, "# HELP freshet_proxy_bytes_total Bytes on the wire, by peer and direction.");
        let _ = writeln!(out, "# TYPE freshet_proxy_bytes_total counter");
        for (peer, dir, c) in [
            ("client", "in", &self.bytes_from_clients),
            ("client", "out", &self.bytes_to_clients),
            ("upstream", "in", &self.bytes_from_upstream),
            ("upstream", "out", &self.bytes_to_upstream),
        ] {
            let _ = writeln!(out, "freshet_proxy_bytes_total{{peer=\"{peer}\",direction=\"{dir}\"}} {}", c.get());
        }
        let _ = writeln!(out, "# HELP freshet_proxy_upstream_failures_total Failures of freshet's connections to the upstream, by kind.");
        let _ = writeln!(out, "# TYPE freshet_proxy_upstream_failures_total counter");
        for kind in UpstreamFailure::ALL {
            let _ = writeln!(out, "freshet_proxy_upstream_failures_total{{kind=\"{}\"}} {}", kind.label(), self.upstream_failures[kind as usize].get());
        }
        let _ = writeln!(out, "# HELP freshet_proxy_server_errors_total ERR packets the upstream sent to clients.");
        let _ = writeln!(out, "# TYPE freshet_proxy_server_errors_total counter");
        let _ = writeln!(out, "freshet_proxy_server_errors_total {}", self.server_errors.get());
        let _ = writeln!(out, "# HELP freshet_proxy_sessions_ended_total Client sessions ended, by reason.");
        let _ = writeln!(out, "# TYPE freshet_proxy_sessions_ended_total counter");
        for end in SessionEnd::ALL {
            let _ = writeln!(out, "freshet_proxy_sessions_ended_total{{reason=\"{}\"}} {}", end.label(), self.sessions_ended[end as usize].get());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = ProxyMetrics::default();
        m.connections_total.inc();
        m.command(Command::Query, Duration::from_micros(300));
        m.command(Command::Query, Duration::from_millis(20));
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
