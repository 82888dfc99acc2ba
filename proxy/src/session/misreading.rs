//! Where the tracker's reading of a text may differ from the server's under the session's
//! settings. The tracker ([`super::state`]) reads bytes with the tokenizer in the default
//! sql_mode: a client character set whose two-byte characters may end in an ASCII byte
//! ([`MISREAD_CHARSETS`]), or a sql_mode that changes how text is read (any but
//! [`READABLE_MODES`]: ANSI_QUOTES, NO_BACKSLASH_ESCAPES), may hide from it a statement the
//! server runs.
//!
//! Owns: those character sets (by name and by collation id) and modes, whether a SET of them
//! names one the tracker follows a session in ([`follows_charset`],
//! [`reads_as_default_mode`]), and whether a text reads otherwise in a setting the tracker has
//! not seen set ([`reads_otherwise_unseen`]). Does not own: what the session does about it
//! (not followed, asked again, `confirmed`: [`super::state::SessionState`]), nor the server's
//! own answer about its settings ([`super::probe`]).

use super::state::unquoted;
use crate::matching::lexer::{Lexer, Token, TokenKind};

/// Why a session is not followed after it may have set a client character set that this
/// tokenizer misreads ([`misread_charset`]).
pub(super) const MISREAD_CHARSET: &str = "a client character set whose characters the tokenizer may misread";

/// Client character sets with two-byte characters whose second byte may be ASCII (a
/// backslash, a quote, a backtick among them): the server's lexer reads such a character
/// whole, where this tokenizer, reading bytes, reads an escape or the end of a string, and so
/// may not see a statement that follows it in the same text (a temporary table, a SET). A
/// session that has used one is not followed until it is reset. The other multi-byte sets
/// (utf8, ujis, euckr, gb2312, eucjpms) have no ASCII byte inside a character.
const MISREAD_CHARSETS: &[&str] = &["big5", "cp932", "gbk", "sjis", "gb18030"];

/// Whether the character set named `name` is one of [`MISREAD_CHARSETS`].
pub fn misread_charset(name: &str) -> bool {
    MISREAD_CHARSETS.iter().any(|c| c.eq_ignore_ascii_case(name))
}

/// Whether collation `id` (a handshake's or COM_CHANGE_USER's) is of a character set in
/// [`MISREAD_CHARSETS`]: MariaDB's and MySQL's ids for big5, cp932, gbk, sjis and gb18030.
pub fn misread_collation(id: u16) -> bool {
    matches!(id, 1 | 13 | 28 | 84 | 87 | 88 | 95 | 96 | 248..=250 | 1025 | 1037 | 1052 | 1108 | 1111 | 1112 | 1119 | 1120)
}

/// Whether `sql` may read otherwise to a server whose session reads text in a way the tracker
/// has not seen set (see [`SessionState::confirmed`](super::state::SessionState::confirmed))
/// than to this tokenizer:
/// - a byte that may lead a two-byte character of gbk, big5, sjis, cp932 or gb18030 followed
///   by a backslash or a backtick, which that character would hold (a byte-wise reading sees
///   an escape, or a quoted name's start or end);
/// - a backslash inside a quoted string, which is not an escape under NO_BACKSLASH_ESCAPES,
///   nor inside a `"..."` name under ANSI_QUOTES.
///
/// Without either, every reading of the text has the same tokens' bounds, so the same
/// statements. Valid UTF-8 may match the first (`é` before a backtick), which costs a question.
pub fn reads_otherwise_unseen(sql: &[u8]) -> bool {
    if memchr::memchr2_iter(b'\\', b'`', sql).any(|i| i > 0 && sql[i - 1] >= 0x81) {
        return true;
    }
    memchr::memchr(b'\\', sql).is_some()
        && Lexer::new(sql).any(|t| matches!(t.kind, TokenKind::SingleQuoted | TokenKind::DoubleQuoted) && t.text(sql).contains(&b'\\'))
}

/// Whether the character set named at `tokens[at]` is one the tracker follows a session in:
/// a name or a quoted name, not DEFAULT (the server's, which the tracker does not know), not
/// one of [`MISREAD_CHARSETS`], and nothing but COLLATE or the next assignment after it.
pub(super) fn follows_charset(sql: &[u8], tokens: &[Token], at: usize) -> bool {
    let Some(value) = tokens.get(at) else { return false };
    let text = value.text(sql);
    let name = match value.kind {
        TokenKind::Word => text,
        TokenKind::SingleQuoted | TokenKind::DoubleQuoted => text.get(1..text.len().saturating_sub(1)).unwrap_or_default(),
        _ => return false,
    };
    let name = String::from_utf8_lossy(name);
    let ends = tokens
        .get(at + 1)
        .is_none_or(|t| t.is_symbol(sql, b",") || (t.kind == TokenKind::Word && t.text(sql).eq_ignore_ascii_case(b"collate")));
    ends && !name.eq_ignore_ascii_case("default") && !misread_charset(&name) && !name.contains('\\')
}

/// MariaDB's sql_mode flags under which a text reads as in the default mode (its tokens and
/// statements are the same): all but ANSI_QUOTES, NO_BACKSLASH_ESCAPES and the combinations
/// that hold one (ANSI, ORACLE, POSTGRESQL, MSSQL, DB2, MAXDB). Whether a cached answer is
/// still the server's under them is the probe's to say.
const READABLE_MODES: &[&str] = &[
    "REAL_AS_FLOAT",
    "PIPES_AS_CONCAT",
    "IGNORE_SPACE",
    "IGNORE_BAD_TABLE_OPTIONS",
    "ONLY_FULL_GROUP_BY",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_DIR_IN_CREATE",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_FIELD_OPTIONS",
    "MYSQL323",
    "MYSQL40",
    "NO_AUTO_VALUE_ON_ZERO",
    "STRICT_TRANS_TABLES",
    "STRICT_ALL_TABLES",
    "NO_ZERO_IN_DATE",
    "NO_ZERO_DATE",
    "ALLOW_INVALID_DATES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "TRADITIONAL",
    "NO_AUTO_CREATE_USER",
    "HIGH_NOT_PRECEDENCE",
    "NO_ENGINE_SUBSTITUTION",
    "PAD_CHAR_TO_FULL_LENGTH",
    "EMPTY_STRING_IS_NULL",
    "SIMULTANEOUS_ASSIGNMENT",
    "TIME_ROUND_FRACTIONAL",
];

/// Whether a sql_mode's value (`tokens`: `=` and what follows) is known to hold only modes
/// under which texts read as in the default one: the modes of its strings (each a comma list)
/// are all [`READABLE_MODES`], and the rest is `@@sql_mode` (the session's own, which the
/// probe read), such modes written as words, CONCAT or CONCAT_WS, DEFAULT, parentheses and
/// commas. ANSI_QUOTES or NO_BACKSLASH_ESCAPES named, a mode built from pieces
/// (`CONCAT('NO_BACK', 'SLASH_ESCAPES')`), a number (a bit mask), a hex string, a user variable
/// or any other function or query may be any mode, and the texts sent before the next probe
/// would be read in the wrong one. Rails' `CONCAT(CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'),
/// ...)` is followed.
pub(super) fn reads_as_default_mode(sql: &[u8], tokens: &[Token]) -> bool {
    let mut depth = 0i32;
    let mut tokens = tokens.iter().skip_while(|t| t.is_symbol(sql, b"=") || t.is_symbol(sql, b":=")).peekable();
    while let Some(t) = tokens.next() {
        let text = t.text(sql);
        match t.kind {
            TokenKind::Symbol if text == b"(" => depth += 1,
            TokenKind::Symbol if text == b")" => depth -= 1,
            TokenKind::Symbol if text == b"," && depth == 0 => return true,
            TokenKind::Symbol if text == b"," => {}
            TokenKind::SingleQuoted | TokenKind::DoubleQuoted => {
                let value = unquoted(text);
                let modes = String::from_utf8_lossy(&value).to_ascii_uppercase();
                if !modes.split(',').map(str::trim).all(|m| m.is_empty() || READABLE_MODES.contains(&m)) {
                    return false;
                }
            }
            TokenKind::SystemVariable => {
                let name = String::from_utf8_lossy(text).to_ascii_lowercase();
                if !matches!(name.as_str(), "@@sql_mode" | "@@session.sql_mode" | "@@local.sql_mode") {
                    return false;
                }
            }
            TokenKind::Word => {
                let w = String::from_utf8_lossy(text).to_ascii_lowercase();
                let call = tokens.peek().is_some_and(|n| n.is_symbol(sql, b"("));
                let mode = !call && READABLE_MODES.contains(&w.to_ascii_uppercase().as_str());
                if !(w == "default" || mode || call && (w == "concat" || w == "concat_ws")) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::glance::opens_executable_comment;
    use super::*;

    #[test]
    fn a_text_that_reads_otherwise_in_another_setting_is_known() {
        for sql in [
            &b"SELECT '\x95\x5c'; CREATE TEMPORARY TABLE t (i INT) -- '"[..],
            b"SELECT 1 AS \x95`; SET sql_log_bin = 0; SELECT `",
            // NO_BACKSLASH_ESCAPES: the string ends at the backslash.
            b"SELECT 'a\\'; DROP TABLE t -- '",
            // ANSI_QUOTES: a name, in which a backslash is a backslash.
            b"SELECT \"a\\\"; SET @x = 1 -- \"",
            b"INSERT INTO t VALUES ('O\\'Brien')",
            // UTF-8 may match too: an accented letter before a backtick costs a question.
            "SELECT `café` FROM t".as_bytes(),
        ] {
            assert!(reads_otherwise_unseen(sql), "{}", String::from_utf8_lossy(sql));
        }
        for sql in [
            &b"SELECT id FROM t WHERE id = 1"[..],
            b"SET NAMES utf8mb4",
            "INSERT INTO t VALUES ('sécret', 'O''Brien')".as_bytes(),
            // A backslash outside a string, or in a comment, reads the same way in each.
            b"SELECT \\N, 1 /* \\' */",
            b"SELECT `a\\b` FROM t",
        ] {
            assert!(!reads_otherwise_unseen(sql), "{}", String::from_utf8_lossy(sql));
        }
    }

    #[test]
    fn the_searches_of_a_text_find_what_is_at_its_ends() {
        // The byte pair that may hide an escape, at the start and at the end of the text.
        assert!(reads_otherwise_unseen(b"\x95`"));
        assert!(reads_otherwise_unseen(b"SELECT 1 AS `a\x95`"));
        assert!(!reads_otherwise_unseen(b"`a` \x95"));
        for (sql, opens) in [
            (&b"/*!"[..], true),
            (b"SELECT 1 /*M", true),
            (b"SELECT 1 /*", false),
            (b"SELECT 1 / *! 2", false),
            (b"SELECT '/*' /*+ hint */", false),
            (b"/*/*!*/", true),
        ] {
            assert_eq!(opens_executable_comment(sql), opens, "{}", String::from_utf8_lossy(sql));
        }
    }
}
