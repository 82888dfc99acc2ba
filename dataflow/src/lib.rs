//! freshet-dataflow: partially-stateful views compiled from SQL (the Noria model, adapted to a
//! database that already exists).
//!
//! Owns: values, rows, schemas, deltas and positions; compiling a SELECT into a tree of
//! operators; partitioned partial state with holes, fills, eviction and a byte budget; readers;
//! cost bounds. Does not own, and must not depend on: MySQL clients, the wire protocol,
//! networking, binlog formats, RocksDB. Those live in `cdc` and `proxy`, which use the API
//! below.
//!
//! # The stable interface
//!
//! **Data** ([`value`], [`schema`], [`delta`]):
//! - [`Value`] — every MySQL type (signed/unsigned integers, exact [`Decimal`], FLOAT/DOUBLE,
//!   text with its [`Collation`], bytes, [`Date`]/[`DateTime`]/TIME/TIMESTAMP with
//!   microseconds, YEAR, ENUM/SET, BIT, JSON, NULL). 24 bytes. Equality and hashing are SQL
//!   equality (collation-aware, numeric across types).
//! - [`Row`] = `Box<[Value]>`, compact.
//! - [`TableSchema`] / [`ColumnSchema`] / [`SqlType`] — supplied by the caller (cdc builds them
//!   from information_schema); a text column whose collation freshet does not implement has
//!   `collation: None`, and queries that use it are refused.
//! - [`Batch`] — one upstream transaction: [`Change`]s (`+row`/`-row`; update = `-old +new`)
//!   at a [`Position`], an opaque totally ordered `u64` newtype assigned by cdc.
//!
//! **Compiling** ([`mod@compile`]): [`compile()`]`(sql, &Catalog) -> Result<CompiledQuery, Refusal>`.
//! Never panics; a [`Refusal`] carries a reason a user can act on. Two texts compile to the
//! same plan whatever their qualifiers, aliases and `? = col` spelling
//! ([`CompiledQuery::same_plan`]); [`CompiledQuery::same_plan_except_arity`] says whether an
//! `IN (?, ...)` text may be answered from a `= ?` view ([`Reader::lookup_in`]), which needs the
//! view to be [`mergeable`](CompiledQuery::mergeable) across keys. Supported: base tables,
//! WHERE (literals, AND/OR/NOT, comparisons, IN, BETWEEN, LIKE, IS NULL), projections with
//! arithmetic, CASE, CONCAT, COALESCE/IFNULL/NULLIF/IF, LOWER/UPPER/LENGTH/CHAR_LENGTH/
//! SUBSTRING/TRIM/LEFT/RIGHT/REPLACE, ABS/ROUND/FLOOR/CEIL, YEAR/MONTH/DAY/DATE; INNER and
//! LEFT equi-joins on one or more columns across several tables (self-joins included);
//! GROUP BY with COUNT(*), COUNT(col), COUNT(DISTINCT col), SUM, AVG, MIN, MAX; HAVING;
//! DISTINCT; UNION ALL (without parameters); ORDER BY ... LIMIT n [OFFSET m]; `?` parameters
//! as `col = ?` / `col IN (?, ...)` (the partition key) and `col <, <=, >, >= ?` (filters the
//! reader applies at lookup). Tables not joined onto the `=`/`IN` parameter columns
//! ("dimensions", e.g. `comments JOIN users ON users.id = comments.author_id WHERE
//! comments.story_id = ?`) are looked up by equalities on one other table's columns; with
//! LEFT joins the first table in FROM must be compared with the parameters and each dimension
//! joined onto one earlier table (inner joins are re-placed as needed).
//!
//! **Running** ([`view`]): [`Dataflow`] is the single writer.
//! - `Dataflow::new(catalog, ByteSize(budget))`, `install_sql` / `install` → [`ViewId`]
//!   (identical plans share one view; views with an identical stateful subtree share its
//!   operators and state, see `domain_of`). `alter_table` applies DDL (affected views are
//!   dropped and recompiled; old readers answer `NoView`), `drop_view` removes one.
//! - `apply(&Batch)` — in position order; changes become visible per batch. `apply_held`
//!   routes a batch without running the partitions' operators or republishing, and
//!   `publish_held` then processes every partition the held batches touched once, for all of
//!   them in order, and republishes it (the writer's step): readers see whole batches, several
//!   at a time.
//! - `reader(ViewId)` → [`Reader`] (Clone + Send + Sync): `lookup(&params)` →
//!   [`Lookup::Hit`]`(rows)` in the query's column order, or [`Lookup::Miss`]`(keys)`. Never
//!   waits for the writer. `lookup_in(&param_slots, &params)` reads several values per key
//!   column (`id IN (1, 2, 3)`) from a view compiled as `id = ?`, merging the partitions as
//!   the `IN` view would; it refuses ([`LookupError::NotMergeable`]) views whose per-key
//!   results cannot be merged (LIMIT, aggregates not grouped by the key).
//! - Misses become fill requests: `fill_requests()` → [`FillRequest`]s (deduplicated,
//!   batched). A [`FillSource`] answers with a [`FillResponse`] at a position: either
//!   [`FillData::States`] (answers to the request's SQL [`StateQuery`]s, which an upstream
//!   server evaluates, e.g. `SELECT ... COUNT(*) ... WHERE story_id IN (?, ?) GROUP BY ...`) or
//!   [`FillData::BaseRows`] (base rows for [`BaseScan`]s, then for [`DimScan`]s — dimension rows
//!   joined with the rows of an earlier answer —, from a replica, replayed here).
//!   `complete_fill(resp)` installs it, applying the no-double-counting position rules;
//!   `abandon_fill(&req)` gives up. `run_fills(&mut source)` does both synchronously.
//! - Every [`FillRequest`] carries a [`FillTicket`] the response must echo
//!   ([`FillResponse::answer`] does); answers for an outdated layout are ignored. A caller that
//!   will not answer a request must `abandon_fill` it.
//! - A partition holds the dimension rows it joined with; a dimension write reaches exactly the
//!   partitions holding its join key; a write that needs a dimension row its partition does not
//!   hold (a comment by a new author) copies it from another partition that holds it, or else
//!   evicts that partition, which refills on the next read.
//! - `evict`, `evict_all`; a global byte budget evicts least-recently-used partitions.
//!   Top-k states keep `OFFSET + LIMIT + slack` rows (`set_topk_slack`).
//! - `stats(ViewId)` / `Reader::stats()` → [`ViewStats`] (keys, bytes, hits, misses, fills,
//!   evictions), plain numbers.
//! - `cost(ViewId)` → [`CostBounds`] (PIQL-style bounds for a hit, a fill and a write;
//!   [`CostBounds::class`] names the worst: constant, bounded, linear in partition, fan-out,
//!   linear in table).
//! - `explain(ViewId)` / [`explain_sql`]`(sql, &catalog)` → `(section, detail)` lines for
//!   `EXPLAIN CACHE`: query, operator graph, states, cost, the fill SQL of one partition,
//!   and (installed views) the views sharing state; `explain_sql` returns the [`Refusal`] of
//!   a query that cannot be cached.
//!
//! **In-memory stand-ins** for tests and benches: [`MemStore`] with [`MemUpstream`] (answers
//! state queries) and [`MemReplica`] (answers base scans); [`eval::eval`] evaluates a plan from
//! scratch (the oracle).
//!
//! # Invariants
//! See `plan` (partitioning by parameters), `ops` (incremental operators) and `view` (partial
//! state, positions, eviction, budget) for the invariants each keeps and why they hold.

pub mod collation;
pub mod compile;
pub mod cost;
pub mod delta;
pub mod eval;
pub mod expr;
pub mod fill;
pub mod hash;
pub mod mem;
pub mod ops;
pub mod plan;
pub mod render;
pub mod schema;
pub mod small;
pub mod store;
pub mod value;
pub mod view;

pub use compile::{Catalog, CompiledQuery, KeyColumn, Names, ReadFilter, Refusal, compile, compile_unpruned};
pub use cost::{Bound, CostBounds, StateInfo, TableCost};
pub use delta::{Batch, Change, Position};
pub use fill::{
    BaseScan, DimScan, FillData, FillError, FillRequest, FillResponse, FillSource, FillTicket, MemReplica, MemUpstream, StateQuery, Unsure,
    ViewId,
};
pub use ops::Key;
pub use schema::{ColumnSchema, SchemaError, SqlType, TableSchema};
pub use store::MemStore;
pub use value::{Collation, Date, DateTime, Decimal, Row, Rows, SharedRow, TextRef, Value, ValueRef};
pub use view::{ApplyError, ByteSize, Dataflow, Explanation, FillOutcome, Lookup, LookupError, Reader, Recompiled, ViewStats, explain_sql};
