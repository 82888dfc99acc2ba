//! MariaDB's own binlog events, which mysql_common hands over as unknown events with their raw
//! payload: GTID (162), GTID_LIST (163), ANNOTATE_ROWS (160), BINLOG_CHECKPOINT (161).
//!
//! Owns: their type codes and payload parsers. Every parser is total: malformed input gives
//! `None`, never a panic (a property test feeds it arbitrary bytes).

use crate::position::MariaGtid;

pub const ANNOTATE_ROWS: u8 = 160;
pub const BINLOG_CHECKPOINT: u8 = 161;
pub const GTID: u8 = 162;
pub const GTID_LIST: u8 = 163;
pub const START_ENCRYPTION: u8 = 164;

/// FL_STANDALONE: the event group has no BEGIN/COMMIT (DDL), it is the single next event.
const FL_STANDALONE: u8 = 1;

/// A MariaDB GTID event: the start of an event group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GtidEvent {
    pub gtid: MariaGtid,
    /// True for DDL and other statements that are their own group (no XID/COMMIT follows).
    pub standalone: bool,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Parses a GTID event payload: seq_no u64, domain_id u32, flags u8, ...; the server id comes
/// from the event header.
pub fn parse_gtid(data: &[u8], server_id: u32) -> Option<GtidEvent> {
    let seq = u64_at(data, 0)?;
    let domain = u32_at(data, 8)?;
    let flags = *data.get(12)?;
    Some(GtidEvent { gtid: MariaGtid { domain, server: server_id, seq }, standalone: flags & FL_STANDALONE != 0 })
}

/// Parses a GTID_LIST payload: count (low 28 bits) then (domain u32, server u32, seq u64) each.
pub fn parse_gtid_list(data: &[u8]) -> Option<Vec<MariaGtid>> {
    let n = (u32_at(data, 0)? & 0x0FFF_FFFF) as usize;
    if data.len() < 4 + n.checked_mul(16)? {
        return None;
    }
    (0..n)
        .map(|i| {
            let at = 4 + i * 16;
            Some(MariaGtid { domain: u32_at(data, at)?, server: u32_at(data, at + 4)?, seq: u64_at(data, at + 8)? })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn gtid_and_list() {
        let mut d = 42u64.to_le_bytes().to_vec();
        d.extend(7u32.to_le_bytes());
        d.push(1);
        assert_eq!(parse_gtid(&d, 3), Some(GtidEvent { gtid: MariaGtid { domain: 7, server: 3, seq: 42 }, standalone: true }));
        assert_eq!(parse_gtid(&d[..10], 3), None);
        let mut l = 1u32.to_le_bytes().to_vec();
        l.extend(0u32.to_le_bytes());
        l.extend(1u32.to_le_bytes());
        l.extend(5736u64.to_le_bytes());
        assert_eq!(parse_gtid_list(&l), Some(vec![MariaGtid { domain: 0, server: 1, seq: 5736 }]));
        assert_eq!(parse_gtid_list(&l[..10]), None);
    }

    proptest! {
        #[test]
        fn parsers_are_total(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_gtid(&b, 1);
            let _ = parse_gtid_list(&b);
        }
    }
}
