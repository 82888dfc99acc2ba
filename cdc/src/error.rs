//! The crate's error type: where an error comes from and whether retrying is safe.

use crate::position::BinlogPos;

/// Errors of the cdc crate.
#[derive(Debug, thiserror::Error)]
pub enum CdcError {
    /// The upstream server or the connection to it failed (I/O, killed connection, server
    /// error). Retrying (reconnecting) is safe.
    #[error("upstream: {0}")]
    Upstream(#[from] mysql_async::Error),
    /// The position to resume from no longer exists on the server (purged binlog, or a file
    /// number that went backwards). Not retryable: evict all state and restart at the current
    /// position ([`crate::StartAt::Current`]).
    #[error("binlog position {position} is gone from the server ({reason}); evict all state and resume at the current position")]
    PositionGone { position: BinlogPos, reason: String },
    /// The stream cannot prove that what the server sends next continues what it delivered
    /// (the server restarted, another server answers, its history at the resume position
    /// differs, a file began that no ROTATE announced). Not retryable: evict all state and
    /// restart at the current position. See `continuity`.
    #[error("binlog gap after {position}: {reason}; evict all state and resume at the current position")]
    Gap { position: BinlogPos, reason: String },
    /// A row could not be decoded with the table's schema (the schema from information_schema
    /// does not match the binlog's table map, e.g. after DDL the stream did not see). The
    /// stream cannot be trusted past this point: evict all state and restart.
    #[error("table `{table}`: {reason}")]
    SchemaMismatch { table: String, reason: String },
    /// A value could not be decoded. Same consequence as [`CdcError::SchemaMismatch`].
    #[error("table `{table}` column `{column}`: cannot decode binlog value: {reason}")]
    Decode { table: String, column: String, reason: String },
    /// The stream saw something whose effect it cannot deliver as row changes (an XA COMMIT).
    /// Evict all state; the stream itself can continue (`next` again) or restart.
    #[error("binlog stream cannot be trusted: {0}; evict all state")]
    Untrusted(String),
    /// A malformed binlog file name or position (internal or configuration error).
    #[error("bad binlog position: {0}")]
    BadPosition(String),
    /// Start-up checks failed; each line names the problem and its fix.
    #[error("upstream is not ready for freshet:\n{}", .0.join("\n"))]
    Checks(Vec<String>),
    /// An operation did not finish within its bound. Retrying is safe.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The binlog stream ended or sent something the protocol does not allow. Retrying
    /// (reconnecting) is safe.
    #[error("binlog protocol: {0}")]
    Protocol(String),
}

impl CdcError {
    /// True if reconnecting and resuming from the last delivered position is safe and useful.
    pub fn retry_safe(&self) -> bool {
        match self {
            CdcError::Upstream(e) => !matches!(e, mysql_async::Error::Server(s) if s.code == 1236),
            CdcError::Timeout(_) | CdcError::Protocol(_) => true,
            _ => false,
        }
    }
}
