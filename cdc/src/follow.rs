//! The tables whose rows the binlog stream decodes: a set shared by the stream and its
//! consumer, which the consumer may grow while the stream runs.
//!
//! Owns: [`FollowedTables`] (the wanted set and its generation). Does not own: when the
//! stream starts decoding a table it was not decoding (the stream's `sync_followed`, at group
//! boundaries only) or what the consumer does until then (the proxy's writer defers a cache
//! on such a table).
//!
//! Why this exists: decoding row events is most of the stream's work, and most of a busy
//! server's writes are to tables no cache reads. Rows of tables outside the set are skipped
//! before their cells are read; DDL, privilege-table rows, positions and lag are followed for
//! every table whatever the set says.
//!
//! # Invariants
//! - **Only grows.** A table is never removed (a dropped cache leaves its table followed: it
//!   costs decoding, never correctness), so a stream never stops delivering a table's rows.
//! - **Whole groups.** A stream takes the set once when it connects and again only between
//!   event groups (no transaction half read), and when it takes new tables it emits
//!   [`crate::StreamEvent::Following`] first: every batch after that event in the stream, and
//!   none necessarily before it, carries the rows of those tables. A consumer that installs
//!   state for a new table only when it sees that event (or on a new stream, which took the
//!   whole set at connect) therefore never applies a batch that lacks that table's rows to it.
//! - Names compare ASCII case-insensitively, as the stream's schema lookups do.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The wanted set; clones share it. See the module header.
#[derive(Clone, Debug, Default)]
pub struct FollowedTables {
    names: Arc<Mutex<Vec<String>>>,
    generation: Arc<AtomicU64>,
}

impl FollowedTables {
    /// A set holding `tables`.
    pub fn of<S: AsRef<str>>(tables: impl IntoIterator<Item = S>) -> FollowedTables {
        let set = FollowedTables::default();
        for t in tables {
            set.add(t.as_ref());
        }
        set
    }

    /// Adds `table`; true if it was not in the set.
    pub fn add(&self, table: &str) -> bool {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if names.iter().any(|t| t.eq_ignore_ascii_case(table)) {
            return false;
        }
        names.push(table.to_string());
        // Under the lock: a reader that sees this generation also sees the name.
        self.generation.fetch_add(1, Ordering::Release);
        true
    }

    /// True if `table` is in the set.
    pub fn contains(&self, table: &str) -> bool {
        self.names.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|t| t.eq_ignore_ascii_case(table))
    }

    /// Changes so far: a reader compares it with the one of its last [`FollowedTables::snapshot`]
    /// (one atomic load, cheap enough for every event).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The set and its generation, read together.
    pub fn snapshot(&self) -> (u64, Vec<String>) {
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        (self.generation.load(Ordering::Acquire), names.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_case_insensitively_and_counts_changes() {
        let set = FollowedTables::of(["Votes"]);
        let shared = set.clone();
        assert_eq!(set.generation(), 1);
        assert!(!shared.add("votes"));
        assert_eq!(set.generation(), 1);
        assert!(shared.add("stories"));
        assert!(set.contains("STORIES") && set.contains("votes") && !set.contains("users"));
        assert_eq!(set.snapshot(), (2, vec!["Votes".to_string(), "stories".to_string()]));
    }
}
