//! freshet-cdc: the upstream's change stream and the fill source that reads the live server.
//!
//! Owns (see ARCHITECTURE.md): the binlog client and decoder, binlog positions (file:offset,
//! GTID), reconnect/resume, DDL detection, the fenced upstream fill source, start-up checks and
//! lag. Does not own: applying changes or fills (the dataflow does), the RocksDB replica (the
//! `replica` crate).
//!
//! # How the proxy wires it
//! ```text
//! check_upstream(&mut conn, db, &cached_tables).await?;                 // fails with every fix to make
//! let s = BinlogStream::connect(opts, StreamConfig::new(db, server_id), StartAt::Current).await?;
//! catalog <- s.tables() (skip tables `TableSchema::check` refuses; their rows are not decoded)
//! dataflow.set_applied(s.delivered().position()?);
//! let fills = UpstreamFills::new(opts, db, s.flavor(), s.table_infos(), FillConfig::default());
//! let (mut events, lag) = s.spawn(capacity);                             // lag: metrics, readiness
//! loop { select! {
//!   ev = events.recv() => match ev {
//!     Ok(StreamEvent::Batch(b))  => { dataflow.apply(&b); dataflow.settle_fills() } // fills waiting for the stream
//!     Ok(StreamEvent::Schema(c)) => { dataflow.alter_table(&c.table, c.schema); fills.set_table(&c.table, c.info) }
//!     Ok(StreamEvent::Following(t)) => views on tables `t` may be installed now (`follow`)
//!     Err(CdcError::Untrusted(_)) => dataflow.evict_all(),               // the stream goes on
//!     Err(_) /* PositionGone, Gap, SchemaMismatch, gave up */ => { dataflow.evict_all();
//!         connect again at StartAt::Current; dataflow.set_applied(new start) }
//!   },
//!   tick => for req in dataflow.fill_requests() { spawn(fills.fill(&req)) },
//!   done = fill_tasks.join_next() => Ok(resp) => dataflow.complete_fill(resp), Err(_) => dataflow.abandon_fill(&req),
//! } }
//! ```
//! Positions: [`position`] maps file:offset to the dataflow's `Position` so that a fill's
//! snapshot position compares directly with batch positions.
//!
//! Modules: [`backoff`] (the reconnect loops' delays), [`position`] (file:offset, GTIDs), [`gtid_set`] (MySQL GTID sets), [`flavor`]
//! (MariaDB vs MySQL 8 capabilities), [`follow`] (the tables whose rows are decoded), [`continuity`] (is a reconnect the same history?), [`schema`] (information_schema -> TableSchema, table-map
//! checks), [`events`] (one kind per binlog event), [`mariadb_events`] (MariaDB's own event
//! payloads), [`decode`] (binlog cells -> Value), [`ddl`] (DDL statements -> tables), [`stream`]
//! (the binlog stream; `stream::assembly`: events -> transactions; `stream::scope`: may
//! another database's statement-logged write reach the tracked one), [`lag`] (replication lag),
//! [`result`] (result-set values -> Value),
//! [`fill`] (the fenced upstream fill source), [`checks`] (start-up checks), [`error`].

pub mod backoff;
pub mod cascade;
pub mod checks;
pub mod continuity;
pub mod ddl;
pub mod decode;
pub mod error;
pub mod events;
pub mod fill;
pub mod flavor;
pub mod follow;
pub mod gtid_set;
pub mod lag;
pub mod mariadb_events;
pub mod position;
pub mod result;
pub mod schema;
pub mod stream;
pub mod views;

/// What each of freshet's own connections to the server sets first, whatever the server's
/// globals are: no `sql_select_limit` (a global one would cut the schema's and the fills'
/// answers short), a `sql_mode` that changes no SELECT (not `''`, which EMPTY_STRING_IS_NULL
/// reads as NULL), UTC (the binlog's zone for TIMESTAMPs), autocommit (a global off would
/// keep an idle connection of freshet's in a transaction for good), and utf8mb4 both ways,
/// which freshet decodes every text it reads as (a server started with
/// `--skip-character-set-client-handshake`, or an `init_connect` of `SET NAMES latin1`, gives
/// a connection its own character set whatever the handshake asked, and sends `?` for what
/// that set lacks). The fill and copy connections add their own settings to it.
pub const OWN_SESSION: &str = "SET SESSION sql_select_limit = 18446744073709551615, sql_mode = 'NO_ENGINE_SUBSTITUTION', \
     time_zone = '+00:00', autocommit = 1, character_set_client = utf8mb4, character_set_connection = utf8mb4, \
     character_set_results = utf8mb4";

pub use backoff::Backoff;
pub use checks::check_upstream;
pub use ddl::DdlKind;
pub use error::CdcError;
pub use fill::{FillConfig, UpstreamFills};
pub use flavor::{FenceKind, Flavor, MariaDb, MySql8};
pub use follow::FollowedTables;
pub use gtid_set::GtidSet;
pub use lag::{Behind, Lag, LagHandle, spawn_position_poll};
pub use position::{BinlogPos, MariaGtid};
pub use schema::TableInfo;
pub use stream::{BinlogStream, SchemaChange, StartAt, StreamConfig, StreamEvent};
pub use views::ViewNames;
