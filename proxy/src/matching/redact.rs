//! What freshet shows of a query: its normalized text with every literal replaced.
//!
//! A fingerprint keeps some literals in its normalized text on purpose (select lists, type
//! arguments, `ORDER BY 1`, executable comments: they change a result's meaning or metadata),
//! and a statement that is not a SELECT is normalized with the same rules. Such texts are for
//! matching only. Anything shown to a user (SHOW PROXIED QUERIES) or written to a log goes
//! through [`shown`], which replaces every literal token with `?`, inside executable comments
//! too: `GRANT ... IDENTIFIED BY 'pw'` and `/*!40101 SET PASSWORD = PASSWORD('pw') */` are
//! what other users' sessions send.
//!
//! Invariant (a property test checks it on arbitrary text): lexing the shown text finds no
//! literal token, at its top level or inside an executable comment's body; an unterminated
//! string or comment is cut at its opening quote.

use super::lexer::{Lexer, TokenKind};

/// `normalized` with every literal token (numbers, strings, hex and bit values, anything
/// unterminated) replaced by `?`.
pub fn shown(normalized: &str) -> String {
    let mut out = String::with_capacity(normalized.len());
    redact_into(normalized.as_bytes(), &mut out);
    out
}

fn redact_into(text: &[u8], out: &mut String) {
    let mut from = 0;
    for token in Lexer::new(text) {
        let piece = match token.kind {
            kind if kind.is_value_literal() || matches!(kind, TokenKind::NationalString | TokenKind::Unterminated) => None,
            TokenKind::ExecComment => Some(token),
            // `'user'@'host'` lexes as a string then a user variable named by a string.
            TokenKind::UserVariable if matches!(token.text(text).get(1), Some(b'\'' | b'"')) => {
                out.push_str(&String::from_utf8_lossy(&text[from..token.start]));
                out.push_str("@?");
                from = token.end;
                continue;
            }
            _ => continue,
        };
        out.push_str(&String::from_utf8_lossy(&text[from..token.start]));
        from = token.end;
        match piece {
            None => out.push('?'),
            Some(comment) => {
                // `/*!40101 body */`, `/*M!100000 body */`, `/*+ body */`: the body is SQL; it
                // cannot hold `*/`, so one level is all there is.
                let raw = comment.text(text);
                let open = if raw.starts_with(b"/*M!") { 4 } else { 3 };
                out.push_str(&String::from_utf8_lossy(&raw[..open]));
                let body = &raw[open..raw.len().saturating_sub(2).max(open)];
                // A version number right after `!` is not a value anyone wrote.
                let digits = body.iter().take_while(|b| b.is_ascii_digit()).count();
                out.push_str(&String::from_utf8_lossy(&body[..digits]));
                redact_into(&body[digits..], out);
                out.push_str("*/");
            }
        }
    }
    out.push_str(&String::from_utf8_lossy(&text[from..]));
}
