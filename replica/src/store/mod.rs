//! The RocksDB store: base rows of the replicated tables, kept at one binlog position, and the
//! base-row fill source over them (thesis section 5.5).
//!
//! Owns: the layout on disk, applying a transaction, answering [`FillRequest`]s at exactly the
//! applied position, the per-table copy state the snapshot ([`crate::snapshot`]) advances.
//! Does not own: reading the upstream (snapshot, cdc), deciding when fills go here (the engine).
//! Its memory is bounded by [`ReplicaMemory`] (`[replica] memory`): RocksDB's memtables over
//! every column family, its block cache, and the bytes of one index-build chunk.
//!
//! # Layout
//! - `<table>` below is the table's name with `%` and `/` escaped (`stored_name`), so that no
//!   table's keys start with another's prefix.
//! - Column family `t/<table>`: primary-key encoding ([`crate::keycode`]) -> the whole row
//!   ([`crate::rowcode`]). Only tables with a primary key are replicated: it is the row's
//!   identity, which makes applying a binlog image idempotent (below).
//! - Column family `i/<table>/<c1>,<c2>` per index a fill uses (its scan's key columns):
//!   index-value encoding ++ primary-key encoding -> the whole row, so one prefix scan over the
//!   encoding of an index value returns every row for it, with no second lookup. Created (and
//!   filled from `t/<table>`, holding writers only per chunk) the first time a fill needs it;
//!   fills use it once it is complete.
//! - The default column family holds the metadata: `pos` (the applied position), `schema/<t>`
//!   (the schema and key encoding the rows have: either changed, the table is copied again), `copy/<t>` (copy progress), `idx/<t>/<cols>` (index built),
//!   `x/<t>/<pk>` (rows the stream touched while the table was being copied).
//!
//! # Invariants
//! - **Atomic position.** Every transaction is applied as one `WriteBatch` that also writes
//!   `pos`, so what is on disk is always the state at exactly `pos`, after a crash too.
//! - **Fills at the applied position.** A fill reads through one RocksDB snapshot, position
//!   included, so its rows are exactly the state at the position it reports.
//! - **Idempotent images.** An insert puts the row under its primary key (replacing whatever
//!   was there), a delete removes the key; both use the full binlog image. Replaying events the
//!   store has already seen therefore converges to the same rows, which is what lets a copy
//!   resume and run while the stream is applied (see `crate::snapshot`).
//! - **Copy versus stream.** While a table is being copied, every key the stream writes is
//!   marked (`x/...`, in the same batch) and the copy does not write marked keys: the stream's
//!   image is never older than the copy's. A table is answered from only once its copy is
//!   complete and the applied position has reached the newest snapshot the copy read
//!   (`ready_at`); until then fills of it fail as unavailable and the engine uses the upstream.
//! - **Forgetting a table is one write.** A reset (a stream gap, TRUNCATE) or a changed schema
//!   deletes the table's rows, progress, index markers and marks in one `WriteBatch` before its
//!   column families are dropped (only for their space), so a kill at any instant leaves the
//!   old state or a table to copy again from nothing. That write is made durable (flushed)
//!   before the drop, which is durable at once: a power loss that cuts the log's unsynced tail
//!   must not take the write and leave the drop. Every reset is, since no replay of the binlog
//!   brings its cause back.
//! - **DDL in place.** A changed schema that keeps the primary key is applied by rewriting the
//!   stored rows ([`reshape`]) under the same marks and readiness rule as a copy.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use freshet_dataflow::{ByteSize, FillData, FillError, FillRequest, FillResponse, FillSource, Key, Position, Row, TableSchema, Value};
use rocksdb::{ColumnFamilyDescriptor, DBWithThreadMode, IteratorMode, MultiThreaded, Options, ReadOptions, WriteBatch};

use crate::error::ReplicaError;
use crate::keycode::{encode_key, encode_value};
use crate::rowcode::{decode_row, encode_row};

mod copy;
mod fill;
mod reshape;
pub use reshape::Altered;

type Db = DBWithThreadMode<MultiThreaded>;

/// Rows written per batch when an index is built from a table (at most: also at most
/// [`ReplicaMemory::batch`] bytes).
const INDEX_BUILD_BATCH: usize = 10_000;

/// How the replica's own memory (`[replica] memory`; the views' is `[memory] limit`) is shared.
/// RocksDB's defaults bound neither: a 64 MiB memtable per column family (two tables and an
/// index each are six), and no cap over all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaMemory {
    /// The memtables of every column family together (RocksDB's `db_write_buffer_size`: past
    /// it, the largest is flushed).
    pub write_buffers: ByteSize,
    /// RocksDB's block cache, shared by every column family, index and filter blocks included.
    pub block_cache: ByteSize,
    /// The rows one copy batch or index-build chunk holds, about (a batch is at least one row):
    /// held about three times over while it is written (as read, as decoded, as a WriteBatch).
    pub batch: ByteSize,
}

impl ReplicaMemory {
    /// The default `[replica] memory`.
    pub const DEFAULT_TOTAL: ByteSize = ByteSize(128 << 20);

    /// `total` shared as half write buffers, a quarter block cache and a sixteenth per batch
    /// (three sixteenths with its copies): about 15/16 of `total` at the most.
    pub fn within(total: ByteSize) -> ReplicaMemory {
        ReplicaMemory { write_buffers: ByteSize(total.0 / 2), block_cache: ByteSize(total.0 / 4), batch: ByteSize((total.0 / 16).max(1)) }
    }

    /// The options of every column family: one family's memtable at most a quarter of the
    /// write buffers (1 to 64 MiB), blocks in the shared cache.
    fn family_options(&self, cache: &rocksdb::Cache) -> Options {
        let mut o = Options::default();
        o.set_write_buffer_size((self.write_buffers.0 / 4).clamp(1 << 20, 64 << 20) as usize);
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_block_cache(cache);
        table.set_cache_index_and_filter_blocks(true);
        o.set_block_based_table_factory(&table);
        o
    }
}

/// How far a table's copy has come.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyState {
    /// Nothing copied yet.
    NotStarted,
    /// Rows up to and including the primary key `after` (its values, as [`crate::rowcode`]
    /// encodes a row) are copied; `since` is the newest snapshot position a batch was read at.
    Copying { since: Position, after: Option<Vec<u8>> },
    /// Every row is copied; the table is current once the applied position reaches `ready_at`.
    Done { ready_at: Position },
    /// DDL changed the table's columns and its rows are being rewritten to the new schema in
    /// place (`ReplicaStore::alter`): column `i` of a new row is column `keep[i]` of the stored
    /// row, or, where `keep[i]` is `None`, read from the upstream. Rows already in the new shape
    /// are marked like the keys the stream writes during a copy. `after` is where the rewrite
    /// goes on (the last primary key as a copy stores it when columns are read from the
    /// upstream, the last stored key when none are). Stored with every batch, so a restart in
    /// the middle goes on with the rewrite.
    Reshaping { since: Position, after: Option<Vec<u8>>, keep: Vec<Option<usize>> },
}

impl CopyState {
    fn encode(&self) -> Vec<u8> {
        match self {
            CopyState::NotStarted => vec![0],
            CopyState::Reshaping { since, after, keep } => {
                let mut v = vec![3];
                v.extend_from_slice(&since.0.to_be_bytes());
                v.extend_from_slice(&(keep.len() as u32).to_be_bytes());
                for k in keep {
                    // Column positions fit in u32 (a table has at most a few thousand columns).
                    v.extend_from_slice(&k.map_or(u32::MAX, |c| c as u32).to_be_bytes());
                }
                if let Some(a) = after {
                    v.extend_from_slice(a);
                }
                v
            }
            CopyState::Copying { since, after } => {
                let mut v = vec![1];
                v.extend_from_slice(&since.0.to_be_bytes());
                if let Some(a) = after {
                    v.extend_from_slice(a);
                }
                v
            }
            CopyState::Done { ready_at } => {
                let mut v = vec![2];
                v.extend_from_slice(&ready_at.0.to_be_bytes());
                v
            }
        }
    }
    fn decode(b: &[u8]) -> Result<CopyState, ReplicaError> {
        let pos = |b: &[u8]| -> Result<Position, ReplicaError> {
            let a: [u8; 8] = b.get(1..9).and_then(|s| s.try_into().ok()).ok_or(ReplicaError::Corrupt("copy state"))?;
            Ok(Position(u64::from_be_bytes(a)))
        };
        match b.first() {
            Some(0) => Ok(CopyState::NotStarted),
            Some(1) => {
                let after = if b.len() > 9 { Some(b[9..].to_vec()) } else { None };
                Ok(CopyState::Copying { since: pos(b)?, after })
            }
            Some(2) => Ok(CopyState::Done { ready_at: pos(b)? }),
            Some(3) => {
                let corrupt = || ReplicaError::Corrupt("rewrite state");
                let u32_at = |i: usize| -> Result<u32, ReplicaError> {
                    let a: [u8; 4] = b.get(i..i + 4).and_then(|s| s.try_into().ok()).ok_or_else(corrupt)?;
                    Ok(u32::from_be_bytes(a))
                };
                let n = u32_at(9)? as usize;
                // Bounded by what is stored: every column takes 4 bytes.
                if n > (b.len().saturating_sub(13)) / 4 {
                    return Err(corrupt());
                }
                let keep = (0..n).map(|i| u32_at(13 + 4 * i).map(|c| (c != u32::MAX).then_some(c as usize))).collect::<Result<_, _>>()?;
                let rest = 13 + 4 * n;
                let after = if b.len() > rest { Some(b[rest..].to_vec()) } else { None };
                Ok(CopyState::Reshaping { since: pos(b)?, after, keep })
            }
            _ => Err(ReplicaError::Corrupt("copy state")),
        }
    }
}

/// Which incarnation of a table's stored rows a copy works on: a new one each time the table
/// is registered anew, reset or altered. A copy batch carries the generation it was read for
/// ([`ReplicaStore::copy_progress`]) and is refused under another (see
/// [`ReplicaStore::write_copy_batch`]). Kept in memory only: a copy never outlives the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generation(u64);

/// What the store knows of one replicated table.
#[derive(Clone, Debug)]
struct Table {
    schema: TableSchema,
    /// Maintained indexes (column lists other than the primary key): built, or being built.
    indexes: Vec<Vec<usize>>,
    /// Those of `indexes` still being built: maintained by writers, not yet read by fills.
    building: Vec<Vec<usize>>,
    copy: CopyState,
    generation: Generation,
}

/// The replica's RocksDB store.
pub struct ReplicaStore {
    db: Db,
    tables: RwLock<HashMap<String, Table>>,
    /// Serializes writers (the stream's batches, copy batches, index builds): each reads the
    /// keys it replaces before writing them.
    write: Mutex<()>,
    /// Test hook ([`ReplicaStore::crash_after_steps`]): durable steps left before every later
    /// one fails; `u64::MAX` when off.
    steps_left: AtomicU64,
    /// Test hook ([`ReplicaStore::between_index_chunks`]).
    chunk_hook: Mutex<Option<ChunkHook>>,
    /// The next [`Generation`] handed out.
    generations: AtomicU64,
    /// Whether tables whose names differ in case are two tables (the server's
    /// `lower_case_table_names = 0`), as the dataflow's catalog says: a row event of `Stories`
    /// must not reach the rows of `stories`.
    case_sensitive: bool,
    /// The database whose tables the store holds, part of each table's identity: a store left
    /// by a run over another database holds that database's rows under the same names.
    database: String,
    /// The options every column family is created with ([`ReplicaMemory::family_options`]).
    family: Options,
    /// [`ReplicaMemory::batch`], in bytes.
    batch_bytes: usize,
}

/// See [`ReplicaStore::between_index_chunks`].
type ChunkHook = Arc<dyn Fn() + Send + Sync>;

/// A table's name as the store's keys and column family names hold it: `%` and `/` escaped
/// (`%25`, `%2F`), so no name holds the separator that ends it. Unescaped, the prefix
/// `x/ts/` of table `ts` was also the start of table `ts/x`'s keys, and resetting `ts` dropped
/// the marks, index markers and index column families of `ts/x`.
fn stored_name(table: &str) -> String {
    table.replace('%', "%25").replace('/', "%2F")
}

/// The name [`stored_name`] escaped.
fn unstored_name(stored: &str) -> String {
    let mut out = String::with_capacity(stored.len());
    let mut rest = stored;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let (c, skip) = match rest.get(i + 1..i + 3) {
            Some("2F") => ('/', 3),
            Some("25") => ('%', 3),
            _ => ('%', 1),
        };
        out.push(c);
        rest = &rest[i + skip..];
    }
    out.push_str(rest);
    out
}

fn primary_cf(table: &str) -> String {
    format!("t/{}", stored_name(table))
}
fn index_cf(table: &str, cols: &[usize]) -> String {
    format!("{}{}", index_cf_prefix(table), column_list(cols))
}
/// Every index column family of `table` starts with it.
fn index_cf_prefix(table: &str) -> String {
    format!("i/{}/", stored_name(table))
}
fn touched_prefix(table: &str) -> Vec<u8> {
    format!("x/{}/", stored_name(table)).into_bytes()
}
fn schema_key(table: &str) -> String {
    format!("schema/{}", stored_name(table))
}
fn copy_key(table: &str) -> String {
    format!("copy/{}", stored_name(table))
}
/// Every index marker (`idx/<table>/<cols>`: that index is built) of `table` starts with it.
fn index_marker_prefix(table: &str) -> String {
    format!("idx/{}/", stored_name(table))
}
fn column_list(cols: &[usize]) -> String {
    cols.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// The key that says how the store's keys hold table names: absent in a store written before
/// names were escaped ([`stored_name`], session 47), whose tables with `/` or `%` in their
/// names (if any) are under other keys and may have lost marks or indexes to a table named by
/// their prefix: such a store is emptied and copied again ([`ReplicaStore::open`]).
const NAMES_KEY: &[u8] = b"names";
const NAME_ENCODING: &[u8] = b"escaped 1";

/// The version of the key encoding (`keycode`): a store whose rows were keyed otherwise is
/// copied again. 3: non-integral DECIMALs exactly, and the database in each table's identity
/// (session 41); 2: strings by the server's collation weights (session 29); before, folded
/// code points, unversioned.
const KEY_ENCODING: u32 = 3;

/// A schema's identity for "did this table change": the key encoding, columns, types,
/// collations and key. Not a column's length (`ColumnSchema::values_only`): it changes no
/// stored value, and a store written before columns had one is not copied again.
fn fingerprint(database: &str, s: &TableSchema) -> String {
    let columns: Vec<_> = s.columns.iter().map(|c| c.values_only()).collect();
    format!("keys {KEY_ENCODING}|{database:?}|{columns:?}|{:?}", s.primary_key)
}

impl ReplicaStore {
    /// Opens (or creates) the store at `path`, within [`ReplicaMemory::DEFAULT_TOTAL`].
    pub fn open(path: &Path) -> Result<ReplicaStore, ReplicaError> {
        ReplicaStore::open_within(path, ReplicaMemory::within(ReplicaMemory::DEFAULT_TOTAL))
    }

    /// Opens (or creates) the store at `path`, its memory shared as `memory` says.
    pub fn open_within(path: &Path, memory: ReplicaMemory) -> Result<ReplicaStore, ReplicaError> {
        let cache = rocksdb::Cache::new_lru_cache(memory.block_cache.0 as usize)?;
        let family = memory.family_options(&cache);
        let mut opts = family.clone();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_db_write_buffer_size(memory.write_buffers.0 as usize);
        let cfs = match Db::list_cf(&opts, path) {
            Ok(cfs) => cfs,
            Err(_) => vec![rocksdb::DEFAULT_COLUMN_FAMILY_NAME.to_string()],
        };
        let descs = cfs.into_iter().map(|n| ColumnFamilyDescriptor::new(n, family.clone()));
        let db = Db::open_cf_descriptors(&opts, path, descs)?;
        escape_names(&db)?;
        Ok(ReplicaStore {
            db,
            tables: RwLock::new(HashMap::new()),
            write: Mutex::new(()),
            steps_left: AtomicU64::new(u64::MAX),
            chunk_hook: Mutex::new(None),
            generations: AtomicU64::new(0),
            case_sensitive: false,
            database: String::new(),
            family,
            batch_bytes: memory.batch.0 as usize,
        })
    }

    /// The bytes of rows one copy batch may hold ([`ReplicaMemory::batch`]).
    pub fn batch_bytes(&self) -> usize {
        self.batch_bytes
    }

    /// The store, holding tables of `database` (a table stored for another is copied again).
    pub fn of_database(mut self, database: &str) -> ReplicaStore {
        self.database = database.to_owned();
        self
    }

    /// The database whose tables the store holds ([`ReplicaStore::of_database`]).
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The store, where tables whose names differ in case are two tables if `yes` (see
    /// `freshet_dataflow::Names`); a store opened by [`ReplicaStore::open`] folds names to lower case.
    pub fn case_sensitive(mut self, yes: bool) -> ReplicaStore {
        self.case_sensitive = yes;
        self
    }

    /// Whether `a` and `b` name one table, as the store compares names.
    pub fn same_table(&self, a: &str, b: &str) -> bool {
        if self.case_sensitive { a == b } else { a.eq_ignore_ascii_case(b) }
    }

    /// A table's name as the store keys it (its column families, its schema and its state).
    fn key(&self, table: &str) -> String {
        if self.case_sensitive { table.to_owned() } else { table.to_ascii_lowercase() }
    }

    /// Declares a table to replicate. Returns true if its rows on disk are usable (same
    /// schema as stored); false if it was new or its schema changed, in which case its rows
    /// and indexes were dropped and it must be copied again.
    pub fn register(&self, schema: &TableSchema) -> Result<bool, ReplicaError> {
        let name = self.key(&schema.name);
        if schema.primary_key.is_empty() {
            return Err(ReplicaError::NoPrimaryKey(name));
        }
        if schema.key_unreadable() {
            return Err(ReplicaError::KeyUnreadable(name));
        }
        let _w = self.lock();
        let fp = fingerprint(&self.database, schema);
        let stored = self.db.get(schema_key(&name))?;
        let same = stored.as_deref() == Some(fp.as_bytes());
        if !same {
            let mut wb = WriteBatch::default();
            self.forget_table(&mut wb, &name);
            wb.put(schema_key(&name), fp.as_bytes());
            // A table never stored has nothing a lost write could leave behind.
            if stored.is_some() {
                self.write_durable(wb)?
            } else {
                self.write(wb)?
            }
            self.drop_table_cfs(&name)?;
        }
        let copy = match self.db.get(copy_key(&name))? {
            Some(b) => CopyState::decode(&b)?,
            None => CopyState::NotStarted,
        };
        let mut indexes = Vec::new();
        let idx_prefix = index_marker_prefix(&name);
        for item in self.db.prefix_iterator(idx_prefix.as_bytes()) {
            let (k, _) = item?;
            let Some(cols) = k.strip_prefix(idx_prefix.as_bytes()) else { break };
            let cols = std::str::from_utf8(cols).map_err(|_| ReplicaError::Corrupt("index name"))?;
            // No columns: a whole table's scan (a fill without a key).
            let cols: Vec<usize> = match cols {
                "" => Vec::new(),
                cols => cols.split(',').map(|c| c.parse().map_err(|_| ReplicaError::Corrupt("index name"))).collect::<Result<_, _>>()?,
            };
            indexes.push(cols);
        }
        if self.db.cf_handle(&primary_cf(&name)).is_none() {
            self.create_cf(&primary_cf(&name))?;
        }
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        // Rows kept under the same registration keep their generation (a copy going on with
        // them is still right); anything else is a new incarnation.
        let generation = match tables.get(&name) {
            Some(t) if same => t.generation,
            _ => self.new_generation(),
        };
        tables.insert(name, Table { schema: schema.clone(), indexes, building: Vec::new(), copy, generation });
        Ok(same)
    }

    /// Forgets a registered table's rows, indexes and progress: it must be copied again (the
    /// stream skipped some of its changes).
    pub fn reset(&self, schema: &TableSchema) -> Result<(), ReplicaError> {
        self.reset_tables(&[schema], None)
    }

    /// Forgets the rows, indexes and progress of every table of `schemas` (they must be copied
    /// again) and, with `position`, moves the applied position there: all in one write, so a
    /// kill at any instant leaves either the old state or every table to copy again at the new
    /// position (never the new position with rows that lack the changes before it). A start
    /// whose stored position was purged resets this way.
    pub fn reset_tables(&self, schemas: &[&TableSchema], position: Option<Position>) -> Result<(), ReplicaError> {
        let names: Vec<String> = schemas.iter().map(|s| self.key(&s.name)).collect();
        let _w = self.lock();
        let mut wb = WriteBatch::default();
        for name in &names {
            self.forget_table(&mut wb, name);
        }
        if let Some(pos) = position {
            wb.put(b"pos", pos.0.to_be_bytes());
        }
        self.write_durable(wb)?;
        {
            let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
            for name in &names {
                if let Some(t) = tables.get_mut(name) {
                    t.indexes.clear();
                    t.building.clear();
                    t.copy = CopyState::NotStarted;
                    t.generation = self.new_generation();
                }
            }
        }
        for name in &names {
            self.drop_table_cfs(name)?;
            self.create_cf(&primary_cf(name))?;
        }
        Ok(())
    }

    /// Drops every stored table that is not registered: the stream was applied without it
    /// (it was not in this run's list, or a previous run's), so its rows are stale and a later
    /// registration must copy it again. Returns the tables dropped.
    pub fn forget_unregistered(&self) -> Result<Vec<String>, ReplicaError> {
        let mut stored = Vec::new();
        for item in self.db.prefix_iterator(b"schema/") {
            let (k, _) = item?;
            let Some(name) = k.strip_prefix(b"schema/".as_slice()) else { break };
            let name = std::str::from_utf8(name).map_err(|_| ReplicaError::Corrupt("table name"))?;
            stored.push(unstored_name(name));
        }
        let registered: Vec<String> = self.tables.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        let gone: Vec<String> = stored.into_iter().filter(|n| !registered.contains(n)).collect();
        let _w = self.lock();
        for name in &gone {
            self.drop_table_data(name)?;
            let mut wb = WriteBatch::default();
            wb.delete(schema_key(name));
            self.write(wb)?;
        }
        Ok(gone)
    }

    /// Forgets a table's rows, indexes and copy progress: it must be copied again.
    fn drop_table_data(&self, name: &str) -> Result<(), ReplicaError> {
        let mut wb = WriteBatch::default();
        self.forget_table(&mut wb, name);
        self.write_durable(wb)?;
        self.drop_table_cfs(name)
    }

    /// Adds to `wb` what makes `name` a table to copy again, with no row, index or mark of
    /// its own left: written in one batch before any column family is dropped, so a kill at any
    /// instant leaves either the old state or a table that is copied again from nothing (never
    /// one still marked copied whose rows are gone, nor one to copy that keeps rows the upstream
    /// deleted meanwhile).
    fn forget_table(&self, wb: &mut WriteBatch, name: &str) {
        if let Some(cf) = self.db.cf_handle(&primary_cf(name)) {
            // Every primary-key encoding starts with a kind tag below 0xFF (`crate::keycode`),
            // so this range holds every row.
            wb.delete_range_cf(&cf, &[][..], &[0xFF][..]);
        }
        wb.delete(copy_key(name));
        for p in [index_marker_prefix(name).into_bytes(), touched_prefix(name)] {
            let mut end = p.clone();
            end.push(0xFF);
            wb.delete_range(p, end);
        }
    }

    /// Drops a forgotten table's column families (their space; nothing reads them any more).
    fn drop_table_cfs(&self, name: &str) -> Result<(), ReplicaError> {
        let prefix = index_cf_prefix(name);
        let cfs = Db::list_cf(&Options::default(), self.db.path()).unwrap_or_default();
        for cf in cfs.iter().filter(|c| c.starts_with(&prefix) || **c == primary_cf(name)) {
            if self.db.cf_handle(cf).is_some() {
                self.drop_cf(cf)?;
            }
        }
        Ok(())
    }

    /// Test hook: after `n` more durable steps (a RocksDB write, a column family created or
    /// dropped), every later step fails with [`ReplicaError::SimulatedCrash`] and changes
    /// nothing, as if the process had been killed at that instant. Reopening the store shows
    /// what a restart would find, so a test can try every crash point of an operation.
    #[doc(hidden)]
    pub fn crash_after_steps(&self, n: u64) {
        self.steps_left.store(n, Ordering::SeqCst);
    }

    /// Test hook: `hook` runs before every chunk of an index build but the first, with no
    /// lock held, so that a test can land DDL or a reset exactly between two chunks.
    #[doc(hidden)]
    pub fn between_index_chunks(&self, hook: impl Fn() + Send + Sync + 'static) {
        *self.chunk_hook.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(hook));
    }

    /// Accounts for one durable step (see [`ReplicaStore::crash_after_steps`]).
    fn step(&self) -> Result<(), ReplicaError> {
        match self.steps_left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
            u64::MAX => Some(n),
            0 => None,
            n => Some(n - 1),
        }) {
            Ok(_) => Ok(()),
            Err(_) => Err(ReplicaError::SimulatedCrash),
        }
    }

    /// One atomic write, as durable as the binlog makes it: lost to a power loss (RocksDB's log
    /// is not synced), it takes the store back to an earlier position, which the stream
    /// replays from.
    fn write(&self, wb: WriteBatch) -> Result<(), ReplicaError> {
        self.step()?;
        self.db.write(wb)?;
        Ok(())
    }

    /// One atomic write that survives a power loss once this returns: a reset, whose cause
    /// (a gap, an unlogged write, a new history, a table no longer followed) no replay of the
    /// binlog brings back, and a write that an irreversible step follows (a column family
    /// dropped is durable at once, and a lost write before it left a table marked copied
    /// with no rows). The default column family, which holds every key such a write changes
    /// that matters after it (position, progress, schema, index markers, marks), is flushed:
    /// its keys are then in a table file the manifest names, not in the log, whose unsynced
    /// tail a power loss may cut.
    fn write_durable(&self, wb: WriteBatch) -> Result<(), ReplicaError> {
        self.write(wb)?;
        self.db.flush()?;
        Ok(())
    }

    fn create_cf(&self, name: &str) -> Result<(), ReplicaError> {
        self.step()?;
        self.db.create_cf(name, &self.family)?;
        Ok(())
    }

    fn drop_cf(&self, name: &str) -> Result<(), ReplicaError> {
        self.step()?;
        self.db.drop_cf(name)?;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        // The guarded state is RocksDB's; a panic in another writer leaves nothing half-done
        // in memory, so a poisoned lock is still usable.
        self.write.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The position of the last applied transaction (0 if none).
    pub fn position(&self) -> Result<Position, ReplicaError> {
        read_position(self.db.get(b"pos")?)
    }

    /// The binlog file of a position applied here, as the server had begun it: its sequence
    /// number and its FORMAT_DESCRIPTION's timestamp, if recorded. A resume in that file
    /// checks that the server's file of that name is still the one begun then (RESET MASTER
    /// begins another, and its offsets and GTIDs may repeat the old one's).
    pub fn file_created(&self) -> Result<Option<(u32, u32)>, ReplicaError> {
        let Some(b) = self.db.get(b"file_created")? else { return Ok(None) };
        let a: [u8; 8] = b.as_slice().try_into().map_err(|_| ReplicaError::Corrupt("file_created"))?;
        let (seq, created) = a.split_at(4);
        let word = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap_or_default());
        Ok(Some((word(seq), word(created))))
    }

    /// Records [`ReplicaStore::file_created`].
    pub fn set_file_created(&self, seq: u32, created: u32) -> Result<(), ReplicaError> {
        let _w = self.lock();
        let mut wb = WriteBatch::default();
        wb.put(b"file_created", [seq.to_be_bytes(), created.to_be_bytes()].concat());
        self.write(wb)
    }

    fn new_generation(&self) -> Generation {
        Generation(self.generations.fetch_add(1, Ordering::Relaxed))
    }

    /// The copy state of a registered table and the generation of its rows, read together: a
    /// copy goes on from that state and passes the generation with each batch
    /// ([`ReplicaStore::write_copy_batch`]), reading them in a snapshot opened after this call.
    pub fn copy_progress(&self, table: &str) -> Option<(CopyState, Generation)> {
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        tables.get(&self.key(table)).map(|t| (t.copy.clone(), t.generation))
    }

    /// The copy state of a registered table.
    pub fn copy_state(&self, table: &str) -> Option<CopyState> {
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        tables.get(&self.key(table)).map(|t| t.copy.clone())
    }

    /// True if fills may read `table`: copied, and the applied position past its copy.
    pub fn is_ready(&self, table: &str) -> Result<bool, ReplicaError> {
        let pos = self.position()?;
        Ok(matches!(self.copy_state(table), Some(CopyState::Done { ready_at }) if pos >= ready_at))
    }

    /// Sets the applied position without changes (a new, empty replica starts where the
    /// stream starts).
    pub fn set_position(&self, pos: Position) -> Result<(), ReplicaError> {
        let _w = self.lock();
        let mut wb = WriteBatch::default();
        wb.put(b"pos", pos.0.to_be_bytes());
        self.write(wb)?;
        Ok(())
    }

    /// Moves the stored position forward to `pos` (never back): the stream passed events that
    /// change no stored row, such as a DDL the store has already taken in
    /// ([`ReplicaStore::alter`], `register`, `reset`). Without it a DDL that no write follows
    /// leaves the store dated before it, and every fill asking for the views' position is
    /// refused as behind until the next write.
    pub fn advance_position(&self, pos: Position) -> Result<(), ReplicaError> {
        let _w = self.lock();
        if self.position()? >= pos {
            return Ok(());
        }
        let mut wb = WriteBatch::default();
        wb.put(b"pos", pos.0.to_be_bytes());
        self.write(wb)
    }

    /// Applies one transaction and its position in one write.
    pub fn apply(&self, batch: &freshet_dataflow::Batch) -> Result<(), ReplicaError> {
        let _w = self.lock();
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        let mut wb = WriteBatch::default();
        // Rows this batch already replaced, by (table, primary key): later changes of the same
        // key in the batch must see them, not what is on disk.
        let mut overlay: HashMap<(String, Vec<u8>), Option<Row>> = HashMap::new();
        for c in &batch.changes {
            let name = self.key(&c.table);
            let Some(t) = tables.get(&name) else { continue };
            let pk = encode_key(t.schema.primary_key.iter().map(|&i| c.row.get(i).unwrap_or(&Value::Null)));
            let current = match overlay.get(&(name.clone(), pk.clone())) {
                Some(r) => r.clone(),
                None => self.get_row(&name, &pk)?,
            };
            if let Some(old) = &current {
                self.delete_entries(&mut wb, &name, t, &pk, old)?;
            }
            let new = if c.insert { Some(c.row.clone()) } else { None };
            if let Some(row) = &new {
                self.put_entries(&mut wb, &name, t, &pk, row)?;
            }
            if !matches!(t.copy, CopyState::Done { .. }) {
                let mut k = touched_prefix(&name);
                k.extend_from_slice(&pk);
                wb.put(k, []);
            }
            overlay.insert((name, pk), new);
        }
        wb.put(b"pos", batch.position.0.to_be_bytes());
        self.write(wb)?;
        Ok(())
    }

    fn cf(&self, name: &str) -> Result<std::sync::Arc<rocksdb::BoundColumnFamily<'_>>, ReplicaError> {
        self.db.cf_handle(name).ok_or_else(|| ReplicaError::MissingColumnFamily(name.to_string()))
    }

    fn get_row(&self, table: &str, pk: &[u8]) -> Result<Option<Row>, ReplicaError> {
        match self.db.get_cf(&self.cf(&primary_cf(table))?, pk)? {
            Some(b) => Ok(Some(decode_row(&b)?)),
            None => Ok(None),
        }
    }

    fn put_entries(&self, wb: &mut WriteBatch, name: &str, t: &Table, pk: &[u8], row: &[Value]) -> Result<(), ReplicaError> {
        let bytes = encode_row(row);
        wb.put_cf(&self.cf(&primary_cf(name))?, pk, &bytes);
        for cols in &t.indexes {
            wb.put_cf(&self.cf(&index_cf(name, cols))?, index_key(row, cols, pk), &bytes);
        }
        Ok(())
    }

    fn delete_entries(&self, wb: &mut WriteBatch, name: &str, t: &Table, pk: &[u8], row: &[Value]) -> Result<(), ReplicaError> {
        wb.delete_cf(&self.cf(&primary_cf(name))?, pk);
        for cols in &t.indexes {
            wb.delete_cf(&self.cf(&index_cf(name, cols))?, index_key(row, cols, pk));
        }
        Ok(())
    }
}

/// The registered table `name`, if `schema` is still its schema (checked under the write lock,
/// so rows read with an older schema are never written after DDL registered a new one).
fn registered_as<'a>(tables: &'a mut HashMap<String, Table>, name: &str, schema: &TableSchema) -> Result<&'a mut Table, ReplicaError> {
    let t = tables.get_mut(name).ok_or_else(|| ReplicaError::UnknownTable(name.to_string()))?;
    if t.schema != *schema {
        return Err(ReplicaError::SchemaChanged(name.to_string()));
    }
    Ok(t)
}

/// Index entry key: the index value then the primary key (unique per row).
fn index_key(row: &[Value], cols: &[usize], pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(pk.len() + 16 * cols.len());
    for &c in cols {
        encode_value(row.get(c).unwrap_or(&Value::Null), &mut k);
    }
    k.extend_from_slice(pk);
    k
}

/// Brings a store written before table names were escaped ([`NAMES_KEY`]) to the escaped
/// names: one that holds a table whose name has `/` or `%` is emptied (every key in one write,
/// then every table's column family dropped), so each table is copied again; any other holds
/// the same keys either way and is only marked.
fn escape_names(db: &Db) -> Result<(), ReplicaError> {
    if db.get(NAMES_KEY)?.is_some() {
        return Ok(());
    }
    let mut old_names = false;
    for item in db.prefix_iterator(b"schema/") {
        let (k, _) = item?;
        let Some(name) = k.strip_prefix(b"schema/".as_slice()) else { break };
        old_names |= name.iter().any(|&b| b == b'/' || b == b'%');
    }
    let mut wb = WriteBatch::default();
    if old_names {
        tracing::warn!(
            "replica: the store holds a table whose name has `/` or `%` under keys of an older layout; copying every table again"
        );
        // Every metadata key starts with an ASCII letter.
        wb.delete_range(&[][..], &[0xFF][..]);
    }
    wb.put(NAMES_KEY, NAME_ENCODING);
    db.write(wb)?;
    if old_names {
        // Durable before any family is dropped (`ReplicaStore::write_durable`); the mark alone
        // may be lost (the next open looks again).
        db.flush()?;
        // Only space: no key names them any more (a kill before this leaves them unused).
        for cf in Db::list_cf(&Options::default(), db.path()).unwrap_or_default() {
            if cf != rocksdb::DEFAULT_COLUMN_FAMILY_NAME && db.cf_handle(&cf).is_some() {
                db.drop_cf(&cf)?;
            }
        }
    }
    Ok(())
}

fn read_position(b: Option<Vec<u8>>) -> Result<Position, ReplicaError> {
    match b {
        None => Ok(Position(0)),
        Some(b) => {
            let a: [u8; 8] = b.as_slice().try_into().map_err(|_| ReplicaError::Corrupt("position"))?;
            Ok(Position(u64::from_be_bytes(a)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_states_round_trip_and_bad_bytes_are_errors() {
        let states = [
            CopyState::NotStarted,
            CopyState::Copying { since: Position(7), after: Some(vec![1, 2, 3]) },
            CopyState::Done { ready_at: Position(9) },
            CopyState::Reshaping { since: Position(11), after: None, keep: vec![Some(0), None, Some(3)] },
            CopyState::Reshaping { since: Position(12), after: Some(vec![0xFF, 0]), keep: vec![] },
        ];
        for st in states {
            let b = st.encode();
            assert_eq!(CopyState::decode(&b).unwrap(), st);
            // Every truncation is an error or another valid state, never a panic.
            for n in 0..b.len() {
                let _ = CopyState::decode(&b[..n]);
            }
        }
        let mut huge = vec![3];
        huge.extend_from_slice(&[0; 8]);
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(CopyState::decode(&huge).is_err(), "a column count the bytes cannot hold");
        assert!(CopyState::decode(&[9]).is_err());
    }

    /// Keys encode strings by their collation's weights, and session 29 changed the weights
    /// (the server's tables, not folded code points). A store written before that holds its
    /// rows and index entries under the old encoding: opened by this build, the same schema
    /// must not be taken as the same table, or lookups by the new encoding miss rows that are
    /// there and binlog deletes miss the rows they delete. It is copied again.
    /// A column's length (session 36's `max_bytes`, for ORDER BY) changes no stored value: a
    /// store written before columns had one is the same table to this build.
    #[test]
    fn a_columns_length_is_not_the_tables_identity() {
        use freshet_dataflow::{Collation, ColumnSchema, SqlType};
        let text = ColumnSchema::new("name", SqlType::Text).with_collation(Some(Collation::Utf8mb4UnicodeCi));
        let id = ColumnSchema::new("id", SqlType::Int { bytes: 4, unsigned: false });
        let before = TableSchema::new("t", vec![text.clone(), id.clone()], vec![0]);
        let now = TableSchema::new("t", vec![text.with_max_bytes(1020), id], vec![0]);
        assert_eq!(fingerprint("db", &now), fingerprint("db", &before));
        assert_eq!(fingerprint("db", &before), format!("keys {KEY_ENCODING}|\"db\"|{:?}|{:?}", before.columns, before.primary_key));
        assert!(!fingerprint("db", &before).contains("max_bytes"), "the text a store written before holds");
        assert_ne!(fingerprint("db", &before), fingerprint("other", &before), "another database's table");
    }

    #[test]
    fn a_store_keyed_by_older_string_weights_is_copied_again() {
        use freshet_dataflow::{Collation, ColumnSchema, SqlType};
        let d = std::env::temp_dir().join(format!("freshet-replica-store-weights-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let text = ColumnSchema::new("name", SqlType::Text).with_collation(Some(Collation::Utf8mb4UnicodeCi));
        let t = TableSchema::new("t", vec![text, ColumnSchema::new("id", SqlType::Int { bytes: 4, unsigned: false })], vec![0]);
        {
            let s = ReplicaStore::open(&d).unwrap();
            // What the build before session 29 wrote for this schema.
            s.db.put(b"schema/t", format!("{:?}|{:?}", t.columns, t.primary_key)).unwrap();
            s.db.put(b"copy/t", CopyState::Done { ready_at: Position(5) }.encode()).unwrap();
            assert!(!s.register(&t).unwrap(), "a store keyed by the old weights is taken as current");
            assert_eq!(s.copy_progress("t").unwrap().0, CopyState::NotStarted);
            assert!(s.register(&t).unwrap(), "registered again by the same build: the same table");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Escaped names hold no `/`, and every name comes back from its escaped form.
    #[test]
    fn stored_names_hold_no_separator_and_come_back() {
        for name in ["ts", "ts/x", "a%2Fb", "%", "/", "%25/%2F", "x%", "100%2"] {
            let stored = stored_name(name);
            assert!(!stored.contains('/'), "{name}: {stored}");
            assert_eq!(unstored_name(&stored), name);
        }
        assert_ne!(stored_name("a/b"), stored_name("a%2Fb"));
    }

    /// A store written before names were escaped, holding a table whose name has `/`, is
    /// emptied at open (its keys are under the old names, and a table named by their prefix may
    /// have dropped some of them); one without such a table keeps its rows.
    #[test]
    fn a_store_with_unescaped_slashed_names_is_copied_again() {
        let d = std::env::temp_dir().join(format!("freshet-replica-store-names-{}", std::process::id()));
        let t = TableSchema::new(
            "t",
            vec![freshet_dataflow::ColumnSchema::new("id", freshet_dataflow::SqlType::Int { bytes: 4, unsigned: false })],
            vec![0],
        );
        for (old_name, kept) in [("plain", true), ("ts/x", false)] {
            let _ = std::fs::remove_dir_all(&d);
            {
                let s = ReplicaStore::open(&d).unwrap();
                s.register(&t).unwrap();
                s.write_copy_batch(&t, s.copy_progress("t").unwrap().1, Position(5), &[vec![Value::Int(1)].into()], true).unwrap();
                // What the build before session 47 wrote.
                s.db.put(format!("schema/{old_name}"), b"x").unwrap();
                s.db.create_cf(format!("t/{old_name}"), &Options::default()).unwrap();
                s.db.delete(NAMES_KEY).unwrap();
            }
            let s = ReplicaStore::open(&d).unwrap();
            assert_eq!(s.register(&t).unwrap(), kept, "{old_name}");
            assert_eq!(s.db.get(format!("schema/{old_name}")).unwrap().is_some(), kept, "{old_name}");
            assert_eq!(s.db.cf_handle(&format!("t/{old_name}")).is_some(), kept, "{old_name}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A fill checks that its table is ready, then builds the index it needs; DDL that moves the
    /// table to a rewrite can land in between. The build must then be refused: an index built
    /// from rows of the old shape at new column positions, marked built on disk, would be read
    /// after the rewrite (and after a restart) with entries under the wrong values.
    #[test]
    fn an_index_is_not_built_on_a_table_being_rewritten() {
        use freshet_dataflow::{Batch, ColumnSchema, SqlType};
        let d = std::env::temp_dir().join(format!("freshet-replica-store-index-reshape-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let int = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
        let old = TableSchema::new("t", vec![int("id"), int("k"), int("z")], vec![0]);
        let new = TableSchema::new("t", vec![int("id"), int("z"), int("k")], vec![0]);
        {
            let s = ReplicaStore::open(&d).unwrap();
            s.register(&old).unwrap();
            let row: Row = vec![Value::Int(1), Value::Int(10), Value::Int(100)].into();
            s.write_copy_batch(&old, s.copy_progress("t").unwrap().1, Position(5), &[row], true).unwrap();
            s.apply(&Batch::new(Position(5))).unwrap();
            assert!(s.is_ready("t").unwrap());
            // The fill saw the table ready; the DDL is applied before it builds the index on k.
            assert_eq!(s.alter(&new, &[Some(0), Some(2), Some(1)]).unwrap(), Altered::InPlace);
            assert!(matches!(s.ensure_index("t", &[2]), Err(ReplicaError::NotReady(_))));
            assert!(s.db.get(b"idx/t/2").unwrap().is_none(), "an index of the old shape is marked built");
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
