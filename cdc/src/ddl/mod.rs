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
mod tests;
