//! Text shapes: the classification of a text that spells a shape the session has read before,
//! with other values, without tokenizing the whole text again.
//!
//! Applications send the same few statements over and over with different values. Classifying
//! one ([`super::classify`]) costs about 130 instructions a byte of it, most of a text hit's
//! user-space work. A [`TextShape`] keeps a text that was classified, split at its literals:
//! a text that has the same bytes between the literals, and at each literal one token of the
//! same kind, is the same query with other values. Checking that reads each byte once
//! (comparisons of the fixed pieces and one token per literal); the answer is exactly the
//! [`Query`] that classifying the text would give, which the test
//! `a_shape_answers_as_classifying_does` checks on generated texts.
//!
//! Why the same bytes around a literal token of the same kind give the same classification:
//! - the lexer reads forward and keeps no state between tokens, so every token of a fixed
//!   piece lexes as it did in the learnt text, provided each literal starts and ends a token
//!   in both texts. Learning takes only literals with a separator right before them (a space,
//!   `(`, `,`, `=`, `<`, `>`) and right after them (a space, `)`, `,`, `;`, or the end), and
//!   a literal's token is read by the lexer itself, of one of two kinds that start with a
//!   class of byte no token before a separator can absorb: a decimal integer or a
//!   single-quoted string;
//! - the normalizer decides from tokens' kinds and the texts of words and symbols, never from a
//!   literal's value; a sign or a charset introducer before a literal is the one place where
//!   a neighbour changes a literal, so learning takes only literals without either (those
//!   [`classify_with_tokens`](super::classify_with_tokens) notes); `NULL`, IN lists and
//!   texts classified with a relay reason (not a SELECT, a comment the server runs, ...) are
//!   not learnt;
//! - the fingerprint is computed from the normalized text and the raw select lists, which
//!   never contain a literal that became a slot, so it is the learnt text's.
//!
//! A session keeps a few shapes of its own ([`Shapes`]), learnt from texts whose verdict was a
//! cache, and a few of SELECTs whose verdict was none (relayed reads are classified too, to
//! learn that); nothing is shared between sessions, so a client can only fill its own. A text of no
//! learnt shape is classified once, noting its literals' tokens
//! ([`classify_with_tokens`](super::classify_with_tokens)): all that learning needs, so a shape
//! that cannot be learnt costs no second reading.

use std::sync::Arc;

use super::fingerprint::{Bounds, Fingerprint, Query, QueryFingerprint};
use super::lexer::{Lexer, Token, TokenKind};
use super::literal::{self, Literal};

/// Texts longer than this are not learnt: a session's shapes stay small.
const MAX_TEXT: usize = 1024;
/// Nor are texts with more literals than this.
const MAX_LITERALS: usize = 16;
/// Shapes a session keeps of each kind (cached, relayed), the most recently learnt first.
const KEPT: usize = 4;

/// A classified text split at its literals.
#[derive(Debug)]
pub struct TextShape {
    text: Box<[u8]>,
    /// Each literal's byte range in `text` and its token's kind, in order.
    literals: Box<[(usize, usize, TokenKind)]>,
    fingerprint: Arc<Fingerprint>,
}

/// Whether a byte may sit right before a learnt literal.
fn separates_before(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'(' | b',' | b'=' | b'<' | b'>')
}

/// Whether a byte may sit right after a learnt literal.
fn separates_after(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b')' | b',' | b';')
}

impl TextShape {
    /// The shape of `sql`, classified as `query` with its literals' `tokens`
    /// ([`classify_with_tokens`](super::classify_with_tokens)), if it can be learnt: it
    /// classified without a relay reason, and each of its literals is a decimal integer or a
    /// single-quoted string standing alone between separators. The query's fingerprint moves
    /// into the shape, and the query keeps a shared count of it. None, and the query untouched,
    /// otherwise.
    pub fn learn(sql: &[u8], query: &mut Query<'_>, tokens: &[Token]) -> Option<TextShape> {
        if sql.len() > MAX_TEXT
            || query.relay.is_some()
            || !query.in_lists.is_empty()
            || tokens.len() != query.literals.len()
            || tokens.len() > MAX_LITERALS
        {
            return None;
        }
        let mut literals = Vec::with_capacity(tokens.len());
        for &token in tokens {
            let kind_ok = matches!(token.kind, TokenKind::Integer | TokenKind::SingleQuoted);
            let before = token.start.checked_sub(1).and_then(|p| sql.get(p)).is_some_and(|&b| separates_before(b));
            let after = sql.get(token.end).is_none_or(|&b| separates_after(b));
            if !(kind_ok && before && after) {
                return None;
            }
            literals.push((token.start, token.end, token.kind));
        }
        let fingerprint = match std::mem::take(&mut query.fingerprint) {
            QueryFingerprint::Own(f) => Arc::new(f),
            QueryFingerprint::Learnt(f) => f,
        };
        query.fingerprint = QueryFingerprint::Learnt(Arc::clone(&fingerprint));
        Some(TextShape { text: sql.into(), literals: literals.into(), fingerprint })
    }

    /// What classifying `sql` gives, if `sql` is this shape with other values; None if it is
    /// not (then it must be classified).
    pub fn classify<'q>(&self, sql: &'q [u8], bounds: Bounds) -> Option<Query<'q>> {
        if sql.len() > bounds.max_statement {
            return None;
        }
        let mut values = Vec::with_capacity(self.literals.len());
        let (mut from, mut at) = (0, 0);
        for &(start, end, kind) in self.literals.iter() {
            let fixed = self.text.get(from..start)?;
            at = after_prefix(sql, at, fixed)?;
            let rest = sql.get(at..)?;
            let token = Lexer::new(rest).next()?;
            if token.kind != kind || token.start != 0 {
                return None;
            }
            let text = token.text(rest);
            values.push(match kind {
                TokenKind::Integer => literal::integer(std::str::from_utf8(text).ok()?, false),
                _ => Literal::String {
                    bytes: literal::unescape(text.get(1..text.len().checked_sub(1)?)?, b'\''),
                    introducer: None,
                    national: false,
                },
            });
            at += token.end;
            from = end;
        }
        if sql.get(at..)? != self.text.get(from..)? {
            return None;
        }
        let fingerprint = QueryFingerprint::Learnt(Arc::clone(&self.fingerprint));
        Some(Query { fingerprint, literals: values, in_lists: Vec::new(), relay: None })
    }
}

/// The position after `fixed` if `sql` has it at `at`.
fn after_prefix(sql: &[u8], at: usize, fixed: &[u8]) -> Option<usize> {
    let end = at.checked_add(fixed.len())?;
    (sql.get(at..end)? == fixed).then_some(end)
}

/// A session's shapes: the last few learnt of texts a cache answers, and apart from them the
/// last few of SELECTs no cache answers (relayed), each the latest first. Apart, so that an
/// application's many relayed reads do not push out the shapes of its cached ones.
#[derive(Debug, Default)]
pub struct Shapes {
    recent: Vec<TextShape>,
    relayed: Vec<TextShape>,
}

impl Shapes {
    /// The classification of `sql` by a shape the session knows, if one spells it.
    pub fn classify<'q>(&self, sql: &'q [u8], bounds: Bounds) -> Option<Query<'q>> {
        self.recent.iter().chain(&self.relayed).find_map(|shape| shape.classify(sql, bounds))
    }

    /// Learns the shape of `sql`, classified as `query` (whose verdict is a cache) with its
    /// literals' `tokens`, if it can be learnt ([`TextShape::learn`]); the oldest shape goes
    /// past [`KEPT`].
    pub fn learn(&mut self, sql: &[u8], query: &mut Query<'_>, tokens: &[Token]) {
        Self::learn_into(&mut self.recent, sql, query, tokens);
    }

    /// [`Shapes::learn`] for a SELECT whose verdict is no cache: a relayed read, whose text is
    /// classified at each send to find that out (a cache may be created for it meanwhile, so
    /// the verdict is asked again each time; only the classifying is spared).
    pub fn learn_relayed(&mut self, sql: &[u8], query: &mut Query<'_>, tokens: &[Token]) {
        Self::learn_into(&mut self.relayed, sql, query, tokens);
    }

    fn learn_into(list: &mut Vec<TextShape>, sql: &[u8], query: &mut Query<'_>, tokens: &[Token]) {
        if let Some(shape) = TextShape::learn(sql, query, tokens) {
            list.insert(0, shape);
            list.truncate(KEPT);
        }
    }

    /// The shapes kept.
    pub fn len(&self) -> usize {
        self.recent.len() + self.relayed.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::{SqlMode, classify_bounded, classify_with_tokens};
    use freshet_testkit::rng::Rng;

    const BOUNDS: Bounds = Bounds { max_statement: 256 << 10, max_in_list: 1000 };

    /// Texts to learn, each with its literals' texts (to replace in variants).
    const LEARNT: &[(&str, &[&str])] = &[
        ("SELECT id, title, author_id FROM stories WHERE id = 5", &["5"]),
        (
            "SELECT stories.id, stories.title, COUNT(votes.user_id) AS votes FROM stories LEFT JOIN votes ON votes.story_id = stories.id WHERE stories.id = 17 GROUP BY stories.id, stories.title",
            &["17"],
        ),
        ("select a, b from t where a = 'x' and b = 10 limit 5", &["'x'", "10", "5"]),
        ("SELECT a FROM t WHERE a=1 AND b<2 AND c>'z' ORDER BY a;", &["1", "2", "'z'"]),
        ("SELECT /* c */ a FROM t WHERE (a = 1) -- tail\n", &["1"]),
        ("SELECT a FROM t WHERE a = 1\n", &["1"]),
        ("SELECT a FROM t WHERE a BETWEEN 1 AND 9", &["1", "9"]),
        ("SELECT a FROM t WHERE a = 1 OR b <> 'it''s' OR c = 'a\\'b'", &["1", "'it''s'", "'a\\'b'"]),
    ];

    /// Values tried in place of a literal: plain ones the shape must take, and every kind of
    /// text that must not be taken for a literal of the learnt kind.
    const VALUES: &[&str] = &[
        "0",
        "7",
        "007",
        "123456789012345678901234567890",
        "18446744073709551615",
        "9223372036854775808",
        "'a'",
        "''",
        "'a''b'",
        "'a\\'b'",
        "'é'",
        "-1",
        "+1",
        "- 1",
        "1.5",
        ".5",
        "1.",
        "1e3",
        "1e",
        "0x1F",
        "0b1",
        "x'41'",
        "b'1'",
        "N'a'",
        "_utf8mb4'a'",
        "'unterminated",
        "\"d\"",
        "NULL",
        "?",
        "@v",
        "@@v",
        "1)",
        "1 OR 1=1",
        "1/*",
        "1 /*! 1 */",
        "1--",
        "1 -- x",
        "1#",
        "(1)",
        "1,2",
        "'a' 'b'",
        "'a'b",
        "`c`",
        "a",
        "1a",
        "1_",
        "1$",
        "",
        " ",
        "1;",
        "1; DROP TABLE t",
        "'/*'",
        "'--'",
        "1 UNION SELECT 2",
        "'a\\\\'",
        "'\\''",
    ];

    /// Classifies `text` and learns its shape, checking that the query keeps its classification.
    fn learn(text: &str) -> Option<TextShape> {
        let (mut query, tokens) = classify_with_tokens(text.as_bytes(), BOUNDS);
        let classified = query.clone();
        let shape = TextShape::learn(text.as_bytes(), &mut query, &tokens);
        assert_eq!(query, classified, "learning {text:?} leaves its classification as it was");
        assert_eq!(matches!(query.fingerprint, QueryFingerprint::Learnt(_)), shape.is_some(), "{text:?}");
        shape
    }

    fn check(shape: &TextShape, sql: &[u8]) -> bool {
        match shape.classify(sql, BOUNDS) {
            Some(query) => {
                assert_eq!(query, classify_bounded(sql, SqlMode::default(), BOUNDS), "text {:?}", String::from_utf8_lossy(sql));
                true
            }
            None => false,
        }
    }

    /// Replaces literal `which` of `text` (its first occurrence after the previous ones).
    fn with_value(text: &str, literals: &[&str], which: usize, value: &str) -> String {
        let mut at = 0;
        let mut out = String::new();
        for (i, lit) in literals.iter().enumerate() {
            let found = at + text[at..].find(lit).expect("literal in text");
            out.push_str(&text[at..found]);
            out.push_str(if i == which { value } else { lit });
            at = found + lit.len();
        }
        out.push_str(&text[at..]);
        out
    }

    #[test]
    fn a_shape_answers_as_classifying_does() {
        let alphabet = b"0123456789aexbN'\"\\-+./*#(),;=<> \n?@_`\xff";
        let mut rng = Rng::new(0x5eed);
        let (mut taken, mut tried) = (0, 0);
        for &(text, literals) in LEARNT {
            let shape = learn(text).unwrap_or_else(|| panic!("learns {text:?}"));
            assert!(check(&shape, text.as_bytes()), "{text:?} is its own shape");
            for which in 0..literals.len() {
                // Each listed value, and random byte soups.
                let mut values: Vec<Vec<u8>> = VALUES.iter().map(|v| v.as_bytes().to_vec()).collect();
                for _ in 0..3000 {
                    let len = rng.below(7) as usize;
                    values.push((0..len).map(|_| alphabet[rng.below(alphabet.len() as u64) as usize]).collect());
                }
                for value in values {
                    let value = String::from_utf8_lossy(&value).into_owned();
                    let sql = with_value(text, literals, which, &value);
                    tried += 1;
                    taken += usize::from(check(&shape, sql.as_bytes()));
                }
            }
            // The fixed pieces changed: one byte inserted, replaced or removed anywhere.
            for _ in 0..3000 {
                let mut sql = text.as_bytes().to_vec();
                let at = rng.below(sql.len() as u64 + 1) as usize;
                let byte = alphabet[rng.below(alphabet.len() as u64) as usize];
                match rng.below(3) {
                    0 => sql.insert(at, byte),
                    1 if at < sql.len() => sql[at] = byte,
                    _ if at < sql.len() => {
                        sql.remove(at);
                    }
                    _ => sql.push(byte),
                }
                tried += 1;
                taken += usize::from(check(&shape, &sql));
            }
        }
        // Plain values of the learnt kinds are taken (the fast path is used, not only safe).
        for &(text, literals) in LEARNT {
            let shape = learn(text).expect("learnt");
            for (which, lit) in literals.iter().enumerate() {
                let value = if lit.starts_with('\'') { "'another value'" } else { "987654" };
                assert!(check(&shape, with_value(text, literals, which, value).as_bytes()), "{text:?} with {value}");
            }
        }
        assert!(taken > 100 && taken < tried, "{taken} of {tried} texts taken");
    }

    #[test]
    fn only_literals_standing_alone_are_learnt() {
        for text in [
            "SELECT a FROM t WHERE a = -5",
            "SELECT a FROM t WHERE a = + 5",
            "SELECT a FROM t WHERE a = _utf8mb4'x'",
            "SELECT a FROM t WHERE a = N'x'",
            "SELECT a FROM t WHERE a = \"x\"",
            "SELECT a FROM t WHERE a = 1.5",
            "SELECT a FROM t WHERE a = 0x1F",
            "SELECT a FROM t WHERE a IS NULL OR b = NULL",
            "SELECT a FROM t WHERE a IN (1, 2)",
            "SELECT a FROM t WHERE a = 5+1",
            "SELECT a FROM t WHERE a = 1 - 2",
            "SELECT a FROM t WHERE a = 5/*c*/",
            "SELECT a FROM t WHERE a = NOW()",
            "SELECT a FROM t WHERE a = 1; SELECT 2",
            "UPDATE t SET a = 1",
        ] {
            assert!(learn(text).is_none(), "{text:?} is not learnt");
        }
        // What cannot be learnt notes no tokens past the point it shows (no vector for a
        // relayed statement's literals or a long IN list's).
        for (text, noted) in [
            ("UPDATE t SET a = 1 WHERE b = 2", 0),
            ("SELECT a FROM t WHERE a = NOW() AND b = 1", 0),
            ("SELECT a FROM t WHERE b = 1 AND a IN (1, 2, 3, 4, 5)", 1),
            ("SELECT a FROM t WHERE b = 1 AND c = 2", 2),
        ] {
            assert_eq!(classify_with_tokens(text.as_bytes(), BOUNDS).1.len(), noted, "{text:?}");
        }
        let long = format!("SELECT a FROM t WHERE a = 1 /* {} */", "x".repeat(MAX_TEXT));
        assert!(learn(&long).is_none(), "a long text is not learnt");
        // A shape answers nothing over the bounds: such a text is relayed unread.
        let shape = learn("SELECT a FROM t WHERE a = 1").expect("learnt");
        let tight = Bounds { max_statement: 20, ..BOUNDS };
        assert!(shape.classify(b"SELECT a FROM t WHERE a = 2", tight).is_none());
    }

    #[test]
    fn a_session_keeps_its_latest_shapes() {
        let mut shapes = Shapes::default();
        for sql in (0..6).map(|i| format!("SELECT a{i} FROM t WHERE a = 1")).chain(["SELECT a FROM t WHERE a = -1".to_string()]) {
            let (mut query, tokens) = classify_with_tokens(sql.as_bytes(), BOUNDS);
            shapes.learn(sql.as_bytes(), &mut query, &tokens);
        }
        assert_eq!(shapes.len(), KEPT, "four kept; the last text, with a sign, was not learnt");
        assert!(shapes.classify(b"SELECT a5 FROM t WHERE a = 2", BOUNDS).is_some(), "the latest is kept");
        assert!(shapes.classify(b"SELECT a2 FROM t WHERE a = 2", BOUNDS).is_some());
        assert!(shapes.classify(b"SELECT a1 FROM t WHERE a = 2", BOUNDS).is_none(), "the oldest went");
    }

    /// Relayed reads' shapes are kept apart: however many an application sends, the shapes of
    /// its cached reads stay.
    #[test]
    fn relayed_shapes_do_not_push_out_cached_ones() {
        let mut shapes = Shapes::default();
        let learn = |shapes: &mut Shapes, sql: &str, relayed: bool| {
            let (mut query, tokens) = classify_with_tokens(sql.as_bytes(), BOUNDS);
            if relayed {
                shapes.learn_relayed(sql.as_bytes(), &mut query, &tokens);
            } else {
                shapes.learn(sql.as_bytes(), &mut query, &tokens);
            }
        };
        learn(&mut shapes, "SELECT cached FROM t WHERE a = 1", false);
        for i in 0..10 {
            learn(&mut shapes, &format!("SELECT r{i} FROM t WHERE a = 1"), true);
        }
        assert_eq!(shapes.len(), 1 + KEPT);
        for (sql, known) in
            [("SELECT cached FROM t WHERE a = 7", true), ("SELECT r9 FROM t WHERE a = 7", true), ("SELECT r5 FROM t WHERE a = 7", false)]
        {
            let by_shape = shapes.classify(sql.as_bytes(), BOUNDS);
            assert_eq!(by_shape.is_some(), known, "{sql}");
            if let Some(q) = by_shape {
                let fresh = classify_with_tokens(sql.as_bytes(), BOUNDS).0;
                assert_eq!((q.fingerprint.hash, &q.literals), (fresh.fingerprint.hash, &fresh.literals), "{sql}");
            }
        }
    }
}
