//! Binlog positions and their mapping onto the dataflow's opaque [`Position`].
//!
//! Owns: [`BinlogPos`] (file name + byte offset, what both MariaDB and MySQL resume from) and
//! [`MariaGtid`] (domain-server-sequence). MySQL's GTID sets live in `gtid_set`.
//!
//! # The mapping
//! `Position = (file sequence number << 32) | offset`. A binlog file is named `base.NNNNNN`; the
//! sequence number is its numeric suffix, which the server increments on every rotation, and an
//! offset fits in 32 bits because event headers carry `log_pos` as a u32 (so a server can never
//! address a file past 4 GiB; `max_binlog_size` is at most 1 GiB, a file overshoots it by at
//! most one transaction). Hence the mapping is strictly monotonic in binlog order, across
//! rotations, which is what the dataflow needs:
//! - a batch's position is the end offset of its commit event, so batches strictly increase;
//! - a fill taken inside `START TRANSACTION WITH CONSISTENT SNAPSHOT` reports
//!   `binlog_snapshot_file:binlog_snapshot_position`, the end of the last transaction the
//!   snapshot contains, so "batch position <= fill position" is exactly "already in the fill".
//!
//! What breaks if it does not hold: a base name change (`log_bin_basename`) between two files, or
//! a `RESET MASTER` that restarts numbering, would make positions go backwards; the stream
//! reports those as position-gone (the caller evicts everything and starts at the current
//! position, always correct).

use std::fmt;

use freshet_dataflow::Position;

use crate::error::CdcError;

/// A place in the binlog: file name and byte offset within it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BinlogPos {
    /// File name as the server lists it (`SHOW BINARY LOGS`), without directory.
    pub file: String,
    /// Byte offset in the file (4 = just after the magic bytes).
    pub offset: u32,
}

impl fmt::Display for BinlogPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.offset)
    }
}

/// Splits `base.NNNNNN` into the base and the sequence number.
pub fn split_file_name(file: &str) -> Option<(&str, u32)> {
    let (base, digits) = file.rsplit_once('.')?;
    if base.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((base, digits.parse().ok()?))
}

impl BinlogPos {
    /// A position; no validation (see [`BinlogPos::position`]).
    pub fn new(file: impl Into<String>, offset: u32) -> BinlogPos {
        BinlogPos { file: file.into(), offset }
    }

    /// The file's sequence number (its numeric suffix).
    pub fn file_seq(&self) -> Result<u32, CdcError> {
        split_file_name(&self.file)
            .map(|(_, n)| n)
            .ok_or_else(|| CdcError::BadPosition(format!("binlog file name `{}` has no numeric suffix", self.file)))
    }

    /// The dataflow position: `(file sequence << 32) | offset`.
    pub fn position(&self) -> Result<Position, CdcError> {
        Ok(Position(((self.file_seq()? as u64) << 32) | self.offset as u64))
    }

    /// The inverse of [`BinlogPos::position`], given a file name of the same series (its base
    /// and digit count are reused).
    pub fn from_position(p: Position, like: &str) -> Result<BinlogPos, CdcError> {
        let (base, _) =
            split_file_name(like).ok_or_else(|| CdcError::BadPosition(format!("binlog file name `{like}` has no numeric suffix")))?;
        let width = like.len() - base.len() - 1;
        let seq = p.0 >> 32;
        Ok(BinlogPos { file: format!("{base}.{seq:0width$}"), offset: (p.0 & 0xFFFF_FFFF) as u32 })
    }
}

/// A MariaDB GTID: replication domain, originating server, sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MariaGtid {
    pub domain: u32,
    pub server: u32,
    pub seq: u64,
}

impl fmt::Display for MariaGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server, self.seq)
    }
}

impl MariaGtid {
    /// Parses `d-s-n`.
    pub fn parse(s: &str) -> Option<MariaGtid> {
        let mut it = s.trim().splitn(3, '-');
        let domain = it.next()?.parse().ok()?;
        let server = it.next()?.parse().ok()?;
        let seq = it.next()?.parse().ok()?;
        Some(MariaGtid { domain, server, seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn file_names() {
        assert_eq!(split_file_name("mariadb-bin.000004"), Some(("mariadb-bin", 4)));
        assert_eq!(split_file_name("a.b.1234567"), Some(("a.b", 1234567)));
        assert_eq!(split_file_name("nodigits"), None);
        assert_eq!(split_file_name("x.12a"), None);
        assert_eq!(split_file_name(".000001"), None);
    }

    #[test]
    fn rotation_orders_after_any_offset_of_the_previous_file() {
        let end_of_big_file = BinlogPos::new("b.000001", u32::MAX).position().unwrap();
        let start_of_next = BinlogPos::new("b.000002", 4).position().unwrap();
        assert!(end_of_big_file < start_of_next);
    }

    #[test]
    fn gtid_parse() {
        assert_eq!(MariaGtid::parse("0-1-5736"), Some(MariaGtid { domain: 0, server: 1, seq: 5736 }));
        assert_eq!(MariaGtid::parse("0-1"), None);
        assert_eq!(MariaGtid { domain: 1, server: 2, seq: 3 }.to_string(), "1-2-3");
    }

    proptest! {
        #[test]
        fn mapping_is_monotonic_and_invertible(a in 0u32..1_000_000, ao in any::<u32>(), b in 0u32..1_000_000, bo in any::<u32>()) {
            let pa = BinlogPos::new(format!("bin.{a:06}"), ao);
            let pb = BinlogPos::new(format!("bin.{b:06}"), bo);
            prop_assert_eq!((a, ao).cmp(&(b, bo)), pa.position().unwrap().cmp(&pb.position().unwrap()));
            prop_assert_eq!(BinlogPos::from_position(pa.position().unwrap(), "bin.000001").unwrap(), pa);
        }
    }
}
