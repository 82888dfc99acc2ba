//! Which tables' rows the binlog stream decodes, from the writer's side: the tables caches
//! read, and caches that wait until the stream carries their tables.
//!
//! Owns: the writer's `followed` list (tables every batch it applies from now on carries), the
//! caches waiting for theirs (`CREATE CACHE` on a table no cache read yet, and caches revived
//! after DDL), and adding their tables to the stream's shared set (`StreamConfig::tables`,
//! cdc's `follow`). Does not own: skipping rows (the stream), installing a cache
//! (`Engine::build`).
//!
//! # Invariant: no view is ever fed a batch that lacks rows of a table it reads
//! The stream skips rows of tables outside the set before decoding them, and it runs ahead of
//! the writer (up to the event queue): when a table is added to the set, batches already read
//! lack its rows, and the writer does not know how many. So a view on a new table is
//! installed only once the writer has seen proof, *in stream order*, that every later batch
//! carries the table:
//! 1. `StreamEvent::Following(tables)`: the stream took `tables` between two groups and
//!    announced them before any batch that carries them (cdc's `follow`); every batch after
//!    it in the stream carries them. The writer handles events in stream order, so when it
//!    handles the announcement, every batch it applies afterwards carries them.
//! 2. A new stream (`Writer::reconnect`): it took the whole set when it connected, after the
//!    writer had added every table it waits for (the writer is the only one to add, and does
//!    so before it waits), so every batch of the new stream carries them. Batches of the old
//!    stream are never applied after (its receiver is replaced).
//!
//! A view installed after that point starts with every partition a hole, made at the writer's
//! applied position; a fill is requested with that position as its minimum and reflects the
//! server at some position P at or after it; the dataflow skips batches up to P for the
//! fill's keys and applies those after P, all of which (by 1 or 2) carry the table's rows. So
//! every filled entry reflects every committed write exactly once, as without skipping. A
//! view installed *before* that point could be filled at P and then miss a write after P that
//! the stream skipped: which is why `Create` and `revive` wait here instead.
//!
//! The set only grows (a dropped cache's table stays followed), so the proof never expires.
//! Waiting costs at most the stream's next group boundary (a heartbeat, 1 s, on an idle
//! server); a stream that is down is re-established (case 2) and the wait ends then.

use tokio::sync::oneshot;
use tracing::info;

use freshet_config::CacheSpec;

use super::Writer;

/// A `CREATE CACHE` waiting for its tables to be followed.
pub(super) struct Waiting {
    pub(super) spec: CacheSpec,
    pub(super) reply: oneshot::Sender<Result<std::sync::Arc<super::super::Cache>, String>>,
}

impl Writer {
    /// True if every table `sql` reads is followed (its view may be installed now); else adds
    /// the missing ones to the stream's set (they will be announced). A query that does not
    /// compile is "ready": installing it fails with its own reason.
    pub(super) fn reads_followed(&mut self, sql: &str) -> bool {
        let Ok(q) = freshet_dataflow::compile(sql, self.dataflow.catalog()) else { return true };
        let mut ready = true;
        for table in &q.tables {
            if !self.followed.iter().any(|t| t.eq_ignore_ascii_case(table)) {
                ready = false;
                if let Some(set) = &self.stream_config.tables {
                    set.add(table);
                }
            }
        }
        ready || self.stream_config.tables.is_none()
    }

    /// Proof that every later batch carries `tables` (case 1 or 2 of the module header):
    /// caches waiting for them are installed, caches waiting since DDL are tried again.
    pub(super) fn now_following(&mut self, tables: Vec<String>) {
        // The replica starts applying them here, in stream order, and copies them.
        if let Some(r) = &self.replica {
            r.follow(&tables);
        }
        for t in tables {
            if !self.followed.iter().any(|f| f.eq_ignore_ascii_case(&t)) {
                self.followed.push(t);
            }
        }
        for Waiting { spec, reply } in std::mem::take(&mut self.waiting) {
            if self.reads_followed(&spec.query) {
                self.create(spec, reply);
            } else {
                self.waiting.push(Waiting { spec, reply });
            }
        }
        self.revive();
    }

    /// After a new stream: it decodes every table of the set (case 2).
    pub(super) fn stream_replaced(&mut self) {
        let all = self.stream_config.tables.as_ref().map(|s| s.snapshot().1).unwrap_or_default();
        self.now_following(all);
    }

    /// `CREATE CACHE` now, or once its tables are followed.
    pub(super) fn create_when_followed(
        &mut self,
        spec: CacheSpec,
        reply: oneshot::Sender<Result<std::sync::Arc<super::super::Cache>, String>>,
    ) {
        if self.reads_followed(&spec.query) {
            self.create(spec, reply);
        } else {
            info!(cache = %spec.name, "cache waits until the binlog stream decodes its tables");
            self.waiting.push(Waiting { spec, reply });
        }
    }
}
