//! Start-up checks: is the upstream configured so that freshet can follow it? Every failure is
//! one line that names the fix; all failures are reported at once.
//!
//! Owns: reading the relevant server variables and grants, and [`evaluate`] (pure, unit-tested
//! on constructed inputs). Checked: server version, `log_bin`, `binlog_format = ROW`,
//! `binlog_row_image = FULL`, MariaDB `log_bin_compress = OFF` (compressed row events are not
//! decoded), MySQL `binlog_row_value_options = ''` (partial JSON updates are not decoded),
//! REPLICATION SLAVE + REPLICATION CLIENT (MariaDB: BINLOG MONITOR), SELECT on the cached
//! tables, that the binlog filters (binlog-do-db, binlog-ignore-db) log the database, that a
//! replica binlogs what it applies (log_slave_updates), and that the cached tables exist and
//! are InnoDB (fills need consistent snapshots).

use std::collections::HashMap;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use crate::error::CdcError;
use crate::flavor::{self, Flavor, version_of};

/// Runs every check against the server behind `conn`; `Err(CdcError::Checks)` lists all
/// failures.
pub async fn check_upstream(conn: &mut Conn, database: &str, tables: &[&str]) -> Result<(), CdcError> {
    let version: String = conn.query_first("SELECT VERSION()").await?.unwrap_or_default();
    let flavor = flavor::detect(&version);
    let vars: Vec<(String, String)> = conn.query(VARIABLES).await?;
    let vars: HashMap<String, String> = vars.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect();
    let grants: Vec<String> = conn.query(flavor.show_grants_sql()).await?;
    let engines: Vec<(String, Option<String>)> =
        conn.exec("SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", (database,)).await?;
    let engines: HashMap<String, String> = engines.into_iter().map(|(t, e)| (t, e.unwrap_or_default())).collect();
    let status: Option<mysql_async::Row> = conn.query_first(flavor.current_position_sql()).await?;
    let filter =
        |i: usize| status.as_ref().and_then(|r| r.get_opt::<Option<String>, _>(i)).and_then(Result::ok).flatten().unwrap_or_default();
    let mut problems = evaluate(flavor.as_ref(), &version, &vars, &grants, database, tables);
    problems.extend(check_binlog_filters(database, &filter(2), &filter(3)));
    // A server that cannot say (an older MySQL 8.0 without SHOW REPLICA STATUS) is taken as no
    // replica: the check is for the common mistake, a read replica as the upstream.
    let replicating = conn.query::<mysql_async::Row, _>(flavor.replica_status_sql()).await.is_ok_and(|rows| !rows.is_empty());
    problems.extend(check_replica(replicating, &vars));
    problems.extend(check_engines(database, tables, &engines));
    if problems.is_empty() { Ok(()) } else { Err(CdcError::Checks(problems)) }
}

/// The check itself, on values already read.
pub fn evaluate(
    flavor: &dyn Flavor,
    version: &str,
    vars: &HashMap<String, String>,
    grants: &[String],
    database: &str,
    tables: &[&str],
) -> Vec<String> {
    let mut p = Vec::new();
    let (min_major, min_minor) = flavor.min_version();
    if version_of(version) < (min_major, min_minor) {
        p.push(format!(
            "server version {version} is too old: freshet needs {} {min_major}.{min_minor} or later; upgrade the server",
            flavor.name()
        ));
    }
    p.extend(binlog_settings(vars));
    let g = Grants::parse(grants);
    let (dump, client) = flavor.replication_privileges();
    if !dump.iter().any(|priv_| g.global(priv_)) {
        p.push("missing privilege REPLICATION SLAVE: `GRANT REPLICATION SLAVE ON *.* TO <freshet user>`".into());
    }
    if !client.iter().any(|priv_| g.global(priv_)) {
        p.push(format!("missing privilege {}: `GRANT {} ON *.* TO <freshet user>`", client[0], client[0]));
    }
    for t in tables {
        if !g.select_on(database, t) {
            p.push(format!("missing SELECT on `{database}`.`{t}`: `GRANT SELECT ON `{database}`.* TO <freshet user>`"));
        }
    }
    p
}

/// The server's global binlog settings that freshet needs, as read from `SHOW GLOBAL
/// VARIABLES`: one line naming the fix per setting that is wrong. Checked at start-up and,
/// since an operator may change them while freshet runs (`SET GLOBAL binlog_format`), again
/// by the position poll ([`crate::lag::spawn_position_poll`]).
pub fn binlog_settings(vars: &HashMap<String, String>) -> Vec<String> {
    let mut p = Vec::new();
    let var = |k: &str| vars.get(k).map(|v| v.to_ascii_uppercase());
    if var("log_bin").as_deref() != Some("ON") && var("log_bin").as_deref() != Some("1") {
        p.push("binary logging is off: start the server with log_bin (e.g. `log_bin = mysql-bin` in my.cnf) and restart it".into());
    }
    if var("binlog_format").as_deref() != Some("ROW") {
        p.push(format!(
            "binlog_format is {}: set `binlog_format = ROW` in my.cnf and `SET GLOBAL binlog_format = 'ROW'`",
            var("binlog_format").unwrap_or_else(|| "unknown".into())
        ));
    }
    if var("binlog_row_image").as_deref() != Some("FULL") {
        p.push(format!(
            "binlog_row_image is {}: set `binlog_row_image = FULL` in my.cnf and `SET GLOBAL binlog_row_image = 'FULL'`",
            var("binlog_row_image").unwrap_or_else(|| "unknown".into())
        ));
    }
    if var("log_bin_compress").as_deref() == Some("ON") {
        p.push(
            "log_bin_compress is ON: freshet does not decode compressed row events; `SET GLOBAL log_bin_compress = OFF` and in my.cnf"
                .into(),
        );
    }
    // The compiler takes 1 MiB as the floor of the server's `max_allowed_packet`: it lets views
    // compute string functions up to that, where the server answers NULL past its own limit.
    if let Some(n) = var("max_allowed_packet").and_then(|v| v.parse::<u64>().ok()).filter(|&n| n < 1 << 20) {
        p.push(format!(
            "max_allowed_packet is {n}: freshet's views compute strings of up to 1 MiB where the server answers NULL past its \
             max_allowed_packet; `SET GLOBAL max_allowed_packet = 16777216` and in my.cnf"
        ));
    }
    if var("binlog_row_value_options").is_some_and(|v| v.contains("PARTIAL_JSON")) {
        p.push(
            "binlog_row_value_options is PARTIAL_JSON: freshet needs whole JSON values; `SET GLOBAL binlog_row_value_options = ''`".into(),
        );
    }
    p
}

/// Reads the global binlog settings and checks them ([`binlog_settings`]).
pub async fn read_binlog_settings(conn: &mut Conn) -> Result<Vec<String>, CdcError> {
    let vars: Vec<(String, String)> = conn.query(VARIABLES).await?;
    Ok(binlog_settings(&vars.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect()))
}

/// The global variables the checks read.
const VARIABLES: &str = "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'binlog_row_image', \
     'log_bin_compress', 'binlog_row_value_options', 'log_slave_updates', 'log_replica_updates', 'max_allowed_packet')";

/// The server's binlog filters (`binlog-do-db`, `binlog-ignore-db`, as SHOW MASTER STATUS
/// lists them) must log the database: a filtered write never reaches freshet, whose caches would
/// serve the rows before it for good. Left to the operator, as for their replicas: with a
/// filter that keeps the database, DDL run from another default database is filtered too.
pub fn check_binlog_filters(database: &str, do_db: &str, ignore_db: &str) -> Vec<String> {
    let names = |list: &str| list.split(',').map(str::trim).filter(|d| !d.is_empty()).any(|d| d == database);
    let logged = (do_db.trim().is_empty() || names(do_db)) && !names(ignore_db);
    if logged {
        return Vec::new();
    }
    vec![format!(
        "the server does not log database `{database}` (binlog-do-db = '{do_db}', binlog-ignore-db = '{ignore_db}'): its writes \
         never reach freshet; remove the filter from my.cnf (or keep `{database}` in it) and restart the server"
    )]
}

/// A replica must write what it applies to its own binlog (`log_slave_updates`, MySQL's
/// `log_replica_updates`): otherwise the writes made on its primary, nearly all of them, never
/// reach freshet, whose caches would keep the rows of their first fills for good.
pub fn check_replica(replicating: bool, vars: &HashMap<String, String>) -> Vec<String> {
    let on = |k: &str| vars.get(k).is_some_and(|v| v.eq_ignore_ascii_case("ON") || v == "1");
    if !replicating || on("log_slave_updates") || on("log_replica_updates") {
        return Vec::new();
    }
    vec![
        "the server is a replica that does not binlog what it applies (log_slave_updates = OFF): its primary's writes \
          never reach freshet; set `log_slave_updates = ON` in its my.cnf and restart it, or point freshet at the primary"
            .into(),
    ]
}

/// Cached tables must exist and be InnoDB: fills are fenced by a consistent snapshot, which
/// non-transactional engines (MyISAM, Aria, MEMORY) do not have. `engines` is by the server's
/// table names: a table is found by its name as it is (on a server with case-sensitive names
/// `T` is not `t`), else without case (where the server keeps the case a table was created
/// with and freshet's names are folded).
pub fn check_engines(database: &str, tables: &[&str], engines: &HashMap<String, String>) -> Vec<String> {
    let mut p = Vec::new();
    for t in tables {
        let engine = engines.get(*t).or_else(|| engines.iter().find(|(n, _)| n.eq_ignore_ascii_case(t)).map(|(_, e)| e));
        match engine {
            None => p.push(format!("table `{database}`.`{t}` does not exist: create it or remove the queries that read it")),
            Some(e) if !e.eq_ignore_ascii_case("InnoDB") => p.push(format!(
                "table `{database}`.`{t}` uses engine {e}: fills need consistent snapshots; `ALTER TABLE `{database}`.`{t}` ENGINE = InnoDB`"
            )),
            Some(_) => {}
        }
    }
    p
}

/// What `SHOW GRANTS` lines give: (privileges, on) pairs.
struct Grants {
    entries: Vec<(Vec<String>, String)>,
}

impl Grants {
    fn parse(lines: &[String]) -> Grants {
        let mut entries = Vec::new();
        for l in lines {
            let up = l.to_ascii_uppercase();
            let Some(rest) = up.strip_prefix("GRANT ") else { continue };
            let Some(on_at) = rest.find(" ON ") else { continue };
            let privs = rest[..on_at].split(',').map(|p| p.trim().to_string()).collect();
            let target = rest[on_at + 4..].split(" TO ").next().unwrap_or("").trim().replace('`', "");
            entries.push((privs, target));
        }
        Grants { entries }
    }
    fn has(&self, privs: &[String], want: &str) -> bool {
        privs.iter().any(|p| p == want || p == "ALL PRIVILEGES" || p == "ALL")
    }
    fn global(&self, want: &str) -> bool {
        self.entries.iter().any(|(p, on)| on == "*.*" && self.has(p, want))
    }
    fn select_on(&self, db: &str, table: &str) -> bool {
        let (db, table) = (db.to_ascii_uppercase(), table.to_ascii_uppercase());
        self.entries
            .iter()
            .any(|(p, on)| self.has(p, "SELECT") && (on == "*.*" || *on == format!("{db}.*") || *on == format!("{db}.{table}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flavor::{MariaDb, MySql8};

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn good() -> HashMap<String, String> {
        vars(&[("log_bin", "ON"), ("binlog_format", "ROW"), ("binlog_row_image", "FULL"), ("log_bin_compress", "OFF")])
    }

    #[test]
    fn a_well_configured_server_passes() {
        let g = vec!["GRANT ALL PRIVILEGES ON *.* TO `freshet`@`%`".to_string()];
        assert!(evaluate(&MariaDb, "10.11.6-MariaDB", &good(), &g, "app", &["t"]).is_empty());
        let g =
            vec!["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `f`@`%`".to_string(), "GRANT SELECT ON `app`.* TO `f`@`%`".to_string()];
        assert!(evaluate(&MariaDb, "10.6.1-MariaDB", &good(), &g, "app", &["t"]).is_empty());
    }

    #[test]
    fn a_database_the_binlog_filters_out_is_refused() {
        assert!(check_binlog_filters("app", "", "").is_empty());
        assert!(check_binlog_filters("app", "other,app", "").is_empty());
        assert!(check_binlog_filters("app", "", "scratch").is_empty());
        for (do_db, ignore_db) in [("other", ""), ("", "scratch,app"), ("app", "app"), ("apps", "")] {
            let p = check_binlog_filters("app", do_db, ignore_db);
            assert_eq!(p.len(), 1, "{do_db:?} {ignore_db:?}");
            assert!(p[0].contains("does not log database `app`"));
        }
    }

    #[test]
    fn a_replica_must_binlog_what_it_applies() {
        assert!(check_replica(false, &good()).is_empty());
        let mut v = good();
        v.insert("log_slave_updates".into(), "OFF".into());
        let p = check_replica(true, &v);
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("log_slave_updates = ON"));
        v.insert("log_slave_updates".into(), "ON".into());
        assert!(check_replica(true, &v).is_empty());
        let mysql = vars(&[("log_replica_updates", "ON")]);
        assert!(check_replica(true, &mysql).is_empty());
    }

    /// A view computes a string function up to 1 MiB (the compiler's floor of the server's
    /// `max_allowed_packet`), where the server answers NULL past its own: a server below that
    /// floor is named (an audit: with 16 KiB, `CONCAT(txt, txt)` of 18,000 bytes was served
    /// whole where the server answers NULL and warning 1301).
    #[test]
    fn a_max_allowed_packet_below_a_mebibyte_is_named() {
        let mut v = good();
        v.insert("max_allowed_packet".into(), "16777216".into());
        assert!(binlog_settings(&v).is_empty());
        v.insert("max_allowed_packet".into(), "16384".into());
        let p = binlog_settings(&v);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("max_allowed_packet"), "{p:?}");
    }

    #[test]
    fn cached_tables_must_be_innodb() {
        let e: HashMap<String, String> =
            [("a".to_string(), "InnoDB".to_string()), ("b".to_string(), "MyISAM".to_string())].into_iter().collect();
        let p = check_engines("app", &["a", "B", "c"], &e);
        assert_eq!(p.len(), 2);
        assert!(p[0].contains("MyISAM") && p[0].contains("ENGINE = InnoDB"));
        assert!(p[1].contains("does not exist"));
        // Two tables whose names differ in case (a case-sensitive server): each is itself.
        let e: HashMap<String, String> =
            [("T".to_string(), "InnoDB".to_string()), ("t".to_string(), "MyISAM".to_string())].into_iter().collect();
        assert!(check_engines("app", &["T"], &e).is_empty());
        assert_eq!(check_engines("app", &["t"], &e).len(), 1, "t is MyISAM");
    }

    #[test]
    fn every_problem_is_reported_with_its_fix() {
        let v = vars(&[("log_bin", "OFF"), ("binlog_format", "MIXED"), ("binlog_row_image", "MINIMAL"), ("log_bin_compress", "ON")]);
        let g = vec!["GRANT SELECT ON `app`.`t` TO `f`@`%`".to_string()];
        let p = evaluate(&MariaDb, "10.4.1-MariaDB", &v, &g, "app", &["t", "u"]);
        let all = p.join("\n");
        assert_eq!(p.len(), 8, "{all}");
        for needle in [
            "upgrade",
            "log_bin",
            "binlog_format = ROW",
            "binlog_row_image = FULL",
            "log_bin_compress",
            "REPLICATION SLAVE",
            "BINLOG MONITOR",
            "`app`.`u`",
        ] {
            assert!(all.contains(needle), "{needle} in {all}");
        }
        let p = evaluate(
            &MySql8 { minor_at_least_4: false },
            "8.0.36",
            &vars(&[
                ("log_bin", "ON"),
                ("binlog_format", "ROW"),
                ("binlog_row_image", "FULL"),
                ("binlog_row_value_options", "PARTIAL_JSON"),
            ]),
            &["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `f`@`%`".to_string()],
            "app",
            &[],
        );
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("PARTIAL_JSON"));
    }
}
