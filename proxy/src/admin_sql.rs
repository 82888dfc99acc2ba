//! Recognizing freshet's own admin statements in the text of a COM_QUERY:
//!
//! ```text
//! SHOW CACHES
//! SHOW PROXIED QUERIES [LIMIT n]
//! SHOW FRESHET STATUS
//! EXPLAIN CACHE <select>
//! CREATE CACHE [name] FROM <select>
//! DROP CACHE name
//! ```
//!
//! Keywords in any case, any whitespace and comments between tokens, one optional trailing
//! `;`. A name is `[A-Za-z0-9_]+`, optionally backquoted. Owns recognition and the column
//! layout of each statement's answer; running them is the session's.
//!
//! Invariants: every query goes through [`parse`], so a text that does not start with SHOW,
//! EXPLAIN, CREATE or DROP is rejected after skipping its leading whitespace and comments and
//! reading one word. No real SQL is taken for an admin statement: a statement is claimed only
//! by its first two keywords, and no MySQL or MariaDB statement starts with SHOW CACHES, SHOW
//! PROXIED, SHOW FRESHET, CREATE CACHE or DROP CACHE. `EXPLAIN cache` alone is DESCRIBE of a
//! table named `cache`, so EXPLAIN CACHE is claimed only when a SELECT (or `WITH`, or `(`)
//! follows. Executable comments (`/*! ... */`, `/*M! ... */`) and optimizer hints (`/*+ */`)
//! carry SQL, so they are not skipped: they end recognition like any other unexpected token.
//! Tokens are the shared tokenizer's ([`crate::matching::lexer`]), so admin statements and
//! routing read comments, quotes and words alike. Bytes are never indexed past their end; any
//! input gives an answer, not a panic.

use crate::matching::lexer::{Lexer as SqlLexer, TokenKind};
use crate::protocol::synth::{SynthColumn, SynthType};

/// A recognized admin statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminStatement {
    /// `SHOW CACHES`
    ShowCaches,
    /// `SHOW PROXIED QUERIES [LIMIT n]`
    ShowProxiedQueries { limit: Option<u64> },
    /// `EXPLAIN CACHE <select>`: the SELECT's text, trimmed, without the trailing `;`.
    ExplainCache { select: String },
    /// `SHOW FRESHET STATUS`
    ShowFreshetStatus,
    /// `CREATE CACHE [name] FROM <select>`
    CreateCache { name: Option<String>, select: String },
    /// `DROP CACHE name`
    DropCache { name: String },
}

/// `None` when `sql` is not an admin statement (relay it); `Some(Err(message))` when it is
/// one but malformed (answer ER_PARSE_ERROR with the message).
pub fn parse(sql: &[u8]) -> Option<Result<AdminStatement, String>> {
    let mut lexer = Lexer { sql, pos: 0 };
    // The cheap rejection: one word, compared without allocating.
    let Token::Word(first) = lexer.next() else { return None };
    let first = [Keyword::Show, Keyword::Explain, Keyword::Create, Keyword::Drop].into_iter().find(|k| k.is(first))?;
    let Token::Word(second) = lexer.next() else { return None };
    let statement = match first {
        Keyword::Show if is(second, b"CACHES") => end(&mut lexer, AdminStatement::ShowCaches),
        Keyword::Show if is(second, b"PROXIED") => show_proxied(&mut lexer),
        Keyword::Show if is(second, b"FRESHET") => {
            expect_word(&mut lexer, b"STATUS", "SHOW FRESHET").and_then(|()| end(&mut lexer, AdminStatement::ShowFreshetStatus))
        }
        Keyword::Explain if is(second, b"CACHE") => {
            // Without a SELECT this is DESCRIBE of a table named `cache`: relay it.
            if !starts_select(&mut lexer) {
                return None;
            }
            select_text(&mut lexer).map(|select| AdminStatement::ExplainCache { select })
        }
        Keyword::Create if is(second, b"CACHE") => create_cache(&mut lexer),
        Keyword::Drop if is(second, b"CACHE") => match name(&mut lexer, "DROP CACHE") {
            Ok(Some(name)) => end(&mut lexer, AdminStatement::DropCache { name }),
            Ok(None) => Err(format!("DROP CACHE needs a cache name{USAGE_DROP}")),
            Err(e) => Err(e),
        },
        _ => return None,
    };
    Some(statement)
}

/// The words an admin statement can start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keyword {
    Show,
    Explain,
    Create,
    Drop,
}

impl Keyword {
    fn is(self, word: &[u8]) -> bool {
        let keyword: &[u8] = match self {
            Keyword::Show => b"SHOW",
            Keyword::Explain => b"EXPLAIN",
            Keyword::Create => b"CREATE",
            Keyword::Drop => b"DROP",
        };
        is(word, keyword)
    }
}

/// True if a SELECT (or `WITH`, or `(`) comes next; the lexer stays where it was.
fn starts_select(lexer: &mut Lexer<'_>) -> bool {
    let at = lexer.pos;
    let select = match lexer.next() {
        Token::Word(w) => is(w, b"SELECT") || is(w, b"WITH"),
        token => token == Token::Punct(b"("),
    };
    lexer.pos = at;
    select
}

const USAGE_PROXIED: &str = " (usage: SHOW PROXIED QUERIES [LIMIT n])";
const USAGE_CREATE: &str = " (usage: CREATE CACHE [name] FROM SELECT ...)";
const USAGE_DROP: &str = " (usage: DROP CACHE name)";

fn show_proxied(lexer: &mut Lexer<'_>) -> Result<AdminStatement, String> {
    expect_word(lexer, b"QUERIES", "SHOW PROXIED")?;
    let at = lexer.pos;
    match lexer.next() {
        Token::Word(w) if is(w, b"LIMIT") => {}
        _ => {
            lexer.pos = at;
            return end(lexer, AdminStatement::ShowProxiedQueries { limit: None });
        }
    }
    let limit = match lexer.next() {
        Token::Word(w) if !w.is_empty() && w.iter().all(u8::is_ascii_digit) => {
            // Only ASCII digits, so the text is UTF-8; overflow is the only failure left.
            std::str::from_utf8(w).ok().and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| format!("LIMIT {} is too large", show(w)))?
        }
        other => return Err(format!("LIMIT needs a non-negative integer, not {}{USAGE_PROXIED}", other.describe())),
    };
    end(lexer, AdminStatement::ShowProxiedQueries { limit: Some(limit) })
}

fn create_cache(lexer: &mut Lexer<'_>) -> Result<AdminStatement, String> {
    let at = lexer.pos;
    let name = match lexer.next() {
        Token::Word(w) if is(w, b"FROM") => None,
        _ => {
            lexer.pos = at;
            let name = name(lexer, "CREATE CACHE")?.ok_or_else(|| format!("CREATE CACHE needs FROM and a SELECT{USAGE_CREATE}"))?;
            expect_word(lexer, b"FROM", "CREATE CACHE name").map_err(|e| format!("{e}{USAGE_CREATE}"))?;
            Some(name)
        }
    };
    if !starts_select(lexer) {
        return Err(format!("CREATE CACHE ... FROM needs a SELECT, not {}{USAGE_CREATE}", lexer.next().describe()));
    }
    let select = select_text(lexer)?;
    Ok(AdminStatement::CreateCache { name, select })
}

/// A cache name: a word or backquoted identifier of 1-64 of `[A-Za-z0-9_]`, as a config's
/// (it is a metrics label). `Ok(None)` if the statement ends here (the lexer is left where it
/// was).
fn name(lexer: &mut Lexer<'_>, after: &str) -> Result<Option<String>, String> {
    let at = lexer.pos;
    let text = match lexer.next() {
        Token::Word(w) | Token::Quoted(w) => w,
        Token::End | Token::Punct(b";") => {
            lexer.pos = at;
            return Ok(None);
        }
        other => return Err(format!("{after} needs a cache name, not {}", other.describe())),
    };
    if text.is_empty() || text.len() > 64 || !text.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
        return Err(format!("cache name {} is not 1-64 letters, digits and _", show(text)));
    }
    // Only ASCII bytes were accepted just above.
    Ok(Some(String::from_utf8_lossy(text).into_owned()))
}

/// The rest of the text from the lexer's position: trimmed, one trailing `;` removed.
fn select_text(lexer: &mut Lexer<'_>) -> Result<String, String> {
    let rest = lexer.sql.get(lexer.pos..).unwrap_or_default();
    let rest = rest.trim_ascii();
    let rest = rest.strip_suffix(b";").unwrap_or(rest).trim_ascii_end();
    lexer.pos = lexer.sql.len();
    std::str::from_utf8(rest).map(str::to_owned).map_err(|_| "the SELECT is not valid UTF-8".to_string())
}

fn expect_word(lexer: &mut Lexer<'_>, word: &[u8], after: &str) -> Result<(), String> {
    match lexer.next() {
        Token::Word(w) if is(w, word) => Ok(()),
        other => Err(format!("expected {} after {after}, not {}", show(word), other.describe())),
    }
}

/// Ends a statement: nothing but whitespace, comments and one `;` may follow.
fn end(lexer: &mut Lexer<'_>, statement: AdminStatement) -> Result<AdminStatement, String> {
    let mut token = lexer.next();
    if token == Token::Punct(b";") {
        token = lexer.next();
    }
    match token {
        Token::End => Ok(statement),
        other => Err(format!("unexpected {} at the end of a freshet admin statement", other.describe())),
    }
}

fn is(word: &[u8], keyword: &[u8]) -> bool {
    word.eq_ignore_ascii_case(keyword)
}

/// A token for an error message, shortened.
fn show(bytes: &[u8]) -> String {
    const MAX: usize = 40;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]).into_owned();
    if bytes.len() > MAX { format!("'{text}...'") } else { format!("'{text}'") }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    /// Letters, digits, `_`, `$` and non-ASCII bytes (which identifiers may hold).
    Word(&'a [u8]),
    /// A backquoted identifier's content, doubled backquotes left as they are.
    Quoted(&'a [u8]),
    /// Any other token, whole: a symbol, a string or other literal, an executable comment.
    Punct(&'a [u8]),
    /// An unterminated string, quoted identifier or comment.
    Unterminated,
    End,
}

impl Token<'_> {
    fn describe(&self) -> String {
        match self {
            Token::Word(w) => show(w),
            Token::Quoted(w) => format!("`{}`", show(w).trim_matches('\'')),
            Token::Punct([b]) if !b.is_ascii_graphic() => format!("byte {b:#04x}"),
            Token::Punct(text) => show(text),
            Token::Unterminated => "an unterminated comment or identifier".to_string(),
            Token::End => "the end of the statement".to_string(),
        }
    }
}

/// The admin statements' view of the shared tokenizer ([`crate::matching::lexer`]): one
/// token at a time from a position that recognition may rewind. Numbers are words here (a
/// LIMIT, a cache name of digits); executable comments and optimizer hints hold SQL, so they
/// end recognition like any other unexpected token; strings and other literals are not part
/// of any admin statement.
struct Lexer<'a> {
    sql: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn next(&mut self) -> Token<'a> {
        let rest = self.sql.get(self.pos..).unwrap_or_default();
        let Some(token) = SqlLexer::new(rest).next() else {
            self.pos = self.sql.len();
            return Token::End;
        };
        self.pos += token.end;
        let text = token.text(rest);
        match token.kind {
            TokenKind::Word | TokenKind::Integer => Token::Word(text),
            TokenKind::QuotedIdent => Token::Quoted(text.get(1..text.len().saturating_sub(1)).unwrap_or_default()),
            TokenKind::Unterminated => Token::Unterminated,
            _ => Token::Punct(text),
        }
    }
}

/// SHOW CACHES: one row per cache.
pub fn show_caches_columns() -> Vec<SynthColumn> {
    use SynthType::*;
    columns(&[
        ("name", Text),
        ("query", Text),
        ("keys", UInt),
        ("bytes", UInt),
        ("hits", UInt),
        ("misses", UInt),
        ("hit_ratio", Double),
        ("p50_hit_us", Double),
        ("p99_hit_us", Double),
        ("fills", UInt),
        ("evictions", UInt),
        ("cost_class", Text),
    ])
}

/// SHOW PROXIED QUERIES: one row per normalized query shape that was relayed; `cacheable` is
/// 'yes' or 'no', `reason` says why not.
pub fn proxied_queries_columns() -> Vec<SynthColumn> {
    use SynthType::*;
    columns(&[("query", Text), ("count", UInt), ("total_ms", Double), ("cacheable", Text), ("reason", Text)])
}

/// EXPLAIN CACHE: one row per line of the explanation.
pub fn explain_columns() -> Vec<SynthColumn> {
    columns(&[("section", SynthType::Text), ("detail", SynthType::Text)])
}

/// SHOW FRESHET STATUS: name and value pairs, like SHOW STATUS.
pub fn status_columns() -> Vec<SynthColumn> {
    columns(&[("variable_name", SynthType::Text), ("value", SynthType::Text)])
}

fn columns(layout: &[(&str, SynthType)]) -> Vec<SynthColumn> {
    layout.iter().map(|&(name, ty)| SynthColumn::new(name, ty)).collect()
}

#[cfg(test)]
mod tests;
