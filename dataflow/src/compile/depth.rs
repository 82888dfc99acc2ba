//! A bound on how deep a query's expressions can nest, read from its tokens before any tree is
//! built.
//!
//! Compiling recurses over the parsed AST (`select`, `lower`), and so do evaluation and the
//! AST's own drop. sqlparser's recursion limit bounds parenthesised nesting while it parses,
//! but not a flat chain: `a = 1 AND a = 1 AND ...` parses in a loop into a left-deep tree as
//! deep as the chain is long, and 10,000 terms overflowed a 2 MiB worker stack while being
//! lowered. Every level of an expression tree comes from at least one operator token (a
//! symbol, an operator keyword, an opening parenthesis), so their count bounds the depth from
//! above; [`check`] refuses a query past [`MAX_NESTING`] before it is parsed. Over-counting
//! (keywords that nest nothing, siblings counted as depth) only refuses queries far larger than
//! anything cached in practice: identifiers, literals, `?` and commas are not counted, so long
//! select lists and IN lists are not limited.

use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::{Refusal, refuse};

/// The most operator tokens a compiled query may hold: far more than a cached lookup needs
/// (a dozen is typical), few enough that a tree this deep is installed, filled and evaluated
/// on a tokio worker's 2 MiB stack even unoptimised (dataflow/tests/deep.rs runs them there;
/// compiling itself gets a stack of its own, see [`with_stack`]).
pub const MAX_NESTING: usize = 200;

/// Keywords that combine or wrap expressions.
const OPERATOR_WORDS: &[Keyword] = &[
    Keyword::AND,
    Keyword::OR,
    Keyword::XOR,
    Keyword::NOT,
    Keyword::IS,
    Keyword::LIKE,
    Keyword::ILIKE,
    Keyword::RLIKE,
    Keyword::REGEXP,
    Keyword::BETWEEN,
    Keyword::IN,
    Keyword::CASE,
    Keyword::WHEN,
    Keyword::DIV,
    Keyword::MOD,
    Keyword::COLLATE,
    Keyword::INTERVAL,
    Keyword::EXISTS,
    Keyword::ANY,
    Keyword::ALL,
    Keyword::SOME,
    Keyword::BINARY,
    Keyword::ESCAPE,
    Keyword::SELECT,
];

/// Stack that must be free before recursing over a tree, and the size of the segment added
/// when less is left. Unoptimised code takes ~14 KiB of stack per expression level while
/// lowering, so a tree [`MAX_NESTING`] deep needs ~3 MiB: more than a tokio worker's 2 MiB,
/// hence a segment of its own (mapped lazily: untouched pages cost no memory; compiling is
/// rare, once per new query shape).
const RED_ZONE: usize = 4 << 20;
const SEGMENT: usize = 8 << 20;

/// Runs `f`, which recurses over a tree at most [`MAX_NESTING`] deep, on enough stack.
pub fn with_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

/// Refuses `sql` if its expressions may nest deeper than [`MAX_NESTING`].
pub fn check(sql: &str) -> Result<(), Refusal> {
    let dialect = MySqlDialect {};
    let tokens = match Tokenizer::new(&dialect, sql).tokenize() {
        Ok(t) => t,
        Err(e) => return refuse(format!("cannot parse the query: {e}")),
    };
    let nesting = tokens.iter().filter(|t| nests(t)).count();
    if nesting > MAX_NESTING {
        return refuse(format!(
            "the query's expressions nest too deep to cache safely ({nesting} operators and parentheses, at most {MAX_NESTING})"
        ));
    }
    Ok(())
}

/// Whether a token may add a level to an expression tree.
fn nests(token: &Token) -> bool {
    match token {
        Token::Word(w) => OPERATOR_WORDS.contains(&w.keyword),
        Token::Whitespace(_)
        | Token::EOF
        | Token::Comma
        | Token::Period
        | Token::SemiColon
        | Token::RParen
        | Token::RBracket
        | Token::RBrace
        | Token::Number(..)
        | Token::Char(_)
        | Token::Placeholder(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::NationalStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_operators_not_names_literals_or_lists() {
        assert!(check(&format!("SELECT {} FROM t WHERE id IN ({})", vec!["name"; 5000].join(", "), vec!["?"; 5000].join(", "))).is_ok());
        assert!(check(&format!("SELECT a FROM t WHERE a = 1{}", " AND a = 1".repeat(99))).is_ok());
        assert!(check(&format!("SELECT a FROM t WHERE a = 1{}", " AND a = 1".repeat(100))).is_err());
        assert!(check(&format!("SELECT a FROM t WHERE a = {}1{}", "(".repeat(200), ")".repeat(200))).is_err());
    }
}
