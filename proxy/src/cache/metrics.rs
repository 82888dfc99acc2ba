//! The engine's Prometheus metrics: per cache (label `cache`, a configured name), relayed
//! reads by reason, replication and memory. Names follow the crate that owns the quantity:
//! `freshet_proxy_` for routing, `freshet_cdc_` for the binlog, `freshet_dataflow_` for views.

use crate::metrics::{family, sample};

use super::{Engine, ReadCounts, RelayReason};

/// A per-cache metric: name, type, help, and how to read it from the view's statistics.
type PerCache = (&'static str, &'static str, &'static str, fn(&freshet_dataflow::ViewStats) -> u64);

/// A per-cache read counter: name, help, and how to read it.
type PerRead = (&'static str, &'static str, fn(&ReadCounts) -> u64);

impl Engine {
    /// Appends the engine's metrics to `out`.
    pub fn render_metrics(&self, out: &mut String) {
        let caches = self.caches();
        let reads: &[PerRead] = &[
            ("freshet_proxy_cache_hits_total", "Reads answered from the cache's view at the first look.", |r| r.hit.get()),
            (
                "freshet_proxy_cache_misses_total",
                "Reads that found a hole (then answered after the fill, or relayed when it was late).",
                |r| r.missed.get(),
            ),
            (
                "freshet_proxy_cache_filled_reads_total",
                "Reads that found a hole and were answered from the view once the fill arrived.",
                |r| r.filled.get(),
            ),
        ];
        for (name, help, get) in reads {
            family(out, name, "counter", help);
            for c in &caches {
                sample(out, name, &[("cache", c.name.as_str())], get(&c.reads));
            }
        }
        let per_cache: &[PerCache] = &[
            ("freshet_proxy_cache_fills_total", "counter", "Partitions filled from the upstream.", |s| s.fills),
            ("freshet_proxy_cache_evictions_total", "counter", "Partitions evicted (memory budget, DDL, or replication gaps).", |s| {
                s.evictions
            }),
            (
                "freshet_proxy_cache_keys",
                "gauge",
                "Partitions (parameter values) held by the cache's view (caches that share one view each show all of it).",
                |s| s.keys,
            ),
            (
                "freshet_proxy_cache_bytes",
                "gauge",
                "Bytes held by the cache's view (caches that share one view each show all of it; freshet_dataflow_memory_bytes counts it once).",
                |s| s.bytes,
            ),
        ];
        let stats: Vec<_> = caches.iter().map(|c| (c.name.as_str(), c.stats(), c.live().is_ok())).collect();
        for (name, kind, help, get) in per_cache {
            family(out, name, kind, help);
            for (cache, s, _) in &stats {
                sample(out, name, &[("cache", cache)], get(s));
            }
        }
        family(out, "freshet_proxy_cache_available", "gauge", "1 if the cache's view is built and serving, 0 if its queries are relayed.");
        for (cache, _, up) in &stats {
            sample(out, "freshet_proxy_cache_available", &[("cache", cache)], u8::from(*up));
        }
        family(out, "freshet_proxy_cache_hit_duration_seconds", "histogram", "From a cached read's arrival to its answer being written.");
        for c in &caches {
            c.hit_histogram.render(out, "freshet_proxy_cache_hit_duration_seconds", &format!("cache=\"{}\"", c.name));
        }
        family(out, "freshet_proxy_cached_reads_total", "counter", "Reads answered from a view.");
        sample(out, "freshet_proxy_cached_reads_total", &[], self.counters.hits.get());
        family(out, "freshet_proxy_relayed_reads_total", "counter", "SELECTs relayed to the upstream, by reason.");
        for (i, reason) in RelayReason::ALL.iter().enumerate() {
            sample(out, "freshet_proxy_relayed_reads_total", &[("reason", reason.label())], self.counters.relayed[i].get());
        }
        family(
            out,
            "freshet_proxy_ryw_asked_total",
            "counter",
            "Cached reads after a write of their session that asked the server where the write is.",
        );
        sample(out, "freshet_proxy_ryw_asked_total", &[], self.ryw().asked.get());
        family(
            out,
            "freshet_proxy_ryw_waits_total",
            "counter",
            "Cached reads that waited for the views to apply their session's own write.",
        );
        sample(out, "freshet_proxy_ryw_waits_total", &[], self.ryw().waits.get());
        family(out, "freshet_proxy_fill_waits_total", "counter", "Reads that waited for a fill.");
        sample(out, "freshet_proxy_fill_waits_total", &[], self.counters.fill_waits.get());
        family(
            out,
            "freshet_proxy_unlogged_writes_total",
            "counter",
            "Evictions of every cache after writes of sessions with binlogging off (at the write, and again at the end of its transaction).",
        );
        sample(out, "freshet_proxy_unlogged_writes_total", &[], self.counters.unlogged_writes.get());
        family(
            out,
            "freshet_proxy_privilege_resets_total",
            "counter",
            "Times the binlog showed that privileges may have changed (what accounts may read was forgotten).",
        );
        sample(out, "freshet_proxy_privilege_resets_total", &[], self.access.resets.get());
        family(
            out,
            "freshet_proxy_column_captures_refused_total",
            "counter",
            "Captured column definitions not kept (not the cache's own tables and columns).",
        );
        sample(out, "freshet_proxy_column_captures_refused_total", &[], self.counters.captures_refused.get());

        let lag = self.lag_handle().get();
        let fresh = self.freshness();
        family(out, "freshet_cdc_stream_up", "gauge", "1 while the binlog stream is connected, verified and its position known.");
        sample(out, "freshet_cdc_stream_up", &[], u8::from(fresh.lag.is_some()));
        family(
            out,
            "freshet_cdc_lag_seconds",
            "gauge",
            "Replication lag: age of the oldest change on the server not yet applied to the caches (+Inf when unknown).",
        );
        sample(out, "freshet_cdc_lag_seconds", &[], fresh.lag.map_or_else(|| "+Inf".to_string(), |l| l.as_secs_f64().to_string()));
        family(
            out,
            "freshet_cdc_binlog_settings_ok",
            "gauge",
            "1 while the server's global binlog settings, read lately, are what freshet needs (SHOW FRESHET STATUS upstream_settings names the fix).",
        );
        sample(out, "freshet_cdc_binlog_settings_ok", &[], u8::from(lag.settings_known().is_some_and(<[String]>::is_empty)));
        family(out, "freshet_cdc_lag_bytes", "gauge", "Binlog bytes between the last delivered commit and the server's end.");
        sample(out, "freshet_cdc_lag_bytes", &[], lag.bytes_behind);
        family(out, "freshet_cdc_transactions_total", "counter", "Transactions applied from the binlog.");
        sample(out, "freshet_cdc_transactions_total", &[], self.counters.batches.get());
        family(
            out,
            "freshet_cdc_restarts_total",
            "counter",
            "Times the binlog stream was re-established at the server's position (every cache evicted).",
        );
        sample(out, "freshet_cdc_restarts_total", &[], self.counters.restarts.get());
        family(
            out,
            "freshet_cdc_untrusted_total",
            "counter",
            "Transactions the stream could not follow (written as statements, an XA commit whose prepare was not read, oversized), every cache evicted.",
        );
        sample(out, "freshet_cdc_untrusted_total", &[], self.counters.untrusted.get());
        family(
            out,
            "freshet_cdc_statement_writes_spared_total",
            "counter",
            "Writes of other databases logged as statements that nothing of the server's carries into the cached database: not untrusted.",
        );
        sample(out, "freshet_cdc_statement_writes_spared_total", &[], lag.statement_writes_spared);
        family(
            out,
            "freshet_cdc_cascaded_total",
            "counter",
            "Tables whose rows a foreign key's action changed with no row event, their views evicted, per transaction.",
        );
        sample(out, "freshet_cdc_cascaded_total", &[], self.counters.cascades.get());
        family(out, "freshet_cdc_applied_position", "gauge", "Applied binlog position: file sequence * 2^32 + offset.");
        sample(out, "freshet_cdc_applied_position", &[], self.gate.applied().0);

        family(out, "freshet_dataflow_memory_bytes", "gauge", "Bytes held by all cached views.");
        sample(out, "freshet_dataflow_memory_bytes", &[], self.memory_used());
        family(out, "freshet_dataflow_memory_limit_bytes", "gauge", "[memory] limit.");
        sample(out, "freshet_dataflow_memory_limit_bytes", &[], self.settings.memory_limit);
        family(out, "freshet_dataflow_fills_started_total", "counter", "Fill requests sent to the upstream.");
        sample(out, "freshet_dataflow_fills_started_total", &[], self.counters.fills_started.get());
        family(out, "freshet_dataflow_fills_failed_total", "counter", "Fill requests that failed or timed out (their reads were relayed).");
        sample(out, "freshet_dataflow_fills_failed_total", &[], self.counters.fills_failed.get());
        family(
            out,
            "freshet_dataflow_fills_unsure_total",
            "counter",
            "Partitions a fill was not installed for: a commit to them ended where the server's snapshot may disagree with its binlog position (asked again).",
        );
        sample(out, "freshet_dataflow_fills_unsure_total", &[], self.counters.fills_unsure.get());
        if let Some(replica) = self.replica.get() {
            replica.render_metrics(out);
        }
        if let Some(warm) = &self.warm {
            warm.render_metrics(out);
        }
    }
}
