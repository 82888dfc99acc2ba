//! The names of the server's views, shared by the binlog stream, which adds the views its DDL
//! creates, and the proxy's sessions, which ask whether a relayed text may read one.
//!
//! Owns: [`ViewNames`]. Does not own: reading the views that exist when freshet starts (the
//! proxy's engine asks information_schema) or what a session does with the answer (it asks
//! the server its settings again before its next cached read).
//!
//! Why this exists: a view may call a stored function, and a stored function may change the
//! session that reads the view (`SET SESSION sql_select_limit = 1`, a time zone, `SET ROLE
//! NONE`) with no call in the text the session sent: `SELECT x FROM v` names no function.
//!
//! # Invariants
//! - **Only grows.** A dropped view's name stays (it costs a question to the server, never an
//!   answer); past [`MAX_NAMES`] every name counts as a view's.
//! - Names compare ASCII case-insensitively, unqualified: a table of another database that
//!   shares a view's name costs the same question.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// More names than this (a server with that many views, or a hostile account creating them)
/// and every name is taken for a view's: the set's memory stays bounded.
pub const MAX_NAMES: usize = 100_000;

/// The set; clones share it. See the module header.
#[derive(Clone, Debug, Default)]
pub struct ViewNames {
    /// Set once a name is added: until then no text needs reading.
    any: Arc<AtomicBool>,
    /// Past [`MAX_NAMES`]: every name is a view's.
    full: Arc<AtomicBool>,
    names: Arc<RwLock<HashSet<String>>>,
}

impl ViewNames {
    /// Adds a view's `name` (unqualified).
    pub fn add(&self, name: &str) {
        let mut names = self.names.write().unwrap_or_else(|e| e.into_inner());
        if names.len() >= MAX_NAMES {
            self.full.store(true, Ordering::Release);
        } else {
            names.insert(name.to_ascii_lowercase());
        }
        self.any.store(true, Ordering::Release);
    }

    /// True if no view is known: a text need not be read.
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    /// True if `name` may be a view's.
    pub fn contains(&self, name: &[u8]) -> bool {
        if self.is_empty() {
            return false;
        }
        if self.full.load(Ordering::Acquire) {
            return true;
        }
        let Ok(name) = std::str::from_utf8(name) else { return true };
        let names = self.names.read().unwrap_or_else(|e| e.into_inner());
        if name.bytes().any(|b| b.is_ascii_uppercase()) { names.contains(&name.to_ascii_lowercase()) } else { names.contains(name) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_without_case_and_only_grow_to_a_bound() {
        let v = ViewNames::default();
        assert!(v.is_empty());
        assert!(!v.contains(b"orders"));
        v.add("Orders_View");
        assert!(!v.is_empty());
        assert!(v.contains(b"orders_view") && v.contains(b"ORDERS_VIEW"));
        assert!(!v.contains(b"orders"));
        assert!(v.contains(&[0xff, 0xfe]), "a name that is not UTF-8 may be anything");
        for i in 0..MAX_NAMES {
            v.add(&format!("v{i}"));
        }
        assert!(v.contains(b"anything"), "past the bound every name counts");
    }
}
