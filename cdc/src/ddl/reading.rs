//! How a binlogged text is read: its tokens under every sql_mode reading that may differ
//! ([`statements`], [`readings`]), whether it can be read with confidence at all
//! ([`readable`]), and a cursor over the tokens for the parsers in [`super`]. A text that
//! cannot be read is taken at its worst by every caller.

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Tok {
    Word(String),
    Quoted(String),
    Dot,
    Comma,
    Other(char),
}

/// The heads of statements are what matter: at most this many characters are read (a
/// statement logged as a statement may be as large as `max_allowed_packet`, and every Query
/// event is read several times). A longer text is not read at all: it is taken to do anything
/// ([`statements`]), since what lies past the head (a TRUNCATE after a long comment, the last
/// table of a long RENAME) is what it does.
pub(super) const HEAD_CHARS: usize = 64 * 1024;

/// The most statements a `SET STATEMENT` text is read as (one after each `FOR` it has); a text
/// with more is taken to do anything, so that reading it stays linear in its length.
pub(super) const MAX_CANDIDATES: usize = 16;

/// How the strings of a text are read. A binlogged text does not say which sql_mode its
/// session read it under, and each reading may take for a string, or a comment, what another
/// takes for a statement; so every reading is taken where it matters ([`statements`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Reading {
    /// A backslash escapes the character after it in a string (MariaDB's default; not under
    /// NO_BACKSLASH_ESCAPES, under which `'\'` is a whole string).
    pub(super) escapes: bool,
    /// `"..."` is a name (ANSI_QUOTES), in which a backslash escapes nothing, while it still
    /// escapes in `'...'`.
    pub(super) ansi_quotes: bool,
    /// `[...]` is a name too (sql_mode MSSQL, which brings ANSI_QUOTES).
    pub(super) brackets: bool,
}

pub(super) const DEFAULT_READING: Reading = Reading { escapes: true, ansi_quotes: false, brackets: false };

/// The readings of `sql` that may differ: texts without a backslash, a `"` or a `[` read alike
/// under all.
pub(super) fn readings(sql: &str) -> &'static [Reading] {
    const MSSQL: Reading = Reading { escapes: true, ansi_quotes: true, brackets: true };
    const QUOTES: [Reading; 3] = [
        DEFAULT_READING,
        Reading { escapes: false, ansi_quotes: false, brackets: false },
        Reading { escapes: true, ansi_quotes: true, brackets: false },
    ];
    const ALL: [Reading; 4] = [QUOTES[0], QUOTES[1], QUOTES[2], MSSQL];
    match (sql.contains(['\\', '"']), sql.contains('[')) {
        (false, false) => &QUOTES[..1],
        (true, false) => &QUOTES,
        (false, true) => &[DEFAULT_READING, MSSQL],
        (true, true) => &ALL,
    }
}

/// Whether a multibyte character set (Big5, GBK, SJIS, CP932) may read `sql` otherwise than
/// UTF-8 does: their characters' second byte may be a backslash or a backtick, which then
/// escapes or quotes nothing. Decoded as UTF-8, the lead byte before it is not ASCII (a valid
/// character, or U+FFFD for an invalid byte), so a non-ASCII character right before either
/// makes the text one freshet does not read.
pub(super) fn charset_may_differ(sql: &str) -> bool {
    let mut after_wide = false;
    sql.chars().any(|c| {
        let hit = after_wide && (c == '\\' || c == '`');
        after_wide = !c.is_ascii();
        hit
    })
}

/// Whether a text can be read with confidence: not longer than [`HEAD_CHARS`], with no
/// U+FFFD (a byte that was not UTF-8, or one of a session whose character set is not UTF-8:
/// `events::query_text`; in latin1 0xA0 is a space to the server) and no bytes a multibyte
/// character set may read otherwise ([`charset_may_differ`]). What cannot is taken at its
/// worst: it may change rows and rights, and the stream forgets what it knew of other
/// databases.
pub fn readable(sql: &str) -> bool {
    sql.chars().nth(HEAD_CHARS).is_none() && !sql.contains('\u{FFFD}') && !charset_may_differ(sql)
}

/// The statements a binlogged text may run, each as its tokens, under every [`readings`]; or
/// `None` if the text cannot be read with confidence ([`readable`]), or is a `SET STATEMENT` of
/// more than [`MAX_CANDIDATES`] `FOR`s. Callers take `None` at its worst (it may change rows and
/// rights).
///
/// MariaDB's `SET STATEMENT var = value [, ...] FOR <statement>` runs (and logs) the statement
/// after a `FOR` with the variables set. Its values are expressions that may hold a `FOR` of
/// their own (`SUBSTRING(s FROM 1 FOR 2)`), a number may be glued to the `FOR` after it
/// (`1.5FOR`), and a `FOR` in what one reading takes for a string may be outside one in the
/// server's: the statement after every word that ends in `FOR` (in a string or not) is a
/// candidate, and each is read.
pub(super) fn statements(sql: &str) -> Option<Vec<Vec<Tok>>> {
    if !readable(sql) {
        return None;
    }
    let word = |t: &Tok, w: &str| matches!(t, Tok::Word(x) if x.eq_ignore_ascii_case(w));
    // Any word that ends in FOR: `1.5FOR` and `\NFOR` are a value then FOR to the server.
    let ends_for = |t: &Tok| match t {
        Tok::Word(x) => x.len() >= 3 && x.as_bytes()[x.len() - 3..].eq_ignore_ascii_case(b"FOR"),
        _ => false,
    };
    let mut out = Vec::new();
    for &reading in readings(sql) {
        let toks: Vec<Tok> = Lexer::read(sql, reading).collect();
        if !(toks.len() > 2 && word(&toks[0], "SET") && word(&toks[1], "STATEMENT")) {
            out.push(toks);
            continue;
        }
        let fors: Vec<usize> = (2..toks.len()).filter(|&i| ends_for(&toks[i])).collect();
        if fors.len() > MAX_CANDIDATES {
            return None;
        }
        if fors.is_empty() {
            out.push(toks);
        } else {
            out.extend(fors.iter().map(|&at| toks[at + 1..].to_vec()));
        }
    }
    Some(out)
}

/// The first [`HEAD_CHARS`] characters of `sql`.
pub(super) fn head(sql: &str) -> &str {
    sql.char_indices().nth(HEAD_CHARS).map_or(sql, |(end, _)| &sql[..end])
}

pub(super) fn tokens(sql: &str) -> Vec<Tok> {
    Lexer::new(head(sql)).take(256).collect()
}

/// The tokens of a text, however long (what [`tokens`] takes the head of). Strings are not
/// told apart: their words are words, which errs towards reading more into a text; but no
/// comment, quote or sign opens inside one (`'/*'` hides nothing after it), and a backslash
/// escapes the character after it (`"\""`).
pub(super) struct Lexer<'a> {
    s: &'a str,
    i: usize,
    /// Inside a string: its quote.
    quoted: Option<u8>,
    /// Inside a version comment (`/*!50000 ... */`), whose `*/` ends it; elsewhere `*/` is
    /// a `*` and a `/`.
    in_version: bool,
    reading: Reading,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(s: &'a str) -> Lexer<'a> {
        Lexer::read(s, DEFAULT_READING)
    }

    pub(super) fn read(s: &'a str, reading: Reading) -> Lexer<'a> {
        Lexer { s, i: 0, quoted: None, in_version: false, reading }
    }

    /// Whether a backslash escapes in the string the lexer is in.
    fn escapes(&self) -> bool {
        self.reading.escapes && !(self.reading.ansi_quotes && self.quoted == Some(b'"'))
    }

    fn byte(&self, k: usize) -> Option<u8> {
        self.s.as_bytes().get(self.i + k).copied()
    }

    /// The character at the cursor (delimiters are ASCII, so bytes find them; a character
    /// past ASCII is decoded to ask whether it is a letter or a space).
    fn char(&self) -> Option<char> {
        self.s[self.i..].chars().next()
    }

    /// The character `k` bytes past the cursor, if one starts there.
    fn char_at(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k..)?.chars().next()
    }
}

impl Iterator for Lexer<'_> {
    type Item = Tok;

    fn next(&mut self) -> Option<Tok> {
        // Every character past ASCII is part of a name to the server in a UTF-8 session (a
        // no-break space, U+3000 and `€` too); only ASCII white space separates.
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$' || !c.is_ascii();
        let space = |c: char| c.is_ascii() && c.is_whitespace();
        loop {
            let c = self.char()?;
            let next = self.byte(1);
            if (c == '\'' || (c == '"' && !self.reading.ansi_quotes)) && self.quoted.is_none_or(|q| q == c as u8) {
                // A string, in single or double quotes (MariaDB's default reads `"` so; under
                // ANSI_QUOTES it quotes a name, below). `''` inside a string is a quote, not its
                // end. Its opening quote is a token (a name cannot start there; a GRANT's ON
                // cannot come after one), its words are words.
                if self.quoted.is_some() && next == Some(c as u8) {
                    self.i += 2;
                } else if self.quoted.is_some() {
                    self.quoted = None;
                    self.i += 1;
                } else {
                    self.quoted = Some(c as u8);
                    self.i += 1;
                    return Some(Tok::Other(c));
                }
            } else if self.quoted.is_some() && c == '\\' && self.escapes() {
                self.i += 1 + self.char_at(1).map_or(0, char::len_utf8);
            } else if space(c) || (self.quoted.is_some() && !ident(c)) {
                // Inside a string only its words count: no comment, quote or sign opens there.
                self.i += c.len_utf8();
            } else if c == '/' && next == Some(b'*') {
                // `/*!40000 ... */` version comments hold SQL, as MariaDB's `/*M!100000 ... */`
                // do: keep their body.
                let marker = match (self.byte(2), self.byte(3)) {
                    (Some(b'!'), _) => Some(3),
                    (Some(b'M'), Some(b'!')) => Some(4),
                    _ => None,
                };
                if let Some(len) = marker {
                    self.i += len;
                    self.in_version = true;
                    while self.byte(0).is_some_and(|b| b.is_ascii_digit()) {
                        self.i += 1;
                    }
                } else {
                    self.i = self.s[self.i + 2..].find("*/").map_or(self.s.len(), |at| self.i + 2 + at + 2);
                }
            } else if c == '*' && next == Some(b'/') && self.in_version {
                self.in_version = false;
                self.i += 2;
            } else if c == '#'
                || (c == '-' && next == Some(b'-') && self.char_at(2).is_none_or(|d| d.is_ascii() && (d.is_whitespace() || d.is_control())))
            {
                self.i = self.s[self.i..].find('\n').map_or(self.s.len(), |at| self.i + at);
            } else if c == '[' && self.reading.brackets {
                // Under MSSQL a name, to the first `]`.
                let end = self.s[self.i + 1..].find(']').map_or(self.s.len(), |at| self.i + 1 + at);
                let name = self.s[self.i + 1..end].to_string();
                self.i = (end + 1).min(self.s.len());
                return Some(Tok::Quoted(name));
            } else if c == '`' || c == '"' {
                let mut s = String::new();
                self.i += 1;
                while let Some(d) = self.char() {
                    self.i += d.len_utf8();
                    if d == c && self.byte(0) == Some(c as u8) {
                        s.push(c);
                        self.i += 1;
                    } else if d == c {
                        break;
                    } else {
                        s.push(d);
                    }
                }
                return Some(Tok::Quoted(s));
            } else if ident(c) {
                let start = self.i;
                while let Some(d) = self.char().filter(|&d| ident(d)) {
                    self.i += d.len_utf8();
                }
                return Some(Tok::Word(self.s[start..self.i].to_string()));
            } else {
                self.i += c.len_utf8();
                return Some(match c {
                    '.' => Tok::Dot,
                    ',' => Tok::Comma,
                    c => Tok::Other(c),
                });
            }
        }
    }
}

pub(super) struct Cursor<'a> {
    pub(super) toks: &'a [Tok],
    pub(super) at: usize,
}

impl Cursor<'_> {
    pub(super) fn kw(&mut self, word: &str) -> bool {
        match self.toks.get(self.at) {
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case(word) => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }
    pub(super) fn kws(&mut self, words: &[&str]) -> bool {
        let save = self.at;
        if words.iter().all(|w| self.kw(w)) {
            return true;
        }
        self.at = save;
        false
    }
    pub(super) fn name(&mut self) -> Option<(Option<String>, String)> {
        // `.t`: ODBC's spelling of the default database's `t`, which the server takes.
        if self.toks.get(self.at) == Some(&Tok::Dot) {
            self.at += 1;
            return Some((None, self.ident()?));
        }
        let first = self.ident()?;
        if self.toks.get(self.at) == Some(&Tok::Dot) {
            self.at += 1;
            let second = self.ident()?;
            return Some((Some(first), second));
        }
        Some((None, first))
    }
    pub(super) fn ident(&mut self) -> Option<String> {
        let s = match self.toks.get(self.at)? {
            Tok::Word(w) | Tok::Quoted(w) => w.clone(),
            _ => return None,
        };
        self.at += 1;
        Some(s)
    }
    pub(super) fn comma(&mut self) -> bool {
        if self.toks.get(self.at) == Some(&Tok::Comma) {
            self.at += 1;
            true
        } else {
            false
        }
    }
}
