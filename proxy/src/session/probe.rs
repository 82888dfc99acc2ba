//! Asking the server who a session is: the probe.
//!
//! One SELECT on the session's own upstream connection reads what the cached-read checks
//! need from the server instead of from the client's words: the account (`CURRENT_USER()`,
//! user and host as the server matched them, and the active role), the default database as
//! the server resolved it, the sql_mode, sql_select_limit, character sets, time zone,
//! `div_precision_increment`, `sql_auto_is_null`, `max_sort_length` and, with the cache
//! engine, the isolation level (READ UNCOMMITTED reads rows no view holds). It runs lazily,
//! right before a session's first cached read or admin statement (sessions that never read a
//! cached query never pay for it), and again after anything that may change its answer
//! (COM_INIT_DB, USE, COM_CHANGE_USER, COM_RESET_CONNECTION, SET NAMES, ...). Until the first,
//! a text that may read otherwise in a setting the tracker did not see (an `init_connect`)
//! brings it forward ([`Session::confirm_reading`]).
//!
//! What a client could observe: the probe is a SELECT returning one row, so it sets
//! `FOUND_ROWS()` to 1 and `ROW_COUNT()` to -1, and keeps the warnings (it reads no table),
//! as the client's own statement then sets them again: it only ever runs just before a read
//! the client sent, a write, or an admin statement. A write keeps `FOUND_ROWS()`. It takes
//! no locks and opens no transaction.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use crate::cache::route::{Identity, Reading};
use crate::metrics::UpstreamFailure;
use crate::protocol::cursor::Cursor;
use crate::protocol::response::{self, ERR};
use crate::protocol::{Capabilities, Command};

use super::{Session, SessionError};

const PROBE: &[u8] = b"SELECT CURRENT_USER(), CURRENT_ROLE(), DATABASE(), @@SESSION.sql_mode, @@SESSION.sql_select_limit, \
@@SESSION.character_set_client, @@SESSION.character_set_connection, @@SESSION.character_set_results, \
@@SESSION.collation_connection, @@lower_case_table_names, @@SESSION.time_zone, @@system_time_zone, \
@@SESSION.div_precision_increment, @@SESSION.sql_auto_is_null, @@SESSION.max_sort_length, @@SESSION.wait_timeout, \
UNIX_TIMESTAMP('2001-01-01 00:00:00') = 978307200 AND UNIX_TIMESTAMP('2001-07-01 00:00:00') = 993945600 AND NOW() = UTC_TIMESTAMP()";
const COLUMNS: usize = 17;
/// ER_MUST_CHANGE_PASSWORD: the session's password expired (the server's sandbox).
const MUST_CHANGE_PASSWORD: u16 = 1820;
/// The probe's reply is a dozen short values; anything larger is not the server's answer.
const LIMIT: usize = 64 * 1024;

/// sql_mode flags under which a cached answer is still the server's: they change what
/// writes accept or which statements are errors, not how a cached query's text is read or
/// what it returns (NO_ZERO_DATE and NO_ZERO_IN_DATE make `DATE()` NULL for some dates: a
/// session with them is served only queries that do not call it, `Reading::zero_dates`). Any other flag (ANSI_QUOTES, NO_BACKSLASH_ESCAPES, PIPES_AS_CONCAT,
/// PAD_CHAR_TO_FULL_LENGTH, ...) relays the session's cached reads.
const HARMLESS_MODES: &[&str] = &[
    "STRICT_TRANS_TABLES",
    "STRICT_ALL_TABLES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "NO_AUTO_CREATE_USER",
    "NO_ENGINE_SUBSTITUTION",
    "NO_ZERO_DATE",
    "NO_ZERO_IN_DATE",
    "ONLY_FULL_GROUP_BY",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_DIR_IN_CREATE",
    "SIMULTANEOUS_ASSIGNMENT",
    "TRADITIONAL",
    "ALLOW_INVALID_DATES",
];

impl Session {
    /// Runs the probe and keeps its answer; `Ok(None)` (and the session's cached reads
    /// relayed) if the server's answer is not the expected row. With `gtid`, the session's
    /// GTID expression, the same SELECT reads it for read-your-writes (`OwnWrites::asked`):
    /// one round trip where a read after a write would take two.
    pub(super) async fn probe(&mut self, gtid: Option<&'static str>) -> Result<Option<&Identity>, SessionError> {
        self.state.stale = false;
        // What the session learnt holds for as long as it is the same account (and the
        // access generation is the same: the memo checks that).
        let account = self.identity.take().map(|i| i.account);
        // With the cache engine, the isolation level (the flavor names it), then the GTID.
        let mut sql = PROBE.to_vec();
        let mut columns = COLUMNS;
        for expression in [self.shared.engine.get().map(|e| e.settings.session_isolation), gtid].into_iter().flatten() {
            sql.extend_from_slice(b", ");
            sql.extend_from_slice(expression.as_bytes());
            columns += 1;
        }
        let (values, results_collation) = self.one_row_described(&sql, columns, LIMIT, "the session probe").await?;
        let values = match gtid {
            None => values,
            Some(_) => values.map(|mut values| {
                self.own.probe_asked(values.pop().flatten());
                values
            }),
        };
        let Some(values) = values else {
            if self.refused_with == Some(MUST_CHANGE_PASSWORD) {
                // The server's sandbox: a login whose password expired runs nothing but SET
                // PASSWORD. Asked again before the next cached read; this one is relayed.
                self.state.stale = true;
                return Ok(None);
            }
            tracing::debug!("the server's answer to the session probe was not a row; cached reads are relayed");
            self.state.unfollowed = true;
            return Ok(None);
        };
        let mut identity = identity(values);
        // The collation of the result character set, which no variable shows (`SET NAMES x
        // COLLATE y` or a handshake in y sets it, `SET collation_connection` does not): every
        // text column of a result carries it, the probe's first (CURRENT_USER()) too. The
        // column definitions captured for one session are another's only if it is the same.
        let mut h = DefaultHasher::new();
        (identity.charset, results_collation).hash(&mut h);
        identity.charset = h.finish();
        if identity.misread || identity.misread_charset {
            // The session's texts are read here in the default mode; under this one they
            // may have been misread (a SET hidden in what looked like a string), and may be.
            tracing::debug!(
                "the session's sql_mode or character set changes how text is read; its cached reads are relayed until it is reset"
            );
            self.state.unfollowed = true;
        } else {
            self.state.confirmed = true;
        }
        tracing::Span::current().record("user", identity.account.as_ref());
        // What the session learnt holds for the same account, unless the server has read its
        // database privileges again since (USE, a stored routine of another database: a
        // database-level REVOKE the session outlived then takes effect for it) and a privilege
        // change was seen since it last read them before (without one, they are what they
        // were; a change the binlog does not carry is bounded by the age of what was learnt).
        // Only a sure re-read (USE, COM_INIT_DB) makes the session's privileges as new as its
        // generation: one that only may have been (a write, a call) may have left them its
        // login's, so a session learns again after each of these once a change was seen, and
        // once per seen change after USE. A reset reads nothing again: pools that reset at
        // each checkout keep what their sessions learnt.
        let generation = self.shared.engine.get().map(|e| e.access.generation());
        let read_again = self.memo_epoch != self.state.rights_epoch;
        if account.as_ref() != Some(&identity.account) || read_again && (generation.is_none() || self.memo_generation != generation) {
            self.memo.clear();
        }
        if self.memo_rights_read != self.state.rights_read_epoch {
            self.memo_generation = self.reread_generation;
            self.memo_rights_read = self.state.rights_read_epoch;
        }
        self.memo_epoch = self.state.rights_epoch;
        self.identity = Some(identity);
        self.note_prepared_database();
        Ok(self.identity.as_ref())
    }

    /// Before a text the session relays (a COM_QUERY's or COM_STMT_PREPARE's) while the server
    /// has not told how the session reads text (`SessionState::confirmed`): if the text may
    /// read otherwise in a character set or sql_mode set unseen (`init_connect`, the server's
    /// defaults: [`super::misreading::reads_otherwise_unseen`]), the server is asked first, so that
    /// what the tracker read of it is known to be what the server runs. The question is a
    /// SELECT, which sets `FOUND_ROWS()` and `ROW_COUNT()`: it is asked only before a text that
    /// sets them again without reading them (a SELECT of a table, a write, as for an owed
    /// read). Any other such text (a SET, a DDL, a prepare) leaves the session unfollowed.
    pub(super) async fn confirm_reading(&mut self, command: Command, payload: &[u8]) -> Result<(), SessionError> {
        if self.state.confirmed || self.state.unfollowed {
            return Ok(());
        }
        let sql = match command {
            Command::Query | Command::StmtPrepare => payload.get(1..).unwrap_or_default(),
            _ => return Ok(()),
        };
        if !super::misreading::reads_otherwise_unseen(sql) {
            return Ok(());
        }
        if command != Command::Query || super::owed::may_read_diagnostics(sql) || !super::owed::replaces_diagnostics(sql) {
            self.state.unfollowed("a text that reads otherwise in a setting the server was not asked about", sql);
            return Ok(());
        }
        // The text's own effect (a SET NAMES among its statements) is asked about later.
        let stale = self.state.stale;
        self.probe(None).await?;
        self.state.stale |= stale;
        Ok(())
    }

    /// Sends `sql` (a SELECT of one row and `columns` columns) on the session's own upstream
    /// connection and reads its reply to the end: the row's values (None per NULL), or None
    /// if the server answered with an error or no row. `what` names the asker in protocol
    /// errors. The probe and read-your-writes' GTID question both ask the server this way.
    pub(super) async fn one_row(
        &mut self,
        sql: &[u8],
        columns: usize,
        limit: usize,
        what: &'static str,
    ) -> Result<Option<Vec<Option<String>>>, SessionError> {
        Ok(self.one_row_described(sql, columns, limit, what).await?.0)
    }

    /// [`Session::one_row`], with the character set id of the reply's first column.
    async fn one_row_described(
        &mut self,
        sql: &[u8],
        columns: usize,
        limit: usize,
        what: &'static str,
    ) -> Result<(Option<Vec<Option<String>>>, Option<u16>), SessionError> {
        self.upstream.queue_packet(0, &[&[crate::protocol::Command::Query as u8][..], sql].concat());
        self.upstream_idle = false;
        self.upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
        let row = self.one_row_reply(columns, limit, what).await?;
        self.rest_upstream();
        Ok(row)
    }

    async fn one_row_reply(
        &mut self,
        columns: usize,
        limit: usize,
        what: &'static str,
    ) -> Result<(Option<Vec<Option<String>>>, Option<u16>), SessionError> {
        let protocol = |why: &str| protocol(what, why);
        // A server that does not answer (a session left mid-authentication by a malformed
        // COM_CHANGE_USER) holds the session only while its client is there, as a relayed
        // statement's slow answer does (`reply::client_gone`).
        let first = {
            let read = self.upstream.read_packet(limit);
            tokio::pin!(read);
            tokio::select! {
                biased;
                packet = &mut read => packet,
                () = super::reply::client_watched(self.client.get_ref().tcp()) => return Err(SessionError::ClientGone),
            }
        }
        .map_err(SessionError::from_upstream)?;
        self.refused_with = None;
        if first.payload.first() == Some(&ERR) {
            self.refused_with = first.payload.get(1..3).map(|c| u16::from_le_bytes([c[0], c[1]]));
            return Ok((None, None));
        }
        let count = Cursor::new(&first.payload).lenenc().map_err(|_| protocol("bad column count"))?;
        if count != columns as u64 {
            return Err(protocol("unexpected column count"));
        }
        let mut charset = None;
        for i in 0..columns {
            let def = self.upstream.read_packet(limit).await.map_err(SessionError::from_upstream)?;
            if i == 0 {
                let extended = self.caps.has(Capabilities::MARIADB_EXTENDED_TYPE_INFO);
                charset = crate::protocol::column::ColumnDef::parse_with(&def.payload, extended).ok().map(|d| d.charset);
            }
        }
        let eof = !self.caps.has(Capabilities::DEPRECATE_EOF);
        if eof {
            self.upstream.read_packet(limit).await.map_err(SessionError::from_upstream)?;
        }
        let mut row = None;
        loop {
            let p = self.upstream.read_packet(limit).await.map_err(SessionError::from_upstream)?;
            if response::is_terminator(&p.payload, self.caps) {
                self.status = response::terminator_status(&p.payload, self.caps).map_err(|_| protocol("short EOF packet"))?;
                return Ok((row, charset));
            }
            if p.payload.first() == Some(&ERR) {
                return Ok((None, None));
            }
            row = Some(text_row(&p.payload, columns).map_err(|_| protocol("short row"))?);
        }
    }
}

/// The values of a text-protocol row of `columns` columns (None per NULL).
fn text_row(payload: &[u8], columns: usize) -> Result<Vec<Option<String>>, crate::protocol::cursor::Truncated> {
    let mut c = Cursor::new(payload);
    let mut values = Vec::with_capacity(columns);
    for _ in 0..columns {
        if c.remaining().first() == Some(&0xfb) {
            c.skip(1)?;
            values.push(None);
        } else {
            let v = c.lenenc_bytes()?;
            values.push(Some(String::from_utf8_lossy(v).into_owned()));
        }
    }
    Ok(values)
}

/// The identity the probe's values describe.
fn identity(values: Vec<Option<String>>) -> Identity {
    let get = |i: usize| values.get(i).cloned().flatten();
    let current_user = get(0).unwrap_or_default();
    // CURRENT_USER() is `user@host`; a user name cannot contain `@` unquoted, the host can't
    // either, so the last `@` splits them.
    let (user, host) =
        current_user.rsplit_once('@').map(|(u, h)| (u.to_string(), h.to_string())).unwrap_or((current_user.clone(), String::new()));
    let role = get(1).filter(|r| !r.is_empty() && r != "NONE");
    // Names may hold `@` and `/` (quoted), so the two parts are told apart by the first's
    // length: `app@%/reader` as a user and role is `5:app@%/reader`, the user
    // `app@%/reader`@`%` alone is `14:app@%/reader@%`.
    let account: Arc<str> = match &role {
        Some(r) => format!("{}:{current_user}/{r}", current_user.len()).into(),
        None => format!("{}:{current_user}", current_user.len()).into(),
    };
    let sql_mode = get(3).unwrap_or_default();
    let unfit_mode = sql_mode.split(',').filter(|m| !m.is_empty()).find(|m| !HARMLESS_MODES.contains(&m.to_ascii_uppercase().as_str()));
    let limited = get(4).is_none_or(|l| l != u64::MAX.to_string());
    let utf8 = |i: usize| get(i).is_some_and(|c| c.to_ascii_lowercase().starts_with("utf8"));
    let unfit = if let Some(mode) = unfit_mode {
        Some(format!("sql_mode {mode}"))
    } else if limited {
        Some("sql_select_limit".to_string())
    } else if get(13).is_some_and(|v| v != "0") {
        // `WHERE id IS NULL` finds the last inserted row.
        Some("sql_auto_is_null".to_string())
    } else if get(14).and_then(|v| v.parse::<u64>().ok()).is_none_or(|n| n < 1024) {
        // A filesort would cut strings a view orders whole (`compile::sorting` lets a view
        // order strings of up to 1,020 bytes).
        Some("a max_sort_length below 1,024".to_string())
    } else if !(utf8(5) && utf8(6) && utf8(7)) {
        Some("a character set other than UTF-8".to_string())
    } else if get(COLUMNS).is_some_and(|level| level.eq_ignore_ascii_case("READ-UNCOMMITTED")) {
        // Reads other sessions' uncommitted rows, which no view holds.
        Some("READ UNCOMMITTED isolation".to_string())
    } else {
        None
    };
    // What the server's column definitions for one query depend on: the character sets and
    // collation, and the decimals of a quotient (a relayed reply may teach them to a session
    // with another `div_precision_increment`, which must not use them).
    let mut text = DefaultHasher::new();
    (&sql_mode, get(5), get(6), get(8)).hash(&mut text);
    let mut h = DefaultHasher::new();
    (get(5), get(6), get(7), get(8), get(12)).hash(&mut h);
    let reading = Reading {
        utc: utc(get(10).as_deref(), get(11).as_deref()) && get(16).as_deref() == Some("1"),
        default_division: get(12).as_deref() == Some("4"),
        // utf8mb3's general_ci weighs every character it holds as utf8mb4's does.
        general_ci: matches!(get(8).as_deref(), Some("utf8mb4_general_ci" | "utf8mb3_general_ci" | "utf8_general_ci")),
        // TRADITIONAL is shown expanded, with both.
        zero_dates: !sql_mode
            .split(',')
            .any(|m| matches!(m.to_ascii_uppercase().as_str(), "NO_ZERO_DATE" | "NO_ZERO_IN_DATE" | "TRADITIONAL")),
    };
    Identity {
        account,
        user,
        host,
        database: get(2),
        case_insensitive_names: get(9).is_some_and(|v| v != "0"),
        unfit,
        charset: h.finish(),
        text_reading: text.finish(),
        reading,
        misread: misreading(&sql_mode),
        misread_charset: get(5).is_some_and(|c| super::misreading::misread_charset(&c)),
        narrow_text: narrow(get(5).as_deref()) || narrow(get(6).as_deref()),
        keep_alive: keep_alive(get(15).as_deref()),
    }
}

/// How long the session's upstream connection may go without a command while reads are
/// answered from views, before freshet pings the server (`Session::keep_alive`), which counts
/// `wait_timeout` from the session's last command and would drop a session that reads only
/// cached rows: half the session's `wait_timeout` (a minute when the server does not say).
fn keep_alive(wait_timeout: Option<&str>) -> std::time::Duration {
    let seconds = wait_timeout.and_then(|w| w.parse::<u64>().ok()).unwrap_or(120);
    std::time::Duration::from_millis(seconds.saturating_mul(500))
}

/// Whether a character set is utf8mb3 (`utf8` in MariaDB before 10.6 and in MySQL 5.7),
/// which holds no character past U+FFFF.
fn narrow(charset: Option<&str>) -> bool {
    charset.is_some_and(|c| c.eq_ignore_ascii_case("utf8mb3") || c.eq_ignore_ascii_case("utf8"))
}

/// Whether `sql_mode` changes how text is read (ANSI_QUOTES, NO_BACKSLASH_ESCAPES, or ANSI,
/// which includes the first).
fn misreading(sql_mode: &str) -> bool {
    sql_mode.split(',').any(|m| matches!(m.to_ascii_uppercase().as_str(), "ANSI" | "ANSI_QUOTES" | "NO_BACKSLASH_ESCAPES"))
}

/// Whether a session whose `time_zone` is `zone` reads TIMESTAMPs in UTC: by offset, by the
/// name `UTC`, or `SYSTEM` on a host whose zone is UTC. A host zone's name is its abbreviation
/// at the server's start (`GMT` may be London's winter), so only `UTC` counts; any other zone
/// is not UTC here, which relays, never answers wrongly. A name is not enough either (the
/// POSIX zone `UTC+5` calls itself `UTC`, and a named zone is whatever the server's time zone
/// tables say): the probe also asks for the zone's offset now, in January and in July, and
/// all three must be zero (the caller's second condition).
fn utc(zone: Option<&str>, system: Option<&str>) -> bool {
    match zone {
        Some("+00:00" | "UTC") => true,
        Some("SYSTEM") => system == Some("UTC"),
        _ => false,
    }
}

fn protocol(asker: &str, what: &str) -> SessionError {
    SessionError::Upstream(format!("upstream protocol error in {asker}: {what}"), UpstreamFailure::Protocol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_of_last_gtid_as_mariadb_sends_it() {
        // The row packets MariaDB sends for `SELECT @@last_gtid` after a commit and before
        // any (an empty string, not NULL), a NULL, and a row cut short.
        let one = |p: &[u8]| text_row(p, 1).map(|mut v| v.pop().flatten());
        assert_eq!(one(b"\x070-1-123").unwrap().as_deref(), Some("0-1-123"));
        assert_eq!(one(b"\x00").unwrap().as_deref(), Some(""));
        assert_eq!(one(b"\xfb").unwrap(), None);
        assert!(one(b"\x09short").is_err());
    }

    fn values(user: &str, role: Option<&str>, mode: &str, limit: &str, results: Option<&str>) -> Vec<Option<String>> {
        let s = |v: &str| Some(v.to_string());
        vec![
            s(user),
            role.map(str::to_string),
            s("Shop"),
            s(mode),
            s(limit),
            s("utf8mb4"),
            s("utf8mb4"),
            results.map(str::to_string),
            s("utf8mb4_general_ci"),
            s("0"),
            s("SYSTEM"),
            s("UTC"),
            s("4"),
            s("0"),
            s("1024"),
            s("28800"),
            s("1"),
        ]
    }

    #[test]
    fn the_account_and_what_makes_a_session_unfit() {
        let max = u64::MAX.to_string();
        let id = identity(values("app@10.%", None, "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION", &max, Some("utf8mb4")));
        assert_eq!((&*id.account, id.user.as_str(), id.host.as_str(), id.database.as_deref()), ("8:app@10.%", "app", "10.%", Some("Shop")));
        assert_eq!(id.unfit, None);
        assert!(!id.case_insensitive_names);
        let anonymous = identity(values("@localhost", None, "", &max, Some("utf8mb4")));
        assert_eq!((anonymous.user.as_str(), anonymous.host.as_str()), ("", "localhost"));
        assert_eq!(&*identity(values("app@%", Some("reader"), "", &max, Some("utf8"))).account, "5:app@%/reader");
        // A user whose name spells another's and a role is another account.
        assert_eq!(&*identity(values("app@%/reader@%", None, "", &max, Some("utf8"))).account, "14:app@%/reader@%");
        assert!(identity(values("app@%", None, "ANSI_QUOTES", &max, Some("utf8mb4"))).unfit.is_some());
        assert!(identity(values("app@%", None, "NO_BACKSLASH_ESCAPES", &max, Some("utf8mb4"))).unfit.is_some());
        assert!(identity(values("app@%", None, "", "0", Some("utf8mb4"))).unfit.is_some());
        assert!(identity(values("app@%", None, "", &max, Some("latin1"))).unfit.is_some());
        assert!(identity(values("app@%", None, "", &max, None)).unfit.is_some());
        // A mode that changes how text is read.
        assert!(identity(values("app@%", None, "STRICT_ALL_TABLES,NO_BACKSLASH_ESCAPES", &max, Some("utf8mb4"))).misread);
        assert!(identity(values("app@%", None, "REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE", &max, None)).misread);
        assert!(!identity(values("app@%", None, "STRICT_ALL_TABLES,PIPES_AS_CONCAT", &max, None)).misread);
        // sql_auto_is_null = 1: `WHERE id IS NULL` finds the last inserted row.
        let mut auto = values("app@%", None, "", &max, Some("utf8mb4"));
        auto[13] = Some("1".to_string());
        assert!(identity(auto).unfit.is_some());
        // A filesort that cuts strings shorter than a view's ORDER BY may hold (a server's
        // default below 1,024, or an init_connect): relayed.
        for (sort_length, unfit) in [("1024", false), ("4096", false), ("512", true)] {
            let mut sorting = values("app@%", None, "", &max, Some("utf8mb4"));
            sorting[14] = Some(sort_length.to_string());
            assert_eq!(identity(sorting).unfit.is_some(), unfit, "max_sort_length {sort_length}");
        }
    }

    #[test]
    fn a_session_reads_as_views_compute_only_where_the_server_says_so() {
        let max = u64::MAX.to_string();
        assert_eq!(identity(values("app@%", None, "", &max, Some("utf8mb4"))).reading, Reading::VIEWS);
        let mut other = values("app@%", None, "", &max, Some("utf8mb4"));
        other[12] = Some("6".to_string());
        assert_eq!(identity(other).reading, Reading { default_division: false, ..Reading::VIEWS });
        let mut bin = values("app@%", None, "", &max, Some("utf8mb4"));
        bin[8] = Some("utf8mb4_bin".to_string());
        assert_eq!(identity(bin).reading, Reading { general_ci: false, ..Reading::VIEWS });
        // Laravel's strict mode: DATE() of a date with a zero part is NULL (an audit).
        for mode in ["STRICT_TRANS_TABLES,NO_ZERO_IN_DATE", "NO_ZERO_DATE", "TRADITIONAL,NO_ZERO_DATE,NO_ZERO_IN_DATE"] {
            let strict = values("app@%", None, mode, &max, Some("utf8mb4"));
            assert_eq!(identity(strict).reading, Reading { zero_dates: false, ..Reading::VIEWS }, "{mode}");
        }
        for (zone, system, is_utc) in [
            (Some("+00:00"), Some("CET"), true),
            (Some("UTC"), Some("CET"), true),
            (Some("SYSTEM"), Some("UTC"), true),
            (Some("SYSTEM"), Some("CET"), false),
            (Some("SYSTEM"), Some("GMT"), false),
            (Some("+02:00"), Some("UTC"), false),
            (Some("Europe/Berlin"), Some("UTC"), false),
            (None, Some("UTC"), false),
        ] {
            assert_eq!(utc(zone, system), is_utc, "{zone:?} on {system:?}");
        }
        // A zone that calls itself UTC and is not (the POSIX zone `UTC+5` on `SYSTEM`): the
        // offsets decide.
        assert!(identity(values("app@%", None, "", &max, Some("utf8mb4"))).reading.utc);
        let mut off = values("app@%", None, "", &max, Some("utf8mb4"));
        off[16] = Some("0".to_string());
        assert!(!identity(off).reading.utc);
    }
}
