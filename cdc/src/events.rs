//! Binlog events as the stream needs them: one [`EventKind`] per kind of event, parsed from
//! mysql_common's [`Event`] (header + raw payload).
//!
//! Owns: which event types matter and what is read from each (rotate name, GTID flags, query
//! text, rows table id). Does not own: what the stream does with them (`stream`), MariaDB's
//! payload layouts (`mariadb_events`), row values (`decode`).
//!
//! Invariant: [`classify`] is total over arbitrary bytes — a malformed event is an error, never
//! a panic (the property test below builds events with random types and payloads).

use mysql_async::binlog::EventType;
use mysql_async::binlog::StatusVarKey;
use mysql_async::binlog::events::{Event, QueryEvent, RotateEvent, StatusVarVal};

use crate::error::CdcError;
use crate::mariadb_events::{self, GtidEvent};

/// What one event means to the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// MySQL TRANSACTION_PAYLOAD: the events it carries follow, without positions.
    Payload,
    /// ROTATE written in the binlog: the stream continues in `name` at `next`.
    Rotate { name: String, next: u32 },
    /// The artificial ROTATE the server sends first (position 0). Its name may carry the four
    /// checksum bytes: never take a position from it.
    FakeRotate { name: String },
    /// Keep-alive carrying the server's position.
    Heartbeat,
    /// A binlog file's FORMAT_DESCRIPTION, which the server sends at the start of each file it
    /// reads, whatever position the dump starts at: `created` is its header's timestamp, when
    /// the file was begun, which tells two files of one name apart (RESET MASTER).
    FormatDescription { created: u32 },
    /// MariaDB GTID: opens an event group.
    MariaGtid(GtidEvent),
    /// MySQL GTID or ANONYMOUS_GTID: opens an event group (BEGIN may follow).
    MysqlGtid,
    /// A statement: BEGIN/COMMIT/ROLLBACK/XA, DDL, or a write logged as a statement.
    Query { sql: String, schema: String },
    /// LOAD DATA logged as a statement (EXECUTE_LOAD_QUERY, or the older load events): rows
    /// changed with no row events.
    LoadData,
    /// XID: commit of a transactional group.
    Xid,
    /// XA PREPARE (event form): the group's rows are prepared, not committed, under `xid`
    /// ([`xid_key`]; None if the event could not be read). `one_phase`: MySQL's form of `XA
    /// COMMIT ... ONE PHASE`, an ordinary commit.
    XaPrepare { one_phase: bool, xid: Option<Box<str>> },
    /// An INCIDENT event: the server says its binlog lost events here (a statement that
    /// changed rows it could not log); a replica stops at it.
    Incident,
    /// A rows event (v1, v2 or partial) for `table_id`; `changes_existing` for updates and
    /// deletes (a foreign key's action may follow them, unlogged: `cascade`).
    Rows { table_id: u64, changes_existing: bool },
    /// MariaDB compressed query/rows events (`log_bin_compress`), not supported.
    Compressed,
    /// Anything else (format description, table map — tracked by the reader —, GTID lists,
    /// checkpoints, annotations, ...).
    Other,
}

/// Classifies `ev`.
pub fn classify(ev: &Event) -> Result<EventKind, CdcError> {
    let hdr = ev.header();
    let ty = hdr.event_type_raw();
    let is = |t: EventType| ty == t as u8;
    Ok(if is(EventType::TRANSACTION_PAYLOAD_EVENT) {
        EventKind::Payload
    } else if is(EventType::ROTATE_EVENT) {
        let r: RotateEvent<'_> = ev.read_event().map_err(proto)?;
        let name = r.name().into_owned();
        if hdr.log_pos() == 0 {
            EventKind::FakeRotate { name }
        } else {
            let next = u32::try_from(r.position()).map_err(|_| CdcError::Protocol("rotate to an offset past 4 GiB".into()))?;
            EventKind::Rotate { name, next }
        }
    } else if is(EventType::HEARTBEAT_EVENT) {
        EventKind::Heartbeat
    } else if is(EventType::FORMAT_DESCRIPTION_EVENT) {
        EventKind::FormatDescription { created: hdr.timestamp() }
    } else if ty == mariadb_events::GTID {
        EventKind::MariaGtid(
            mariadb_events::parse_gtid(ev.data(), hdr.server_id())
                .ok_or_else(|| CdcError::Protocol("malformed MariaDB GTID event".into()))?,
        )
    } else if is(EventType::GTID_EVENT) || is(EventType::ANONYMOUS_GTID_EVENT) || is(EventType::GTID_TAGGED_LOG_EVENT) {
        EventKind::MysqlGtid
    } else if is(EventType::QUERY_EVENT) {
        let q: QueryEvent<'_> = ev.read_event().map_err(proto)?;
        EventKind::Query { sql: query_text(q.query_raw(), text_charset(&q)), schema: q.schema().into_owned() }
    } else if is(EventType::EXECUTE_LOAD_QUERY_EVENT) || matches!(ty, 6 | 10 | 12) {
        // 6, 10 and 12: LOAD_EVENT, EXEC_LOAD_EVENT, NEW_LOAD_EVENT (pre-5.0 servers' forms).
        EventKind::LoadData
    } else if is(EventType::INCIDENT_EVENT) {
        EventKind::Incident
    } else if is(EventType::XID_EVENT) {
        EventKind::Xid
    } else if is(EventType::XA_PREPARE_LOG_EVENT) {
        let (one_phase, xid) = xa_prepare(ev.data());
        EventKind::XaPrepare { one_phase, xid }
    } else if matches!(ty, 23..=25 | 30..=32 | 39) {
        // The post-header starts with the 6-byte table id (binlog v4).
        let d = ev.data();
        let id = d.get(..6).ok_or_else(|| CdcError::Protocol("rows event too short".into()))?;
        // UPDATE and DELETE (v1 24-25, v2 31-32) and MySQL's partial updates (39) change rows
        // that exist; WRITE (23, 30) adds rows.
        EventKind::Rows {
            table_id: id.iter().rev().fold(0u64, |a, &b| (a << 8) | b as u64),
            changes_existing: matches!(ty, 24 | 25 | 31 | 32 | 39),
        }
    } else if (165..=171).contains(&ty) {
        EventKind::Compressed
    } else {
        EventKind::Other
    })
}

fn proto(e: std::io::Error) -> CdcError {
    CdcError::Protocol(e.to_string())
}

/// How a Query event's session wrote its text, by the client character set the event
/// carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TextCharset {
    /// utf8mb3 or utf8mb4.
    Utf8,
    /// swe7, whose `@ [ \ ] ^ ` { | } ~` are letters (É Ä Ö Å Ü é ä ö å ü): part of a name to
    /// the server.
    Swe7,
    /// Any other, or none said: its ASCII bytes are ASCII, and no other byte is read.
    Other,
}

/// A Query event's text as the stream reads it: UTF-8 (invalid bytes as U+FFFD) when its
/// session's character set is UTF-8, else its ASCII bytes with every other byte as U+FFFD
/// (swe7's letters among ASCII's punctuation too), which makes a text that has one
/// unreadable (`ddl::readable`).
pub(crate) fn query_text(raw: &[u8], charset: TextCharset) -> String {
    let swe7_letter = |b: u8| charset == TextCharset::Swe7 && b"@[\\]^`{|}~".contains(&b);
    match charset {
        TextCharset::Utf8 => String::from_utf8_lossy(raw).into_owned(),
        _ => raw.iter().map(|&b| if b.is_ascii() && !swe7_letter(b) { char::from(b) } else { char::REPLACEMENT_CHARACTER }).collect(),
    }
}

/// The character set a Query event's session wrote its text in (a collation id in the
/// event).
fn text_charset(q: &QueryEvent<'_>) -> TextCharset {
    let Some(var) = q.status_vars().get_status_var(StatusVarKey::Charset) else { return TextCharset::Other };
    let Ok(StatusVarVal::Charset { charset_client, .. }) = var.get_value() else { return TextCharset::Other };
    if utf8_collation(charset_client) {
        TextCharset::Utf8
    } else if matches!(charset_client, 10 | 82 | 1034 | 1106) {
        TextCharset::Swe7
    } else {
        TextCharset::Other
    }
}

/// Whether collation `id` is one of utf8mb3 or utf8mb4: MySQL's and MariaDB's (33, 45, 46, 83,
/// the UCA ones 192-215, 223-247, MySQL 8's 76 and 255-323, MariaDB's 576-578 and 608-610,
/// its UCA 14.0.0 ones 2048-2559), and MariaDB's NO PAD ones, whose ids are the PAD ones' plus
/// 1024.
fn utf8_collation(id: u16) -> bool {
    let id = if (1024..2048).contains(&id) { id - 1024 } else { id };
    matches!(id, 33 | 45 | 46 | 76 | 83 | 192..=215 | 223..=247 | 255..=323 | 576..=578 | 608..=610 | 2048..=2559)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_async::binlog::BinlogVersion;
    use mysql_async::binlog::events::FormatDescriptionEvent;
    use proptest::prelude::*;

    /// A v4 event: 19-byte header (no checksum before a format description says so) + body.
    fn event_bytes(ty: u8, log_pos: u32, body: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(0u32.to_le_bytes());
        b.push(ty);
        b.extend(1u32.to_le_bytes());
        b.extend((19 + body.len() as u32).to_le_bytes());
        b.extend(log_pos.to_le_bytes());
        b.extend(0u16.to_le_bytes());
        b.extend(body);
        b
    }

    fn read(bytes: &[u8]) -> Option<Event> {
        Event::read(&FormatDescriptionEvent::new(BinlogVersion::Version4), bytes).ok()
    }

    #[test]
    fn classifies_constructed_events() {
        let mut rot = 4u64.to_le_bytes().to_vec();
        rot.extend(b"bin.000002");
        assert_eq!(classify(&read(&event_bytes(4, 120, &rot)).unwrap()).unwrap(), EventKind::Rotate { name: "bin.000002".into(), next: 4 });
        assert!(matches!(classify(&read(&event_bytes(4, 0, &rot)).unwrap()).unwrap(), EventKind::FakeRotate { .. }));
        let mut g = 9u64.to_le_bytes().to_vec();
        g.extend(0u32.to_le_bytes());
        g.push(1);
        assert!(
            matches!(classify(&read(&event_bytes(162, 300, &g)).unwrap()).unwrap(), EventKind::MariaGtid(e) if e.standalone && e.gtid.seq == 9)
        );
        let mut rows = vec![0x2a, 0, 0, 0, 0, 0, 0, 0];
        rows.extend([1, 1, 0xff]);
        assert_eq!(
            classify(&read(&event_bytes(23, 400, &rows)).unwrap()).unwrap(),
            EventKind::Rows { table_id: 42, changes_existing: false }
        );
        assert_eq!(
            classify(&read(&event_bytes(32, 400, &rows)).unwrap()).unwrap(),
            EventKind::Rows { table_id: 42, changes_existing: true }
        );
        assert_eq!(classify(&read(&event_bytes(16, 500, &7u64.to_le_bytes())).unwrap()).unwrap(), EventKind::Xid);
        assert_eq!(classify(&read(&event_bytes(169, 500, &[0; 12])).unwrap()).unwrap(), EventKind::Compressed);
        assert_eq!(classify(&read(&event_bytes(18, 600, &[0; 40])).unwrap()).unwrap(), EventKind::LoadData);
        // INCIDENT_EVENT: type 1 (LOST_EVENTS), a message of 11 bytes.
        let incident = [&[1u8, 0, 11][..], b"lost events"].concat();
        assert_eq!(classify(&read(&event_bytes(26, 700, &incident)).unwrap()).unwrap(), EventKind::Incident);
    }

    proptest! {
        /// Fuzz: random types and payloads never panic in what the stream parses: our
        /// classification, rows events (`read_data`, only called for them), and the table
        /// maps and format descriptions mysql_async's reader parses for every stream.
        /// (`read_data` on *other* random event types can abort on a huge allocation inside
        /// mysql_common; the stream never calls it on them.)
        #[test]
        fn classify_is_total(ty in any::<u8>(), log_pos in any::<u32>(), body in proptest::collection::vec(any::<u8>(), 0..96)) {
            if let Some(ev) = read(&event_bytes(ty, log_pos, &body))
                && let Ok(EventKind::Rows { .. }) = classify(&ev)
            {
                let _ = ev.read_data();
            }
        }

        #[test]
        fn table_maps_and_format_descriptions_never_panic(fde in any::<bool>(), body in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Some(ev) = read(&event_bytes(if fde { 15 } else { 19 }, 5, &body)) {
                if fde {
                    let _ = ev.read_event::<FormatDescriptionEvent<'_>>();
                } else {
                    let _ = ev.read_event::<mysql_async::binlog::events::TableMapEvent<'_>>();
                }
            }
        }
    }
}

/// An XA_PREPARE_LOG_EVENT's body: `one_phase` (1 byte), then the XID: format id, gtrid
/// length and bqual length (4 bytes each, little-endian), gtrid and bqual.
fn xa_prepare(data: &[u8]) -> (bool, Option<Box<str>>) {
    let one_phase = data.first().is_some_and(|&b| b != 0);
    let int = |at: usize| data.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let xid = (|| {
        let (format, gtrid, bqual) = (int(1)? as i32, int(5)? as usize, int(9)? as usize);
        let ids = data.get(13..13usize.checked_add(gtrid)?.checked_add(bqual)?)?;
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        Some(format!("x'{}',x'{}',{format}", hex(&ids[..gtrid]), hex(&ids[gtrid..])).into_boxed_str())
    })();
    (one_phase, xid)
}

/// The XID of an `XA COMMIT`, `XA ROLLBACK` or `XA PREPARE` statement as the binlog logs it
/// (`XA COMMIT X'6331',X'',1`), in the form [`EventKind::XaPrepare`] names it: without spaces,
/// in lower case. `rest` is the text after the two words.
pub fn xid_key(rest: &str) -> Box<str> {
    rest.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_lowercase).collect::<String>().into_boxed_str()
}

#[cfg(test)]
mod text_tests {
    use super::{TextCharset, query_text};

    /// A text logged by a session whose character set is not UTF-8 keeps its ASCII, and every
    /// other byte is U+FFFD: in latin1 0xA0 is a space to the server, in GBK a byte before a
    /// backslash takes it into a character (a sixth audit of the binlog's texts).
    #[test]
    fn a_text_in_another_character_set_keeps_only_its_ascii() {
        assert_eq!(query_text(b"TRUNCATE\xa0t", TextCharset::Other), "TRUNCATE\u{FFFD}t");
        assert_eq!(query_text("SELECT 'é'".as_bytes(), TextCharset::Other), "SELECT '\u{FFFD}\u{FFFD}'");
        assert_eq!(query_text("SELECT 'é'".as_bytes(), TextCharset::Utf8), "SELECT 'é'");
        assert_eq!(query_text(b"SELECT '\xbf'", TextCharset::Utf8), "SELECT '\u{FFFD}'");
        // swe7's letters among ASCII's punctuation (a seventh audit: `TRUNCATE TABLE u]` of
        // the table `u]` truncated `u`).
        assert_eq!(query_text(b"TRUNCATE TABLE u]", TextCharset::Swe7), "TRUNCATE TABLE u\u{FFFD}");
        assert_eq!(query_text(b"TRUNCATE TABLE u]", TextCharset::Other), "TRUNCATE TABLE u]");
    }
}

#[cfg(test)]
mod xa_tests {
    use super::{xa_prepare, xid_key};

    #[test]
    fn an_xa_prepare_names_its_xid_as_the_commit_does() {
        // one_phase 0, format 7, gtrid "hx1", bqual "bq" (MariaDB 10.11's bytes).
        let mut data = vec![0u8];
        data.extend(7u32.to_le_bytes());
        data.extend(3u32.to_le_bytes());
        data.extend(2u32.to_le_bytes());
        data.extend(b"hx1bq");
        let (one_phase, xid) = xa_prepare(&data);
        assert!(!one_phase);
        assert_eq!(xid.as_deref(), Some(&*xid_key("X'687831',X'6271',7")));
        data[0] = 1;
        assert!(xa_prepare(&data).0, "MySQL's XA COMMIT ... ONE PHASE");
        assert_eq!(xa_prepare(&data[..10]).1, None, "cut short");
        let mut huge = data.clone();
        huge[5..9].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(xa_prepare(&huge).1, None, "lengths past the event");
    }
}
