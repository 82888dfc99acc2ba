//! freshet-examples: a small application to run against freshet — the news aggregator of the
//! Noria paper's figure 2 (users, stories, votes, comments).
//!
//! Owns: the example's schema (`news/schema.sql`), its freshet config (`news/freshet.toml`,
//! whose `[[cache]]` entries are the application's read queries), a deterministic data
//! generator ([`load`]) and a mixed read/write workload ([`workload`]); the `news` binary only
//! parses arguments and calls these. Does not own: freshet itself (the workload is an ordinary
//! MySQL client and cannot tell freshet from MariaDB), freshet's own counters (hits, fills, lag:
//! the demo script reads them from freshet). [`compare`] runs the workload against MariaDB and
//! freshet interleaved and sets their latencies side by side.
//!
//! Invariant the tests keep: every read the workload sends is one of the cached queries of
//! `news/freshet.toml`, and each compiles with `freshet_dataflow::compile` against the schema
//! as MariaDB reports it.

pub mod app;
pub mod compare;
pub mod keepup;
pub mod load;
pub mod probe;
pub mod rng;
pub mod workload;
