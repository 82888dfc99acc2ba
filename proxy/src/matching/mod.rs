//! Query matching for the hit path: classify a query's text without a SQL parser.
//!
//! Owns the tokenizer ([`lexer`]), the fingerprint and literal extraction ([`fingerprint`],
//! [`literal`], with the keyword sets it reads in `words`), what is shown of a query ([`redact`]: every literal replaced), a
//! session's learnt text shapes ([`shape`]: a text that repeats a cached shape with other
//! values is classified without tokenizing it again, to the same [`Query`]) and the
//! bounded table of verdicts ([`table`]; what a verdict says is the routing layer's,
//! `cache::route::Verdict`). What classifying costs is bounded ([`Bounds`]): a
//! text over `[limits] max_query` is not tokenized, an IN list over `max_in_list` is not
//! folded; both are relayed. It does not parse SQL, build
//! views, encode rows or decide what is cacheable: the full parse, run once per new
//! fingerprint by the routing code, does that and stores its verdict here.
//!
//! How routing uses it, per COM_QUERY (or per COM_STMT_PREPARE's text, whose `?` become
//! [`Literal::Placeholder`]s bound at execute):
//! ```text
//! let query = session_shapes.classify(sql).unwrap_or_else(|| matching::classify_with_tokens(sql));
//! if let Some(reason) = query.relay { relay; count under query.fingerprint with reason }
//! match table.get(&query.fingerprint) {
//!     Some(entry) => match &entry.verdict {
//!         Verdict::Cache(matches) => look up the view of the match whose constants the query
//!             repeats (`route::interpret`), with query.literals mapped by its params
//!             (a COM_QUERY's text is learnt: session_shapes.learn(sql, &mut query, &tokens)),
//!         Verdict::Relay { .. } => relay,
//!     },
//!     None => full parse once, table.insert(&query.fingerprint, verdict), then as above,
//! }
//! VerdictTable::record(&entry, elapsed);
//! ```
//!
//! Decisions, each enforced where it is implemented:
//! - executable comments (`/*! */`, `/*M! */`) and optimizer hints (`/*+ */`) make a query
//!   relayed: what they mean depends on the server version reading them;
//! - the text is read with the default sql_mode (no `ANSI_QUOTES`, backslash escapes on);
//!   [`classify`] relays a session in any other mode, so a verdict always carries that
//!   reading;
//! - a unary sign before a number is folded into the literal (`id = -5` ~ `id = 5`);
//! - qualified and unqualified names give different fingerprints; the full parse maps both to
//!   the same cache id when they mean the same column;
//! - token-level relays: session-dependent functions, user and system variables, locking
//!   reads, `SELECT ... INTO`, `SQL_CALC_FOUND_ROWS`, multiple statements, anything that is
//!   not a SELECT, and malformed text (unterminated string, identifier or comment).
//!
//! For the routing and the full parse to handle (not decided here):
//! - literal kinds vs column types: `id = 5` and `id = '5'` share a fingerprint but compare
//!   differently; the parameter mapping must check each [`Literal`]'s kind before a lookup;
//! - string literals are bytes in the session's `character_set_client`; converting them to
//!   the dataflow's values needs that charset (and the introducer, when there is one);
//! - functions that depend on session variables (time_zone for `FROM_UNIXTIME`, collation
//!   for comparisons) are not visible to tokens; the full parse decides those;
//! - whether a qualified and an unqualified fingerprint are the same cached query.

pub mod fingerprint;
pub mod lexer;
pub mod literal;
pub mod redact;
pub mod shape;
pub mod table;
mod words;

pub use fingerprint::{Bounds, Fingerprint, Query, QueryFingerprint, Slot, SqlMode, classify, classify_bounded, classify_with_tokens};
pub use literal::Literal;
pub use redact::{reason_shown, shown};
pub use shape::Shapes;
pub use table::{CacheId, Entry, VerdictTable, Weigh};
pub use words::parsed_only_when_touching;

#[cfg(test)]
mod tests;
