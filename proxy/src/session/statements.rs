//! A text's statements, read one at a time with the tokenizer ([`Statements`]), and whether
//! one of them runs others ([`runs_statements`]), so that its error says nothing of what ran.
//!
//! Owns: the split at `;` (empty statements skipped) that keeps of each statement only the
//! tokens its reader asks for: a text of millions of short statements must not cost a vector
//! of all their tokens. Does not own: what a statement does to the session
//! ([`super::state`]), or to privileges (`super::command`).

use super::glance::Glance;
use crate::matching::lexer::{Lexer, Token, TokenKind};

/// One statement of a text ([`Statements`]).
pub(super) struct Statement {
    /// From its first token's first byte to its last token's last.
    pub range: std::ops::Range<usize>,
    /// How many tokens it has.
    pub tokens: usize,
}

/// A text's statements (split at `;`, empty ones skipped), read one at a time with the
/// tokenizer: what reading one needs is kept, not every token of the text.
pub(super) struct Statements<'q> {
    sql: &'q [u8],
    lexer: Lexer<'q>,
}

impl<'q> Statements<'q> {
    pub(super) fn new(sql: &'q [u8]) -> Statements<'q> {
        Statements { sql, lexer: Lexer::new(sql) }
    }

    /// The next statement. Its first `keep(first token)` tokens are put in `kept` (cleared
    /// first); `visit` sees every one of them, in order.
    pub(super) fn next(
        &mut self,
        keep: impl Fn(&Token) -> usize,
        kept: &mut Vec<Token>,
        mut visit: impl FnMut(&Token),
    ) -> Option<Statement> {
        kept.clear();
        let (mut range, mut tokens, mut keeping) = (0..0, 0, 0);
        for t in self.lexer.by_ref() {
            if t.is_symbol(self.sql, b";") {
                if tokens > 0 {
                    break;
                }
                continue;
            }
            if tokens == 0 {
                range.start = t.start;
                keeping = keep(&t);
            }
            range.end = t.end;
            tokens += 1;
            if kept.len() < keeping {
                kept.push(t);
            }
            visit(&t);
        }
        (tokens > 0).then_some(Statement { range, tokens })
    }
}

/// Whether `sql` has a statement that runs others one by one: a block (`BEGIN NOT ATOMIC`,
/// IF, CASE, LOOP, WHILE, REPEAT, FOR, a label), CALL, EXECUTE, or anything in an executable
/// comment; also after `SET STATEMENT ... FOR`. The server answers such a statement with the
/// error of the statement inside it that failed, after the ones before it ran (and stayed: a
/// block is not atomic), so its error says nothing of what ran. A single statement is atomic:
/// what its stored functions and triggers did is undone with it.
pub(super) fn runs_statements(sql: &[u8]) -> bool {
    runs_statements_glanced(&Glance::of(sql))
}

/// [`runs_statements`] of a text glanced at already.
pub(super) fn runs_statements_glanced(g: &Glance<'_>) -> bool {
    let sql = g.sql;
    const RUNNERS: [&[u8]; 8] = [b"call", b"execute", b"if", b"case", b"loop", b"while", b"repeat", b"for"];
    let runner = |kept: &[Token]| {
        let word = |i: usize| kept.get(i).map_or(&b""[..], |t| t.text(sql));
        // The statement `SET STATEMENT ... FOR` runs; not within the kept tokens: any.
        let at = if word(0).eq_ignore_ascii_case(b"set") && word(1).eq_ignore_ascii_case(b"statement") {
            match kept.iter().position(|t| t.kind == TokenKind::Word && t.text(sql).eq_ignore_ascii_case(b"for")) {
                Some(i) => i + 1,
                None => return true,
            }
        } else {
            0
        };
        RUNNERS.iter().any(|r| word(at).eq_ignore_ascii_case(r))
            || (word(at).eq_ignore_ascii_case(b"begin") && word(at + 1).eq_ignore_ascii_case(b"not"))
            || kept.get(at + 1).is_some_and(|t| t.is_symbol(sql, b":"))
    };
    if g.executable_comment() {
        return true;
    }
    // Most texts: one statement, decided by its first word and the byte after it (this runs
    // for every relayed command); its tokens are read only when those may start a runner.
    if !g.semicolon {
        let Some(first) = g.first else { return false };
        if first.eq_ignore_ascii_case(b"set") {
            return runner(&Lexer::new(sql).take(256).collect::<Vec<_>>());
        }
        let end = first.as_ptr() as usize - sql.as_ptr() as usize + first.len();
        let next = sql[end..].iter().find(|c| !c.is_ascii_whitespace());
        let may_start = first.eq_ignore_ascii_case(b"begin")
            || RUNNERS.iter().any(|r| first.eq_ignore_ascii_case(r))
            // A label (`l: LOOP`), or a comment before what follows the word.
            || matches!(next, Some(b':' | b'/' | b'#' | b'-'));
        if !may_start {
            return false;
        }
        let mut tokens = [Token { kind: TokenKind::Symbol, start: 0, end: 0 }; 3];
        let read = Lexer::new(sql).zip(tokens.iter_mut()).map(|(t, slot)| *slot = t).count();
        return runner(&tokens[..read]);
    }
    let mut statements = Statements::new(sql);
    let mut kept = Vec::new();
    let keep = |t: &Token| if t.text(sql).eq_ignore_ascii_case(b"set") { 256 } else { 3 };
    while statements.next(keep, &mut kept, |_| ()).is_some() {
        if runner(&kept) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statements that run others, whose error tells nothing of what ran before it.
    #[test]
    fn statements_that_run_others_are_known() {
        for sql in [
            "CALL p()",
            "call db.p(1)",
            "EXECUTE s",
            "EXECUTE IMMEDIATE 'GRANT ALL ON *.* TO u'",
            "BEGIN NOT ATOMIC SET @a = 1; END",
            "IF 1 THEN DO 1; END IF",
            "l: LOOP LEAVE l; END LOOP",
            "l : BEGIN NOT ATOMIC END",
            "l /* a label */ : BEGIN NOT ATOMIC END",
            "  Call p()",
            "DO 1; CALL p()",
            "SET STATEMENT max_statement_time = 1 FOR CALL p()",
            "/*!1 CALL p() */",
        ] {
            assert!(runs_statements(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "BEGIN",
            "BEGIN WORK; UPDATE t SET a = 1; COMMIT",
            "SET sql_log_bin = 0",
            "SET STATEMENT sql_log_bin = 0 FOR UPDATE t SET a = 1",
            "GRANT SELECT ON t TO u",
            "SELECT f(1) FROM t",
            "SELECT id, k FROM t WHERE id = 1",
            "SELECT -1",
            "INSERT /* c */ INTO t VALUES (1)",
            "DO 1; SELECT 'CALL p()'",
        ] {
            assert!(!runs_statements(sql.as_bytes()), "{sql}");
        }
    }
}
