//! freshet's admin statements on the MySQL port: `SHOW CACHES`, `SHOW PROXIED QUERIES`,
//! `EXPLAIN CACHE <select>`, `SHOW FRESHET STATUS`, `CREATE CACHE [name] FROM <select>`,
//! `DROP CACHE name`. Recognized by [`crate::admin_sql`], answered here with result sets
//! freshet builds ([`crate::protocol::synth`]); never relayed.
//!
//! Only the accounts listed in `[admin] users` may run them, as the server identifies the
//! session (`CURRENT_USER()`, asked on the session's own connection by the probe, and asked
//! again after COM_CHANGE_USER): an entry `user@host` names one account exactly as the
//! server stores it, a bare `user` that user name at any host; an anonymous account (empty
//! user name) is never an admin, whatever name the client logged in with. Others get
//! ER_SPECIFIC_ACCESS_DENIED_ERROR, as for a missing privilege. Runtime caches (CREATE CACHE)
//! last until freshet restarts.

use std::sync::Arc;

use bytes::Bytes;

use crate::admin_sql::{self, AdminStatement};
use crate::cache::route::Verdict;
use crate::cache::{Engine, RelayReason};
use crate::protocol::response::{ErrPacket, ok_packet};
use crate::protocol::synth::SynthResult;
use crate::protocol::{Capabilities, StatusFlags};

use super::command::Flow;
use super::{Session, SessionError};

/// ER_SPECIFIC_ACCESS_DENIED_ERROR.
const ACCESS_DENIED: u16 = 1227;
/// ER_PARSE_ERROR.
const PARSE_ERROR: u16 = 1064;
/// ER_UNKNOWN_ERROR: what freshet reports when an admin statement cannot be carried out.
const ADMIN_FAILED: u16 = 1105;

/// How many shapes SHOW PROXIED QUERIES lists without LIMIT.
const PROXIED_DEFAULT: u64 = 20;

enum Reply {
    Rows(SynthResult),
    Done,
    Error(ErrPacket),
}

impl Session {
    /// Answers an admin statement; None if the query is not one.
    pub(super) async fn admin_statement(&mut self, payload: &Bytes, last_seq: u8) -> Result<Option<Flow>, SessionError> {
        let Some(parsed) = admin_sql::parse(&payload[1..]) else { return Ok(None) };
        if self.state.stale || self.identity.is_none() {
            self.probe(None).await?;
        }
        let account =
            self.identity.as_ref().map_or_else(|| "an account the server did not name".to_string(), |i| format!("{}@{}", i.user, i.host));
        let allowed = self.identity.as_ref().is_some_and(|i| is_admin(&self.shared.config.admin.users, &i.user, &i.host));
        let reply = if !allowed {
            Reply::Error(ErrPacket::new(
                ACCESS_DENIED,
                "42000",
                format!("Access denied; freshet's admin statements are for the accounts in [admin] users (not {account})"),
            ))
        } else {
            match parsed {
                Err(message) => Reply::Error(ErrPacket::new(PARSE_ERROR, "42000", message)),
                Ok(statement) => self.run_admin(statement).await,
            }
        };
        let status = StatusFlags(self.status.0 & StatusFlags::SESSION);
        let mut seq = last_seq.wrapping_add(1);
        match reply {
            Reply::Rows(result) => {
                let (deprecate_eof, extended) =
                    (self.caps.has(Capabilities::DEPRECATE_EOF), self.caps.has(Capabilities::MARIADB_EXTENDED_TYPE_INFO));
                for packet in result.packets_with(deprecate_eof, extended, status) {
                    seq = self.client.queue_packet(seq, &packet);
                }
            }
            Reply::Done => {
                self.client.queue_packet(seq, &ok_packet(status));
            }
            Reply::Error(err) => {
                self.client.queue_packet(seq, &err.encode());
            }
        }
        self.flush_client().await?;
        Ok(Some(Flow::Continue))
    }

    async fn run_admin(&mut self, statement: AdminStatement) -> Reply {
        let failed = |message: String| Reply::Error(ErrPacket::new(ADMIN_FAILED, "HY000", message));
        let engine = self.shared.engine.get().cloned();
        match statement {
            AdminStatement::ShowCaches => Reply::Rows(show_caches(engine.as_deref())),
            AdminStatement::ShowProxiedQueries { limit } => {
                Reply::Rows(proxied_queries(engine.as_deref(), limit.unwrap_or(PROXIED_DEFAULT)))
            }
            AdminStatement::ShowFreshetStatus => Reply::Rows(self.status_rows(engine.as_deref())),
            AdminStatement::ExplainCache { select } => match self.engine_or_start().await {
                Err(e) => failed(e),
                Ok(engine) => match engine.explain(select).await {
                    Ok(lines) => Reply::Rows(SynthResult {
                        columns: admin_sql::explain_columns(),
                        rows: lines.into_iter().map(|(s, d)| vec![Some(s), Some(d)]).collect(),
                    }),
                    Err(reason) => failed(format!("freshet cannot cache this query: {reason}")),
                },
            },
            AdminStatement::CreateCache { name, select } => match self.engine_or_start().await {
                Err(e) => failed(e),
                Ok(engine) => match engine.create(name, select).await {
                    Ok(_) => Reply::Done,
                    Err(reason) => failed(format!("freshet cannot cache this query: {reason}")),
                },
            },
            AdminStatement::DropCache { name } => match engine {
                None => failed(format!("no cache named {name}")),
                Some(engine) => match engine.drop_cache(&name).await {
                    Ok(()) => Reply::Done,
                    Err(reason) => failed(reason),
                },
            },
        }
    }

    /// The engine, started now if no `[[cache]]` started it with the server.
    async fn engine_or_start(&self) -> Result<Arc<Engine>, String> {
        let config = self.shared.config.clone();
        self.shared.engine.get_or_try_init(|| async move { Engine::start(&config).await }).await.cloned().map_err(|e| format!("{e:#}"))
    }

    fn status_rows(&self, engine: Option<&Engine>) -> SynthResult {
        let config = &self.shared.config;
        let mut rows: Vec<(&str, String)> = vec![
            ("version", env!("CARGO_PKG_VERSION").to_string()),
            ("upstream", config.upstream.url.address()),
            ("memory_limit_bytes", config.memory.limit.bytes().to_string()),
            ("connections_open", self.shared.metrics.connections_open.get().to_string()),
        ];
        match engine {
            None => rows.push(("cache_engine", "not started (no [[cache]] configured; CREATE CACHE starts it)".into())),
            Some(e) => {
                let lag = e.lag_handle().get();
                let fresh = e.freshness();
                rows.extend([
                    ("cache_engine", "running".to_string()),
                    ("uptime_seconds", e.started.elapsed().as_secs().to_string()),
                    ("database", e.settings.database.clone()),
                    ("replica_server_id", e.settings.server_id.to_string()),
                    ("binlog_position", lag.delivered.as_ref().map(|p| p.to_string()).unwrap_or_default()),
                    // What the views have applied and readers see; `binlog_position` is what
                    // the stream has delivered to them, which may be ahead.
                    (
                        "binlog_applied_position",
                        // Empty until the writer has applied a step (its position 0 names no file).
                        lag.delivered
                            .as_ref()
                            .filter(|_| e.gate.applied().0 > 0)
                            .and_then(|d| freshet_cdc::BinlogPos::from_position(e.gate.applied(), &d.file).ok())
                            .map(|p| p.to_string())
                            .unwrap_or_default(),
                    ),
                    ("binlog_server_position", lag.server.as_ref().map(|p| p.to_string()).unwrap_or_default()),
                    ("binlog_stream", if fresh.stream_up { "up" } else { "down" }.to_string()),
                    (
                        "upstream_settings",
                        match lag.settings_known() {
                            None => "unknown: not read lately".to_string(),
                            Some([]) => "ok".to_string(),
                            Some(problems) => problems.join("; "),
                        },
                    ),
                    ("lag_seconds", fresh.lag.map_or_else(|| "unknown".to_string(), |l| format!("{:.3}", l.as_secs_f64()))),
                    ("max_lag_seconds", format!("{:.3}", e.settings.max_lag.as_secs_f64())),
                    ("caught_up", if fresh.caught_up { "yes" } else { "no" }.to_string()),
                    ("transactions_applied", e.counters.batches.get().to_string()),
                    ("memory_used_bytes", e.memory_used().to_string()),
                    ("caches", e.caches().len().to_string()),
                    ("cached_reads", e.counters.hits.get().to_string()),
                    ("relayed_reads", e.counters.relayed.iter().map(|c| c.get()).sum::<u64>().to_string()),
                    ("fills_started", e.counters.fills_started.get().to_string()),
                    ("fills_failed", e.counters.fills_failed.get().to_string()),
                    ("query_shapes_known", e.registry.verdicts.len().to_string()),
                    ("privilege_resets", e.access.resets.get().to_string()),
                    ("unlogged_writes", e.counters.unlogged_writes.get().to_string()),
                    ("untrusted_transactions", e.counters.untrusted.get().to_string()),
                    ("statement_writes_spared", lag.statement_writes_spared.to_string()),
                    ("cascaded_evictions", e.counters.cascades.get().to_string()),
                    ("column_captures_refused", e.counters.captures_refused.get().to_string()),
                ]);
                if let Some(replica) = e.replica.get() {
                    rows.extend(replica.status_rows());
                }
                if let Some(warm) = &e.warm {
                    rows.extend(warm.status_rows());
                }
            }
        }
        SynthResult {
            columns: admin_sql::status_columns(),
            rows: rows.into_iter().map(|(k, v)| vec![Some(k.to_string()), Some(v)]).collect(),
        }
    }
}

/// Whether the account `user@host` (as the server matched it) is one of `[admin] users`.
fn is_admin(admins: &[String], user: &str, host: &str) -> bool {
    if user.is_empty() {
        return false;
    }
    admins.iter().any(|entry| match entry.split_once('@') {
        Some((u, h)) => u == user && h == host,
        None => entry == user,
    })
}

fn show_caches(engine: Option<&Engine>) -> SynthResult {
    let mut rows = Vec::new();
    for cache in engine.map(Engine::caches).unwrap_or_default() {
        let s = cache.stats();
        let ratio = cache.reads.hit_ratio().map(|r| format!("{r:.4}"));
        let micros = |q: f64| cache.hit_latency.quantile(q).map(|d| format!("{:.1}", d.as_secs_f64() * 1e6));
        let class = match cache.live() {
            Ok(live) => live.cost_class.to_string(),
            Err(reason) => format!("unavailable: {reason}"),
        };
        rows.push(vec![
            Some(cache.name.clone()),
            Some(cache.sql.clone()),
            Some(s.keys.to_string()),
            Some(s.bytes.to_string()),
            Some(cache.reads.hit.get().to_string()),
            Some(cache.reads.missed.get().to_string()),
            ratio,
            micros(0.5),
            micros(0.99),
            Some(s.fills.to_string()),
            Some(s.evictions.to_string()),
            Some(class),
        ]);
    }
    SynthResult { columns: admin_sql::show_caches_columns(), rows }
}

fn proxied_queries(engine: Option<&Engine>, limit: u64) -> SynthResult {
    let mut rows = Vec::new();
    if let Some(engine) = engine {
        let n = usize::try_from(limit).unwrap_or(usize::MAX);
        for entry in engine.registry.verdicts.top(n).into_iter().filter(|e| e.count() > 0) {
            let (cacheable, mut reason) = match &entry.verdict {
                // The compiler's reason quotes what it refused as it read it, literals and all.
                Verdict::Relay { reason } => (
                    if crate::cache::matcher::is_no_cache(&entry.verdict) { "yes" } else { "no" },
                    crate::matching::reason_shown(reason, &entry.normalized),
                ),
                Verdict::Cache(matches) => {
                    let names: Vec<String> = matches.iter().filter_map(|m| engine.by_id(m.id)).map(|c| c.name.clone()).collect();
                    let name = names.join(", ");
                    let last = entry.last_relay().and_then(|i| RelayReason::ALL.get(usize::from(i))).map_or("none yet", |r| r.label());
                    ("yes", format!("matches cache {name}; last relayed for: {last} (all reasons: freshet_proxy_relayed_reads_total)"))
                }
            };
            if entry.is_stale() {
                reason.push_str(" [a cache was created since: taken again at its next read]");
            }
            rows.push(vec![
                // Never the normalized text itself: it keeps some literals (select lists,
                // statements other than SELECT), which may be other users' secrets.
                Some(crate::matching::shown(&entry.normalized)),
                Some(entry.count().to_string()),
                Some(format!("{:.3}", entry.total_time().as_secs_f64() * 1e3)),
                Some(cacheable.to_string()),
                Some(reason),
            ]);
        }
    }
    SynthResult { columns: admin_sql::proxied_queries_columns(), rows }
}

#[cfg(test)]
mod tests {
    use super::is_admin;

    #[test]
    fn admins_are_accounts_as_the_server_names_them() {
        let admins = vec!["ops@10.1.2.3".to_string(), "root".to_string()];
        assert!(is_admin(&admins, "ops", "10.1.2.3"));
        assert!(!is_admin(&admins, "ops", "127.0.0.1"));
        assert!(is_admin(&admins, "root", "localhost"));
        assert!(is_admin(&admins, "root", "%"));
        assert!(!is_admin(&admins, "", "localhost"));
        assert!(!is_admin(&["".to_string()], "", "localhost"));
    }
}
