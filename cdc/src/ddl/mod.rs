//! DDL detection in binlog query events: which tables a statement changes, and how.
//!
//! Owns: a small tokenizer for the heads of DDL statements (comments, quoted identifiers,
//! qualified names) and [`parse_ddl`]. Does not own: re-reading the schema (the stream does,
//! from information_schema, before the next row event of the table).
//!
//! Deliberately conservative: it recognises ALTER/CREATE/DROP/RENAME/TRUNCATE TABLE and
//! CREATE/DROP INDEX; anything else is not DDL on a table. A statement it cannot parse past the
//! keyword still names its first table, and the stream refreshes that table: refreshing too
//! often costs a query, missing a refresh would decode with the wrong shape (which the table-map
//! check would then catch).

mod reading;

pub use reading::readable;
use reading::{Cursor, Lexer, Reading, Tok, charset_may_differ, readings, statements, tokens};

/// What a statement did to a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DdlKind {
    Create,
    Alter,
    Drop,
    /// Renamed away from this name (the new name gets a `RenamedTo`). Another table may hold
    /// the name by the time the stream reads the schema (a swap).
    RenamedFrom,
    /// Another table's rows are under this name now (RENAME TABLE, ALTER ... RENAME TO): a new
    /// table whatever its schema, never a no-op, even when the old one's schema was the same
    /// (tables swapped by an online schema change or a migration).
    RenamedTo,
    /// Rows removed or replaced without row events: TRUNCATE, and partition or tablespace
    /// maintenance (EXCHANGE, TRUNCATE, DROP, CONVERT PARTITION, IMPORT TABLESPACE). The
    /// table's rows are taken anew.
    Truncate,
    /// The table's database was dropped.
    DatabaseDropped,
    /// Not DDL: a foreign key's action (ON DELETE or ON UPDATE CASCADE, SET NULL) changed
    /// rows of the table in the batch at the same position, with no row event. Its schema is
    /// unchanged; its rows are taken anew.
    Cascaded,
    /// Not a table of the tracked database: what accounts may read may have changed (GRANT,
    /// REVOKE, DROP/RENAME USER or ROLE (CREATE OR REPLACE too), FLUSH PRIVILEGES, a write to
    /// the `mysql` schema or DDL of its tables; [`privileges_may_change`]). The change's
    /// `table` is empty. Consumers that remember what an account may read forget it.
    Privileges,
}

/// One table a DDL statement touched: (database if qualified, table, kind).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DdlTarget {
    pub database: Option<String>,
    pub table: String,
    pub kind: DdlKind,
}

/// True if a binlogged statement may change what an account may read of the tables of
/// `tracked` (see [`DdlKind::Privileges`]); `default_db` is the statement's default database
/// (None if not known). Errs towards true where a statement can change it (a false alarm
/// costs each account a relayed read per cache, a miss would keep stale rights), but not
/// where any login can send it: a password or default role set for oneself (SET PASSWORD,
/// SET DEFAULT ROLE, MySQL's ALTER USER of oneself) changes no grant, and neither does DDL
/// that only names `mysql` (a view's alias) or a new account (CREATE USER, CREATE ROLE). A
/// GRANT or REVOKE on objects of another database changes nothing here ([`grant_reaches`]).
pub fn privileges_may_change(sql: &str, default_db: Option<&str>, tracked: &str) -> bool {
    statements(sql).is_none_or(|all| all.iter().any(|toks| privileges_may_change_read(sql, toks, default_db, tracked)))
}

fn privileges_may_change_read(sql: &str, toks: &[Tok], default_db: Option<&str>, tracked: &str) -> bool {
    let word = |i: usize| match toks.get(i) {
        Some(Tok::Word(w)) => w.to_ascii_uppercase(),
        _ => String::new(),
    };
    let (first, second) = (word(0), word(1));
    let account = |w: &str| matches!(w, "USER" | "ROLE");
    let in_mysql = default_db.is_some_and(|d| d.eq_ignore_ascii_case("mysql"));
    match first.as_str() {
        "GRANT" | "REVOKE" => grant_reaches(toks, default_db, tracked),
        // Which account a name is, or its rights gone with it. A new account (CREATE USER,
        // CREATE ROLE) has no rights and no open session is it; ALTER USER changes how an
        // account logs in, not what it may read.
        "DROP" | "RENAME" if account(&second) => true,
        // CREATE OR REPLACE USER / ROLE drops the one there was.
        "CREATE" if second == "OR" && account(&word(3)) => true,
        "FLUSH" => toks.iter().any(|t| matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case("privileges"))),
        // A privilege table itself replaced, altered or emptied (in effect at the next FLUSH
        // PRIVILEGES or restart), or the `mysql` database dropped.
        "CREATE" | "ALTER" | "DROP" | "RENAME" | "TRUNCATE" => {
            in_mysql
                || parse_drop_database(sql).is_some_and(|d| d.eq_ignore_ascii_case("mysql"))
                || parse_ddl(sql).iter().any(|t| t.database.as_deref().is_some_and(|d| d.eq_ignore_ascii_case("mysql")))
        }
        // A write to the privilege tables logged as a statement: the `mysql` schema named as
        // a qualifier anywhere, or the default database.
        "INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "LOAD" => {
            in_mysql || toks.windows(2).any(|w| matches!(w, [Tok::Word(d) | Tok::Quoted(d), Tok::Dot] if d.eq_ignore_ascii_case("mysql")))
        }
        _ => false,
    }
}

/// Whether a GRANT or REVOKE (`toks`) may reach the tables of database `tracked`. Only one
/// `ON` a database other than `tracked` does not: `ON other.*`, `ON other.t`, `ON
/// PROCEDURE other.p`, or an unqualified `ON t` / `ON *` in another default database. A
/// database-level grant names a pattern (`%` and `_` are wildcards, `\` escapes one), read
/// without case; table grants name it exactly, which the pattern reading only widens. Roles
/// (no `ON`), PROXY, `*.*` and `REVOKE ALL PRIVILEGES, GRANT OPTION` may reach anything. The
/// `ON` is the first before any `TO` or `FROM`: the accounts after those may be strings whose
/// words read as `on` (`'on-call'@'%'`).
fn grant_reaches(toks: &[Tok], default_db: Option<&str>, tracked: &str) -> bool {
    let is = |t: Option<&Tok>, w: &str| matches!(t, Some(Tok::Word(x)) if x.eq_ignore_ascii_case(w));
    if is(toks.get(1), "PROXY") {
        return true;
    }
    // The first ON, TO or FROM outside parentheses (a column list), with no string before it
    // (a role's name): the ON clause if it is ON.
    let mut depth = 0i32;
    let Some(on) = toks
        .iter()
        .position(|t| {
            match t {
                Tok::Other('(') => depth += 1,
                Tok::Other(')') => depth -= 1,
                _ => {}
            }
            matches!(t, Tok::Other('\'' | '"')) || (depth == 0 && ["ON", "TO", "FROM"].iter().any(|w| is(Some(t), w)))
        })
        .filter(|&at| is(toks.get(at), "ON"))
    else {
        return true;
    };
    let mut at = on + 1;
    while ["TABLE", "FUNCTION", "PROCEDURE", "PACKAGE", "BODY"].iter().any(|w| is(toks.get(at), w)) {
        at += 1;
    }
    let database = match (toks.get(at), toks.get(at + 1)) {
        (Some(Tok::Word(d) | Tok::Quoted(d)), Some(Tok::Dot)) => Some(d.as_str()),
        // `*.*` (or anything this reading does not know).
        (Some(_), Some(Tok::Dot)) | (None, _) => return true,
        (Some(_), _) => default_db,
    };
    database.is_none_or(|d| like(d.as_bytes(), tracked.as_bytes()))
}

/// SQL LIKE without case: `%` any run, `_` any one byte, `\` takes the next byte as it is. In
/// time bounded by the pattern's length times the name's (a pattern of many `%` must not take
/// exponential time: the proxy reads a client's text before the server refuses it).
fn like(pattern: &[u8], name: &[u8]) -> bool {
    like_case(pattern, name, false)
}

/// [`like`], comparing bytes with case when `case_sensitive` (database names on a server with
/// `lower_case_table_names = 0`).
pub(crate) fn like_case(pattern: &[u8], name: &[u8], case_sensitive: bool) -> bool {
    // Names past ASCII fold too (`É` is `é` under lower_case_table_names): both are folded
    // first, as UTF-8.
    if !case_sensitive && (!pattern.is_ascii() || !name.is_ascii()) {
        let fold = |b: &[u8]| String::from_utf8_lossy(b).to_lowercase().into_bytes();
        return like_bytes(&fold(pattern), &fold(name), false);
    }
    like_bytes(pattern, name, case_sensitive)
}

fn like_bytes(pattern: &[u8], name: &[u8], case_sensitive: bool) -> bool {
    #[derive(Clone, Copy)]
    enum Item {
        Any,
        One,
        Byte(u8),
    }
    let mut items = Vec::with_capacity(pattern.len());
    let mut bytes = pattern.iter().copied();
    while let Some(b) = bytes.next() {
        items.push(match b {
            b'%' => Item::Any,
            b'_' => Item::One,
            b'\\' => Item::Byte(bytes.next().unwrap_or(b'\\')),
            b => Item::Byte(b),
        });
    }
    // Greedy, going back to the last `%` on a mismatch.
    let (mut p, mut n) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while n < name.len() {
        match items.get(p) {
            Some(Item::Any) => {
                back = Some((p, n));
                p += 1;
            }
            Some(Item::One) => (p, n) = (p + 1, n + 1),
            Some(Item::Byte(b)) if if case_sensitive { *b == name[n] } else { b.eq_ignore_ascii_case(&name[n]) } => (p, n) = (p + 1, n + 1),
            _ => match back {
                Some((star, from)) => {
                    back = Some((star, from + 1));
                    (p, n) = (star + 1, from + 1);
                }
                None => return false,
            },
        }
    }
    items[p..].iter().all(|i| matches!(i, Item::Any))
}

/// True if a binlogged statement may have changed rows that no row event carries: a write
/// logged as a statement (its session's `binlog_format` was STATEMENT or MIXED), or anything
/// not known to change only schemas (which [`parse_ddl`] reports), accounts, or nothing at all
/// (transaction control). Errs towards true: a false alarm evicts the caches, a miss leaves
/// them serving rows the server has changed.
pub fn may_change_rows(sql: &str) -> bool {
    statements(sql).is_none_or(|all| all.iter().any(|toks| may_change_rows_read(sql, toks)))
}

fn may_change_rows_read(sql: &str, toks: &[Tok]) -> bool {
    let word = |i: usize| match toks.get(i) {
        Some(Tok::Word(w)) => Some(w.to_ascii_uppercase()),
        _ => None,
    };
    let Some(first) = toks.first() else { return false };
    let Tok::Word(_) = first else { return true };
    match word(0).unwrap_or_default().as_str() {
        // A CREATE TABLE ... SELECT (or AS VALUES) runs the functions it calls, whose writes a
        // statement-logged CREATE carries no rows of (row-logged, it is the table's generated
        // definition, then row events). Its SELECT may lie past the head: the whole text is
        // read (a rare statement).
        "CREATE" => {
            let mut at = 1;
            for skip in ["OR", "REPLACE", "TEMPORARY"] {
                at += usize::from(word(at).as_deref() == Some(skip));
            }
            // Read as bytes, not tokens: no quoting can hide the word, and one in a string or
            // a comment only evicts the caches once more.
            let upper = sql.to_ascii_uppercase();
            word(at).as_deref() == Some("TABLE") && (upper.contains("SELECT") || constructs_values(&upper))
        }
        // MariaDB's ANALYZE of a statement runs it (and is logged by its text); of tables it
        // is maintenance.
        "ANALYZE" => {
            let at = 1 + usize::from(matches!(word(1).as_deref(), Some("NO_WRITE_TO_BINLOG" | "LOCAL")));
            !matches!(word(at).as_deref(), Some("TABLE" | "TABLES"))
        }
        // Schemas, routines, triggers, views, accounts and the server's own maintenance.
        "ALTER" | "DROP" | "RENAME" | "TRUNCATE" | "GRANT" | "REVOKE" | "OPTIMIZE" | "REPAIR" | "FLUSH" | "INSTALL" | "UNINSTALL" => false,
        "BEGIN" | "COMMIT" | "ROLLBACK" | "SAVEPOINT" | "RELEASE" | "XA" => false,
        // A SET STATEMENT without its FOR (not a statement MariaDB logs) counts as a write.
        "SET" => !matches!(word(1).as_deref(), Some("PASSWORD" | "ROLE" | "DEFAULT")),
        _ => true,
    }
}

/// The one table a statement logged as a statement writes, for the forms whose target is
/// plain: `INSERT` or `REPLACE [modifiers] [INTO] t ...`, `UPDATE [modifiers] t [[AS] a] SET
/// ...`, `DELETE [modifiers] FROM t [[AS] a]` then its end, `WHERE`, `ORDER`, `LIMIT`,
/// `RETURNING` or `PARTITION`; as (database if named, table). Anything else gives `None`:
/// multi-table UPDATE and DELETE, a SELECT calling a function, a CALL, LOAD DATA, and a text
/// whose [`statements`] do not all name the same target.
pub fn write_target(sql: &str) -> Option<(Option<String>, String)> {
    let all = statements(sql)?;
    let mut targets = all.iter().map(|toks| target_of(toks));
    let first = targets.next()??;
    targets.all(|t| t.as_ref() == Some(&first)).then_some(first)
}

fn target_of(toks: &[Tok]) -> Option<(Option<String>, String)> {
    let mut c = Cursor { toks, at: 0 };
    let modifiers = |c: &mut Cursor| while ["LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK"].iter().any(|m| c.kw(m)) {};
    let ends = |c: &Cursor, words: &[&str]| match c.toks.get(c.at) {
        None => true,
        Some(Tok::Word(w)) => words.iter().any(|k| w.eq_ignore_ascii_case(k)),
        _ => false,
    };
    // After the table, an alias may come before what ends the table list.
    let alias_then = |c: &mut Cursor, words: &[&str]| {
        if ends(c, words) {
            return true;
        }
        let _ = c.kw("AS");
        c.ident().is_some() && ends(c, words)
    };
    if c.kw("INSERT") || c.kw("REPLACE") {
        modifiers(&mut c);
        c.kw("INTO");
        c.name()
    } else if c.kw("UPDATE") {
        modifiers(&mut c);
        let name = c.name()?;
        (alias_then(&mut c, &["SET"]) && c.toks.get(c.at).is_some()).then_some(name)
    } else if c.kw("DELETE") {
        modifiers(&mut c);
        if !c.kw("FROM") {
            return None;
        }
        let name = c.name()?;
        alias_then(&mut c, &["WHERE", "ORDER", "LIMIT", "RETURNING", "PARTITION"]).then_some(name)
    } else {
        None
    }
}

/// True if `upper` (a text in capitals) has a VALUES that is not a partition's bound (`VALUES
/// LESS THAN`, `VALUES IN`): a table value constructor, which runs the functions it calls.
fn constructs_values(upper: &str) -> bool {
    upper.match_indices("VALUES").any(|(at, w)| {
        let rest = upper[at + w.len()..].trim_start();
        let bound = |k: &str| rest.strip_prefix(k).is_some_and(|r| !r.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
        !(bound("LESS") || bound("IN"))
    })
}

/// True if a stored routine's body may write a table: an INSERT, REPLACE, UPDATE or DELETE
/// statement (not the string functions `INSERT(...)` and `REPLACE(...)`, nor `FOR UPDATE`)
/// whose target is not in `performance_schema` (the sys schema's functions set its
/// instruments), a CALL, or a sequence's use (`NEXTVAL`, `SETVAL`). Errs towards true: words in strings count.
/// Every reading of the body is taken ([`readings`]); one a character set may read otherwise
/// ([`charset_may_differ`]), or with U+FFFD (bytes that were not UTF-8, or not of a UTF-8
/// session: [`routine_body`]; in latin1 0xA0 is a space to the server), writes.
pub fn routine_writes(body: &str) -> bool {
    body.contains('\u{FFFD}') || charset_may_differ(body) || readings(body).iter().any(|&reading| routine_writes_read(body, reading))
}

/// A routine's body (`mysql.proc.body`) as text, read as the server reads it where freshet can:
/// UTF-8 when the session that created it was (`character_set_client`), otherwise its ASCII
/// bytes, every other byte U+FFFD (a routine that is then taken to write, [`routine_writes`]).
pub fn routine_body(body: &[u8], client_charset: &str) -> String {
    let utf8 = client_charset.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("utf8"));
    if utf8 || body.is_ascii() {
        String::from_utf8_lossy(body).into_owned()
    } else {
        body.iter().map(|&b| if b.is_ascii() { char::from(b) } else { '\u{FFFD}' }).collect()
    }
}

fn routine_writes_read(body: &str, reading: Reading) -> bool {
    let toks: Vec<Tok> = Lexer::read(body, reading).collect();
    let word = |t: Option<&Tok>, k: &str| matches!(t, Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k));
    (0..toks.len()).any(|i| {
        let at = |k: &str| word(toks.get(i), k);
        let statement = (at("INSERT") || at("REPLACE")) && toks.get(i + 1) != Some(&Tok::Other('('))
            || at("UPDATE") && !(i > 0 && word(toks.get(i - 1), "FOR"))
            || at("DELETE");
        if statement {
            // A write of performance_schema's tables only, by a plain target.
            return !target_of(&toks[i..]).is_some_and(|(db, _)| db.is_some_and(|d| d.eq_ignore_ascii_case("performance_schema")));
        }
        at("CALL") || at("NEXTVAL") || at("SETVAL")
    })
}

/// True if a statement may give a session a temporary table that writes other tables: a
/// MERGE table (its rows are other MyISAM tables', in any database), made by `CREATE
/// TEMPORARY TABLE ... ENGINE=MERGE`, `... LIKE` a MERGE table, or an ALTER to that engine. A
/// temporary table shadows the base table of its name for its session and is not in
/// information_schema, so what is read of a database there cannot rule it out.
pub fn may_make_temporary_merge(sql: &str) -> bool {
    let lower = sql.to_ascii_lowercase();
    let merge = lower.contains("merge") || lower.contains("mrg_");
    if !merge && !lower.contains("like") {
        return false;
    }
    let one = |toks: &[Tok]| {
        let word = |i: usize, k: &str| matches!(toks.get(i), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k));
        let temporary = word(0, "CREATE") && (word(1, "TEMPORARY") || (word(1, "OR") && word(2, "REPLACE") && word(3, "TEMPORARY")));
        (temporary || word(0, "ALTER"))
            && (merge || (temporary && Lexer::new(sql).any(|t| matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case("LIKE")))))
    };
    statements(sql).is_none_or(|all| all.iter().any(|toks| one(toks)))
}

/// The tables a statement changes, or empty if it is not table DDL: those of every one of
/// its [`statements`], each once. Empty too for a text that cannot be read, which
/// [`may_change_rows`] takes to change anything.
pub fn parse_ddl(sql: &str) -> Vec<DdlTarget> {
    union_of(sql, ddl_of)
}

/// What `of` finds in every one of `sql`'s [`statements`], each once, in the order found; none
/// for a text that cannot be read.
fn union_of<T: PartialEq>(sql: &str, of: impl Fn(&[Tok]) -> Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for toks in statements(sql).unwrap_or_default() {
        for found in of(&toks) {
            if !out.contains(&found) {
                out.push(found);
            }
        }
    }
    out
}

/// [`parse_ddl`] of one statement's tokens.
fn ddl_of(toks: &[Tok]) -> Vec<DdlTarget> {
    let mut c = Cursor { toks, at: 0 };
    let mut out = Vec::new();
    let mut push = |(database, table): (Option<String>, String), kind| out.push(DdlTarget { database, table, kind });
    if matches!(toks.first(), Some(Tok::Word(w)) if w.eq_ignore_ascii_case("ALTER")) {
        // ALTER IGNORE TABLE ... ADD UNIQUE deletes the duplicates with no row event.
        let Some((ignore, name)) = alter_table_head(&mut c) else { return out };
        // Partition and tablespace maintenance moves or removes rows with no row event
        // (EXCHANGE, TRUNCATE, DROP, CONVERT PARTITION; IMPORT TABLESPACE), and so does a
        // BLACKHOLE engine: the table is taken anew, as after TRUNCATE. Any mention counts;
        // ADD or REORGANIZE PARTITION, which keep the rows, cost a refill.
        let rows_moved = ignore
            || c.toks[c.at..].iter().any(|t| {
                matches!(t, Tok::Word(w) if ["PARTITION", "PARTITIONS", "PARTITIONING", "TABLESPACE", "BLACKHOLE"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k)))
            })
            || alter_may_rewrite_values(&c.toks[c.at..]);
        push(name, if rows_moved { DdlKind::Truncate } else { DdlKind::Alter });
        // ALTER TABLE a ..., RENAME [TO|AS] b; EXCHANGE PARTITION p WITH TABLE b; CONVERT
        // PARTITION p TO TABLE b; CONVERT TABLE b TO PARTITION p.
        let mut renamed = false;
        while c.at < c.toks.len() {
            if c.kw("RENAME") {
                if c.kw("COLUMN") || c.kw("INDEX") || c.kw("KEY") {
                    continue;
                }
                let _ = c.kw("TO") || c.kw("AS");
                if let Some(new) = c.name() {
                    push(new, DdlKind::RenamedTo);
                    renamed = true;
                }
            } else if c.kws(&["WITH", "TABLE"]) {
                if let Some(other) = c.name() {
                    push(other, DdlKind::Truncate);
                }
            } else if c.kws(&["TO", "TABLE"]) {
                if let Some(new) = c.name() {
                    push(new, DdlKind::Create);
                }
            } else if c.kws(&["CONVERT", "TABLE"]) {
                if let Some(gone) = c.name() {
                    push(gone, DdlKind::Drop);
                }
            } else {
                c.at += 1;
            }
        }
        if renamed {
            out[0].kind = DdlKind::RenamedFrom;
        }
    } else if c.kw("CREATE") {
        // CREATE OR REPLACE TABLE empties (or refills) the table with no row event, whatever
        // its schema: never the no-op a CREATE of a table that exists is.
        let replace = c.kws(&["OR", "REPLACE"]);
        if c.kw("TEMPORARY") {
            // Session-private; under ROW format it is not even logged. A same-named base
            // table is not affected.
            return out;
        }
        if c.kw("TABLE") {
            c.kws(&["IF", "NOT", "EXISTS"]);
            if let Some(name) = c.name() {
                push(name, if replace { DdlKind::Truncate } else { DdlKind::Create });
            }
        } else if c.kw("SEQUENCE") {
            // CREATE OR REPLACE SEQUENCE of a table's name drops the table.
            c.kws(&["IF", "NOT", "EXISTS"]);
            if let Some(name) = c.name() {
                push(name, DdlKind::Drop);
            }
        } else {
            index_target(&mut c, &mut push);
        }
    } else if c.kw("DROP") {
        if c.kw("TEMPORARY") {
            return out;
        }
        if c.kw("TABLE") {
            c.kws(&["IF", "EXISTS"]);
            while let Some(name) = c.name() {
                push(name, DdlKind::Drop);
                if !c.comma() {
                    break;
                }
            }
        } else {
            index_target(&mut c, &mut push);
        }
    } else if c.kw("RENAME") {
        // `RENAME TABLE[S] [IF EXISTS] a [WAIT n | NOWAIT] TO b, ...`
        if !(c.kw("TABLE") || c.kw("TABLES")) {
            return out;
        }
        c.kws(&["IF", "EXISTS"]);
        while let Some(from) = c.name() {
            if c.kw("WAIT") {
                c.ident();
            } else {
                c.kw("NOWAIT");
            }
            if !c.kw("TO") {
                break;
            }
            let Some(to) = c.name() else { break };
            push(from, DdlKind::RenamedFrom);
            push(to, DdlKind::RenamedTo);
            if !c.comma() {
                break;
            }
        }
    } else if c.kw("TRUNCATE") {
        c.kw("TABLE");
        if let Some(name) = c.name() {
            push(name, DdlKind::Truncate);
        }
    }
    out
}

/// The views a statement creates or changes, by their unqualified names: `CREATE [OR REPLACE]
/// [ALGORITHM = ...] [DEFINER = ...] [SQL SECURITY ...] VIEW [IF NOT EXISTS] name`, the same
/// with ALTER, and the new names of a RENAME TABLE of names `is_view` says are views'. Empty
/// for any other statement. A view's name may be anything a table's may; the words before
/// `VIEW` are not checked further (a name taken for a view's costs a question, not an answer).
pub fn view_names(sql: &str, is_view: impl Fn(&str) -> bool) -> Vec<String> {
    union_of(sql, |toks| views_of(toks, &is_view))
}

/// [`view_names`] of one statement's tokens.
fn views_of(toks: &[Tok], is_view: &impl Fn(&str) -> bool) -> Vec<String> {
    let word = |i: usize, k: &str| matches!(toks.get(i), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k));
    if word(0, "CREATE") || word(0, "ALTER") {
        // Before VIEW come a view's options (`OR REPLACE`, `ALGORITHM = x`, `DEFINER = user`,
        // `SQL SECURITY x`); the word naming any other kind of object, or a view's body (AS),
        // ends the search.
        const OTHERS: &[&str] = &[
            "AS",
            "TABLE",
            "INDEX",
            "DATABASE",
            "SCHEMA",
            "FUNCTION",
            "PROCEDURE",
            "TRIGGER",
            "EVENT",
            "USER",
            "ROLE",
            "SEQUENCE",
            "SERVER",
            "TABLESPACE",
            "LOGFILE",
            "PACKAGE",
            "AGGREGATE",
            "UNIQUE",
            "FULLTEXT",
            "SPATIAL",
            "TEMPORARY",
        ];
        let other = |i: usize| OTHERS.iter().any(|k| word(i, k));
        let Some(at) = (1..toks.len().min(64)).find(|&i| word(i, "VIEW") || other(i)).filter(|&i| word(i, "VIEW")) else {
            return Vec::new();
        };
        let mut c = Cursor { toks, at: at + 1 };
        c.kws(&["IF", "NOT", "EXISTS"]);
        return c.name().map(|(_, table)| vec![table]).unwrap_or_default();
    }
    if word(0, "RENAME") {
        let targets = ddl_of(toks);
        return targets
            .chunks(2)
            .filter_map(|pair| match pair {
                [from, to] if from.kind == DdlKind::RenamedFrom && is_view(&from.table) => Some(to.table.clone()),
                _ => None,
            })
            .collect();
    }
    Vec::new()
}

/// True unless every clause of an ALTER TABLE (`clauses`: the tokens after the table's name)
/// keeps the values of the rows it keeps. The schema read after an ALTER cannot tell: a
/// generated column's new expression is not in it, and a MODIFY that rounds the values and a
/// second that widens the type back, read by the stream after both ran, show the final schema
/// twice. So the clauses that keep the values are listed (a new column, index or constraint,
/// a column, index or constraint dropped, a rename of the table or an index, a column's
/// default, the table's options and order) and any other (MODIFY, CHANGE, RENAME COLUMN,
/// CONVERT TO, what this list does not know) counts: the
/// table's rows are taken anew, as after TRUNCATE. A dropped column the schema read still has
/// (added again by the same ALTER or a later one) is the stream's to find
/// ([`alter_dropped_columns`]).
fn alter_may_rewrite_values(clauses: &[Tok]) -> bool {
    const KEEPS: &[&str] = &[
        "ADD",
        "RENAME",
        "ALTER",
        "ORDER",
        "COMMENT",
        "ENGINE",
        "ROW_FORMAT",
        "AUTO_INCREMENT",
        "ALGORITHM",
        "LOCK",
        "FORCE",
        "KEY_BLOCK_SIZE",
        "STATS_AUTO_RECALC",
        "STATS_PERSISTENT",
        "STATS_SAMPLE_PAGES",
        "PACK_KEYS",
        "CHECKSUM",
        "PAGE_CHECKSUM",
        "TRANSACTIONAL",
        "MAX_ROWS",
        "MIN_ROWS",
        "AVG_ROW_LENGTH",
        "DELAY_KEY_WRITE",
        "ENCRYPTED",
        "ENCRYPTION_KEY_ID",
        "PAGE_COMPRESSED",
        "PAGE_COMPRESSION_LEVEL",
        "DEFAULT",
        "CHARACTER",
        "CHARSET",
        "COLLATE",
        "DISABLE",
        "ENABLE",
    ];
    !alter_clause_heads(clauses).all(|at| {
        let first = word(clauses, at);
        // A renamed column keeps its values in its place, under another name: two renames
        // that swap names swap the values the names hold (a copy matched by name would not).
        let renames_column = first == "RENAME" && word(clauses, at + 1) == "COLUMN";
        first == "DROP" || (KEEPS.contains(&first.as_str()) && !renames_column)
    })
}

/// What a DROP in an ALTER TABLE may name besides a column.
const DROPS_NO_COLUMN: &[&str] =
    &["INDEX", "KEY", "PRIMARY", "FOREIGN", "CONSTRAINT", "CHECK", "UNIQUE", "FULLTEXT", "SPATIAL", "PERIOD", "SYSTEM", "PARTITION"];

/// The columns an ALTER TABLE drops (`DROP [COLUMN] [IF EXISTS] name`), as written. A dropped
/// column that the schema read after it still has was added again (by the same ALTER or by a
/// later one the stream has not reached): its values are new, though its name and type are not.
/// Those of every one of its [`statements`], each once.
pub fn alter_dropped_columns(sql: &str) -> Vec<String> {
    union_of(sql, |toks| {
        let mut c = Cursor { toks, at: 0 };
        if alter_table_head(&mut c).is_none() {
            return Vec::new();
        }
        let clauses = &toks[c.at..];
        alter_clause_heads(clauses)
            .filter(|&at| word(clauses, at) == "DROP" && !DROPS_NO_COLUMN.contains(&word(clauses, at + 1).as_str()))
            .filter_map(|at| {
                let mut c = Cursor { toks: clauses, at: at + 1 };
                c.kw("COLUMN");
                c.kws(&["IF", "EXISTS"]);
                c.ident()
            })
            .collect()
    })
}

/// A stored function's body (`mysql.proc.body`) under the sql_mode it was created with may
/// write a table: under ORACLE a statement may call a procedure by its name alone, which no
/// word says, so such a function writes.
pub fn function_writes(body: &str, sql_mode: &str) -> bool {
    sql_mode.split(',').any(|m| m.trim().eq_ignore_ascii_case("ORACLE")) || routine_writes(body)
}

/// Whether two column names may be the same to the server, which compares them without case,
/// Unicode's too (`É` is `é`; `é` is not `e`). Either folding counts: taking two names for one
/// costs a refill, the reverse a stale column.
pub fn same_column_name(a: &str, b: &str) -> bool {
    a.chars().flat_map(char::to_lowercase).eq(b.chars().flat_map(char::to_lowercase))
        || a.chars().flat_map(char::to_uppercase).eq(b.chars().flat_map(char::to_uppercase))
}

/// `ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] name`: whether IGNORE, and the name; the cursor
/// is left at the first clause.
fn alter_table_head(c: &mut Cursor) -> Option<(bool, (Option<String>, String))> {
    if !c.kw("ALTER") {
        return None;
    }
    c.kw("ONLINE");
    let ignore = c.kw("IGNORE");
    if !c.kw("TABLE") {
        return None;
    }
    c.kws(&["IF", "EXISTS"]);
    Some((ignore, c.name()?))
}

/// The upper-cased word at `i`, or empty.
fn word(toks: &[Tok], i: usize) -> String {
    match toks.get(i) {
        Some(Tok::Word(w)) => w.to_ascii_uppercase(),
        _ => String::new(),
    }
}

/// Where each clause of an ALTER TABLE starts (`clauses`: the tokens after the table's name;
/// clauses are separated by top-level commas, and a lock wait, `WAIT n` or `NOWAIT`, may come
/// before the first).
fn alter_clause_heads(clauses: &[Tok]) -> impl Iterator<Item = usize> + '_ {
    let mut depth = 0i32;
    let mut head = true;
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < clauses.len() {
            let at = i;
            i += 1;
            match &clauses[at] {
                Tok::Other('(') => depth += 1,
                Tok::Other(')') => depth -= 1,
                Tok::Comma if depth == 0 => head = true,
                _ if head && depth == 0 => match word(clauses, at).as_str() {
                    "WAIT" => i += 1,
                    "NOWAIT" => {}
                    _ => {
                        head = false;
                        return Some(at);
                    }
                },
                _ => {}
            }
        }
        None
    })
}

/// A savepoint statement of a transaction, by the savepoint's name: MariaDB logs `SAVEPOINT`,
/// and, where it could not cut the rows out of the binlog (a non-transactional table was
/// written since), `ROLLBACK TO` after the rows it undoes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Savepoint {
    /// `SAVEPOINT name`.
    Set(String),
    /// `ROLLBACK [WORK] TO [SAVEPOINT] name`.
    RollbackTo(String),
    /// `RELEASE SAVEPOINT name`.
    Release(String),
}

/// The savepoint statement `sql` is, if it is one.
pub fn parse_savepoint(sql: &str) -> Option<Savepoint> {
    let toks = tokens(sql);
    let mut c = Cursor { toks: &toks, at: 0 };
    if c.kw("SAVEPOINT") {
        return c.ident().map(Savepoint::Set);
    }
    if c.kw("ROLLBACK") {
        c.kw("WORK");
        if !c.kw("TO") {
            return None;
        }
        c.kw("SAVEPOINT");
        return c.ident().map(Savepoint::RollbackTo);
    }
    if c.kws(&["RELEASE", "SAVEPOINT"]) {
        return c.ident().map(Savepoint::Release);
    }
    None
}

/// The database a `DROP DATABASE|SCHEMA [IF EXISTS] name` statement drops (the first that one
/// of its [`statements`] drops).
pub fn parse_drop_database(sql: &str) -> Option<String> {
    statements(sql)?.iter().find_map(|toks| drop_database_of(toks))
}

fn drop_database_of(toks: &[Tok]) -> Option<String> {
    let mut c = Cursor { toks, at: 0 };
    // `CREATE OR REPLACE DATABASE` drops the one there was.
    let drops = c.kw("DROP") || c.kws(&["CREATE", "OR", "REPLACE"]);
    if !(drops && (c.kw("DATABASE") || c.kw("SCHEMA"))) {
        return None;
    }
    c.kws(&["IF", "EXISTS"]);
    c.ident()
}

/// `[UNIQUE|FULLTEXT|SPATIAL] INDEX name ON table` (after CREATE/DROP): an ALTER of `table`.
fn index_target(c: &mut Cursor, push: &mut impl FnMut((Option<String>, String), DdlKind)) {
    let _ = c.kw("UNIQUE") || c.kw("FULLTEXT") || c.kw("SPATIAL");
    if !c.kw("INDEX") {
        return;
    }
    c.kws(&["IF", "EXISTS"]);
    c.kws(&["IF", "NOT", "EXISTS"]);
    if c.ident().is_none() || !c.kw("ON") {
        return;
    }
    if let Some(name) = c.name() {
        push(name, DdlKind::Alter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_views_a_statement_creates_are_named() {
        let none = |_: &str| false;
        for (sql, want) in [
            ("CREATE VIEW v AS SELECT 1", vec!["v"]),
            (
                "create or replace algorithm = merge definer = 'a'@'%' sql security invoker view `db`.`My View` as select f()",
                vec!["My View"],
            ),
            ("ALTER DEFINER = CURRENT_USER() VIEW v2 AS SELECT 2", vec!["v2"]),
            ("CREATE VIEW IF NOT EXISTS db.v3 AS SELECT 3", vec!["v3"]),
            ("/* c */ SET STATEMENT max_statement_time = 5 FOR CREATE VIEW v4 AS SELECT 4", vec!["v4"]),
            ("CREATE TABLE t (view INT)", vec![]),
            ("CREATE TABLE t AS SELECT 1 AS view", vec![]),
            ("ALTER TABLE t ADD COLUMN view INT", vec![]),
            ("INSERT INTO view VALUES (1)", vec![]),
        ] {
            assert_eq!(view_names(sql, none), want, "{sql}");
        }
        let is_view = |n: &str| n == "v" || n == "w";
        assert_eq!(view_names("RENAME TABLE v TO v_old, t TO t2, db.w WAIT 3 TO db.w2", is_view), vec!["v_old", "w2"]);
        assert_eq!(view_names("RENAME TABLE t TO v9", is_view), Vec::<String>::new());
    }
    use proptest::prelude::*;

    #[test]
    fn savepoint_statements_name_their_savepoint() {
        assert_eq!(parse_savepoint("SAVEPOINT `a`"), Some(Savepoint::Set("a".into())));
        assert_eq!(parse_savepoint("ROLLBACK TO `a`"), Some(Savepoint::RollbackTo("a".into())));
        assert_eq!(parse_savepoint("rollback work to savepoint B"), Some(Savepoint::RollbackTo("B".into())));
        assert_eq!(parse_savepoint("RELEASE SAVEPOINT a"), Some(Savepoint::Release("a".into())));
        assert_eq!(parse_savepoint("ROLLBACK"), None);
        assert_eq!(parse_savepoint("ROLLBACK WORK"), None);
        assert_eq!(parse_savepoint("COMMIT"), None);
    }

    fn t(db: Option<&str>, table: &str, kind: DdlKind) -> DdlTarget {
        DdlTarget { database: db.map(str::to_string), table: table.into(), kind }
    }

    /// A GRANT or REVOKE reaches the caches' database `app` unless it is on another one's
    /// objects; database names in grants are patterns.
    #[test]
    fn grants_reach_the_databases_they_name() {
        let reaches = |sql: &str, default_db: Option<&str>| privileges_may_change(sql, default_db, "app_1");
        for (sql, db) in [
            ("GRANT SELECT ON app_1.* TO u", Some("other")),
            ("GRANT SELECT ON `APP_1`.t TO u", Some("other")),
            ("GRANT SELECT ON t TO u", Some("app_1")),
            ("GRANT SELECT ON * TO u", Some("app_1")),
            ("GRANT SELECT ON t TO u", None),
            ("GRANT SELECT ON *.* TO u", Some("other")),
            ("GRANT SELECT ON `app%`.* TO u", Some("other")),
            ("GRANT SELECT ON `app\\_1`.* TO u", Some("other")),
            ("GRANT SELECT ON `a_p_1`.* TO u", Some("other")),
            ("GRANT SELECT ON `%`.* TO u", Some("other")),
            ("GRANT role_a TO u", Some("other")),
            ("GRANT PROXY ON a TO u", Some("other")),
            ("REVOKE ALL PRIVILEGES, GRANT OPTION FROM u", Some("other")),
            ("REVOKE SELECT ON app_1.t FROM u", Some("other")),
            ("GRANT", Some("other")),
        ] {
            assert!(reaches(sql, db), "{sql} in {db:?}");
        }
        for (sql, db) in [
            ("GRANT SELECT ON other.* TO u", Some("app_1")),
            ("GRANT SELECT, INSERT (a, b) ON `other`.`t` TO u WITH GRANT OPTION", Some("app_1")),
            ("GRANT SELECT ON t TO u", Some("other")),
            ("GRANT DELETE ON * TO u", Some("other")),
            ("GRANT EXECUTE ON PROCEDURE other.p TO u", Some("app_1")),
            ("REVOKE ALL PRIVILEGES ON TABLE other.t FROM u", Some("app_1")),
            ("GRANT SELECT ON `app\\_%x`.* TO u", Some("other")),
            ("GRANT SELECT ON `ap`.* TO u", Some("other")),
        ] {
            assert!(!reaches(sql, db), "{sql} in {db:?}");
        }
    }

    /// LIKE in time the pattern's length times the name's, whatever the pattern.
    #[test]
    fn like_takes_time_bounded_by_both_lengths() {
        assert!(like(b"a%b%c", b"axxbyyc"));
        assert!(!like(b"a%b%c", b"axxbyy"));
        assert!(like(b"%%%", b""));
        assert!(like(b"\\%", b"%") && !like(b"\\%", b"x"));
        let pattern = format!("{}b", "%a".repeat(5_000));
        let name = "a".repeat(5_000);
        assert!(!like(pattern.as_bytes(), name.as_bytes()));
    }

    #[test]
    fn privilege_statements_are_recognised() {
        for sql in [
            "GRANT SELECT ON app.t TO 'a'@'%'",
            "revoke all on *.* from a",
            "CREATE OR REPLACE ROLE r",
            "CREATE OR REPLACE USER 'x'@'h'",
            "DROP USER x",
            "RENAME USER a TO b",
            "FLUSH PRIVILEGES",
            "/*!40000 GRANT SELECT ON t TO a */",
            "UPDATE mysql.global_priv SET priv = '{}'",
            "INSERT INTO `mysql`.`tables_priv` VALUES ()",
            "DROP TABLE IF EXISTS app.t, mysql.tables_priv",
            "RENAME TABLE mysql.global_priv TO mysql.old, mysql.new TO mysql.global_priv",
            "TRUNCATE TABLE `mysql`.`db`",
            "ALTER TABLE mysql.global_priv ENGINE = Aria",
            "DROP DATABASE mysql",
        ] {
            assert!(privileges_may_change(sql, Some("app"), "app"), "{sql}");
        }
        assert!(privileges_may_change("DELETE FROM tables_priv", Some("mysql"), "app"));
        assert!(privileges_may_change("TRUNCATE tables_priv", Some("mysql"), "app"));
        for sql in [
            "UPDATE t SET a = 1",
            "CREATE TABLE users (id INT)",
            "SELECT * FROM mysql.user",
            "FLUSH TABLES",
            "SET NAMES utf8",
            // Any login may set its own password and default role; ALTER USER changes how an
            // account logs in, not what it may read.
            "SET PASSWORD FOR a = PASSWORD('x')",
            "SET PASSWORD = PASSWORD('x')",
            "SET DEFAULT ROLE r FOR a",
            "ALTER USER a ACCOUNT LOCK",
            "ALTER USER CURRENT_USER() IDENTIFIED BY 'x'",
            // A new account has no rights.
            "CREATE USER 'x'@'h' IDENTIFIED BY 'p'",
            "CREATE USER IF NOT EXISTS a, b",
            "CREATE ROLE r",
            // `mysql` as an alias or in a string, with DDL on the application's own objects.
            "CREATE OR REPLACE VIEW v AS SELECT mysql.note FROM notes AS mysql",
            "CREATE TABLE t (a INT COMMENT 'from mysql.user') SELECT mysql.a FROM s AS mysql",
            "ALTER TABLE t ADD COLUMN mysql INT",
            "DROP VIEW IF EXISTS mysql_users",
        ] {
            assert!(!privileges_may_change(sql, Some("app"), "app"), "{sql}");
        }
    }

    #[test]
    fn a_plain_write_names_its_one_target() {
        let t = |db: Option<&str>, table: &str| Some((db.map(str::to_string), table.to_string()));
        for (sql, want) in [
            ("INSERT INTO t VALUES (1)", t(None, "t")),
            ("/* app */ insert low_priority ignore `p`.`checksums` (a) SELECT a FROM app.x", t(Some("p"), "checksums")),
            ("REPLACE INTO percona.checksums (db) SELECT 'app' FROM app.t /*checksum chunk*/", t(Some("percona"), "checksums")),
            ("SET STATEMENT max_statement_time = 1 FOR INSERT t SET a = 1", t(None, "t")),
            ("/*M!100000 INSERT INTO o.t VALUES (1) */", t(Some("o"), "t")),
            ("UPDATE o.t SET a = 1 WHERE b IN (SELECT b FROM app.u)", t(Some("o"), "t")),
            ("UPDATE IGNORE t AS x SET x.a = 1", t(None, "t")),
            ("UPDATE t x SET a = 1", t(None, "t")),
            ("DELETE FROM o.t", t(Some("o"), "t")),
            ("DELETE QUICK FROM t WHERE a = 1", t(None, "t")),
            ("DELETE FROM t ORDER BY a LIMIT 3", t(None, "t")),
        ] {
            assert_eq!(write_target(sql), want, "{sql}");
        }
        for sql in [
            "UPDATE o.t, app.u SET t.a = 1, u.b = 2",
            "UPDATE o.t JOIN app.u ON t.id = u.id SET u.b = 2",
            "UPDATE o.t AS x, app.u SET u.b = 2",
            "DELETE o.t, app.u FROM o.t JOIN app.u",
            "DELETE FROM o.t USING o.t JOIN app.u",
            "DELETE FROM o.t, app.u USING o.t JOIN app.u",
            "SELECT f()",
            "DO f()",
            "CALL p()",
            "LOAD DATA INFILE 'x' INTO TABLE t",
            "WITH c AS (SELECT 1) SELECT * FROM c",
            "UPDATE t",
        ] {
            assert_eq!(write_target(sql), None, "{sql}");
        }
    }

    #[test]
    fn a_routine_writes_if_it_has_a_write_statement() {
        for body in [
            "BEGIN INSERT INTO app.t VALUES (x); RETURN x; END",
            "BEGIN UPDATE t SET a = 1; RETURN 1; END",
            "BEGIN DELETE FROM t; RETURN 1; END",
            "BEGIN REPLACE t VALUES (1); RETURN 1; END",
            "BEGIN CALL p(); RETURN 1; END",
            "RETURN NEXTVAL(s)",
            "BEGIN UPDATE performance_schema.threads, app.t SET instrumented = 'NO'; RETURN 1; END",
            // A comment's opening inside a string hides nothing (an audit of the lexer).
            "BEGIN DECLARE c CHAR(2) DEFAULT '/*'; UPDATE t SET a = 1; RETURN 1; END",
            "BEGIN DECLARE c CHAR(2) DEFAULT '#'; UPDATE t SET a = 1; RETURN 1; END",
            "BEGIN DECLARE c CHAR(2) DEFAULT 'it''s -- '; UPDATE t SET a = 1; RETURN 1; END",
            "BEGIN DECLARE c CHAR(2) DEFAULT 'a\\' -- '; UPDATE t SET a = 1; RETURN 1; END",
            // `--` opens a comment only before white space: `1--1` is one minus minus one.
            "BEGIN DECLARE c INT DEFAULT 1--1; UPDATE t SET a = 1; RETURN 1; END",
            // A double-quoted string escapes with a backslash too (a third audit: `"\""` hid
            // the UPDATE after it).
            "BEGIN DECLARE x VARCHAR(10) DEFAULT \"\\\"\"; UPDATE d1.t SET v = v + 1 WHERE id = 2; RETURN LENGTH(\"a\"); END",
            // Under NO_BACKSLASH_ESCAPES `'\'` ends at its second quote: `'/*'` after it is a
            // string, not a comment hiding the UPDATE.
            "BEGIN DECLARE c VARCHAR(9) DEFAULT '\\'; SET @x = '/*'; UPDATE t SET a = 1; SET @y = 'x'; RETURN 1; END",
        ] {
            assert!(routine_writes(body), "{body}");
        }
        for body in [
            "RETURN REPLACE(INSERT(x, 1, 2, 'ab'), 'a', 'b')",
            "BEGIN DECLARE v INT; SELECT a INTO v FROM t WHERE id = x FOR UPDATE; RETURN v; END",
            "BEGIN UPDATE performance_schema.threads SET instrumented = 'NO' WHERE thread_id = x; RETURN 1; END",
            "BEGIN SET SESSION sql_select_limit = 1; RETURN x; END",
        ] {
            assert!(!routine_writes(body), "{body}");
        }
    }

    #[test]
    fn a_temporary_merge_table_is_noticed() {
        for sql in [
            "CREATE TEMPORARY TABLE t (id INT) ENGINE=MERGE UNION=(app.m1)",
            "CREATE OR REPLACE TEMPORARY TABLE t (id INT) ENGINE = MRG_MyISAM",
            "CREATE TEMPORARY TABLE t LIKE o.m",
            "ALTER TABLE t ENGINE=MERGE UNION=(app.m1)",
        ] {
            assert!(may_make_temporary_merge(sql), "{sql}");
        }
        for sql in ["CREATE TEMPORARY TABLE t (id INT)", "CREATE TABLE t (id INT) ENGINE=MERGE", "ALTER TABLE t ADD COLUMN b INT"] {
            assert!(!may_make_temporary_merge(sql), "{sql}");
        }
    }

    #[test]
    fn statements_that_may_change_rows_unseen_are_recognised() {
        for sql in [
            "INSERT INTO t VALUES (1)",
            "update t set a = 1",
            "/* app */ DELETE FROM t",
            "/*!50000 REPLACE INTO t VALUES (1) */",
            "/*M!100000 INSERT INTO t VALUES (1) */",
            "/*M! DELETE FROM t */",
            "LOAD DATA INFILE 'x' INTO TABLE t",
            "SELECT f()",
            "CALL p()",
            "DO g()",
            "SET STATEMENT max_statement_time = 1 FOR UPDATE t SET a = 1",
            "(SELECT 1)",
            "WITH c AS (SELECT 1) SELECT * FROM c",
            // Statement-logged, a CREATE ... SELECT runs the functions its SELECT calls, and
            // MariaDB's ANALYZE runs the statement it analyzes (an audit of binlog settings).
            "create table c2 select bump() as a",
            "CREATE TEMPORARY TABLE c3 SELECT bump() AS a",
            "CREATE OR REPLACE TABLE IF NOT EXISTS c AS SELECT f()",
            "CREATE TABLE c (a INT) IGNORE SELECT f()",
            "CREATE TABLE c (SELECT f())",
            "SET STATEMENT sql_mode = '' FOR CREATE TABLE c SELECT f()",
            "analyze update t set v = v + 10 where id = 2",
            "ANALYZE DELETE FROM t WHERE id = 99",
            "ANALYZE SELECT f()",
            // A second audit: a table value constructor runs its functions too, and quoting
            // the lexer misread hid the SELECT.
            "CREATE TABLE c3 AS VALUES (bump())",
            "CREATE TABLE c1 (x VARCHAR(5) DEFAULT '/*') SELECT bump() AS y",
            "CREATE TABLE c4 (x INT DEFAULT (1--1)) SELECT bump() AS y",
            "CREATE TABLE c5 (x VARCHAR(5) DEFAULT \"\\\"\") SELECT bump() AS y",
        ] {
            assert!(may_change_rows(sql), "{sql}");
        }
        for sql in [
            "CREATE TABLE t (id INT)",
            "ALTER TABLE t ADD COLUMN b INT",
            "DROP TABLE IF EXISTS `t` /* generated by server */",
            "TRUNCATE TABLE t",
            "RENAME TABLE a TO b",
            "GRANT SELECT ON t TO a",
            "SET PASSWORD FOR a = PASSWORD('x')",
            "SET DEFAULT ROLE r FOR a",
            "ANALYZE TABLE t",
            "ANALYZE NO_WRITE_TO_BINLOG TABLE t PERSISTENT FOR ALL",
            "analyze local tables a, b",
            "OPTIMIZE TABLE t",
            "REPAIR TABLE t QUICK",
            "CREATE TABLE c LIKE t",
            "CREATE TABLE `c` (\n  `a` int(11) DEFAULT NULL\n)",
            "CREATE VIEW v AS SELECT f()",
            // A partitioned table's VALUES LESS THAN and VALUES IN run nothing (the byte reading
            // of VALUES took them for a table value constructor: every cache was evicted at
            // each CREATE of a partitioned table).
            "CREATE TABLE ct_part (id INT PRIMARY KEY, k INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
            "CREATE TABLE l (id INT) PARTITION BY LIST (id) (PARTITION p0 values  in (1, 2))",
            "FLUSH TABLES",
            "BEGIN",
            "COMMIT",
            "XA START 'x'",
            "",
            "/* only a comment */",
            "SET STATEMENT foreign_key_checks = 0, sql_mode = 'a,b' FOR ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES p (id)",
        ] {
            assert!(!may_change_rows(sql), "{sql}");
        }
    }

    #[test]
    fn a_statement_under_set_statement_is_read_as_itself() {
        let t = |table: &str, kind| DdlTarget { database: None, table: table.into(), kind };
        assert_eq!(
            parse_ddl("SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE c ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES p (id)"),
            vec![t("c", DdlKind::Alter)]
        );
        assert_eq!(
            parse_ddl("set statement lock_wait_timeout=5 for rename table a to b"),
            vec![t("a", DdlKind::RenamedFrom), t("b", DdlKind::RenamedTo)]
        );
        assert_eq!(parse_drop_database("SET STATEMENT max_statement_time = 1 FOR DROP DATABASE d"), Some("d".into()));
        assert!(privileges_may_change("SET STATEMENT max_statement_time = 1 FOR GRANT SELECT ON t TO a", Some("db"), "db"));
        assert!(may_change_rows("SET STATEMENT max_statement_time = 1 FOR DELETE FROM t"));
        // The FOR is the first outside a string (a third audit: a value `'x FOR DROP'` made the
        // UPDATE after it a DROP, and `'x FOR SELECT'` a REVOKE a SELECT).
        assert!(may_change_rows("SET STATEMENT default_master_connection='x FOR DROP' FOR UPDATE d1.t SET v=v+1000 WHERE id=1"));
        assert!(privileges_may_change(
            "SET STATEMENT default_master_connection='x FOR SELECT' FOR REVOKE SELECT ON d1.t FROM app@'%'",
            Some("d1"),
            "d1"
        ));
        // Under NO_BACKSLASH_ESCAPES `'\'` is a whole string (a fourth audit: read with escapes,
        // the FOR after it was inside a string, and the REVOKE went unseen).
        assert!(privileges_may_change(
            "SET STATEMENT default_master_connection='\\' FOR REVOKE SELECT ON aud_bp.t FROM 'u'@'%'",
            Some("aud_bp"),
            "aud_bp"
        ));
        assert!(may_change_rows("SET STATEMENT default_master_connection='\\' FOR UPDATE t SET v = 1"));
        // Not a statement: read as the SET it is.
        assert!(parse_ddl("SET STATEMENT x = 1").is_empty());
    }

    /// What a fifth audit of the binlog's texts found read as harmless: each changes rows or
    /// rights. `d` is the tracked database, `t` its cached table.
    #[test]
    fn texts_read_otherwise_or_too_long_to_read_are_taken_at_their_worst() {
        let revoke = "REVOKE SELECT ON d.t FROM u2";
        let reaches = |sql: &str| privileges_may_change(sql, Some("d"), "d");
        let truncates = |sql: &str| parse_ddl(sql).iter().any(|t| t.table == "t" && t.kind == DdlKind::Truncate);
        // Past the first 64 KiB nothing was read: such a text is taken to do anything.
        let long = format!("/* {} */ ", "x".repeat(70_000));
        assert!(may_change_rows(&format!("{long}TRUNCATE TABLE t")), "a TRUNCATE past the head");
        assert!(may_change_rows(&format!("{long}UPDATE t SET v = 42 WHERE id = 1")));
        assert!(reaches(&format!("{long}{revoke}")));
        assert_eq!(write_target(&format!("{long}UPDATE t SET v = 42")), None);
        // Past the 256th token: every token of the head is read.
        let words = vec!["w"; 300].join(" ");
        assert_eq!(
            alter_dropped_columns(&format!("ALTER TABLE t COMMENT '{words}', DROP COLUMN v, ADD COLUMN v INT DEFAULT 7")),
            vec!["v"]
        );
        let pairs: Vec<String> = (0..40).map(|i| format!("o.x{i} TO o.y{i}")).collect();
        let renamed = parse_ddl(&format!("RENAME TABLE {}, d.t TO d.t_old, d.t2 TO d.t", pairs.join(", ")));
        assert!(renamed.iter().any(|t| t.table == "t" && t.kind == DdlKind::RenamedTo), "{renamed:?}");
        let drops: Vec<String> = (0..70).map(|i| format!("o.z{i}")).collect();
        assert!(parse_ddl(&format!("DROP TABLE {}, d.t", drops.join(", "))).iter().any(|t| t.table == "t"));
        let terms = vec!["1"; 200].join("+");
        assert!(reaches(&format!("SET STATEMENT max_statement_time = {terms} FOR {revoke}")));
        // A value of SET STATEMENT has a FOR of its own; a number glued to the FOR after it.
        let inner = "SET STATEMENT default_master_connection = SUBSTRING('abc' FROM 1 FOR 'COMMIT') FOR";
        assert!(truncates(&format!("{inner} TRUNCATE TABLE t")));
        assert!(may_change_rows(&format!("{inner} UPDATE t SET v = 31 WHERE id = 1")));
        assert!(reaches("SET STATEMENT default_master_connection = SUBSTRING('abc' FROM 1 FOR 2) FOR REVOKE SELECT ON d.t FROM u2"));
        assert!(reaches(&format!("SET STATEMENT max_statement_time=1.5FOR {revoke}")));
        // A `*/` outside a comment is a `*` and a `/`: it does not open a string's reading.
        let star = "SET STATEMENT max_statement_time = 2*/*' */3 FOR";
        assert!(reaches(&format!("{star} {revoke} /* ' FOR COMMIT */")));
        assert!(truncates(&format!("{star} TRUNCATE TABLE t /* ' FOR COMMIT */")));
        assert!(may_change_rows(&format!("{star} UPDATE t SET v = 99 WHERE id = 1 /* ' FOR COMMIT */")));
        assert!(routine_writes(
            "BEGIN DECLARE x INT DEFAULT 2*/*' */3; DECLARE s VARCHAR(20) DEFAULT '/*'; UPDATE d.t SET v = v + 1000 WHERE id = 1; RETURN x; /* */ END"
        ));
        // Under ANSI_QUOTES a backslash escapes in '...' and not in "..." (a name).
        assert!(reaches(&format!(
            r#"SET STATEMENT default_master_connection='\' FOR COMMIT ', default_master_connection="\"" FOR COMMIT" FOR {revoke}"#
        )));
        // A multibyte character set (GBK, Big5, SJIS) takes a backslash after a lead byte as
        // the character's second byte; decoded as UTF-8 the lead byte is U+FFFD.
        assert!(reaches(&format!(
            "SET STATEMENT default_master_connection='\u{FFFD}\\'' FOR COMMIT', default_master_connection='\\' FOR COMMIT ', max_statement_time=1 FOR {revoke}"
        )));
        // Read without escapes (NO_BACKSLASH_ESCAPES), DDL too.
        assert!(truncates(r"SET STATEMENT default_master_connection='\' FOR TRUNCATE TABLE t /* ' FOR COMMIT */"));
        assert_eq!(alter_dropped_columns(r"ALTER TABLE t COMMENT 'c:\', DROP COLUMN v, ADD COLUMN v INT DEFAULT 7 -- '"), vec!["v"]);
        // An account named `on-call`: its `on` is no ON clause.
        assert!(privileges_may_change("REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'on-call'@'%'", Some("o"), "d"));
    }

    /// A sixth audit: a text's non-ASCII characters as the server reads them. In a UTF-8
    /// session every one is part of a name (never a space, nor what ends a `--`); a text in
    /// another character set reaches here with its non-ASCII bytes as U+FFFD
    /// (`events::query_text`), which no reading can place: it is taken at its worst.
    #[test]
    fn non_ascii_characters_are_read_as_the_server_reads_them() {
        assert!(may_change_rows("TRUNCATE\u{FFFD}t"), "a latin1 no-break space");
        assert!(privileges_may_change("REVOKE SELECT ON\u{FFFD}d.t FROM r", Some("other"), "d"));
        assert!(privileges_may_change("DROP\u{FFFD}USER r", Some("d"), "d"));
        assert_eq!(
            alter_dropped_columns(
                "ALTER TABLE t ADD CONSTRAINT c1 CHECK (1 --\u{85}), DROP COLUMN v, ADD COLUMN v VARCHAR(20) DEFAULT 'x' AFTER id"
            ),
            vec!["v"]
        );
        assert_eq!(parse_ddl("TRUNCATE TABLE n€"), vec![t(None, "n€", DdlKind::Truncate)]);
        assert_eq!(parse_ddl("TRUNCATE TABLE a\u{A0}b"), vec![t(None, "a\u{A0}b", DdlKind::Truncate)]);
        // Column names are compared without case, Unicode's too (`É` is `é`, not `e`).
        assert!(same_column_name("É", "é"));
        assert!(!same_column_name("é", "e"));
    }

    /// A tenth audit of the binlog. `.name` (ODBC's spelling of a table of the default
    /// database), and `[name]` under sql_mode MSSQL, name tables the server acts on; a
    /// function body that is not UTF-8 (a latin1 session's, where 0xA0 is a space) may hide
    /// its write.
    #[test]
    fn a_tenth_audit_of_the_binlog() {
        assert_eq!(parse_ddl("TRUNCATE TABLE .s"), vec![t(None, "s", DdlKind::Truncate)]);
        assert!(parse_ddl("RENAME TABLE .t TO .tt, .s TO .t").iter().any(|x| x.table == "s"));
        assert_eq!(parse_ddl("TRUNCATE TABLE [s]"), vec![t(None, "s", DdlKind::Truncate)]);
        assert_eq!(parse_ddl("TRUNCATE TABLE [app].[s]"), vec![t(Some("app"), "s", DdlKind::Truncate)]);
        assert_eq!(parse_drop_database("DROP DATABASE [app]"), Some("app".into()));
        assert!(privileges_may_change("REVOKE SELECT ON [app].[t] FROM u", Some("other"), "app"));
        assert!(privileges_may_change("REVOKE SELECT ON .t FROM u", Some("app"), "app"));
        assert!(function_writes("BEGIN\u{FFFD}UPDATE app.t SET v = 'evil' WHERE id = 1;\u{FFFD}RETURN 1; END", ""));
        // Read by the session's character set: a latin1 body's 0xA0 is not UTF-8's.
        assert!(function_writes(&routine_body(b"BEGIN\xa0UPDATE t SET v = 1;\xa0RETURN 1; END", "latin1"), ""));
        assert!(function_writes(&routine_body(b"BEGIN\xc3\xa0UPDATE t SET v = 1; RETURN 1; END", "latin1"), ""));
        assert!(!function_writes(&routine_body("BEGIN RETURN 'é'; END".as_bytes(), "utf8mb4"), ""));
    }

    /// A seventh audit: under ANSI_QUOTES `"t x"` is a name (TRUNCATE of the table `t x` was
    /// read as of `t`), and a GRANT's ON is not a word in a string or in a column list
    /// (`REVOKE 'on-call' FROM r`, `REVOKE SELECT ("ON", v) ON d.t`).
    #[test]
    fn double_quoted_names_and_on_in_names_are_read_as_the_server_reads_them() {
        assert!(parse_ddl(r#"TRUNCATE TABLE "t x""#).contains(&t(None, "t x", DdlKind::Truncate)));
        assert!(parse_ddl(r#"TRUNCATE TABLE "t.y""#).contains(&t(None, "t.y", DdlKind::Truncate)));
        assert_eq!(write_target(r#"UPDATE "x y" SET a = a WHERE a = 1"#), None);
        assert!(privileges_may_change(r#"REVOKE SELECT ("ON", v) ON d.t FROM w@'%'"#, Some("o"), "d"));
        assert!(privileges_may_change("REVOKE SELECT (`on`, v) ON d.t FROM w", Some("o"), "d"));
        assert!(privileges_may_change("REVOKE 'on-call' FROM r2", Some("o"), "d"));
        assert!(!privileges_may_change("REVOKE SELECT (a, b) ON o.t FROM w", Some("o"), "d"));
    }

    /// An eighth audit: `\NFOR` is NULL then FOR to the server; a name of another case beyond
    /// ASCII is the same database under lower_case_table_names; a function created under
    /// sql_mode ORACLE calls a procedure by its name alone; and a text that may be DDL (not a
    /// plain write of one table) makes the stream forget what it knew of other databases.
    #[test]
    fn an_eighth_audit_of_the_binlogs_texts() {
        assert!(privileges_may_change(r"SET STATEMENT character_set_results=\NFOR REVOKE SELECT ON d.t FROM u@'%'", None, "d"));
        assert!(privileges_may_change("REVOKE SELECT ON AUD_É.t FROM u", None, "aud_é"));
        assert!(function_writes("AS BEGIN aud_o.p; RETURN 7; END", "PIPES_AS_CONCAT,ANSI_QUOTES,ORACLE"));
        assert!(!function_writes("RETURN x + 1", "STRICT_TRANS_TABLES"));
        // No plain write of one table: the stream forgets what it knew of other databases.
        assert_eq!(write_target("SET STATEMENT max_statement_time=0 FOR RENAME TABLE o.x TO o.for, o.v TO o.x"), None);
        assert_eq!(write_target("CALL p()"), None);
        assert_eq!(write_target("INSERT INTO o.x VALUES (1)"), Some((Some("o".into()), "x".into())));
    }

    #[test]
    fn recognises_table_ddl() {
        assert_eq!(parse_ddl("ALTER TABLE `a` ADD COLUMN x INT"), vec![t(None, "a", DdlKind::Alter)]);
        assert_eq!(
            parse_ddl("/* c */ alter online table db.`we``ird` rename to b2"),
            vec![t(Some("db"), "we`ird", DdlKind::RenamedFrom), t(None, "b2", DdlKind::RenamedTo)]
        );
        assert_eq!(
            parse_ddl("DROP TABLE IF EXISTS `a`,`d`.`b` /* generated by server */"),
            vec![t(None, "a", DdlKind::Drop), t(Some("d"), "b", DdlKind::Drop)]
        );
        assert_eq!(
            parse_ddl("RENAME TABLE a TO b, c TO d.e"),
            vec![
                t(None, "a", DdlKind::RenamedFrom),
                t(None, "b", DdlKind::RenamedTo),
                t(None, "c", DdlKind::RenamedFrom),
                t(Some("d"), "e", DdlKind::RenamedTo)
            ]
        );
        // An ALTER whose clauses all keep the rows' values, and one with a clause that may not.
        for (sql, kind) in [
            ("ALTER TABLE t ADD INDEX i (a), COMMENT 'x', ALGORITHM = INPLACE", DdlKind::Alter),
            ("ALTER TABLE t DROP INDEX i, DROP FOREIGN KEY f, DROP CONSTRAINT c, ADD CONSTRAINT d CHECK (a > 0)", DdlKind::Alter),
            ("ALTER TABLE t WAIT 5 ADD COLUMN b INT AS (a + 1) VIRTUAL AFTER a", DdlKind::Alter),
            ("ALTER TABLE t ALTER COLUMN a SET DEFAULT 5, DEFAULT CHARSET = utf8mb4, ENGINE = InnoDB", DdlKind::Alter),
            ("ALTER TABLE t MODIFY a INT", DdlKind::Truncate),
            ("ALTER TABLE t CHANGE a a INT", DdlKind::Truncate),
            ("ALTER TABLE t DROP a, DROP COLUMN IF EXISTS `b c`", DdlKind::Alter),
            ("ALTER TABLE t DROP PERIOD FOR p", DdlKind::Alter),
            ("ALTER TABLE t ADD INDEX (a), MODIFY b DECIMAL(10,0)", DdlKind::Truncate),
            ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", DdlKind::Truncate),
        ] {
            assert_eq!(parse_ddl(sql), vec![t(None, "t", kind)], "{sql}");
        }
        assert_eq!(alter_dropped_columns("ALTER TABLE t DROP a, DROP COLUMN IF EXISTS `b c`, DROP INDEX i, ADD d INT"), ["a", "b c"]);
        assert_eq!(alter_dropped_columns("alter online table db.t wait 3 drop column a, add column a int"), ["a"]);
        assert!(alter_dropped_columns("ALTER TABLE t DROP PRIMARY KEY, DROP FOREIGN KEY f").is_empty());
        // MariaDB's other spellings: TABLES, IF EXISTS, a lock wait after each name.
        for sql in [
            "RENAME TABLES a TO b, c TO d.e",
            "RENAME TABLE IF EXISTS a TO b, c TO d.e",
            "RENAME TABLE a WAIT 5 TO b, c NOWAIT TO d.e",
            "rename tables if exists a nowait to b, c wait 1 to d.e",
        ] {
            assert_eq!(
                parse_ddl(sql),
                vec![
                    t(None, "a", DdlKind::RenamedFrom),
                    t(None, "b", DdlKind::RenamedTo),
                    t(None, "c", DdlKind::RenamedFrom),
                    t(Some("d"), "e", DdlKind::RenamedTo)
                ],
                "{sql}"
            );
        }
        assert_eq!(parse_ddl("truncate t"), vec![t(None, "t", DdlKind::Truncate)]);
        assert_eq!(parse_ddl("CREATE OR REPLACE SEQUENCE d.s"), vec![t(Some("d"), "s", DdlKind::Drop)]);
        assert_eq!(parse_drop_database("create or replace schema app"), Some("app".into()));
        assert_eq!(parse_drop_database("CREATE DATABASE app"), None);
        assert_eq!(parse_ddl("CREATE TABLE IF NOT EXISTS x (id int)"), vec![t(None, "x", DdlKind::Create)]);
        assert_eq!(parse_ddl("CREATE OR REPLACE TABLE x (id int)"), vec![t(None, "x", DdlKind::Truncate)]);
        assert_eq!(parse_ddl("CREATE UNIQUE INDEX i ON t (a)"), vec![t(None, "t", DdlKind::Alter)]);
        assert_eq!(parse_ddl("ALTER TABLE a RENAME COLUMN x TO y"), vec![t(None, "a", DdlKind::Truncate)]);
        assert_eq!(parse_ddl("ALTER TABLE a RENAME INDEX x TO y"), vec![t(None, "a", DdlKind::Alter)]);
        assert_eq!(
            parse_ddl("ALTER TABLE p EXCHANGE PARTITION p0 WITH TABLE d.x"),
            vec![t(None, "p", DdlKind::Truncate), t(Some("d"), "x", DdlKind::Truncate)]
        );
        assert_eq!(
            parse_ddl("ALTER TABLE p CONVERT PARTITION p3 TO TABLE o"),
            vec![t(None, "p", DdlKind::Truncate), t(None, "o", DdlKind::Create)]
        );
        assert_eq!(
            parse_ddl("ALTER TABLE p CONVERT TABLE o TO PARTITION p3 VALUES LESS THAN (40)"),
            vec![t(None, "p", DdlKind::Truncate), t(None, "o", DdlKind::Drop)]
        );
        for sql in [
            "ALTER TABLE p TRUNCATE PARTITION p1",
            "alter table p drop partition p2",
            "ALTER TABLE p IMPORT TABLESPACE",
            "ALTER IGNORE TABLE p ADD UNIQUE (k)",
            "ALTER TABLE p ENGINE = BLACKHOLE",
        ] {
            assert_eq!(parse_ddl(sql), vec![t(None, "p", DdlKind::Truncate)], "{sql}");
        }
        assert!(parse_ddl("BEGIN").is_empty());
        assert!(parse_ddl("INSERT INTO t VALUES (1)").is_empty());
        assert!(parse_ddl("CREATE DATABASE x").is_empty());
        assert!(parse_ddl("DROP TEMPORARY TABLE IF EXISTS `t` /* generated by server */").is_empty());
        assert!(parse_ddl("CREATE TEMPORARY TABLE t (id int)").is_empty());
        assert_eq!(parse_drop_database("DROP SCHEMA IF EXISTS `app`"), Some("app".into()));
        assert_eq!(parse_drop_database("DROP TABLE app"), None);
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,80}") {
            let _ = parse_ddl(&s);
        }
    }
}
