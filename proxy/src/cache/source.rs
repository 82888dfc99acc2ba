//! The change source the writer consumes: committed changes of the upstream, in commit order.
//!
//! Owns: the [`ChangeSource`] trait (what the writer needs of a source: the events, the set of
//! tables it decodes, and a restart at the upstream's current position) and its one
//! implementation today, [`BinlogSource`] (cdc's binlog stream). Does not own: what the events
//! mean to the views (the writer), decoding (cdc).
//!
//! What a source promises the writer (its header relies on it): every committed transaction
//! of a followed table after the start is delivered once, in commit order, as a
//! [`StreamEvent::Batch`]; schema changes in that order; a transaction it cannot vouch for as
//! [`CdcError::Untrusted`]; any other error or the end of the events means the source must be
//! [restarted](ChangeSource::restart), and what happened in between is a gap.

use std::collections::HashMap;
use std::future::Future;

use mysql_async::Opts;
use tokio::sync::mpsc;

use freshet_cdc::{BinlogStream, CdcError, FollowedTables, LagHandle, StartAt, StreamConfig, StreamEvent, TableInfo};
use freshet_dataflow::{Position, TableSchema};

/// Events the stream's task has queued for the writer.
const EVENT_QUEUE: usize = 4096;

/// The events of one run of a source, as the writer receives them.
pub type Events = mpsc::Receiver<Result<StreamEvent, CdcError>>;

/// A source started again at the upstream's current position.
pub struct Restarted {
    /// Where its events start (everything before is applied or lost: a gap).
    pub start: Position,
    /// The tables' schemas at the start.
    pub tables: Vec<TableSchema>,
    /// What fills need to know of each table at the start.
    pub infos: HashMap<String, TableInfo>,
    pub events: Events,
}

/// Where the writer's changes come from.
pub trait ChangeSource: Send + 'static {
    /// The tables whose rows the source decodes, when it decodes only some (None: every
    /// table); the writer adds a table before a cache that reads it is installed, and waits
    /// for [`StreamEvent::Following`] (see the writer's `follow`).
    fn followed(&self) -> Option<&FollowedTables>;

    /// Starts the source again at the upstream's current position, after its events failed
    /// or ended. An error is retried by the caller (with backoff).
    fn restart(&mut self) -> impl Future<Output = Result<Restarted, CdcError>> + Send;
}

/// The upstream's binlog, read by cdc's [`BinlogStream`].
pub struct BinlogSource {
    opts: Opts,
    config: StreamConfig,
    /// Every run reports into this one handle (the freshness gate's).
    lag: LagHandle,
}

impl BinlogSource {
    pub fn new(opts: Opts, config: StreamConfig, lag: LagHandle) -> BinlogSource {
        BinlogSource { opts, config, lag }
    }

    /// Runs `stream` (connected at start-up) in its own task: its events.
    pub fn run(&self, stream: BinlogStream) -> Events {
        self.run_behind(stream, None)
    }

    /// [`BinlogSource::run`] for a stream resumed at the replica's position, behind what the
    /// server wrote up to `unknown_until` while no freshet ran (`LagHandle::restart_behind`).
    pub fn run_behind(&self, mut stream: BinlogStream, unknown_until: Option<Position>) -> Events {
        stream.use_lag_behind(self.lag.clone(), unknown_until);
        stream.spawn(EVENT_QUEUE).0
    }
}

impl ChangeSource for BinlogSource {
    fn followed(&self) -> Option<&FollowedTables> {
        self.config.tables.as_ref()
    }

    async fn restart(&mut self) -> Result<Restarted, CdcError> {
        let stream = BinlogStream::connect(self.opts.clone(), self.config.clone(), StartAt::Current).await?;
        let start = stream.delivered().position()?;
        let tables = stream.tables().cloned().collect();
        let infos = stream.table_infos();
        Ok(Restarted { start, tables, infos, events: self.run(stream) })
    }
}
