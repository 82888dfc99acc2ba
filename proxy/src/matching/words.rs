//! The words the fingerprint treats specially: reserved words (their case is folded), the
//! words that end a select list, the function names whose case is folded, and a set type
//! whose look-ups do not allocate. Split from [`super::fingerprint`], which reads them.

use std::sync::OnceLock;

/// Reserved words: their case is folded. Non-reserved words may be table names, whose case
/// matters, so they keep it.
pub(super) static RESERVED: WordSet = WordSet::new(&[
    "ALL",
    "AND",
    "AS",
    "ASC",
    "BETWEEN",
    "BINARY",
    "BY",
    "CASE",
    "CHAR",
    "COLLATE",
    "CROSS",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "CURRENT_USER",
    "DECIMAL",
    "DESC",
    "DISTINCT",
    "DISTINCTROW",
    "DIV",
    "DOUBLE",
    "ELSE",
    "EXCEPT",
    "EXISTS",
    "FALSE",
    "FLOAT",
    "FOR",
    "FORCE",
    "FROM",
    "GROUP",
    "HAVING",
    "HIGH_PRIORITY",
    "IGNORE",
    "IN",
    "INDEX",
    "INNER",
    "INT",
    "INTEGER",
    "INTERSECT",
    "INTERVAL",
    "INTO",
    "IS",
    "JOIN",
    "KEY",
    "LEFT",
    "LIKE",
    "LIMIT",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "LOCK",
    "MOD",
    "NATURAL",
    "NOT",
    "NULL",
    "NUMERIC",
    "ON",
    "OR",
    "ORDER",
    "OUTER",
    "REGEXP",
    "RIGHT",
    "RLIKE",
    "SELECT",
    "SQL_BIG_RESULT",
    "SQL_CALC_FOUND_ROWS",
    "SQL_SMALL_RESULT",
    "STRAIGHT_JOIN",
    "THEN",
    "TRUE",
    "UNION",
    "UNSIGNED",
    "UPDATE",
    "USE",
    "USING",
    "UTC_DATE",
    "UTC_TIME",
    "UTC_TIMESTAMP",
    "VARBINARY",
    "VARCHAR",
    "WHEN",
    "WHERE",
    "WITH",
    "XOR",
]);

/// Keywords after which `(` holds type arguments that stay in the text.
pub(super) static TYPES: WordSet = WordSet::new(&[
    "BINARY",
    "CHAR",
    "DATETIME",
    "DEC",
    "DECIMAL",
    "DOUBLE",
    "FLOAT",
    "NCHAR",
    "NUMERIC",
    "TIME",
    "TIMESTAMP",
    "VARBINARY",
    "VARCHAR",
]);

/// Functions whose result depends on the session, the clock or chance: their reads go to the
/// server. Matched as a word followed by `(`.
pub(super) static SESSION_FUNCTIONS: WordSet = WordSet::new(&[
    "BENCHMARK",
    "CONNECTION_ID",
    "CURDATE",
    "CURRENT_DATE",
    "CURRENT_ROLE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "CURRENT_USER",
    "CURTIME",
    "DATABASE",
    "FOUND_ROWS",
    "GET_LOCK",
    "IS_FREE_LOCK",
    "IS_USED_LOCK",
    "LASTVAL",
    "LAST_INSERT_ID",
    "LOAD_FILE",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "MASTER_GTID_WAIT",
    "MASTER_POS_WAIT",
    "NEXTVAL",
    "NOW",
    "RAND",
    "RANDOM_BYTES",
    "RELEASE_ALL_LOCKS",
    "RELEASE_LOCK",
    "ROW_COUNT",
    "SCHEMA",
    "SESSION_USER",
    "SETVAL",
    "SLEEP",
    "SYSDATE",
    "SYSTEM_USER",
    "UNIX_TIMESTAMP",
    "USER",
    "UTC_DATE",
    "UTC_TIME",
    "UTC_TIMESTAMP",
    "UUID",
    "UUID_SHORT",
    "VERSION",
]);

/// Of the above, those that need no parentheses (`SELECT CURRENT_TIMESTAMP`).
pub(super) static SESSION_WORDS: WordSet = WordSet::new(&[
    "CURRENT_DATE",
    "CURRENT_ROLE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "CURRENT_USER",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "UTC_DATE",
    "UTC_TIME",
    "UTC_TIMESTAMP",
]);

/// Words that end a select list at its own depth.
pub(super) const SELECT_LIST_ENDS: &[&str] =
    &["EXCEPT", "FOR", "FROM", "GROUP", "HAVING", "INTERSECT", "INTO", "LIMIT", "LOCK", "ORDER", "UNION", "WHERE", "WINDOW"];

/// Reserved words that may appear in a select list of plain column names.
pub(super) static NAME_LIST_WORDS: WordSet =
    WordSet::new(&["ALL", "AS", "DISTINCT", "DISTINCTROW", "HIGH_PRIORITY", "SQL_BIG_RESULT", "SQL_SMALL_RESULT", "STRAIGHT_JOIN"]);

/// A set of words, kept on first use as sorted packed upper-case keys: a look-up is a binary
/// search over integers. (Binary search over strings was half of classify's time.)
pub(super) struct WordSet {
    words: &'static [&'static str],
    keys: OnceLock<Vec<[u64; 3]>>,
}

impl WordSet {
    pub(super) const fn new(words: &'static [&'static str]) -> WordSet {
        WordSet { words, keys: OnceLock::new() }
    }

    pub(super) fn contains(&self, key: &[u64; 3]) -> bool {
        let keys = self.keys.get_or_init(|| {
            let mut keys: Vec<[u64; 3]> = self.words.iter().filter_map(|w| Upper::of(w.as_bytes())).map(|u| u.key).collect();
            keys.sort_unstable();
            keys
        });
        keys.binary_search(key).is_ok()
    }
}

/// A word's upper-case form in a stack buffer, for look-ups without allocating.
pub(super) struct Upper {
    buf: [u8; 24],
    len: usize,
    /// `buf` as big-endian integers: orders like the bytes, compares without memcmp.
    key: [u64; 3],
}

impl Upper {
    /// None for words longer than any keyword (they are never keywords).
    pub(super) fn of(word: &[u8]) -> Option<Upper> {
        let mut buf = [0u8; 24];
        buf.get_mut(..word.len())?.copy_from_slice(word);
        buf.make_ascii_uppercase();
        let mut key = [0u64; 3];
        for (k, chunk) in key.iter_mut().zip(buf.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *k = u64::from_be_bytes(b);
        }
        Some(Upper { buf, len: word.len(), key })
    }

    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }

    pub(super) fn is_in(&self, set: &WordSet) -> bool {
        set.contains(&self.key)
    }
}

pub(super) fn upper(word: &[u8]) -> Option<Upper> {
    Upper::of(word)
}

pub(super) fn is(word: &[u8], keyword: &str) -> bool {
    word.eq_ignore_ascii_case(keyword.as_bytes())
}
