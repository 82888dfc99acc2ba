//! Server flavors: every difference between MariaDB and MySQL 8 that cdc depends on, as
//! capability methods of one trait (no `if mariadb` elsewhere).
//!
//! MariaDB is tested live (10.11); MySQL 8 is written from the documentation and unit-tested on
//! constructed inputs only (docs/mysql8.md lists what).

use std::time::Duration;

/// How a fill from the live server is tied to a binlog position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceKind {
    /// `START TRANSACTION WITH CONSISTENT SNAPSHOT` exposes `binlog_snapshot_file` /
    /// `binlog_snapshot_position` (MariaDB): the snapshot is exactly at a binlog position.
    SnapshotPosition,
    /// Read `gtid_executed` before and after the query and accept only if nothing relevant
    /// committed in between (MySQL 8, which has no snapshot position).
    GtidBracket,
}

/// What differs between server flavors.
pub trait Flavor: Send + Sync + std::fmt::Debug {
    /// "MariaDB" or "MySQL".
    fn name(&self) -> &'static str;
    /// Session statements a binlog connection runs before asking for the dump.
    fn binlog_session_setup(&self, heartbeat: Duration) -> Vec<String>;
    /// A statement whose first row starts with the current binlog file and position.
    fn current_position_sql(&self) -> &'static str;
    /// A SELECT of the GTID of the last group the server logged in each domain
    /// (comma-separated), or None where the server has no such list.
    fn last_gtids_sql(&self) -> Option<&'static str>;
    /// True if JSON columns are LONGTEXT with a `json_valid` CHECK (MariaDB); false if JSON is
    /// a type of its own, binary in the binlog (MySQL).
    fn json_is_text(&self) -> bool;
    /// How fills are fenced.
    fn fence(&self) -> FenceKind;
    /// Oldest supported version (major, minor).
    fn min_version(&self) -> (u16, u16);
    /// The statement that lists the grants of the current user.
    fn show_grants_sql(&self) -> &'static str {
        "SHOW GRANTS FOR CURRENT_USER()"
    }
    /// The replication privilege names as `SHOW GRANTS` prints them: (dump the binlog, see
    /// binlog positions).
    fn replication_privileges(&self) -> (&'static [&'static str], &'static [&'static str]);
    /// A statement that lists the server's own replication connections (none when it is not a
    /// replica).
    fn replica_status_sql(&self) -> &'static str;
    /// A statement whose one row is: the server id, the server's start time (unix seconds),
    /// and a server UUID where the server has one (else NULL). Tells a restarted or another
    /// server apart from the one a stream followed.
    fn identity_sql(&self) -> &'static str;
    /// A statement whose one row is the server's GTID state at the binlog place `file:offset`
    /// (comma-separated GTIDs, one per domain), or None where the server cannot say. Proves
    /// that a resume position means the same history on this server as on the one followed.
    fn gtid_state_at_sql(&self, file: &str, offset: u32) -> Option<String>;
    /// An expression that, selected on a client's own session, names the GTID of that
    /// session's last commit (`domain-server-seq`, empty if none), then after a space the
    /// server's last GTID in each domain (comma-separated), or None where the server has no
    /// such read-only variable. Read-your-writes selects it right before a cached read, where
    /// the client's own SELECT would have cleared the same session state (alone, or as one
    /// more column of the session probe); the server's list tells whether a domain was
    /// numbered again (RESET MASTER, `DELETE_DOMAIN_ID`).
    fn session_gtid(&self) -> Option<&'static str>;
    /// A SELECT of one row and one column, run on a client's own session: how many temporary
    /// tables the session has created, its statements and the stored code they ran alike; None
    /// where the server counts no such thing.
    fn temporary_tables_made_sql(&self) -> Option<&'static str>;
    /// The session's transaction isolation level, selected on a client's own session
    /// (`READ-UNCOMMITTED`, `REPEATABLE-READ`, ...).
    fn session_isolation(&self) -> &'static str;
}

/// MariaDB 10.6+.
#[derive(Debug, Clone, Copy)]
pub struct MariaDb;

impl Flavor for MariaDb {
    fn name(&self) -> &'static str {
        "MariaDB"
    }
    fn binlog_session_setup(&self, heartbeat: Duration) -> Vec<String> {
        vec![
            // Without capability 4 (MARIA_SLAVE_CAPABILITY_GTID) the server rewrites GTID events
            // into dummy query events and transaction boundaries are lost.
            "SET @mariadb_slave_capability = 4".into(),
            // Heartbeats (nanoseconds) keep an idle stream observably alive and carry the
            // server's current position, which the lag uses.
            format!("SET @master_heartbeat_period = {}", heartbeat.as_nanos()),
        ]
    }
    fn current_position_sql(&self) -> &'static str {
        "SHOW MASTER STATUS"
    }
    fn last_gtids_sql(&self) -> Option<&'static str> {
        Some("SELECT @@gtid_binlog_pos")
    }
    fn identity_sql(&self) -> &'static str {
        "SELECT @@server_id, CAST(UNIX_TIMESTAMP() - VARIABLE_VALUE AS SIGNED), NULL \
         FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'"
    }
    fn session_gtid(&self) -> Option<&'static str> {
        Some("CONCAT(@@last_gtid, ' ', @@gtid_binlog_pos)")
    }
    fn temporary_tables_made_sql(&self) -> Option<&'static str> {
        // Counted for statements run by stored functions and triggers too (`Com_create_table`
        // is not): what a session's texts cannot show.
        Some("SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_CREATE_TEMPORARY_TABLE'")
    }
    fn session_isolation(&self) -> &'static str {
        // `transaction_isolation` only from 11.1.
        "@@SESSION.tx_isolation"
    }
    fn gtid_state_at_sql(&self, file: &str, offset: u32) -> Option<String> {
        // A binlog file name is the server's own (`base.NNNNNN`); quoting keeps any name inert.
        Some(format!("SELECT BINLOG_GTID_POS('{}', {offset})", file.replace('\\', "\\\\").replace('\'', "\\'")))
    }
    fn json_is_text(&self) -> bool {
        true
    }
    fn fence(&self) -> FenceKind {
        FenceKind::SnapshotPosition
    }
    fn min_version(&self) -> (u16, u16) {
        (10, 6)
    }
    fn replication_privileges(&self) -> (&'static [&'static str], &'static [&'static str]) {
        // MariaDB 10.5 renamed REPLICATION CLIENT to BINLOG MONITOR (the old name is an alias).
        (&["REPLICATION SLAVE"], &["BINLOG MONITOR", "REPLICATION CLIENT"])
    }
    fn replica_status_sql(&self) -> &'static str {
        "SHOW ALL SLAVES STATUS"
    }
}

/// MySQL 8.0+ (untested live; see docs/mysql8.md).
#[derive(Debug, Clone, Copy)]
pub struct MySql8 {
    /// 8.4 removed `SHOW MASTER STATUS`.
    pub minor_at_least_4: bool,
}

impl Flavor for MySql8 {
    fn name(&self) -> &'static str {
        "MySQL"
    }
    fn binlog_session_setup(&self, heartbeat: Duration) -> Vec<String> {
        vec![format!("SET @master_heartbeat_period = {}", heartbeat.as_nanos())]
    }
    fn current_position_sql(&self) -> &'static str {
        if self.minor_at_least_4 { "SHOW BINARY LOG STATUS" } else { "SHOW MASTER STATUS" }
    }
    fn last_gtids_sql(&self) -> Option<&'static str> {
        // Read-your-writes has no session GTID to compare them with (`session_gtid`).
        None
    }
    fn identity_sql(&self) -> &'static str {
        "SELECT @@server_id, CAST(UNIX_TIMESTAMP() - VARIABLE_VALUE AS SIGNED), @@server_uuid \
         FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Uptime'"
    }
    fn session_gtid(&self) -> Option<&'static str> {
        // The session's own GTID is only told through session_track_gtids (OWN_GTID), which
        // would add session-state data to the OK packets the client sees; @@gtid_executed is
        // the server's set, not the session's. Writes fall back to the server's position.
        None
    }
    fn temporary_tables_made_sql(&self) -> Option<&'static str> {
        // MySQL counts no temporary tables per session (docs/mysql8.md, untested live).
        None
    }
    fn session_isolation(&self) -> &'static str {
        // `tx_isolation` is gone from 8.0 (untested live).
        "@@SESSION.transaction_isolation"
    }
    fn gtid_state_at_sql(&self, _file: &str, _offset: u32) -> Option<String> {
        // MySQL has no function for it; the server UUID and start time are what is checked.
        None
    }
    fn json_is_text(&self) -> bool {
        false
    }
    fn fence(&self) -> FenceKind {
        FenceKind::GtidBracket
    }
    fn min_version(&self) -> (u16, u16) {
        (8, 0)
    }
    fn replication_privileges(&self) -> (&'static [&'static str], &'static [&'static str]) {
        (&["REPLICATION SLAVE"], &["REPLICATION CLIENT"])
    }
    fn replica_status_sql(&self) -> &'static str {
        "SHOW REPLICA STATUS"
    }
}

/// Picks the flavor from `SELECT VERSION()`.
pub fn detect(version: &str) -> Box<dyn Flavor> {
    if version.to_ascii_lowercase().contains("mariadb") {
        Box::new(MariaDb)
    } else {
        let mut parts = version.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u16>().ok());
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        Box::new(MySql8 { minor_at_least_4: (major, minor) >= (8, 4) })
    }
}

/// (major, minor) of a version string, `(0, 0)` if unreadable.
pub fn version_of(version: &str) -> (u16, u16) {
    let mut parts = version.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u16>().ok());
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_flavors() {
        assert_eq!(detect("10.11.19-MariaDB-0+deb12u1-log").name(), "MariaDB");
        let m = detect("8.0.36");
        assert_eq!(m.name(), "MySQL");
        assert_eq!(m.current_position_sql(), "SHOW MASTER STATUS");
        assert_eq!(detect("8.4.0").current_position_sql(), "SHOW BINARY LOG STATUS");
        assert_eq!(version_of("10.11.19-MariaDB"), (10, 11));
    }
}
