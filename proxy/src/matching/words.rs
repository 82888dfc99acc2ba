//! The words the fingerprint treats specially: reserved words (their case is folded), the
//! words that end a select list, the function names whose case is folded, and [`Kw`], what a
//! word is among them, found once per word token by one look-up in a table of them all (no
//! allocation). Split from [`super::fingerprint`], which reads them.

use std::sync::OnceLock;

/// Reserved words: their case is folded. Non-reserved words may be table names, whose case
/// matters, so they keep it.
pub(super) static RESERVED: WordSet = WordSet::new(
    1 << 0,
    &[
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
    ],
);

/// Keywords after which `(` holds type arguments that stay in the text.
pub(super) static TYPES: WordSet = WordSet::new(
    1 << 1,
    &["BINARY", "CHAR", "DATETIME", "DEC", "DECIMAL", "DOUBLE", "FLOAT", "NCHAR", "NUMERIC", "TIME", "TIMESTAMP", "VARBINARY", "VARCHAR"],
);

/// Functions whose result depends on the session, the clock or chance: their reads go to the
/// server. Matched as a word followed by `(`.
pub(super) static SESSION_FUNCTIONS: WordSet = WordSet::new(
    1 << 2,
    &[
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
    ],
);

/// Of the above, those that need no parentheses (`SELECT CURRENT_TIMESTAMP`).
pub(super) static SESSION_WORDS: WordSet = WordSet::new(
    1 << 3,
    &[
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
    ],
);

/// Words that end a select list at its own depth.
pub(super) static SELECT_LIST_ENDS: WordSet = WordSet::new(
    1 << 4,
    &["EXCEPT", "FOR", "FROM", "GROUP", "HAVING", "INTERSECT", "INTO", "LIMIT", "LOCK", "ORDER", "UNION", "WHERE", "WINDOW"],
);

/// Reserved words after which a `-` is binary: they end an operand (`NULL - 1`).
pub(super) static OPERAND_WORDS: WordSet = WordSet::new(
    1 << 5,
    &[
        "NULL",
        "TRUE",
        "FALSE",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURRENT_TIMESTAMP",
        "CURRENT_USER",
        "LOCALTIME",
        "LOCALTIMESTAMP",
        "UTC_DATE",
        "UTC_TIME",
        "UTC_TIMESTAMP",
    ],
);

/// Reserved words that may appear in a select list of plain column names.
pub(super) static NAME_LIST_WORDS: WordSet =
    WordSet::new(1 << 6, &["ALL", "AS", "DISTINCT", "DISTINCTROW", "HIGH_PRIORITY", "SQL_BIG_RESULT", "SQL_SMALL_RESULT", "STRAIGHT_JOIN"]);

/// Functions the server parses as built-ins only when `(` follows the name at once (MariaDB's
/// and MySQL's `sql_functions`; MariaDB 10.11's found by asking it `SELECT name (1)` for every
/// function name). With a space or a comment before the `(` the server reads a stored function
/// of that name: ER_SP_DOES_NOT_EXIST, or a syntax error (`COUNT (*)`). SYSDATE and
/// ST_COLLECT are MySQL's (MariaDB takes the space there); relaying them costs only that.
pub(super) static PARSED_FUNCTIONS: WordSet = WordSet::new(
    1 << 7,
    &[
        "ADDDATE",
        "BIT_AND",
        "BIT_OR",
        "BIT_XOR",
        "CAST",
        "COUNT",
        "CUME_DIST",
        "CURDATE",
        "CURTIME",
        "DATE_ADD",
        "DATE_SUB",
        "DENSE_RANK",
        "EXTRACT",
        "FIRST_VALUE",
        "GROUP_CONCAT",
        "JSON_ARRAYAGG",
        "JSON_OBJECTAGG",
        "JSON_TABLE",
        "LAG",
        "LEAD",
        "MAX",
        "MEDIAN",
        "MID",
        "MIN",
        "NOW",
        "NTH_VALUE",
        "NTILE",
        "PERCENTILE_CONT",
        "PERCENTILE_DISC",
        "PERCENT_RANK",
        "POSITION",
        "RANK",
        "SESSION_USER",
        "STD",
        "STDDEV",
        "STDDEV_POP",
        "STDDEV_SAMP",
        "ST_COLLECT",
        "SUBDATE",
        "SUBSTR",
        "SUBSTRING",
        "SUM",
        "SYSDATE",
        "SYSTEM_USER",
        "TRIM",
        "TRIM_ORACLE",
        "VARIANCE",
        "VAR_POP",
        "VAR_SAMP",
    ],
);

/// Words MariaDB 10.11 reads otherwise bare than quoted: a quoted identifier that is one of
/// them keeps its backticks, so that `` `range` `` (a name) and `range` (a syntax error) are
/// two texts, with two verdicts. Found by asking it, for every word of its
/// information_schema.KEYWORDS and SQL_FUNCTIONS, whether `` `w` `` and `w` answer alike as a
/// column (first in a select list and after one, in WHERE, ORDER BY, GROUP BY, HAVING), a
/// table and an alias: most are refused bare (1064); CURRENT_ROLE is the session's role
/// bare; SQL_CACHE, SQL_NO_CACHE and SQL_BUFFER_RESULT are options first in a select list;
/// `a SOUNDS` is `a SOUNDS LIKE ...`; WINDOW is no table alias bare; NEXT, PREVIOUS and VALUE
/// read as a sequence's `NEXT VALUE FOR` together. Not [`RESERVED`], which decides how texts
/// are read: a keyword the server takes as a name, bare or quoted (`status`, `date`), reads
/// the same either way. The charset introducers are [`INTRODUCERS`].
pub(super) static QUOTED_WORDS: WordSet = WordSet::new(
    1 << 8,
    &[
        "ACCESSIBLE",
        "ADD",
        "ALL",
        "ALTER",
        "ANALYZE",
        "AND",
        "AS",
        "ASC",
        "ASENSITIVE",
        "BEFORE",
        "BETWEEN",
        "BIGINT",
        "BINARY",
        "BLOB",
        "BOTH",
        "BY",
        "CALL",
        "CASCADE",
        "CASE",
        "CHANGE",
        "CHAR",
        "CHARACTER",
        "CHECK",
        "COLLATE",
        "COLUMN",
        "CONDITION",
        "CONSTRAINT",
        "CONTINUE",
        "CONVERT",
        "CREATE",
        "CROSS",
        "CURRENT_ROLE",
        "CURSOR",
        "DATABASES",
        "DAY_HOUR",
        "DAY_MICROSECOND",
        "DAY_MINUTE",
        "DAY_SECOND",
        "DEC",
        "DECIMAL",
        "DECLARE",
        "DEFAULT",
        "DELAYED",
        "DELETE",
        "DELETE_DOMAIN_ID",
        "DESC",
        "DESCRIBE",
        "DETERMINISTIC",
        "DISTINCT",
        "DISTINCTROW",
        "DIV",
        "DOUBLE",
        "DO_DOMAIN_IDS",
        "DROP",
        "DUAL",
        "EACH",
        "ELSE",
        "ELSEIF",
        "ENCLOSED",
        "ESCAPED",
        "EXCEPT",
        "EXISTS",
        "EXIT",
        "EXPLAIN",
        "FETCH",
        "FLOAT",
        "FLOAT4",
        "FLOAT8",
        "FOR",
        "FORCE",
        "FOREIGN",
        "FROM",
        "FULLTEXT",
        "GRANT",
        "GROUP",
        "HAVING",
        "HIGH_PRIORITY",
        "HOUR_MICROSECOND",
        "HOUR_MINUTE",
        "HOUR_SECOND",
        "IF",
        "IGNORE",
        "IGNORE_DOMAIN_IDS",
        "IN",
        "INDEX",
        "INFILE",
        "INNER",
        "INOUT",
        "INSENSITIVE",
        "INSERT",
        "INT",
        "INT1",
        "INT2",
        "INT3",
        "INT4",
        "INT8",
        "INTEGER",
        "INTERSECT",
        "INTERVAL",
        "INTO",
        "IS",
        "ITERATE",
        "JOIN",
        "KEY",
        "KEYS",
        "KILL",
        "LEADING",
        "LEAVE",
        "LEFT",
        "LIKE",
        "LIMIT",
        "LINEAR",
        "LINES",
        "LOAD",
        "LOCK",
        "LONG",
        "LONGBLOB",
        "LONGTEXT",
        "LOOP",
        "LOW_PRIORITY",
        "MASTER_DEMOTE_TO_REPLICA",
        "MASTER_DEMOTE_TO_SLAVE",
        "MASTER_SSL_VERIFY_SERVER_CERT",
        "MATCH",
        "MAXVALUE",
        "MEDIUMBLOB",
        "MEDIUMINT",
        "MEDIUMTEXT",
        "MIDDLEINT",
        "MINUTE_MICROSECOND",
        "MINUTE_SECOND",
        "MOD",
        "MODIFIES",
        "NATURAL",
        "NEXT",
        "NOT",
        "NO_WRITE_TO_BINLOG",
        "NUMERIC",
        "OFFSET",
        "ON",
        "OPTIMIZE",
        "OPTIONALLY",
        "OR",
        "ORDER",
        "OUT",
        "OUTER",
        "OUTFILE",
        "OVER",
        "PAGE_CHECKSUM",
        "PARSE_VCOL_EXPR",
        "PARTITION",
        "PORTION",
        "PRECISION",
        "PREVIOUS",
        "PRIMARY",
        "PROCEDURE",
        "PURGE",
        "RANGE",
        "READ",
        "READS",
        "READ_WRITE",
        "REAL",
        "RECURSIVE",
        "REFERENCES",
        "REF_SYSTEM_ID",
        "REGEXP",
        "RELEASE",
        "RENAME",
        "REPEAT",
        "REPLACE",
        "REQUIRE",
        "RESIGNAL",
        "RESTRICT",
        "RETURN",
        "RETURNING",
        "REVOKE",
        "RIGHT",
        "RLIKE",
        "ROWS",
        "ROW_NUMBER",
        "SCHEMAS",
        "SECOND_MICROSECOND",
        "SELECT",
        "SENSITIVE",
        "SEPARATOR",
        "SET",
        "SHOW",
        "SIGNAL",
        "SMALLINT",
        "SOUNDS",
        "SPATIAL",
        "SPECIFIC",
        "SQL",
        "SQLEXCEPTION",
        "SQLSTATE",
        "SQLWARNING",
        "SQL_BIG_RESULT",
        "SQL_BUFFER_RESULT",
        "SQL_CACHE",
        "SQL_CALC_FOUND_ROWS",
        "SQL_NO_CACHE",
        "SQL_SMALL_RESULT",
        "SSL",
        "STARTING",
        "STATS_AUTO_RECALC",
        "STATS_PERSISTENT",
        "STATS_SAMPLE_PAGES",
        "STRAIGHT_JOIN",
        "TABLE",
        "TERMINATED",
        "THEN",
        "TINYBLOB",
        "TINYINT",
        "TINYTEXT",
        "TO",
        "TRAILING",
        "TRIGGER",
        "UNDO",
        "UNION",
        "UNIQUE",
        "UNLOCK",
        "UNSIGNED",
        "UPDATE",
        "USAGE",
        "USE",
        "USING",
        "VALUE",
        "VALUES",
        "VARBINARY",
        "VARCHAR",
        "VARCHARACTER",
        "VARYING",
        "WHEN",
        "WHERE",
        "WHILE",
        "WINDOW",
        "WITH",
        "WRITE",
        "XOR",
        "YEAR_MONTH",
        "ZEROFILL",
    ],
);

/// `_` and a character set name, any case: bare, the server reads a charset introducer
/// (`_utf8mb4'x'`), and before anything but a string or a hex or bit literal refuses it (1064),
/// so `` `_utf8mb4` `` (a name) keeps its backticks and a bare one is relayed. MariaDB 10.11's
/// `SHOW CHARACTER SET`, its aliases `utf8` and `utf8mb3`, and MySQL 8's gb18030.
pub(super) static INTRODUCERS: WordSet = WordSet::new(
    1 << 9,
    &[
        "_ARMSCII8",
        "_ASCII",
        "_BIG5",
        "_BINARY",
        "_CP1250",
        "_CP1251",
        "_CP1256",
        "_CP1257",
        "_CP850",
        "_CP852",
        "_CP866",
        "_CP932",
        "_DEC8",
        "_EUCJPMS",
        "_EUCKR",
        "_GB18030",
        "_GB2312",
        "_GBK",
        "_GEOSTD8",
        "_GREEK",
        "_HEBREW",
        "_HP8",
        "_KEYBCS2",
        "_KOI8R",
        "_KOI8U",
        "_LATIN1",
        "_LATIN2",
        "_LATIN5",
        "_LATIN7",
        "_MACCE",
        "_MACROMAN",
        "_SJIS",
        "_SWE7",
        "_TIS620",
        "_UCS2",
        "_UJIS",
        "_UTF16",
        "_UTF16LE",
        "_UTF32",
        "_UTF8",
        "_UTF8MB3",
        "_UTF8MB4",
    ],
);

/// Whether `word` is a built-in only when `(` follows it at once ([`PARSED_FUNCTIONS`]):
/// apart from its `(`, the server calls a stored function of that name.
pub fn parsed_only_when_touching(word: &[u8]) -> bool {
    Kw::of(word).is_in(&PARSED_FUNCTIONS)
}

/// The longest word of any set, in bytes: a longer word is no keyword.
pub(super) const MAX_KEYWORD: usize = 32;

/// Every set above, for building the table of [`Kw`]s.
static SETS: [&WordSet; 10] = [
    &RESERVED,
    &TYPES,
    &SESSION_FUNCTIONS,
    &SESSION_WORDS,
    &SELECT_LIST_ENDS,
    &OPERAND_WORDS,
    &NAME_LIST_WORDS,
    &PARSED_FUNCTIONS,
    &QUOTED_WORDS,
    &INTRODUCERS,
];

/// A set of words: its bit in [`Kw`] and its words (upper case).
pub(super) struct WordSet {
    bit: u16,
    words: &'static [&'static str],
}

impl WordSet {
    const fn new(bit: u16, words: &'static [&'static str]) -> WordSet {
        WordSet { bit, words }
    }
}

/// The words the normalizer asks about by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Named {
    Other,
    Asc,
    By,
    Desc,
    For,
    Group,
    In,
    Into,
    Is,
    Lock,
    Next,
    Not,
    Null,
    Order,
    Previous,
    Procedure,
    Select,
    Share,
    SqlCalcFoundRows,
    Update,
    Value,
}

const NAMED: [(&str, Named); 20] = [
    ("ASC", Named::Asc),
    ("BY", Named::By),
    ("DESC", Named::Desc),
    ("FOR", Named::For),
    ("GROUP", Named::Group),
    ("IN", Named::In),
    ("INTO", Named::Into),
    ("IS", Named::Is),
    ("LOCK", Named::Lock),
    ("NEXT", Named::Next),
    ("NOT", Named::Not),
    ("NULL", Named::Null),
    ("ORDER", Named::Order),
    ("PREVIOUS", Named::Previous),
    ("PROCEDURE", Named::Procedure),
    ("SELECT", Named::Select),
    ("SHARE", Named::Share),
    ("SQL_CALC_FOUND_ROWS", Named::SqlCalcFoundRows),
    ("UPDATE", Named::Update),
    ("VALUE", Named::Value),
];

/// What a word is to the normalizer: the sets it is in, its name if the normalizer asks for it
/// by name, and its upper-case text. Found once per word token by one hash look-up
/// ([`Kw::of`]); asking each set in turn was a binary search per question, several per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Kw {
    sets: u16,
    pub(super) named: Named,
    /// The word's index in the table's names, when it is in a set or named.
    entry: u16,
}

impl Kw {
    /// In no set and not named: every word that is not a keyword, and every token that is not
    /// a word (each has a byte no keyword has: a digit, quote, backtick, `?`, `@`, `.`, `/` or
    /// an operator).
    pub(super) const NONE: Kw = Kw { sets: 0, named: Named::Other, entry: u16::MAX };

    /// `word` compared without ASCII case, as the sets compared its upper-case form.
    pub(super) fn of(word: &[u8]) -> Kw {
        match key(word) {
            Some(key) => table().get(&key),
            None => Kw::NONE,
        }
    }

    pub(super) fn is_in(self, set: &WordSet) -> bool {
        self.sets & set.bit != 0
    }

    pub(super) fn is(self, named: Named) -> bool {
        self.named == named
    }

    /// The upper-case text of a word in a set or named (`""` otherwise).
    pub(super) fn name(self) -> &'static str {
        table().names.get(usize::from(self.entry)).copied().unwrap_or("")
    }
}

/// The words of every set and the named ones, by key, in an open-addressed table at most half
/// full, so a probe always ends at the key or at an empty slot (no word's key is all zeros).
struct Table {
    slots: Vec<([u64; 4], Kw)>,
    names: Vec<&'static str>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut names: Vec<&'static str> = SETS.iter().flat_map(|s| s.words.iter().copied()).chain(NAMED.iter().map(|n| n.0)).collect();
        names.sort_unstable();
        names.dedup();
        let mut slots = vec![([0u64; 4], Kw::NONE); (names.len() * 2).next_power_of_two()];
        let mask = slots.len() - 1;
        for (entry, &name) in names.iter().enumerate() {
            let Some(key) = key(name.as_bytes()) else { continue };
            let sets = SETS.iter().filter(|s| s.words.contains(&name)).fold(0, |bits, s| bits | s.bit);
            let named = NAMED.iter().find(|n| n.0 == name).map_or(Named::Other, |n| n.1);
            let kw = Kw { sets, named, entry: u16::try_from(entry).unwrap_or(u16::MAX) };
            let mut at = slot(&key) & mask;
            while slots.get(at).is_some_and(|s| s.0 != [0; 4]) {
                at = (at + 1) & mask;
            }
            if let Some(s) = slots.get_mut(at) {
                *s = (key, kw);
            }
        }
        Table { slots, names }
    })
}

impl Table {
    fn get(&self, key: &[u64; 4]) -> Kw {
        let mask = self.slots.len() - 1;
        let mut at = slot(key) & mask;
        // Each slot at most once; an empty slot (there is always one) ends the probe.
        for _ in 0..self.slots.len() {
            match self.slots.get(at) {
                Some((k, kw)) if k == key => return *kw,
                Some((k, _)) if *k != [0; 4] => at = (at + 1) & mask,
                _ => return Kw::NONE,
            }
        }
        Kw::NONE
    }
}

fn slot(key: &[u64; 4]) -> usize {
    let h = (key[0] ^ key[1].rotate_left(16) ^ key[2].rotate_left(32) ^ key[3].rotate_left(48)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 40) as usize
}

/// A word's upper-case bytes zero-padded to [`MAX_KEYWORD`], as big-endian integers,
/// upper-cased eight bytes at a time. None for words longer than any keyword and for the empty
/// word (neither is a keyword).
fn key(word: &[u8]) -> Option<[u64; 4]> {
    if word.is_empty() || word.len() > MAX_KEYWORD {
        return None;
    }
    let mut key = [0u64; 4];
    // Byte by byte into the integers (no copy through a buffer: most words are a few bytes).
    for (k, chunk) in key.iter_mut().zip(word.chunks(8)) {
        let mut v = 0u64;
        for (j, &b) in chunk.iter().enumerate() {
            v |= u64::from(b) << (56 - 8 * j);
        }
        *k = upper8(v);
    }
    Some(key)
}

/// `make_ascii_uppercase` of eight bytes at once: `a`..=`z` lose 0x20, every other byte
/// (those >= 0x80 too) stays.
fn upper8(x: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let low = x & LOW7;
    // Per byte, with no carry between bytes (each sum stays under 0x100): the high bit is set
    // when the low seven bits are >= `a` (0x61 + 0x1f = 0x80), and when they are > `z`
    // (0x7b + 0x05 = 0x80); a byte >= 0x80 is left alone.
    let at_least_a = low.wrapping_add(0x1f1f_1f1f_1f1f_1f1f);
    let above_z = low.wrapping_add(0x0505_0505_0505_0505);
    let lower = at_least_a & !above_z & !x & HIGH;
    x ^ (lower >> 2)
}

/// A word's upper-case form in a stack buffer, without allocating.
pub(super) struct Upper {
    buf: [u8; MAX_KEYWORD],
    len: usize,
}

impl Upper {
    /// None for words longer than any keyword (they are never keywords).
    pub(super) fn of(word: &[u8]) -> Option<Upper> {
        let mut buf = [0u8; MAX_KEYWORD];
        buf.get_mut(..word.len())?.copy_from_slice(word);
        buf.make_ascii_uppercase();
        Some(Upper { buf, len: word.len() })
    }

    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

pub(super) fn upper(word: &[u8]) -> Option<Upper> {
    Upper::of(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key the sets compared before [`Kw`]: the upper-case buffer as big-endian integers.
    fn old_key(u: &Upper) -> [u64; 4] {
        let mut key = [0u64; 4];
        for (k, chunk) in key.iter_mut().zip(u.buf.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *k = u64::from_be_bytes(b);
        }
        key
    }

    /// The look-up each set made before [`Kw`]: a binary search of the set's upper-case keys.
    fn in_set(word: &[u8], set: &WordSet) -> bool {
        let mut keys: Vec<[u64; 4]> = set.words.iter().filter_map(|w| Upper::of(w.as_bytes())).map(|u| old_key(&u)).collect();
        keys.sort_unstable();
        Upper::of(word).is_some_and(|u| keys.binary_search(&old_key(&u)).is_ok())
    }

    #[test]
    fn upper8_is_make_ascii_uppercase() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut bytes = [b'a', b'Z', b'_', 0x80, b'z', b'{', b'`', b'@'];
                bytes[at] = b;
                let mut expect = bytes;
                expect.make_ascii_uppercase();
                assert_eq!(upper8(u64::from_be_bytes(bytes)), u64::from_be_bytes(expect), "{b:#x} at {at}");
            }
        }
    }

    /// A longer word has no key, so a set's word longer than [`MAX_KEYWORD`] was never found
    /// (MASTER_SSL_VERIFY_SERVER_CERT, 29 bytes, in [`QUOTED_WORDS`]).
    #[test]
    fn every_word_of_every_set_is_found() {
        for set in SETS {
            for w in set.words {
                assert!(Kw::of(w.as_bytes()).is_in(set), "{w} in the set of {}", set.words[0]);
                assert!(Kw::of(w.to_ascii_lowercase().as_bytes()).is_in(set), "{w} in lower case");
            }
        }
    }

    #[test]
    fn kw_answers_as_the_sets_did() {
        let mut words: Vec<Vec<u8>> = Vec::new();
        for set in SETS {
            for w in set.words {
                let b = w.as_bytes();
                words.push(b.to_vec());
                words.push(w.to_ascii_lowercase().into_bytes());
                let mut mixed = b.to_vec();
                mixed[0] = mixed[0].to_ascii_lowercase();
                words.push(mixed.clone());
                mixed.push(b'S');
                words.push(mixed);
                words.push(b[..b.len() - 1].to_vec());
                words.push(b[1..].to_vec());
                words.push([b, "\u{e9}".as_bytes()].concat());
            }
        }
        for (name, _) in NAMED {
            words.push(name.to_ascii_lowercase().into_bytes());
        }
        for w in [
            "",
            "a",
            "id",
            "stories",
            "select_",
            "_select",
            "sélect",
            "SELECTSELECTSELECTSELECTSELECTSE",
            "SELECTSELECTSELECTSELECTSELECTSEL",
        ] {
            words.push(w.as_bytes().to_vec());
        }
        words.extend([b"SEL\xc3ECT".to_vec(), b"sql_calc_found_rowz".to_vec(), b"`select`".to_vec(), b"'from'".to_vec()]);
        for w in &words {
            let kw = Kw::of(w);
            let shown = String::from_utf8_lossy(w);
            for set in SETS {
                assert_eq!(kw.is_in(set), in_set(w, set), "{shown:?} in the set of {}", set.words[0]);
            }
            let named = NAMED.iter().find(|n| w.eq_ignore_ascii_case(n.0.as_bytes())).map_or(Named::Other, |n| n.1);
            assert_eq!(kw.named, named, "{shown:?}");
            let keyword = kw.sets != 0 || kw.named != Named::Other;
            let upper = Upper::of(w);
            assert_eq!(kw.name(), if keyword { upper.as_ref().map_or("", Upper::as_str) } else { "" }, "{shown:?}");
            assert_eq!(key(w), if w.is_empty() { None } else { upper.map(|u| old_key(&u)) }, "{shown:?}");
        }
    }
}
