//! Writes of other databases logged as statements: whether one may have reached the tracked
//! database.
//!
//! Owns: what the stream knows of other databases for that (their plain tables, read from the
//! server when a statement needs them and forgotten after DDL), and the verdict for one
//! statement. Does not own: reading the statement (`ddl::write_target`) nor the foreign keys
//! (`cascade`).
//!
//! A write logged as a statement changed rows no row event carries, so its group is untrusted
//! (every cache evicted, a replica copied again). pt-table-checksum logs each chunk so (`REPLACE
//! INTO percona.checksums ... SELECT ... FROM` the checked table), as does any session whose
//! `binlog_format` is STATEMENT or MIXED. Such a write of another database's table reaches the
//! tracked one only through something of the server's: a trigger of the table, a view (the
//! "table" is one), a MERGE table, a stored function the statement or a view calls, or a
//! foreign key's action. (Not a sequence: MariaDB refuses to log a write that uses one as a
//! statement, ERR 1665, and MIXED logs it as rows.) Rules:
//! - **Spared only if ruled out, by the server's word.** A statement is spared if it writes one
//!   table (`ddl::write_target`: INSERT, REPLACE, single-table UPDATE and DELETE) of another
//!   database, named or the statement's default one, and that table is plain: a base table of
//!   InnoDB, MyISAM, Aria or MEMORY, with no trigger, whose triggers freshet's account may see
//!   (information_schema lists a table's triggers only to an account with the TRIGGER
//!   privilege on it, so without it there is nothing to rule them out with); no foreign key
//!   action reaches the tracked database from it; no stored function on the server may write
//!   a table (`ddl::routine_writes` of each body in `mysql.proc`, which the account must be
//!   able to read: a view in the statement may call any function, so the calls in its text do
//!   not settle it); the database is not `mysql` (a function inserted into `mysql.proc` is
//!   no DDL). Anything else is untrusted, as before.
//! - **What is read holds for statements logged after it.** The server's position is read
//!   after the other queries, and only a statement that ends past it is judged by what they
//!   found: the first write the stream meets after a read is untrusted. A trigger, view or
//!   function dropped after a statement ran is dropped after it was logged, since a DDL waits
//!   for the metadata locks that the statement's transaction holds on the objects it used
//!   (tables, views, routines) until it ends, so a statement past the position ran with what
//!   was read or with DDL the stream sees after it.
//! - **Forgotten after DDL.** A database's entry after DDL of its tables (or its DROP); every
//!   entry, and whether a function writes (read once for all databases: a server's function
//!   bodies may be many), after any other statement that is neither a write nor DDL of
//!   tables: routines, triggers, views, grants, CREATE DATABASE; and every entry after any
//!   change of the `mysql` schema (a row event, a statement-logged write, DDL naming it:
//!   `mysql.proc` holds the routines). A temporary MERGE table
//!   (`ddl::may_make_temporary_merge`) spares nothing for the rest of the stream: it shadows
//!   the base table of its name for its session and is not in information_schema.
//! - MariaDB only: MySQL 8 has no `mysql.proc`, so nothing is spared there (untested live).

use std::collections::{HashMap, HashSet};

use freshet_dataflow::Position;
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use super::{BinlogStream, current_position};
use crate::ddl::{self, like_case};
use crate::error::CdcError;
use crate::flavor::Flavor;

/// What the stream knows of other databases (see the module header).
#[derive(Default)]
pub(super) struct Scope {
    /// By database, folded as the server folds names.
    dbs: HashMap<String, Known>,
    /// Whether a stored function on the server may write a table, as read with the first
    /// database read since routine DDL (a server's functions are read once, not per database:
    /// their bodies may be many).
    functions_write: Option<bool>,
    /// A temporary MERGE table may exist: nothing is spared.
    off: bool,
}

/// One database as read.
struct Known {
    /// Its plain tables, folded; empty when nothing can be spared (a stored function may write,
    /// or the functions could not be read).
    plain: HashSet<String>,
    /// The server's position after the read: statements that end at or before it are not
    /// judged by it.
    after: Position,
}

/// The engines whose tables hold their own rows and write nothing else.
const PLAIN_ENGINES: [&str; 4] = ["InnoDB", "MyISAM", "Aria", "MEMORY"];

impl Scope {
    /// A table of the `mysql` schema changed (its rows, by a row event or a statement, or its
    /// definition): `mysql.proc` holds the routines, so this is routine DDL. Everything is
    /// forgotten.
    pub(super) fn mysql_changed(&mut self) {
        self.dbs.clear();
        self.functions_write = None;
    }

    /// A statement that is neither a write nor transaction control was read: forget what it
    /// may have changed. `tables` are the databases of the tables it changed (table DDL), if it
    /// is table DDL; `dropped` a database it dropped.
    pub(super) fn after_ddl(&mut self, sql: &str, tables: &[String], dropped: Option<&str>, case_sensitive: bool) {
        if ddl::may_make_temporary_merge(sql) {
            if !self.off {
                tracing::info!("a temporary MERGE table may exist: every write logged as a statement is untrusted from here on");
            }
            self.off = true;
        }
        match (tables, dropped) {
            _ if tables.iter().map(String::as_str).chain(dropped).any(|d| d.eq_ignore_ascii_case("mysql")) => self.mysql_changed(),
            ([], None) => {
                self.dbs.clear();
                self.functions_write = None;
            }
            _ => {
                for db in tables.iter().map(String::as_str).chain(dropped) {
                    self.dbs.remove(&fold(case_sensitive, db));
                }
            }
        }
    }
}

impl BinlogStream {
    /// False if the write `sql`, logged as a statement and ending at `position`, cannot have
    /// changed a row of the tracked database (see the module header); true if it may have.
    pub(super) async fn may_reach_tracked(&mut self, sql: &str, default_db: &str, position: Position) -> bool {
        let Some((db, table)) = ddl::write_target(sql) else { return true };
        let db = db.unwrap_or_else(|| default_db.to_string());
        // The server's own tables hold its routines and accounts: a function inserted into
        // `mysql.proc` is no DDL, so no write there is spared.
        if db.is_empty()
            || self.scope.off
            || db.eq_ignore_ascii_case("mysql")
            || self.cfg.same_name(&db, &self.cfg.database)
            || !self.cascades.changed_by(&db, &table, &self.cfg.database).is_empty()
        {
            return true;
        }
        let key = self.fold(&db);
        if !self.scope.dbs.contains_key(&key) {
            match self.read_known(&db).await {
                Ok((known, functions_write)) => {
                    self.scope.dbs.insert(key.clone(), known);
                    self.scope.functions_write = Some(functions_write);
                }
                Err(e) => {
                    tracing::debug!(database = %db, error = %e, "could not read what may carry another database's writes; untrusted");
                    return true;
                }
            }
        }
        let table = self.fold(&table);
        self.scope.dbs.get(&key).is_none_or(|k| position <= k.after || !k.plain.contains(&table))
    }

    /// A name as the server compares it.
    pub(super) fn fold(&self, name: &str) -> String {
        fold(self.cfg.names_case_sensitive, name)
    }

    /// What `db` holds that a write may reach, and whether a stored function may write.
    async fn read_known(&mut self, db: &str) -> Result<(Known, bool), CdcError> {
        let nothing = Known { plain: HashSet::new(), after: Position(0) };
        if self.flavor.name() != "MariaDB" {
            return Ok((nothing, true));
        }
        let limit = self.cfg.query_timeout;
        let case_sensitive = self.cfg.names_case_sensitive;
        let known_functions = self.scope.functions_write;
        let flavor: &dyn Flavor = self.flavor.as_ref();
        if self.meta.is_none() {
            self.meta = Some(super::bounded(limit, "connect", Conn::new(self.opts.clone())).await?);
        }
        let Some(meta) = self.meta.as_mut() else { unreachable!("meta was set just above") };
        let read = async {
            let functions_write = match known_functions {
                Some(known) => known,
                None => any_function_writes(meta).await?,
            };
            if functions_write {
                return Ok((nothing, true));
            }
            let tables: Vec<(String, String, Option<String>)> =
                meta.exec("SELECT TABLE_NAME, TABLE_TYPE, ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", (db,)).await?;
            let triggers: Vec<String> = meta
                .exec("SELECT DISTINCT EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ?", (db,))
                .await?;
            let grants: Vec<(Option<String>, Option<String>)> = meta.query(TRIGGER_GRANTS).await?;
            let after = current_position(meta, flavor, limit).await?.position()?;
            let fold = |n: &str| fold(case_sensitive, n);
            let triggered: HashSet<String> = triggers.iter().map(|t| fold(t)).collect();
            let visible = |table: &str| {
                grants.iter().any(|g| match g {
                    (None, _) => true,
                    (Some(pattern), None) => like_case(pattern.as_bytes(), db.as_bytes(), case_sensitive),
                    (Some(d), Some(t)) => fold(d) == fold(db) && fold(t) == fold(table),
                })
            };
            let plain = tables
                .iter()
                .filter(|(name, kind, engine)| {
                    matches!(kind.as_str(), "BASE TABLE" | "SYSTEM VERSIONED")
                        && engine.as_deref().is_some_and(|e| PLAIN_ENGINES.iter().any(|p| p.eq_ignore_ascii_case(e)))
                        && !triggered.contains(&fold(name))
                        && visible(name)
                })
                .map(|(name, _, _)| fold(name))
                .collect();
            Ok::<_, CdcError>((Known { plain, after }, false))
        };
        match tokio::time::timeout(limit, read).await {
            Ok(Ok(read)) => Ok(read),
            Ok(Err(e)) => {
                self.meta = None;
                Err(e)
            }
            Err(_) => {
                self.meta = None;
                Err(CdcError::Timeout(format!("reading what may carry writes of `{db}`")))
            }
        }
    }
}

/// `name` as a server compares names: as it is if `case_sensitive`, else in lower case.
fn fold(case_sensitive: bool, name: &str) -> String {
    if case_sensitive { name.to_string() } else { name.to_lowercase() }
}

/// True if a stored function on the server may write a table, or the functions cannot be read
/// (`mysql.proc` needs SELECT on it). A package's functions (MariaDB's sql_mode ORACLE) are in
/// its body's row.
async fn any_function_writes(meta: &mut Conn) -> Result<bool, CdcError> {
    let bodies = "SELECT body, sql_mode, character_set_client FROM mysql.proc WHERE type IN ('FUNCTION', 'PACKAGE BODY')";
    match meta.query::<(Vec<u8>, Vec<u8>, String), _>(bodies).await {
        Ok(bodies) => {
            Ok(bodies.iter().any(|(b, mode, charset)| ddl::function_writes(&ddl::routine_body(b, charset), &String::from_utf8_lossy(mode))))
        }
        Err(mysql_async::Error::Server(e)) => {
            tracing::debug!(error = %e, "mysql.proc cannot be read: no write logged as a statement is spared");
            Ok(true)
        }
        Err(e) => Err(e.into()),
    }
}

/// Where freshet's account holds the TRIGGER privilege (the rows information_schema shows it of
/// its own grants; a role's are not there, which only spares less): (NULL, NULL) globally,
/// (pattern, NULL) for databases whose names match a LIKE pattern, (database, table).
const TRIGGER_GRANTS: &str = "SELECT TABLE_SCHEMA, TABLE_NAME FROM ( \
     SELECT GRANTEE, PRIVILEGE_TYPE, NULL AS TABLE_SCHEMA, NULL AS TABLE_NAME FROM information_schema.USER_PRIVILEGES \
     UNION ALL SELECT GRANTEE, PRIVILEGE_TYPE, TABLE_SCHEMA, NULL FROM information_schema.SCHEMA_PRIVILEGES \
     UNION ALL SELECT GRANTEE, PRIVILEGE_TYPE, TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLE_PRIVILEGES) AS p \
     WHERE PRIVILEGE_TYPE = 'TRIGGER' AND GRANTEE = CONCAT('''', \
     LEFT(CURRENT_USER(), LENGTH(CURRENT_USER()) - LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)) - 1), \
     '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')";

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Scope {
        let mut s = Scope::default();
        s.dbs.insert("other".into(), Known { plain: HashSet::from(["x".to_string()]), after: Position(0) });
        s.functions_write = Some(false);
        s
    }

    /// `mysql.proc` holds the routines: a change of it (DDL naming a `mysql` table, a write of
    /// one, a row event on one) is routine DDL, and what was known of every database and of
    /// the functions is forgotten (a ninth audit of the binlog: a function restored into
    /// `mysql.proc` by an INSERT, or its body changed by an UPDATE, wrote the tracked table
    /// from a write another database's that was spared).
    #[test]
    fn a_change_of_the_mysql_schema_forgets_everything() {
        let mut s = known();
        s.after_ddl("RENAME TABLE mysql.proc TO o.proc_old, o.procx TO mysql.proc", &["mysql".into(), "o".into()], None, false);
        assert!(s.dbs.is_empty() && s.functions_write.is_none());
        let mut s = known();
        s.mysql_changed();
        assert!(s.dbs.is_empty() && s.functions_write.is_none());
    }
}
