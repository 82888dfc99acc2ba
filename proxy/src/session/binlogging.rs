//! Whether a text may turn the session's binlogging off, which the tracker
//! ([`super::state`]) records as `unlogged`.
//!
//! `unlogged` records that the session may have turned its binlogging off (`sql_log_bin`,
//! `binlog_format` other than ROW): its writes never reach the binlog, so freshet evicts
//! after each of them (see `session::command`). Only an account with SUPER or BINLOG ADMIN
//! may turn it off, and the server refuses anyone else's SET before running it: the session
//! takes `unlogged` back when the server refused the statement that set it
//! (`unlogged_at`), and a text it cannot follow counts only if it names the variables as the
//! server reads the text (not in a string or comment), else any login could make every one
//! of its statements empty every cache. A PREPAREd text turns it off when EXECUTEd.
//!
//! Owns: which variables and values turn binlogging off ([`turns_binlogging_off`]), the
//! search for their names in a text the tracker does not follow ([`may_turn_binlogging_off`])
//! or does not keep ([`NamesInPieces`]), and how many prepared texts that may turn it off a
//! session remembers ([`PREPARED_UNLOGGING`]). Does not own: `unlogged`, `unlogged_at` and
//! the prepared statements' names, nor the reading of the statements that set them
//! ([`SessionState`]).

use super::glance::open_exec_comments;
use super::state::{SessionState, assigned_variable, is_string, unquoted};
use crate::matching::lexer::{Lexer, Token, TokenKind};

/// Whether the tracker, reading `text` as a session's statement, takes it to turn binlogging
/// off: the SQL of a PREPARE or EXECUTE IMMEDIATE.
pub(super) fn text_unlogs(text: &[u8]) -> bool {
    let mut reader = SessionState::default();
    reader.observe(text);
    reader.unlogged
}

/// How many SQL-prepared statements that may turn binlogging off a session keeps by name;
/// past it, preparing one more turns the session's `unlogged` on.
pub(super) const PREPARED_UNLOGGING: usize = 32;

/// Whether a text this tracker does not follow may turn binlogging off: it names
/// `sql_log_bin` or `binlog_format` other than in a string or comment, or in a string of a
/// text that PREPAREs or EXECUTEs SQL (such a string is SQL, read the same way). An
/// executable comment's body is read as the text the server runs; past `depth` 2 (or a body
/// holding another comment) any mention of the names counts.
pub(super) fn may_turn_binlogging_off(sql: &[u8], depth: u8) -> bool {
    let mentions = || names_binlog_variable(sql);
    if depth > 2 {
        return mentions();
    }
    if Lexer::new(sql).any(|t| matches!(t.kind, TokenKind::ExecComment | TokenKind::Unterminated)) {
        return match open_exec_comments(sql, Lexer::new(sql)) {
            Some(opened) => may_turn_binlogging_off(&opened, depth + 1),
            None => mentions(),
        };
    }
    let runs_text = Lexer::new(sql)
        .any(|t| t.kind == TokenKind::Word && [&b"prepare"[..], b"execute"].iter().any(|w| t.text(sql).eq_ignore_ascii_case(w)));
    Lexer::new(sql).any(|t| match t.kind {
        TokenKind::Word | TokenKind::QuotedIdent | TokenKind::SystemVariable => {
            // `sql_log_bin`, `` `sql_log_bin` ``, `@@session.sql_log_bin`.
            let name = t.text(sql).rsplit(|&c| c == b'.').next().unwrap_or_default().trim_ascii_start();
            let name = name.strip_prefix(b"@@").unwrap_or(name);
            let name = name.strip_prefix(b"`").and_then(|n| n.strip_suffix(b"`")).unwrap_or(name);
            BINLOG_VARIABLES.iter().any(|n| name.eq_ignore_ascii_case(n))
        }
        kind if is_string(kind) && runs_text => may_turn_binlogging_off(&unquoted(t.text(sql)), depth + 1),
        _ => false,
    })
}

/// The variables that turn binlogging off for a session.
const BINLOG_VARIABLES: [&[u8]; 2] = [b"sql_log_bin", b"binlog_format"];

/// Whether `text` holds the name of a variable that turns binlogging off, anywhere and in any
/// case.
fn names_binlog_variable(text: &[u8]) -> bool {
    (0..text.len()).any(|i| {
        let rest = &text[i..];
        match rest[0] | 0x20 {
            b's' => rest.get(..11).is_some_and(|w| w.eq_ignore_ascii_case(BINLOG_VARIABLES[0])),
            b'b' => rest.get(..13).is_some_and(|w| w.eq_ignore_ascii_case(BINLOG_VARIABLES[1])),
            _ => false,
        }
    })
}

/// [`names_binlog_variable`] for a text that arrives in pieces and is not kept (a command of
/// 16 MiB or more, forwarded frame by frame): each piece is searched, and so is each edge
/// between two, where a name may be split.
#[derive(Default)]
pub(super) struct NamesInPieces {
    /// The last bytes seen, fewer than the longest name.
    tail: Vec<u8>,
    found: bool,
}

impl NamesInPieces {
    const EDGE: usize = 12;

    pub(super) fn feed(&mut self, piece: &[u8]) {
        if self.found {
            return;
        }
        let mut edge = std::mem::take(&mut self.tail);
        edge.extend_from_slice(&piece[..piece.len().min(Self::EDGE)]);
        self.found = names_binlog_variable(&edge) || names_binlog_variable(piece);
        self.tail = if piece.len() >= Self::EDGE {
            piece[piece.len() - Self::EDGE..].to_vec()
        } else {
            edge[edge.len().saturating_sub(Self::EDGE)..].to_vec()
        };
    }

    pub(super) fn found(&self) -> bool {
        self.found
    }
}

/// True if the assignments `tokens` (`a = 1, b = 2` of a `SET STATEMENT`) may turn
/// binlogging off ([`turns_binlogging_off`]).
pub(super) fn unlogs(sql: &[u8], tokens: &[Token]) -> bool {
    let text = |i: usize| tokens.get(i).map(|t| String::from_utf8_lossy(t.text(sql)).to_ascii_lowercase()).unwrap_or_default();
    (0..tokens.len()).any(|i| {
        let (name, named_by) = assigned_variable(sql, tokens, i);
        turns_binlogging_off(&name, &text(i + named_by + 1))
    })
}

/// Whether setting variable `name` (lower case) to `value` may turn the session's binlogging
/// off: `sql_log_bin` to anything but on, `binlog_format` to anything but ROW.
pub(super) fn turns_binlogging_off(name: &str, value: &str) -> bool {
    match name {
        "sql_log_bin" => !value_is(value, &["1", "on", "true", "default"]),
        "binlog_format" => !value_is(value, &["row", "'row'", "\"row\"", "default"]),
        _ => false,
    }
}

pub(super) fn value_is(value: &str, any_of: &[&str]) -> bool {
    any_of.contains(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name is found in a piece, and across the edge between two pieces, whatever their
    /// lengths; nothing else is.
    #[test]
    fn names_are_found_in_pieces_and_across_their_edges() {
        let text = b"DO 1; SET @@SESSION.Sql_Log_Bin = 0; UPDATE t SET a = 1";
        for cuts in [vec![], vec![24], vec![25, 26, 27], vec![20, 22, 24, 26, 28, 30, 32], vec![1, 2, 3, 4, 5, 6, 7, 8]] {
            let mut n = NamesInPieces::default();
            let mut at = 0;
            for cut in cuts.iter().copied().chain([text.len()]) {
                n.feed(&text[at..cut]);
                at = cut;
            }
            assert!(n.found(), "cut at {cuts:?}");
        }
        let mut n = NamesInPieces::default();
        for piece in [&b"binlog_"[..], b"for", b"mat = 'ROW'"] {
            n.feed(piece);
        }
        assert!(n.found(), "split twice");
        let mut n = NamesInPieces::default();
        for piece in [&b"sql_log_"[..], b"xbin", b"binlog", b"_form", b"et"] {
            n.feed(piece);
        }
        assert!(!n.found());
    }
}
