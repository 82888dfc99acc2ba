//! freshet-cdc: the upstream's change stream and the fill source that reads the live server.
//!
//! Owns (see ARCHITECTURE.md): the binlog client and decoder, binlog positions (file:offset,
//! GTID), reconnect/resume, DDL detection, the fenced upstream fill source, and the RocksDB
//! replica. Nothing is implemented here yet; the work is tracked by the cdc issue. The crate
//! exists so that the workspace has its final shape and later work slots in without moves.
