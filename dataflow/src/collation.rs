//! String collations: which strings are equal and in what order, exactly as the server says.
//!
//! Owns: the collations freshet implements, the weights of each character under them (tables
//! taken from the server's own `WEIGHT_STRING`), and comparison with PAD SPACE.
//! Does not own: where values are compared (value.rs hashes and orders [`crate::Value`]s with
//! these; the replica's index keys use the weights too).
//!
//! Invariants:
//! - A string's weights are the concatenation of its characters' weights: a character may
//!   weigh nothing (ignored: U+0000 and format characters under unicode_ci), one weight, or
//!   several (`ß` is `S S` under unicode_ci, `S` under general_ci). None of the implemented
//!   collations has contractions (two characters that weigh as one); the live tests compare
//!   random strings with the server to keep it so.
//! - Equal weight sequences (after PAD SPACE removes trailing weights of the space) mean
//!   equal strings, and [`Collation::compare`] orders by weights with the shorter sequence
//!   padded with the space's weight, as the server does: under a PAD SPACE collation
//!   `'a\t' < 'a' < 'a b'`.
//! - The case-insensitive tables cover every character of the Basic Multilingual Plane; every
//!   character above it weighs 0xFFFD under both (so all of them are equal to each other
//!   there, as on the server). `scripts/collation-tables` writes the tables and
//!   `dataflow/tests/mariadb.rs` checks every character against the server on each run.
//!
//! Other collations (utf8mb4_unicode_520_ci, utf8mb4_uca1400_*, MySQL 8's utf8mb4_0900_ai_ci,
//! other character sets) are not implemented: a query that reads a column of one is refused,
//! so it is relayed. The UCA 9.0 and 14.0 collations have contractions (`L·`, Cyrillic
//! letters with combining marks) that per-character tables cannot express.

use std::cmp::Ordering;
use std::sync::OnceLock;

/// String collations freshet implements. A column with any other collation makes the queries
/// that read it refuse to compile (see `crate::compile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Collation {
    /// `binary`: byte order, no padding.
    Binary,
    /// `utf8mb4_bin`: code point order, PAD SPACE.
    Utf8mb4Bin,
    /// `utf8mb4_general_ci` (MariaDB's default for utf8mb4): one weight per character, case
    /// and accents folded by the server's table, PAD SPACE.
    Utf8mb4GeneralCi,
    /// `utf8mb4_unicode_ci` (UCA 4.0.0): case and accent insensitive, with expansions and
    /// ignorable characters, PAD SPACE.
    Utf8mb4UnicodeCi,
}

impl Collation {
    /// Maps a server collation name to a supported collation, `None` if freshet does not
    /// implement it. `utf8mb3`/`utf8` names map to their utf8mb4 twin (the same weights on
    /// the BMP, which is all utf8mb3 holds).
    pub fn from_name(name: &str) -> Option<Collation> {
        let n = name.to_ascii_lowercase();
        let n = n.strip_prefix("utf8mb3_").map(|r| format!("utf8mb4_{r}")).unwrap_or(n);
        let n = n.strip_prefix("utf8_").map(|r| format!("utf8mb4_{r}")).unwrap_or(n);
        match n.as_str() {
            "binary" => Some(Collation::Binary),
            // Not ascii_bin: MariaDB's ascii holds any byte (`_binary 0xE9`), which it sends
            // to a client as `?` and compares and sorts as the byte; the views would hold the
            // `?` (filled) or a decoded character (binlog), neither the byte. Not latin1_bin:
            // MariaDB's latin1 is cp1252, whose bytes 0x80-0x9F do not sort as code points.
            "utf8mb4_bin" => Some(Collation::Utf8mb4Bin),
            "utf8mb4_general_ci" => Some(Collation::Utf8mb4GeneralCi),
            "utf8mb4_unicode_ci" => Some(Collation::Utf8mb4UnicodeCi),
            _ => None,
        }
    }

    /// The server's name for this collation.
    pub fn name(self) -> &'static str {
        match self {
            Collation::Binary => "binary",
            Collation::Utf8mb4Bin => "utf8mb4_bin",
            Collation::Utf8mb4GeneralCi => "utf8mb4_general_ci",
            Collation::Utf8mb4UnicodeCi => "utf8mb4_unicode_ci",
        }
    }

    /// True if letters that differ only in case compare equal.
    pub fn case_insensitive(self) -> bool {
        self.table().is_some()
    }

    /// True if two characters are equal under this collation, one character against one
    /// (LIKE compares so: `'ß' LIKE 'ss'` is false under unicode_ci, though `'ß' = 'ss'`).
    pub(crate) fn char_eq(self, a: char, b: char) -> bool {
        match self.table() {
            None => a == b,
            Some(t) => t.get(a) == t.get(b),
        }
    }

    /// The weights of one character, appended to `out` (code points for the binary
    /// collations). What the server's `WEIGHT_STRING` gives for a string of that character.
    pub fn char_weights(self, c: char, out: &mut Vec<u32>) {
        match self.table() {
            None => out.push(c as u32),
            Some(t) => out.extend(t.get(c).iter().map(|&w| w as u32)),
        }
    }

    /// UPPER under this collation: the server's case table, one character for one (`ß` and
    /// `ﬁ` stay as they are); a `binary` string is bytes and keeps its case.
    pub fn upper(self, s: &str) -> String {
        self.change_case(s, |c| c.to_ascii_uppercase(), |m| m.0)
    }

    /// LOWER under this collation (see [`Collation::upper`]): `İ` is `i`, `Σ` is always `σ`.
    pub fn lower(self, s: &str) -> String {
        self.change_case(s, |c| c.to_ascii_lowercase(), |m| m.1)
    }

    fn change_case(self, s: &str, ascii: fn(char) -> char, pick: fn(&(char, char)) -> char) -> String {
        if self == Collation::Binary {
            return s.to_string();
        }
        let table = case_table();
        s.chars()
            .map(|c| {
                if c.is_ascii() {
                    return ascii(c);
                }
                match table.binary_search_by_key(&c, |e| e.0) {
                    Ok(i) => pick(&table[i].1),
                    Err(_) => c,
                }
            })
            .collect()
    }

    /// Builds this collation's weight table now, if it has one and it is not built yet (a few
    /// milliseconds): the writer calls it when a view that compares text is installed, so that
    /// no read pays for it.
    pub fn warm(self) {
        let _ = self.table();
    }

    fn pad_space(self) -> bool {
        self != Collation::Binary
    }

    /// The weight of the space, which PAD SPACE pads the shorter string with.
    fn space(self) -> u32 {
        match self.table() {
            None => ' ' as u32,
            Some(t) => t.get(' ')[0] as u32,
        }
    }

    fn table(self) -> Option<&'static Table> {
        static GENERAL: OnceLock<Table> = OnceLock::new();
        static UNICODE: OnceLock<Table> = OnceLock::new();
        match self {
            Collation::Binary | Collation::Utf8mb4Bin => None,
            Collation::Utf8mb4GeneralCi => {
                Some(GENERAL.get_or_init(|| Table::parse(include_str!("collation/general_ci.txt"), general_rule)))
            }
            Collation::Utf8mb4UnicodeCi => {
                Some(UNICODE.get_or_init(|| Table::parse(include_str!("collation/unicode_ci.txt"), implicit_rule)))
            }
        }
    }

    /// `s` without its trailing characters that weigh only as spaces or nothing (PAD SPACE:
    /// `'a '`, `'a\u{A0}'` under unicode_ci and `'a'` are equal).
    fn trimmed(self, s: &str) -> &str {
        if !self.pad_space() {
            return s;
        }
        match self.table() {
            None => s.trim_end_matches(' '),
            Some(t) => {
                let space = t.get(' ');
                s.trim_end_matches(|c| t.get(c).iter().all(|w| *w == space[0]))
            }
        }
    }

    /// The sequence of weights a string sorts by under this collation, without the trailing
    /// spaces PAD SPACE ignores. Equal sequences mean equal strings: what `hash` uses, so that
    /// it agrees with [`Collation::compare`] (the replica's index keys use it too).
    pub fn weights(self, s: &str) -> Weights<'_> {
        Weights { chars: self.trimmed(s).chars(), table: self.table(), pending: &[] }
    }

    /// Orders two strings as the server does: by weights, the shorter padded with the space's
    /// weight under PAD SPACE.
    pub fn compare(self, a: &str, b: &str) -> Ordering {
        let (mut x, mut y) = (self.weights(a), self.weights(b));
        loop {
            match (x.next(), y.next()) {
                (Some(p), Some(q)) if p == q => {}
                (Some(p), Some(q)) => return p.cmp(&q),
                (None, None) => return Ordering::Equal,
                (None, Some(q)) => return self.padded(q, y).reverse(),
                (Some(p), None) => return self.padded(p, x),
            }
        }
    }

    /// The order of the longer string's rest (`first`, then `rest`) against the padding.
    fn padded(self, first: u32, rest: Weights<'_>) -> Ordering {
        if !self.pad_space() {
            return Ordering::Greater;
        }
        let space = self.space();
        std::iter::once(first).chain(rest).map(|w| w.cmp(&space)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
    }
}

/// The weights of a string's characters, in order (see [`Collation::weights`]).
pub struct Weights<'a> {
    chars: std::str::Chars<'a>,
    table: Option<&'static Table>,
    pending: &'static [u16],
}

impl Iterator for Weights<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        loop {
            if let Some((w, rest)) = self.pending.split_first() {
                self.pending = rest;
                return Some(*w as u32);
            }
            let c = self.chars.next()?;
            match self.table {
                None => return Some(c as u32),
                Some(t) => self.pending = t.get(c),
            }
        }
    }
}

/// Whether two column names or aliases are one name to the server, which compares them in its
/// system character set (utf8mb3, MariaDB 10.11): character by character in lower case (the
/// case table LOWER uses: `É` is `é`, `Σ` is `σ`, `ǅ` is `ǆ`, the final `ς` is itself), and
/// only if they are as long in bytes. Not by general_ci's weights, which fold accents: `e` and
/// `é`, `ß` and `s` are two names. The length is the server's too: `İ` (two bytes) is not `i`
/// nor `I`, the Kelvin sign (three) not `k`, though LOWER makes them so. Checked against the
/// server for every pair of BMP characters that share a weight or a case, as column names,
/// select aliases, and in ORDER BY, GROUP BY and HAVING (session 53); but ORDER BY's search of
/// the select list takes a plain column's alias of another length for the name, so a pair
/// one in lower case but not as long is refused ([`identifiers_unsure`]). Table and database
/// names are compared otherwise ([`crate::Names`]).
pub fn same_identifier(a: &str, b: &str) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    same_in_lower_case(a, b)
}

/// Whether `a` and `b` are one in lower case, character by character (the server's case
/// table).
fn same_in_lower_case(a: &str, b: &str) -> bool {
    let table = case_table();
    let lower = |c: char| {
        if c.is_ascii() {
            return c.to_ascii_lowercase();
        }
        table.binary_search_by_key(&c, |e| e.0).map_or(c, |i| table[i].1.1)
    };
    a.chars().map(lower).eq(b.chars().map(lower))
}

/// Whether the server may or may not take `a` and `b` for one name: they are one in lower
/// case character by character but not as long in bytes (the Kelvin sign and `k`, `İ` and
/// `i`). [`same_identifier`] says two names, which is what the server said for column names
/// and GROUP BY; its ORDER BY took a select alias of the Kelvin sign for `k` (session 53's
/// second audit). A query that names such a pair is refused: whichever name the server takes,
/// it is relayed to it.
pub fn identifiers_unsure(a: &str, b: &str) -> bool {
    a.len() != b.len() && !(a.is_ascii() && b.is_ascii()) && same_in_lower_case(a, b)
}

/// Every BMP character that UPPER or LOWER changes, in code point order, with its upper and
/// lower case (`collation/case.txt`, from the server; characters above the BMP keep their
/// case there).
fn case_table() -> &'static [(char, (char, char))] {
    static TABLE: OnceLock<Vec<(char, (char, char))>> = OnceLock::new();
    TABLE.get_or_init(|| {
        table_lines(include_str!("collation/case.txt"))
            .map(|(c, cases)| {
                let char_of = |u: Option<&u32>| u.copied().and_then(char::from_u32).unwrap_or_else(|| panic!("case table line {c:04X}"));
                (char_of(Some(&c)), (char_of(cases.first()), char_of(cases.get(1))))
            })
            .collect()
    })
}

/// The lines of a table `scripts/collation-tables` writes: a code point, a colon and values,
/// all in hex (`00DF: 0FEA 0FEA`); `#` starts a comment. The text is part of the build, so a
/// malformed line is a bug in the tree: it panics, and every test that compares strings says
/// so.
fn table_lines(text: &str) -> impl Iterator<Item = (u32, Vec<u32>)> + '_ {
    text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(|line| {
        let hex = |h: &str| u32::from_str_radix(h, 16).unwrap_or_else(|e| panic!("collation table line {line:?}: {e}"));
        let (c, values) = line.split_once(':').unwrap_or_else(|| panic!("collation table line {line:?}"));
        (hex(c), values.split_whitespace().map(hex).collect())
    })
}

/// The weight of every character above the BMP under both tables (the servers' utf8mb4
/// general_ci and unicode_ci treat them all as U+FFFD's replacement weight).
const ABOVE_BMP: [u16; 1] = [0xFFFD];

/// One collation's weights for every BMP character: `slots[c]` is where `c`'s weights start
/// in `pool` (high 24 bits) and how many there are (low 8 bits).
struct Table {
    slots: Box<[u32]>,
    pool: Box<[u16]>,
}

impl Table {
    fn get(&'static self, c: char) -> &'static [u16] {
        match self.slots.get(c as usize) {
            Some(&slot) => {
                let start = (slot >> 8) as usize;
                &self.pool[start..start + (slot & 0xFF) as usize]
            }
            None => &ABOVE_BMP,
        }
    }

    /// Builds the table from the characters `text` lists (see [`table_lines`]) and `rule`
    /// for the rest.
    fn parse(text: &str, rule: fn(u32, &mut Vec<u16>)) -> Table {
        let mut listed: Vec<Option<Vec<u32>>> = vec![None; 0x10000];
        for (c, weights) in table_lines(text) {
            listed[c as usize] = Some(weights);
        }
        let mut slots = Vec::with_capacity(0x10000);
        let mut pool = Vec::with_capacity(0x20000);
        for (c, listed) in listed.into_iter().enumerate() {
            let start = pool.len();
            match listed {
                Some(w) => pool.extend(w.into_iter().map(|w| w as u16)),
                None => rule(c as u32, &mut pool),
            }
            slots.push(((start as u32) << 8) | (pool.len() - start) as u32);
        }
        Table { slots: slots.into(), pool: pool.into() }
    }
}

/// general_ci's unlisted characters weigh their code point.
fn general_rule(c: u32, out: &mut Vec<u16>) {
    out.push(c as u16);
}

/// unicode_ci's unlisted characters have the UCA's implicit weights: a base by block (CJK
/// unified ideographs, CJK extension A, everything else) plus the code point's high bits, then
/// its low 15 bits with the top bit set.
fn implicit_rule(c: u32, out: &mut Vec<u16>) {
    let base = match c {
        0x4E00..=0x9FA5 => 0xFB40,
        0x3400..=0x4DB5 => 0xFB80,
        _ => 0xFBC0,
    };
    out.push((base + (c >> 15)) as u16);
    out.push(((c & 0x7FFF) | 0x8000) as u16);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(c: Collation, s: &str) -> Vec<u32> {
        c.weights(s).collect()
    }

    #[test]
    fn names() {
        assert_eq!(Collation::from_name("utf8mb3_general_ci"), Some(Collation::Utf8mb4GeneralCi));
        assert_eq!(Collation::from_name("UTF8_UNICODE_CI"), Some(Collation::Utf8mb4UnicodeCi));
        assert_eq!(Collation::from_name("ascii_bin"), None, "ascii holds any byte, compared as the byte");
        for refused in ["latin1_swedish_ci", "latin1_bin", "utf8mb4_0900_ai_ci", "utf8mb4_uca1400_ai_ci", "utf8mb4_unicode_520_ci"] {
            assert_eq!(Collation::from_name(refused), None, "{refused}");
        }
        for c in [Collation::Binary, Collation::Utf8mb4Bin, Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi] {
            assert_eq!(Collation::from_name(c.name()), Some(c));
        }
    }

    #[test]
    fn the_servers_folds_beyond_latin() {
        let (g, u) = (Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi);
        assert_eq!(weights(g, "ß"), weights(g, "s"));
        assert_eq!(weights(u, "ß"), weights(u, "ss"));
        assert_eq!(weights(u, "Ｓ"), weights(u, "s"));
        assert_ne!(weights(g, "Ｓ"), weights(g, "s"));
        assert_eq!(weights(u, "œ"), weights(u, "OE"));
        assert_eq!(weights(u, "a\u{0}b"), weights(u, "ab"), "U+0000 is ignored under unicode_ci");
        assert_eq!(weights(g, "😀"), weights(g, "😁"), "all characters above the BMP are equal");
    }

    #[test]
    fn pad_space_pads_with_the_spaces_weight() {
        for c in [Collation::Utf8mb4Bin, Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi] {
            assert_eq!(c.compare("a ", "a"), Ordering::Equal, "{c:?}");
            assert_eq!(c.compare("a\t", "a"), Ordering::Less, "{c:?}: a tab weighs less than the padding");
            assert_eq!(c.compare("a", "a b"), Ordering::Less, "{c:?}");
            assert_eq!(c.compare("a  b", "a"), Ordering::Greater, "{c:?}");
        }
        let u = Collation::Utf8mb4UnicodeCi;
        assert_eq!(u.compare("a\u{A0}", "a"), Ordering::Equal, "a no-break space weighs as a space");
        assert_eq!(u.compare("a \u{0}", "a"), Ordering::Equal, "an ignored character after the space");
        let b = Collation::Binary;
        assert_eq!(b.compare("a ", "a"), Ordering::Greater);
        assert_eq!(b.compare("a\t", "a"), Ordering::Greater);
    }

    /// unicode_ci sorts punctuation before digits before letters, and by letter not by code
    /// point.
    #[test]
    fn unicode_ci_orders_by_the_uca() {
        let u = Collation::Utf8mb4UnicodeCi;
        let mut words = vec!["b", "_b", "a", "-c", "1", "Ä", "z"];
        words.sort_by(|a, b| u.compare(a, b));
        assert_eq!(words, ["_b", "-c", "1", "a", "Ä", "b", "z"]);
    }

    /// Trimming whole characters is trimming weights: no character weighs a space after
    /// other weights.
    #[test]
    fn only_whole_characters_weigh_as_trailing_spaces() {
        for coll in [Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi] {
            let t = coll.table().unwrap();
            let space = t.get(' ')[0];
            for c in (0..=0xFFFF).filter_map(char::from_u32) {
                let w = t.get(c);
                if w.last() == Some(&space) {
                    assert!(w.iter().all(|x| *x == space), "{coll:?} {c:?} {w:x?}");
                }
            }
        }
    }

    #[test]
    fn case_changes_one_character_for_one() {
        let g = Collation::Utf8mb4GeneralCi;
        assert_eq!(g.upper("straße ﬁ"), "STRAßE ﬁ");
        assert_eq!(g.lower("İSTANBUL ΟΔΟΣ"), "istanbul οδοσ");
        assert_eq!(Collation::Binary.upper("abc"), "abc");
        let table = case_table();
        assert!(table.windows(2).all(|w| w[0].0 < w[1].0), "the case table is in code point order");
    }

    #[test]
    fn identifiers_compare_by_case_and_length() {
        for (a, b) in
            [("É", "é"), ("ÉA", "éa"), ("Σ", "σ"), ("ǅ", "ǆ"), ("Ǆ", "ǅ"), ("Д", "д"), ("K", "k"), ("\u{212A}ωi", "k\u{2126}\u{130}")]
        {
            assert!(same_identifier(a, b), "{a} {b}");
        }
        for (a, b) in [("e", "é"), ("ß", "s"), ("ß", "ss"), ("ς", "Σ"), ("İ", "i"), ("İD", "id"), ("\u{212A}", "k"), ("ı", "i"), ("µ", "μ")]
        {
            assert!(!same_identifier(a, b), "{a} {b}");
        }
        // One in lower case, not as long: the server's answer depends on where they meet.
        for (a, b) in [("İ", "i"), ("İD", "id"), ("\u{212A}", "k"), ("\u{2126}", "ω"), ("\u{212B}", "å")] {
            assert!(identifiers_unsure(a, b), "{a} {b}");
        }
        for (a, b) in [("É", "é"), ("e", "é"), ("ß", "ss"), ("ı", "i"), ("id", "ID"), ("\u{212A}ωi", "k\u{2126}\u{130}")] {
            assert!(!identifiers_unsure(a, b), "{a} {b}");
        }
    }

    #[test]
    fn like_compares_one_character_with_one() {
        let u = Collation::Utf8mb4UnicodeCi;
        assert!(u.char_eq('ä', 'A'));
        assert!(!u.char_eq('ß', 's'));
        assert!(Collation::Utf8mb4GeneralCi.char_eq('ß', 's'));
        assert!(!Collation::Utf8mb4Bin.char_eq('a', 'A'));
    }
}
