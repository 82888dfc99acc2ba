//! Foreign key actions: rows InnoDB changes with no row event.
//!
//! Owns: [`Cascades`], the server's foreign keys whose ON DELETE or ON UPDATE rule is an action
//! (CASCADE, SET NULL, SET DEFAULT), read from information_schema, and the tables a delete or
//! update of a parent row may change through them, transitively. Does not own: noticing such
//! a delete or update (the stream, from the rows event's type) or what a consumer does about
//! the children (the cache engine evicts the views reading them).
//!
//! Why: the binlog holds the parent's row change only; a replica's InnoDB runs the action
//! again. So a child's cascaded deletes, moved references and cleared ones reach no reader of
//! the stream. Both actions are followed through every edge whatever its rules (a cascaded
//! delete of a child deletes or clears its own children; a cascaded update may too): a table
//! taken anew for nothing costs refills, a missed one serves deleted rows.

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use crate::error::CdcError;

/// Every foreign key of the server with an action, both ends as (database, table).
const SQL: &str = "SELECT UNIQUE_CONSTRAINT_SCHEMA, REFERENCED_TABLE_NAME, CONSTRAINT_SCHEMA, TABLE_NAME \
     FROM information_schema.REFERENTIAL_CONSTRAINTS \
     WHERE DELETE_RULE NOT IN ('RESTRICT', 'NO ACTION') OR UPDATE_RULE NOT IN ('RESTRICT', 'NO ACTION')";

/// Every foreign key the account sees whose rules it cannot read: MariaDB lists a key in
/// KEY_COLUMN_USAGE to an account with SELECT on its table, and in REFERENTIAL_CONSTRAINTS (its
/// rules) only to one with another privilege on it. Such a key is taken for one with an
/// action (a table taken anew for nothing costs refills; a missed one serves deleted rows).
const UNREAD_RULES: &str = "SELECT DISTINCT k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME, k.TABLE_SCHEMA, k.TABLE_NAME \
     FROM information_schema.KEY_COLUMN_USAGE k \
     WHERE k.REFERENCED_TABLE_NAME IS NOT NULL AND NOT EXISTS (SELECT 1 FROM information_schema.REFERENTIAL_CONSTRAINTS r \
       WHERE r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME)";

/// One foreign key with an action: (parent database, parent table, child database, child table).
type Edge = (String, String, String, String);

/// The server's foreign keys with actions (see the module header).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cascades {
    edges: Vec<Edge>,
}

impl Cascades {
    /// Reads them from the server: the keys with an action, and the keys whose rules the
    /// account cannot read ([`UNREAD_RULES`]).
    pub async fn load(conn: &mut Conn) -> Result<Cascades, CdcError> {
        let mut edges: Vec<Edge> = conn.query(SQL).await?;
        let unread: Vec<Edge> = conn.query(UNREAD_RULES).await?;
        if !unread.is_empty() {
            tracing::warn!(
                keys = unread.len(),
                "foreign keys whose rules freshet's account cannot read are taken for keys with actions \
                 (a delete of a parent evicts the child's caches); GRANT REFERENCES on their databases lets it read them"
            );
        }
        edges.extend(unread);
        Ok(Cascades::new(edges))
    }

    pub fn new(edges: Vec<Edge>) -> Cascades {
        Cascades { edges }
    }

    /// True if no foreign key has an action (nearly every schema: the stream's check is one
    /// branch then).
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    /// True if `db`.`table` is the parent of a known foreign key: DDL of it (a rename, which
    /// the key follows; a new key of its own, which a path through it may carry into another
    /// database) may change where actions reach.
    pub fn is_parent(&self, db: &str, table: &str) -> bool {
        self.edges.iter().any(|(pd, pt, _, _)| pd.eq_ignore_ascii_case(db) && pt.eq_ignore_ascii_case(table))
    }

    /// True if a table of `db` is the parent of a known foreign key.
    pub fn holds_parent(&self, db: &str) -> bool {
        self.edges.iter().any(|(pd, _, _, _)| pd.eq_ignore_ascii_case(db))
    }

    /// The tables of `database` whose rows a delete or update of a row of `db`.`table` may
    /// change with no row event: its children, theirs, and so on.
    pub fn changed_by(&self, db: &str, table: &str, database: &str) -> Vec<String> {
        // The table itself is among them only through a key (a comment's replies, deleted
        // with it): what a delete reaches, not where it starts.
        let mut reached: Vec<(&str, &str)> = Vec::new();
        let mut next: Vec<(&str, &str)> = vec![(db, table)];
        while let Some((d, t)) = next.pop() {
            for (pd, pt, cd, ct) in &self.edges {
                let child = (cd.as_str(), ct.as_str());
                if pd.eq_ignore_ascii_case(d)
                    && pt.eq_ignore_ascii_case(t)
                    && !reached.iter().any(|(rd, rt)| rd.eq_ignore_ascii_case(child.0) && rt.eq_ignore_ascii_case(child.1))
                {
                    reached.push(child);
                    next.push(child);
                }
            }
        }
        reached.into_iter().filter(|(d, _)| d.eq_ignore_ascii_case(database)).map(|(_, t)| t.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(p: (&str, &str), c: (&str, &str)) -> Edge {
        (p.0.into(), p.1.into(), c.0.into(), c.1.into())
    }

    #[test]
    fn children_are_followed_transitively_across_databases_and_cycles() {
        let c = Cascades::new(vec![
            edge(("app", "stories"), ("app", "comments")),
            edge(("app", "comments"), ("app", "replies")),
            edge(("app", "replies"), ("app", "comments")),
            edge(("other", "accounts"), ("other", "profiles")),
            edge(("other", "profiles"), ("app", "avatars")),
            edge(("app", "users"), ("other", "logins")),
        ]);
        assert_eq!(c.changed_by("app", "Stories", "app"), ["comments", "replies"]);
        assert_eq!(c.changed_by("other", "accounts", "app"), ["avatars"], "through a table of another database");
        assert!(c.changed_by("app", "users", "app").is_empty(), "a child in another database is not the stream's");
        assert!(c.changed_by("app", "votes", "app").is_empty());
        assert!(Cascades::default().is_empty());
        let replies = Cascades::new(vec![edge(("app", "comments"), ("app", "comments"))]);
        assert_eq!(replies.changed_by("app", "comments", "app"), ["comments"], "a table referencing itself");
    }
}
