//! Fingerprints: a query's shape with its literals taken out, and the literals themselves.
//!
//! Owns the normalization of a token stream and the token-level relay reasons. Invariants:
//! - two texts that differ only in whitespace, comments, reserved-keyword and function-name
//!   case, backticks around identifiers (but not around a name the server reads otherwise
//!   bare: [`QUOTED_WORDS`], [`INTRODUCERS`]), literal values, or the length of an `IN
//!   (literal, ...)` list have the same [`Fingerprint`] (same hash, same normalized text);
//! - nothing that can change a result's meaning or its column metadata is normalized away:
//!   identifiers keep their case (table names are case-sensitive on most servers), and a
//!   select list that is not just column names is also hashed as raw text, because the
//!   server names an unaliased expression column after its exact text (`a+1` vs `a + 1`);
//! - literals that are structure, not values, stay in the text: those inside a select list,
//!   type arguments (`CHAR(10)`, `DECIMAL(10,2)`), and positional `ORDER/GROUP BY 1`;
//! - a unary `-`/`+` before a number, where the previous token cannot end an operand, is
//!   folded into the literal: `id = -5` and `id = 5` share a fingerprint, `a -5` does not fold;
//! - `NULL` is a literal except after `IS` / `IS NOT`; `TRUE`/`FALSE` are keywords.
//!
//! Qualified and unqualified names (`stories.id` vs `id`) cannot be unified without the
//! schema, so they give different fingerprints; the full parse, done once per new fingerprint,
//! decides whether two fingerprints are the same cached query (both verdicts then point at the
//! same cache id).

use super::lexer::{Lexer, Token, TokenKind};
use super::literal::{self, Literal};
use super::words::*;

/// Where a literal was taken out of the normalized text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// One literal, at this byte offset of the normalized text (where its `?` is).
    One(usize),
    /// An IN list `(...)` at this byte offset; its arity is in [`Query::in_lists`].
    InList(usize),
}

/// A query's shape: a hash for lookups and the normalized text it was computed from (kept for
/// collision checks, debugging and EXPLAIN).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint {
    pub hash: u64,
    pub normalized: String,
    pub slots: Vec<Slot>,
}

/// A query's fingerprint, as a [`Fingerprint`] (`Deref`): its own when the text was
/// classified, or the one a session's learnt text shape shares (`super::shape`), which costs a
/// count instead of copying the normalized text.
#[derive(Debug, Clone)]
pub enum QueryFingerprint {
    Own(Fingerprint),
    Learnt(std::sync::Arc<Fingerprint>),
}

impl std::ops::Deref for QueryFingerprint {
    type Target = Fingerprint;
    fn deref(&self) -> &Fingerprint {
        match self {
            QueryFingerprint::Own(f) => f,
            QueryFingerprint::Learnt(f) => f,
        }
    }
}

impl PartialEq for QueryFingerprint {
    fn eq(&self, other: &QueryFingerprint) -> bool {
        **self == **other
    }
}

impl Default for QueryFingerprint {
    /// An empty fingerprint of its own (allocates nothing).
    fn default() -> QueryFingerprint {
        QueryFingerprint::Own(Fingerprint::default())
    }
}

impl From<Fingerprint> for QueryFingerprint {
    fn from(f: Fingerprint) -> QueryFingerprint {
        QueryFingerprint::Own(f)
    }
}

/// A classified query: its fingerprint, its literals in order, and, if tokens alone show it
/// must go to the server, why.
#[derive(Debug, Clone, PartialEq)]
pub struct Query<'q> {
    pub fingerprint: QueryFingerprint,
    pub literals: Vec<Literal<'q>>,
    /// The arity of each folded IN list, in order.
    pub in_lists: Vec<u32>,
    pub relay: Option<&'static str>,
}

impl Query<'_> {
    /// The normalized text with the literals put back: SQL that the server parses as the
    /// original query (modulo whitespace, comments and keyword case).
    pub fn render(&self) -> Vec<u8> {
        let text = self.fingerprint.normalized.as_bytes();
        let mut out = Vec::with_capacity(text.len() + 16 * self.literals.len());
        let (mut from, mut lits, mut lists) = (0, self.literals.iter(), self.in_lists.iter());
        for slot in &self.fingerprint.slots {
            match *slot {
                Slot::One(at) => {
                    out.extend_from_slice(text.get(from..at).unwrap_or(&[]));
                    if let Some(l) = lits.next() {
                        l.render(&mut out);
                    }
                    from = at + 1;
                }
                Slot::InList(at) => {
                    out.extend_from_slice(text.get(from..at).unwrap_or(&[]));
                    out.push(b'(');
                    for i in 0..lists.next().copied().unwrap_or(0) {
                        if i > 0 {
                            out.extend_from_slice(b", ");
                        }
                        if let Some(l) = lits.next() {
                            l.render(&mut out);
                        }
                    }
                    out.push(b')');
                    from = at + IN_LIST.len();
                }
            }
        }
        out.extend_from_slice(text.get(from..).unwrap_or(&[]));
        out
    }
}

const IN_LIST: &str = "(...)";
/// An IN list over [`Bounds::max_in_list`], in a normalized text.
const LONG_LIST: &str = "(/* more than [limits] max_in_list values */)";

/// The session's lexical modes. The tokenizer reads only the default (no `ANSI_QUOTES`,
/// backslash escapes on); a session in either other mode is relayed, so a fingerprint always
/// carries the default reading of its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SqlMode {
    pub ansi_quotes: bool,
    pub no_backslash_escapes: bool,
}

/// What classifying one text may cost (`[limits] max_query` and `max_in_list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Longer texts are not tokenized: one shape per first word, relayed.
    pub max_statement: usize,
    /// Longer IN lists are not folded into a slot: a shape of their own, relayed.
    pub max_in_list: usize,
}

impl Default for Bounds {
    /// The config's defaults.
    fn default() -> Bounds {
        Bounds { max_statement: 256 << 10, max_in_list: 1000 }
    }
}

/// The relay reasons of the bounds (matched by tests and shown by SHOW PROXIED QUERIES).
pub const LONG_STATEMENT: &str = "a statement longer than [limits] max_query (relayed as it is, not normalized)";
pub const LONG_IN_LIST: &str = "an IN list longer than [limits] max_in_list";
/// `MAX (v)`, `` `MAX`(v) ``: the server reads a stored function, not the built-in.
pub const APART_FROM_ITS_PARENTHESIS: &str = "a built-in function's name quoted or apart from its `(` (the server reads a stored function)";

/// `LIMIT +3`, `OFFSET -1`, `FETCH FIRST +2 ROWS`: a syntax error to the server, which takes
/// no sign before a row count; folded, the sign would make it the cached `LIMIT 3`.
pub const SIGNED_ROW_COUNT: &str = "a signed row count (LIMIT, OFFSET, FETCH, ROWS EXAMINED take none)";

/// `_utf8mb4` bare before no literal: an introducer to the server, a name to the full parse.
pub const BARE_INTRODUCER: &str = "a charset introducer before no string (`_utf8mb4`, bare, is no name to the server)";

/// Classifies one COM_QUERY text (or a prepared statement's text: its `?` become
/// [`Literal::Placeholder`]s, so `WHERE id = ?` and `WHERE id = 42` share a fingerprint),
/// within the default [`Bounds`].
pub fn classify(sql: &[u8], mode: SqlMode) -> Query<'_> {
    classify_bounded(sql, mode, Bounds::default())
}

/// [`classify`] within `bounds`. What it allocates is linear in `sql.len()`, itself at most
/// `bounds.max_statement` once tokens are read.
pub fn classify_bounded(sql: &[u8], mode: SqlMode, bounds: Bounds) -> Query<'_> {
    normalize(sql, mode, bounds, None)
}

/// [`classify_bounded`] (default sql_mode), and the token of each literal, in order, up to the
/// first that does not stand alone: a sign before it folded in, a charset introducer, `NULL`,
/// an IN list's. Fewer tokens than literals say that the text's shape cannot be learnt. What
/// learning a text shape needs (`super::shape`), for a vector more than classifying.
pub fn classify_with_tokens(sql: &[u8], bounds: Bounds) -> (Query<'_>, Vec<Token>) {
    let mut tokens = Vec::new();
    let query = normalize(sql, SqlMode::default(), bounds, Some(&mut tokens));
    (query, tokens)
}

fn normalize<'q>(sql: &'q [u8], mode: SqlMode, bounds: Bounds, literal_tokens: Option<&mut Vec<Token>>) -> Query<'q> {
    if sql.len() > bounds.max_statement {
        return long_statement(sql);
    }
    // About one token per four bytes in typical queries: usually no regrowth.
    let mut tokens: Vec<Token> = Vec::with_capacity(sql.len() / 4 + 8);
    tokens.extend(Lexer::new(sql));
    let words: Vec<Kw> = tokens.iter().map(|t| if t.kind == TokenKind::Word { Kw::of(t.text(sql)) } else { Kw::NONE }).collect();
    let mut n = Normalizer {
        sql,
        tokens: &tokens,
        words: &words,
        out: String::with_capacity(sql.len()),
        slots: Vec::new(),
        literals: Vec::new(),
        in_lists: Vec::new(),
        relay: None,
        raw: Vec::new(),
        utf8: std::str::from_utf8(sql).ok(),
        placeholders: 0,
        max_in_list: bounds.max_in_list,
        literal_tokens,
    };
    if mode.ansi_quotes || mode.no_backslash_escapes {
        n.relay("sql_mode ANSI_QUOTES or NO_BACKSLASH_ESCAPES (the tokenizer reads the default modes only)");
    }
    n.run();
    let mut hash = fnv(FNV_OFFSET, n.out.as_bytes());
    for raw in &n.raw {
        hash = fnv(fnv(hash, &[0xff]), raw);
    }
    Query {
        fingerprint: Fingerprint { hash, normalized: n.out, slots: n.slots }.into(),
        literals: n.literals,
        in_lists: n.in_lists,
        relay: n.relay,
    }
}

/// A text over [`Bounds::max_statement`]: only its first token is read (the lexer stops
/// there), and it gets one shape per first word. A statement that is not a SELECT keeps that
/// relay reason, so the session still follows what it may change.
fn long_statement(sql: &[u8]) -> Query<'_> {
    let first = Lexer::new(sql).next().filter(|t| t.kind == TokenKind::Word).and_then(|t| upper(t.text(sql)));
    let word = first.as_ref().map_or("?", |u| u.as_str());
    let normalized = format!("{word} ... /* a statement over [limits] max_query, not normalized */");
    let relay = if word == "SELECT" { LONG_STATEMENT } else { "not a SELECT" };
    let fingerprint = Fingerprint { hash: fnv(FNV_OFFSET, normalized.as_bytes()), normalized, slots: Vec::new() };
    Query { fingerprint: fingerprint.into(), literals: Vec::new(), in_lists: Vec::new(), relay: Some(relay) }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a-like over 8-byte words (then the tail byte by byte), with a final mix: stable
/// across runs and builds (unlike std's SipHash keys), so a hash can be logged and compared,
/// and eight times fewer serial multiplies than bytewise FNV. Collisions are caught by
/// comparing normalized texts.
fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        hash = (hash ^ u64::from_le_bytes(w)).wrapping_mul(PRIME);
        hash ^= hash >> 29;
    }
    for &b in words.remainder() {
        hash = (hash ^ u64::from(b)).wrapping_mul(PRIME);
    }
    hash ^= hash >> 32;
    hash.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

struct Normalizer<'q, 't> {
    sql: &'q [u8],
    tokens: &'t [Token],
    /// What each token is as a keyword ([`Kw::NONE`] for every token that is not a word).
    words: &'t [Kw],
    out: String,
    slots: Vec<Slot>,
    literals: Vec<Literal<'q>>,
    in_lists: Vec<u32>,
    relay: Option<&'static str>,
    /// Raw text of select lists that are more than column names.
    raw: Vec<&'q [u8]>,
    /// The whole text, when it is valid UTF-8: tokens are then pushed as slices of it, with no
    /// validation per piece (a token never splits a character: non-ASCII bytes only occur
    /// inside words, quoted runs and comments).
    utf8: Option<&'q str>,
    placeholders: u32,
    max_in_list: usize,
    /// Where each literal's token goes, when the caller asked ([`classify_with_tokens`]).
    literal_tokens: Option<&'t mut Vec<Token>>,
}

/// Where the walk is, for the literals that must stay in the text.
#[derive(Default)]
struct Context {
    depth: i32,
    /// Depth of the SELECT whose list we are in, the byte its list starts at, and whether it
    /// is only names so far.
    select: Option<(i32, usize, bool)>,
    /// Depth of an ORDER/GROUP BY list we are in.
    by: Option<i32>,
    /// Depth of type arguments we are in.
    type_args: Option<i32>,
}

impl<'q> Normalizer<'q, '_> {
    fn relay(&mut self, reason: &'static str) {
        self.relay.get_or_insert(reason);
    }

    fn text(&self, i: usize) -> &'q [u8] {
        self.tokens.get(i).map_or(&[], |t| t.text(self.sql))
    }

    fn kind(&self, i: usize) -> Option<TokenKind> {
        self.tokens.get(i).map(|t| t.kind)
    }

    fn is_symbol(&self, i: usize, symbol: &[u8]) -> bool {
        self.tokens.get(i).is_some_and(|t| t.is_symbol(self.sql, symbol))
    }

    /// Whether tokens `a` and `b` touch: nothing (no space, no comment) between them.
    fn adjacent(&self, a: usize, b: usize) -> bool {
        matches!((self.tokens.get(a), self.tokens.get(b)), (Some(x), Some(y)) if x.end == y.start)
    }

    fn kw(&self, i: usize) -> Kw {
        self.words.get(i).copied().unwrap_or(Kw::NONE)
    }

    fn is_word(&self, i: usize, keyword: Named) -> bool {
        self.kw(i).is(keyword)
    }

    /// Whether the token at `i` keeps a select list "plain column names", whose column
    /// metadata does not depend on spelling beyond the names themselves.
    fn name_like(&self, i: usize) -> bool {
        match self.kind(i) {
            Some(TokenKind::QuotedIdent) => true,
            Some(TokenKind::Word) => !self.is_symbol(i + 1, b"(") && (!self.kw(i).is_in(&RESERVED) || self.kw(i).is_in(&NAME_LIST_WORDS)),
            // `*` only as a whole item (`*`, `t.*`), not as a product (`a*b`).
            Some(TokenKind::Symbol) if self.is_symbol(i, b"*") => {
                i > 0
                    && (self.is_symbol(i - 1, b",")
                        || self.is_symbol(i - 1, b".")
                        || self.is_word(i - 1, Named::Select)
                        || self.kw(i - 1).is_in(&NAME_LIST_WORDS))
            }
            Some(TokenKind::Symbol) => self.is_symbol(i, b".") || self.is_symbol(i, b","),
            _ => false,
        }
    }

    fn push(&mut self, piece: &str, space_before: bool) {
        // No space after `(` or `.`: `f(x)`, `t.a`.
        if space_before && !matches!(self.out.as_bytes().last(), None | Some(b'(' | b'.')) {
            self.out.push(' ');
        }
        self.out.push_str(piece);
    }

    /// Token `i`'s text as a slice of the whole text, if that is valid UTF-8.
    fn token_str(&self, i: usize) -> Option<&'q str> {
        let t = self.tokens.get(i)?;
        self.utf8?.get(t.start..t.end)
    }

    /// Token `i`'s text, as written.
    fn push_token(&mut self, i: usize, space_before: bool) {
        match self.token_str(i) {
            Some(text) => self.push(text, space_before),
            None => self.push_bytes(self.text(i), space_before),
        }
    }

    fn push_bytes(&mut self, piece: &[u8], space_before: bool) {
        // The same text as the lossy conversion's, without its chunk-by-chunk walk for the
        // usual valid piece.
        match std::str::from_utf8(piece) {
            Ok(text) => self.push(text, space_before),
            Err(_) => self.push(&String::from_utf8_lossy(piece), space_before),
        }
    }

    fn run(&mut self) {
        let mut end = self.tokens.len();
        while end > 0 && self.is_symbol(end - 1, b";") {
            end -= 1;
        }
        // The server drops trailing `;` and spaces only: a comment after a `;` is a statement
        // of its own for a client with multi-statements (a second result, an OK).
        let tail = self.tokens.get(end).is_some_and(|first| {
            self.sql[first.start..].iter().any(|&b| b != b';' && !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        });
        if tail {
            self.relay("a comment after the statement's `;`");
        }
        if !self.is_word(0, Named::Select) {
            self.relay("not a SELECT");
        }
        let mut cx = Context::default();
        let mut i = 0;
        while i < end {
            i = self.step(i, &mut cx);
        }
        let last = end.checked_sub(1).and_then(|e| self.tokens.get(e)).map_or(0, |t| t.end);
        self.close_select(&mut cx, last);
        // A shape of its own: the comment is no part of the normalized text, so without this
        // it would share the plain read's, and the verdict stored for that (an audit).
        if tail {
            self.push("; --", true);
        }
    }

    fn close_select(&mut self, cx: &mut Context, at: usize) {
        if let Some((_, start, simple)) = cx.select.take()
            && !simple
        {
            self.raw.push(self.sql.get(start..at).unwrap_or(&[]).trim_ascii());
        }
    }

    /// Normalizes the token at `i`; returns the index of the next one.
    fn step(&mut self, i: usize, cx: &mut Context) -> usize {
        let Some(&token) = self.tokens.get(i) else { return i + 1 };
        let text = token.text(self.sql);
        if let Some((depth, start, simple)) = cx.select {
            let close = token.is_symbol(self.sql, b")");
            let ends = depth == cx.depth && (close || self.kw(i).is_in(&SELECT_LIST_ENDS));
            if ends {
                self.close_select(cx, token.start);
            } else if simple && !self.name_like(i) {
                cx.select = Some((depth, start, false));
            }
        }
        match token.kind {
            TokenKind::Unterminated => {
                self.relay("malformed: an unterminated string, identifier or comment");
                self.push("<unterminated>", true);
            }
            TokenKind::ExecComment => {
                self.relay("an executable comment or optimizer hint (/*! */, /*M! */, /*+ */)");
                self.push_bytes(text, true);
            }
            TokenKind::UserVariable => {
                self.relay("a user variable");
                self.push_bytes(text, true);
            }
            TokenKind::SystemVariable => {
                self.relay("a system variable");
                self.push_bytes(text, true);
            }
            TokenKind::QuotedIdent => {
                let name = literal::unescape(text.get(1..text.len().saturating_sub(1)).unwrap_or(&[]), b'`');
                if self.is_symbol(i + 1, b"(") && Kw::of(&name).is_in(&PARSED_FUNCTIONS) {
                    // `` `MAX`(v) ``: a quoted name is never the built-in, as with a space
                    // before the `(`; kept quoted, so not the fingerprint of `MAX(v)`.
                    self.relay(APART_FROM_ITS_PARENTHESIS);
                    let quoted = String::from_utf8_lossy(&name).replace('`', "``");
                    self.push(&format!("`{quoted}`"), true);
                } else {
                    self.identifier(&name);
                }
            }
            TokenKind::Word => return self.word(i, cx),
            TokenKind::Symbol => self.symbol(i, cx),
            _ => return self.literal_at(i, cx),
        }
        i + 1
    }

    /// An identifier as written, with backticks only where needed to read it back as one.
    fn identifier(&mut self, name: &[u8]) {
        self.plain_or_quoted(name, true, None);
    }

    /// `may_be_reserved`: false when the caller already knows the name is not a reserved word.
    /// `word`: the name is the text of this word token (whose bytes the lexer took only while
    /// they could continue an identifier).
    fn plain_or_quoted(&mut self, name: &[u8], may_be_reserved: bool, word: Option<usize>) {
        let plain = !name.is_empty()
            && (word.is_some() || name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80))
            && !name.first().is_some_and(u8::is_ascii_digit)
            && (!may_be_reserved || {
                let kw = Kw::of(name);
                !kw.is_in(&RESERVED) && !kw.is_in(&QUOTED_WORDS) && !kw.is_in(&INTRODUCERS)
            });
        if plain {
            match word {
                Some(i) => self.push_token(i, true),
                None => self.push_bytes(name, true),
            }
        } else {
            let quoted = String::from_utf8_lossy(name).replace('`', "``");
            self.push(&format!("`{quoted}`"), true);
        }
    }

    fn word(&mut self, i: usize, cx: &mut Context) -> usize {
        let text = self.text(i);
        let kw = self.kw(i);
        let call = self.is_symbol(i + 1, b"(");
        // A charset introducer: `_utf8mb4'x'` (the string's slot follows the name).
        if text.first() == Some(&b'_')
            && matches!(self.kind(i + 1), Some(TokenKind::SingleQuoted | TokenKind::DoubleQuoted))
            && cx.select.is_none()
        {
            self.push_bytes(text, true);
            return self.literal_at(i + 1, cx);
        }
        // After a dot a word is a name, a reserved one too (`db.order`), in its own case: the
        // server reads `db.ORDER` as another table where names are case-sensitive.
        if i > 0 && self.is_symbol(i - 1, b".") {
            self.plain_or_quoted(text, true, Some(i));
            return i + 1;
        }
        // Bare, `_utf8mb4` is an introducer to the server, which refuses it before anything but
        // a literal (1064); the full parse would take it for the name `` `_utf8mb4` ``.
        if kw.is_in(&INTRODUCERS)
            && !matches!(
                self.kind(i + 1),
                Some(
                    TokenKind::SingleQuoted
                        | TokenKind::DoubleQuoted
                        | TokenKind::HexString
                        | TokenKind::BitString
                        | TokenKind::HexNumber
                        | TokenKind::BitNumber
                )
            )
        {
            self.relay(BARE_INTRODUCER);
        }
        // No keyword is longer; a longer word is a name, even before `(`.
        if text.len() <= MAX_KEYWORD {
            let reserved = kw.is_in(&RESERVED);
            if (call && kw.is_in(&SESSION_FUNCTIONS)) || kw.is_in(&SESSION_WORDS) {
                self.relay("a session-dependent function (NOW(), RAND(), UUID(), LAST_INSERT_ID(), ...)");
            }
            if call && kw.is_in(&PARSED_FUNCTIONS) && !self.adjacent(i, i + 1) {
                self.relay(APART_FROM_ITS_PARENTHESIS);
            }
            match kw.named {
                Named::SqlCalcFoundRows => self.relay("SQL_CALC_FOUND_ROWS"),
                Named::Into => self.relay("SELECT ... INTO"),
                Named::For if self.is_word(i + 1, Named::Update) || self.is_word(i + 1, Named::Share) => {
                    self.relay("a locking read (FOR UPDATE / FOR SHARE)")
                }
                Named::Lock if self.is_word(i + 1, Named::In) => self.relay("a locking read (LOCK IN SHARE MODE)"),
                Named::Procedure => self.relay("SELECT ... PROCEDURE"),
                Named::Next if self.is_word(i + 1, Named::Value) => self.relay("a sequence (NEXT VALUE FOR)"),
                Named::Previous if self.is_word(i + 1, Named::Value) => self.relay("a sequence (PREVIOUS VALUE FOR)"),
                _ => {}
            }
            // A SELECT nested in a select list stays part of that list (all verbatim).
            if kw.is(Named::Select) && cx.select.is_none() {
                cx.select = Some((cx.depth, self.tokens.get(i).map_or(0, |t| t.end), true));
            }
            if kw.is(Named::By) && i > 0 && (self.is_word(i - 1, Named::Order) || self.is_word(i - 1, Named::Group)) {
                cx.by = Some(cx.depth);
            } else if cx.by == Some(cx.depth) && reserved && !kw.is(Named::Asc) && !kw.is(Named::Desc) {
                cx.by = None;
            }
            if kw.is(Named::Null)
                && !(i > 0
                    && (self.is_word(i - 1, Named::Is) || (self.is_word(i - 1, Named::Not) && i > 1 && self.is_word(i - 2, Named::Is))))
                && cx.select.is_none()
            {
                self.record(i, false);
                self.slot(Literal::Null);
                return i + 1;
            }
            if kw.is(Named::In)
                && cx.select.is_none()
                && let Some(next) = self.in_list(i + 1)
            {
                return next;
            }
            if reserved {
                self.push(kw.name(), true);
                return i + 1;
            }
            if call {
                // A function name, case folded.
                let up = upper(text);
                self.push(up.as_ref().map_or("", |u| u.as_str()), true);
                return i + 1;
            }
            // Not reserved: no need to look again in identifier().
            self.plain_or_quoted(text, false, Some(i));
            return i + 1;
        }
        self.plain_or_quoted(text, true, Some(i));
        i + 1
    }

    fn symbol(&mut self, i: usize, cx: &mut Context) {
        let text = self.text(i);
        match text {
            b"(" => {
                let prev_word = i > 0 && matches!(self.kind(i - 1), Some(TokenKind::Word | TokenKind::QuotedIdent));
                let keyword = prev_word && self.kw(i - 1).is_in(&RESERVED) && !self.kw(i - 1).is_in(&TYPES);
                // `MAX (v)` is not `MAX(v)` to the server (`word` relays it): nor to the
                // fingerprint, or the verdict of `MAX(v)` would answer it.
                let apart = prev_word && self.kw(i - 1).is_in(&PARSED_FUNCTIONS) && !self.adjacent(i - 1, i);
                cx.depth += 1;
                if i > 0 && self.kw(i - 1).is_in(&TYPES) && cx.type_args.is_none() {
                    cx.type_args = Some(cx.depth);
                }
                self.push("(", !prev_word || keyword || apart);
            }
            b")" => {
                if cx.type_args == Some(cx.depth) {
                    cx.type_args = None;
                }
                if cx.by == Some(cx.depth) {
                    cx.by = None;
                }
                cx.depth -= 1;
                self.push(")", false);
            }
            b"," => self.push(",", false),
            b"." => self.push(".", false),
            b";" => {
                self.relay("multiple statements");
                self.push(";", false);
            }
            b"-" | b"+" if self.unary_number(i, cx) => {}
            _ => {
                let after_dot = self.out.ends_with('.') || self.out.ends_with('(');
                self.push_token(i, !after_dot);
            }
        }
    }

    /// Whether the symbol at `i` is a unary sign before a number; if so, emits the signed
    /// literal and the caller's next token is skipped via `skip_next`.
    fn unary_number(&mut self, i: usize, cx: &mut Context) -> bool {
        if !matches!(self.kind(i + 1), Some(TokenKind::Integer | TokenKind::Decimal | TokenKind::Float)) || self.verbatim(i + 1, cx) {
            return false;
        }
        // Before the operand test: OFFSET and FIRST are not reserved (`offset + 1` may add
        // to a column so named, which is relayed too, a false alarm).
        if self.row_count_at(i) {
            self.relay(SIGNED_ROW_COUNT);
            return false;
        }
        if i > 0 && self.ends_operand(i - 1) {
            return false;
        }
        // The number's own step (literal_at) sees the sign before it and folds it in.
        true
    }

    /// Whether the server takes a row count at `i`: after LIMIT, OFFSET, FETCH's FIRST or NEXT,
    /// ROWS EXAMINED, or the `,` of `LIMIT offset, count`.
    fn row_count_at(&self, i: usize) -> bool {
        let word = |k: usize, w: &[u8]| self.kind(k) == Some(TokenKind::Word) && self.text(k).eq_ignore_ascii_case(w);
        let Some(before) = i.checked_sub(1) else { return false };
        let after_word = [&b"limit"[..], b"offset", b"first", b"next", b"examined"].iter().any(|w| word(before, w));
        let after_limits_comma = self.is_symbol(before, b",") && before >= 2 && word(before - 2, b"limit");
        after_word || after_limits_comma
    }

    /// Whether the token at `i` can end an operand, so that a following `-` is binary.
    fn ends_operand(&self, i: usize) -> bool {
        match self.kind(i) {
            Some(TokenKind::Symbol) => self.is_symbol(i, b")"),
            Some(TokenKind::Word) => !self.kw(i).is_in(&RESERVED) || self.kw(i).is_in(&OPERAND_WORDS),
            // Literals, names, variables, placeholders; and anything odd: not folding is safe.
            _ => true,
        }
    }

    /// Whether a literal at `i` stays in the text (select list, type arguments, positional BY).
    fn verbatim(&self, i: usize, cx: &Context) -> bool {
        if cx.select.is_some() || cx.type_args.is_some() {
            return true;
        }
        if cx.by == Some(cx.depth) && self.kind(i) == Some(TokenKind::Integer) && i > 0 {
            let after = self.is_word(i - 1, Named::By) || self.is_symbol(i - 1, b",");
            let before = self.tokens.get(i + 1).is_none_or(|t| {
                t.is_symbol(self.sql, b",") || t.is_symbol(self.sql, b")") || t.is_symbol(self.sql, b";") || t.kind == TokenKind::Word
            });
            return after && before;
        }
        false
    }

    /// The literal token at `i`, with a unary sign at `i - 1` if [`Self::symbol`] left it.
    fn literal_at(&mut self, i: usize, cx: &mut Context) -> usize {
        let Some(&token) = self.tokens.get(i) else { return i + 1 };
        if self.verbatim(i, cx) {
            // A `?` left in the text still takes the next execute parameter.
            if token.kind == TokenKind::Placeholder {
                self.placeholders += 1;
            }
            self.push_token(i, true);
            return i + 1;
        }
        let negative = i > 0 && self.is_symbol(i - 1, b"-") && !self.ends_operand_before_sign(i - 1);
        match self.parse_literal(i, negative) {
            Some(lit) => {
                if self.literal_tokens.is_some() {
                    let signed = i > 0 && (self.is_symbol(i - 1, b"-") || self.is_symbol(i - 1, b"+"));
                    let introduced = i > 0 && self.kind(i - 1) == Some(TokenKind::Word) && self.text(i - 1).first() == Some(&b'_');
                    self.record(i, !signed && !introduced);
                }
                if token.kind == TokenKind::NationalString {
                    self.push("N", true);
                    self.out.push('?');
                    self.slots.push(Slot::One(self.out.len() - 1));
                    self.literals.push(lit);
                } else {
                    self.slot(lit);
                }
            }
            None => {
                self.relay("a literal out of range");
                self.push_token(i, true);
            }
        }
        i + 1
    }

    fn ends_operand_before_sign(&self, sign: usize) -> bool {
        sign > 0 && self.ends_operand(sign - 1)
    }

    /// Notes token `i` as the next literal's, if the caller asked for literals' tokens. The
    /// first literal that does not stand `alone`, or any literal once the text has a relay
    /// reason, ends the noting: such a text's shape cannot be learnt, which a list shorter than
    /// the literals says (so a relayed write or an IN list of a thousand values costs no vector
    /// of tokens).
    fn record(&mut self, i: usize, alone: bool) {
        if let (Some(tokens), Some(&token)) = (self.literal_tokens.as_mut(), self.tokens.get(i)) {
            if alone && self.relay.is_none() {
                tokens.push(token);
            } else {
                self.literal_tokens = None;
            }
        }
    }

    fn slot(&mut self, lit: Literal<'q>) {
        let space = !(self.out.ends_with('(') || self.out.ends_with('.'));
        self.push("?", space && !self.out.is_empty());
        self.slots.push(Slot::One(self.out.len() - 1));
        self.literals.push(lit);
    }

    fn parse_literal(&mut self, at: usize, negative: bool) -> Option<Literal<'q>> {
        let token = *self.tokens.get(at)?;
        let text = token.text(self.sql);
        let whole = self.token_str(at);
        let ascii = || whole.or_else(|| std::str::from_utf8(text).ok());
        let body = |skip: usize| text.get(skip..text.len().saturating_sub(1)).unwrap_or(&[]);
        Some(match token.kind {
            TokenKind::Integer => literal::integer(ascii()?, negative),
            TokenKind::Decimal => literal::decimal(ascii()?, negative),
            TokenKind::Float => literal::float(ascii()?, negative)?,
            TokenKind::HexNumber => Literal::HexNumber(ascii()?.get(2..)?),
            TokenKind::BitNumber => Literal::BitNumber(ascii()?.get(2..)?),
            TokenKind::HexString => Literal::HexString(std::str::from_utf8(body(2)).ok()?),
            TokenKind::BitString => Literal::BitString(std::str::from_utf8(body(2)).ok()?),
            TokenKind::SingleQuoted | TokenKind::DoubleQuoted | TokenKind::NationalString => {
                let skip = if token.kind == TokenKind::NationalString { 2 } else { 1 };
                let quote = text.get(skip - 1).copied().unwrap_or(b'\'');
                let introducer = at
                    .checked_sub(1)
                    .filter(|&p| self.kind(p) == Some(TokenKind::Word))
                    .map(|p| self.text(p))
                    .filter(|w| w.first() == Some(&b'_'))
                    .and_then(|w| std::str::from_utf8(&w[1..]).ok());
                Literal::String {
                    bytes: literal::unescape(body(skip), quote),
                    introducer,
                    national: token.kind == TokenKind::NationalString,
                }
            }
            TokenKind::Placeholder => {
                self.placeholders += 1;
                Literal::Placeholder(self.placeholders - 1)
            }
            _ => return None,
        })
    }

    /// Takes back what a list that is not all literals read: its placeholders' numbers and
    /// its literals.
    fn undo(&mut self, (placeholders, literals): (u32, usize)) -> Option<usize> {
        self.placeholders = placeholders;
        self.truncate_literals(literals);
        None
    }

    fn truncate_literals(&mut self, len: usize) {
        self.literals.truncate(len);
        if let Some(tokens) = self.literal_tokens.as_mut() {
            tokens.truncate(len);
        }
    }

    /// `(lit, lit, ...)` at `i`: folds it to one slot and returns the index after `)`, or None
    /// if the list holds anything but plain literals.
    fn in_list(&mut self, i: usize) -> Option<usize> {
        if !self.is_symbol(i, b"(") {
            return None;
        }
        let before = (self.placeholders, self.literals.len());
        let mut j = i + 1;
        loop {
            let negative = self.is_symbol(j, b"-");
            let at = if negative || self.is_symbol(j, b"+") { j + 1 } else { j };
            let Some(&token) = self.tokens.get(at) else { return self.undo(before) };
            let numeric = matches!(token.kind, TokenKind::Integer | TokenKind::Decimal | TokenKind::Float);
            if at != j && !numeric {
                return self.undo(before);
            }
            let lit = match token.kind {
                TokenKind::Word if self.is_word(at, Named::Null) => Literal::Null,
                kind if kind.is_value_literal() || kind == TokenKind::Placeholder => match self.parse_literal(at, negative) {
                    Some(lit) => lit,
                    None => return self.undo(before),
                },
                _ => return self.undo(before),
            };
            // Pushed as they are read; taken back if the list turns out not to be literals.
            self.record(at, false);
            self.literals.push(lit);
            j = at + 1;
            if self.is_symbol(j, b",") {
                j += 1;
            } else if self.is_symbol(j, b")") {
                break;
            } else {
                return self.undo(before);
            }
        }
        let items = self.literals.len() - before.1;
        self.push("IN", true);
        if items > self.max_in_list {
            // Not a slot: a shape of its own whose verdict is this relay.
            self.truncate_literals(before.1);
            self.relay(LONG_IN_LIST);
            self.push(LONG_LIST, true);
            return Some(j + 1);
        }
        self.push(IN_LIST, true);
        self.slots.push(Slot::InList(self.out.len() - IN_LIST.len()));
        self.in_lists.push(u32::try_from(items).unwrap_or(u32::MAX));
        Some(j + 1)
    }
}
