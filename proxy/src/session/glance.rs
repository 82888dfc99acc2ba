//! A first look at a command's text, taken once per relayed command ([`Glance`]), and what
//! its words say it may run: stored code (a write's triggers, a routine called by name), or
//! views it opens without naming them. Each is a hint read from the words, never the truth:
//! a false positive costs a question to the server (the session is asked again), a false
//! negative would keep a session's state believed after stored code changed it, so every
//! reading errs on the side of "may".
//!
//! Owns: the lists of built-in functions and of keywords that stand before a `(` without
//! calling anything, and the text with its executable comments opened as the server runs them
//! ([`open_exec_comments`], read by [`super::binlogging`] and [`super::command`]). Does not
//! own: what the session does with the answers ([`super::state`], [`super::command`]).

use crate::matching::lexer::{Lexer, Token, TokenKind, find};

/// What every reading of a relayed command's text asks first, found once per command: its
/// first word and whether it holds a `;`, a `/` (where a comment may start) or a `(`. Each
/// reading asked for them itself (six lexings of the first token and nine searches of the
/// text per relayed read).
#[derive(Clone, Copy, Debug)]
pub struct Glance<'a> {
    pub sql: &'a [u8],
    pub first: Option<&'a [u8]>,
    pub semicolon: bool,
    pub slash: bool,
    pub paren: bool,
}

impl<'a> Glance<'a> {
    pub fn of(sql: &'a [u8]) -> Glance<'a> {
        Glance {
            sql,
            first: first_word(sql),
            semicolon: memchr::memchr(b';', sql).is_some(),
            slash: memchr::memchr(b'/', sql).is_some(),
            paren: memchr::memchr(b'(', sql).is_some(),
        }
    }

    /// Whether the first word is `word` (ASCII, any case).
    pub fn starts(&self, word: &[u8]) -> bool {
        self.first.is_some_and(|w| w.eq_ignore_ascii_case(word))
    }

    /// `SET STATEMENT ... FOR ...` ([`is_set_statement`]).
    pub fn set_statement(&self) -> bool {
        self.starts(b"set") && is_set_statement(self.sql)
    }

    /// Whether the text opens an executable comment (`/*!`, `/*M!`); `slash` saved the scan.
    pub(super) fn executable_comment(&self) -> bool {
        self.slash && opens_executable_comment(self.sql)
    }
}

/// The first token of `sql` (comments skipped), as written.
pub fn first_word(sql: &[u8]) -> Option<&[u8]> {
    Lexer::new(sql).next().map(|t| t.text(sql))
}

/// Whether `sql` is MariaDB's `SET STATEMENT assignments FOR statement`: a SET by its first
/// word that runs whatever statement follows `FOR`, a write among them.
pub fn is_set_statement(sql: &[u8]) -> bool {
    let mut tokens = Lexer::new(sql).map(|t| t.text(sql));
    tokens.next().is_some_and(|w| w.eq_ignore_ascii_case(b"set")) && tokens.next().is_some_and(|w| w.eq_ignore_ascii_case(b"statement"))
}

/// Whether a text may run stored code, which may SET the session's variables with no SET in the
/// text, but for the calls ([`calls_a_routine`]; the two together are what may run it): a
/// write (its triggers; a WITH may lead one, in MySQL 8), DO, a SET, or several statements,
/// any of which may be one. The session is then asked again before its next cached read
/// (`stale`). A false positive costs that question, one round trip; a procedure (CALL) is
/// unfollowed.
pub fn writes_or_sets(g: &Glance<'_>) -> bool {
    let Some(first) = g.first else { return false };
    [&b"insert"[..], b"update", b"delete", b"replace", b"load", b"do", b"with"].iter().any(|w| first.eq_ignore_ascii_case(w))
        || g.semicolon
        || g.set_statement()
}

/// Whether a text may call a function that is not built in (a name followed by `(` that is
/// neither a built-in function nor a keyword, a qualified name, or a quoted one).
pub fn calls_a_routine(g: &Glance<'_>) -> bool {
    let sql = g.sql;
    if !g.paren {
        return false;
    }
    let mut tokens = Lexer::new(sql).peekable();
    let mut previous: Option<Token> = None;
    while let Some(t) = tokens.next() {
        let called = tokens.peek().is_some_and(|next| next.is_symbol(sql, b"("));
        // `MAX (v)`, `std (5)`: with a space or a comment before the `(`, the server calls a
        // stored function of that name, not the built-in.
        if called
            && t.kind == TokenKind::Word
            && tokens.peek().is_some_and(|next| next.start != t.end)
            && crate::matching::parsed_only_when_touching(t.text(sql))
        {
            return true;
        }
        // `MATCH (a) AGAINST ('x')`: the full-text search's keyword, not a call (`against(1)`
        // alone calls a stored function of that name).
        let against =
            t.kind == TokenKind::Word && t.text(sql).eq_ignore_ascii_case(b"against") && previous.is_some_and(|p| p.is_symbol(sql, b")"));
        if called && !against {
            let qualified = previous.is_some_and(|p| p.is_symbol(sql, b"."));
            match t.kind {
                TokenKind::QuotedIdent => return true,
                TokenKind::Word => {
                    let name = t.text(sql).to_ascii_lowercase();
                    let name = std::str::from_utf8(&name).unwrap_or("");
                    if qualified || !(BUILT_IN.contains(&name) || NOT_CALLS.contains(&name)) {
                        return true;
                    }
                }
                _ => {}
            }
        }
        previous = Some(t);
    }
    false
}

/// Whether a text may open views it does not name: a read of information_schema (COLUMNS,
/// VIEWS... open each view they describe), or a statement that opens the tables it names
/// (SHOW TABLE STATUS, SHOW COLUMNS, DESCRIBE, EXPLAIN, ANALYZE, CHECK). A view opened loads
/// the functions it calls, and the switch to their database and back reads the session's
/// privileges again, as [`calls_a_routine`]'s calls do.
pub fn may_open_views(g: &Glance<'_>) -> bool {
    const OPENING: [&[u8]; 7] = [b"show", b"describe", b"desc", b"explain", b"analyze", b"check", b"checksum"];
    let sql = g.sql;
    let schema = b"information_schema";
    g.first.is_some_and(|w| OPENING.iter().any(|k| w.eq_ignore_ascii_case(k)))
        || memchr::memchr2_iter(b'i', b'I', sql).any(|i| sql.get(i..i + schema.len()).is_some_and(|w| w.eq_ignore_ascii_case(schema)))
}

/// Keywords that may stand before a `(` without calling anything (type names: `CAST(x AS
/// DECIMAL(10, 2))`).
const NOT_CALLS: &[&str] = &[
    "decimal",
    "double",
    "float",
    "int",
    "integer",
    "numeric",
    "nchar",
    "varbinary",
    "varchar",
    "datetime",
    "div",
    "all",
    "and",
    "any",
    "as",
    "between",
    "by",
    "case",
    "check",
    "distinct",
    "each",
    "else",
    "exists",
    "for",
    "from",
    "having",
    "in",
    "index",
    "interval",
    "into",
    "is",
    "join",
    "key",
    "like",
    "limit",
    "not",
    "on",
    "or",
    "over",
    "partition",
    "returning",
    "row",
    "rows",
    "select",
    "set",
    "some",
    "table",
    "then",
    "union",
    "using",
    "value",
    "values",
    "when",
    "where",
    "window",
    "with",
    "xor",
];

/// MariaDB's built-in functions an application's statements commonly call (lower case). A
/// built-in missing here costs a question to the server, nothing else; a name here that is no
/// MariaDB built-in (MySQL 8's ANY_VALUE) would hide a stored function of that name, so the
/// list holds MariaDB's own.
const BUILT_IN: &[&str] = &[
    "abs",
    "acos",
    "adddate",
    "addtime",
    "aes_decrypt",
    "aes_encrypt",
    "ascii",
    "asin",
    "atan",
    "atan2",
    "avg",
    "benchmark",
    "bin",
    "binary",
    "bit_and",
    "bit_count",
    "bit_length",
    "bit_or",
    "bit_xor",
    "cast",
    "ceil",
    "ceiling",
    "char",
    "char_length",
    "character_length",
    "charset",
    "coalesce",
    "coercibility",
    "collation",
    "compress",
    "concat",
    "concat_ws",
    "connection_id",
    "conv",
    "convert",
    "convert_tz",
    "cos",
    "cot",
    "count",
    "crc32",
    "cume_dist",
    "curdate",
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "curtime",
    "database",
    "date",
    "date_add",
    "date_format",
    "date_sub",
    "datediff",
    "day",
    "dayname",
    "dayofmonth",
    "dayofweek",
    "dayofyear",
    "decode",
    "default",
    "degrees",
    "dense_rank",
    "elt",
    "encode",
    "exp",
    "export_set",
    "extract",
    "extractvalue",
    "field",
    "find_in_set",
    "first_value",
    "floor",
    "format",
    "found_rows",
    "from_base64",
    "from_days",
    "from_unixtime",
    "get_format",
    "get_lock",
    "greatest",
    "group_concat",
    "hex",
    "hour",
    "if",
    "ifnull",
    "inet6_aton",
    "inet6_ntoa",
    "inet_aton",
    "inet_ntoa",
    "insert",
    "instr",
    "is_free_lock",
    "is_used_lock",
    "isnull",
    "json_array",
    "json_arrayagg",
    "json_contains",
    "json_contains_path",
    "json_depth",
    "json_extract",
    "json_insert",
    "json_keys",
    "json_length",
    "json_merge",
    "json_merge_patch",
    "json_merge_preserve",
    "json_object",
    "json_objectagg",
    "json_query",
    "json_quote",
    "json_remove",
    "json_replace",
    "json_search",
    "json_set",
    "json_type",
    "json_unquote",
    "json_valid",
    "json_value",
    "lag",
    "last_day",
    "last_insert_id",
    "last_value",
    "lastval",
    "lcase",
    "lead",
    "least",
    "left",
    "length",
    "ln",
    "localtime",
    "localtimestamp",
    "locate",
    "log",
    "log10",
    "log2",
    "lower",
    "lpad",
    "ltrim",
    "make_set",
    "makedate",
    "maketime",
    "match",
    "max",
    "md5",
    "microsecond",
    "mid",
    "min",
    "minute",
    "mod",
    "month",
    "monthname",
    "nextval",
    "now",
    "nth_value",
    "ntile",
    "nullif",
    "oct",
    "octet_length",
    "ord",
    "percent_rank",
    "period_add",
    "period_diff",
    "pi",
    "position",
    "pow",
    "power",
    "quarter",
    "quote",
    "radians",
    "rand",
    "rank",
    "regexp_instr",
    "regexp_replace",
    "regexp_substr",
    "release_lock",
    "repeat",
    "replace",
    "reverse",
    "right",
    "round",
    "row_count",
    "row_number",
    "rpad",
    "rtrim",
    "schema",
    "sec_to_time",
    "second",
    "session_user",
    "setval",
    "sha",
    "sha1",
    "sha2",
    "sign",
    "sin",
    "sleep",
    "soundex",
    "space",
    "sqrt",
    "std",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "str_to_date",
    "strcmp",
    "subdate",
    "substr",
    "substring",
    "substring_index",
    "subtime",
    "sum",
    "sysdate",
    "system_user",
    "tan",
    "time",
    "time_format",
    "time_to_sec",
    "timediff",
    "timestamp",
    "timestampadd",
    "timestampdiff",
    "to_base64",
    "to_days",
    "to_seconds",
    "trim",
    "truncate",
    "ucase",
    "uncompress",
    "uncompressed_length",
    "unhex",
    "unix_timestamp",
    "upper",
    "user",
    "utc_date",
    "utc_time",
    "utc_timestamp",
    "uuid",
    "uuid_short",
    "var_pop",
    "var_samp",
    "variance",
    "version",
    "week",
    "weekday",
    "weekofyear",
    "weight_string",
    "year",
    "yearweek",
];

/// Whether `sql` has `/*!` or `/*M` anywhere.
pub(super) fn opens_executable_comment(sql: &[u8]) -> bool {
    memchr::memmem::find_iter(sql, b"/*").any(|i| matches!(sql.get(i + 2), Some(b'!' | b'M')))
}

/// `sql` with each executable comment's body in the comment's place (`/*!50700 GRANT ... */`
/// read as `GRANT ...`, whatever the version: the server may run it). None if a body holds
/// another comment, or the text has an unterminated token.
pub(super) fn open_exec_comments(sql: &[u8], tokens: impl IntoIterator<Item = Token>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(sql.len() + 8);
    let mut at = 0;
    for t in tokens {
        match t.kind {
            TokenKind::ExecComment => {}
            TokenKind::Unterminated => return None,
            _ => continue,
        }
        // `/*!`, `/*M!` or `/*+`, an optional version, the body, `*/`.
        let inner = sql.get(t.start + 2..t.end.checked_sub(2)?)?;
        let inner = inner.strip_prefix(b"M").unwrap_or(inner).get(1..)?;
        let body = &inner[inner.iter().take_while(|c| c.is_ascii_digit()).count()..];
        if find(body, b"/*").is_some() {
            return None;
        }
        out.extend_from_slice(sql.get(at..t.start)?);
        // Spaces, so that the body's ends join nothing around it into a new token.
        out.push(b' ');
        out.extend_from_slice(body);
        out.push(b' ');
        at = t.end;
    }
    out.extend_from_slice(sql.get(at..)?);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes (their triggers), DO and calls of functions that are not built in may run code
    /// that sets the session's variables.
    #[test]
    fn stored_code_is_known_by_writes_and_calls() {
        for sql in [
            "INSERT INTO log VALUES (1)",
            "update t set a = 1",
            "DO f()",
            "SELECT my_func(1)",
            "SELECT app.lower(s) FROM t",
            "SELECT `f`(1)",
            "SELECT COUNT(*), bump (2) FROM t",
            "SELECT 1; INSERT INTO log VALUES (2)",
            "SELECT std (5)",
            "SELECT MAX/**/(n) FROM t",
        ] {
            let g = Glance::of(sql.as_bytes());
            assert!(writes_or_sets(&g) || calls_a_routine(&g), "{sql}");
        }
        for sql in [
            "SELECT id FROM t WHERE k IN (1, 2)",
            "SELECT COUNT(*), MAX(n), CONCAT(a, 'f(x)') FROM t WHERE (a = 1) AND EXISTS (SELECT 1)",
            "SELECT id FROM t",
            "SELECT CAST(n AS DECIMAL(10, 2)), a DIV (b) FROM t",
            "SELECT CONCAT (a, 'b'), STD(n) FROM t",
            "SET @a = 1",
            "BEGIN",
            "",
        ] {
            let g = Glance::of(sql.as_bytes());
            assert!(!writes_or_sets(&g) && !calls_a_routine(&g), "{sql}");
        }
    }
}
