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

/// `reason` (why a statement of normalized text `normalized` is relayed, which may quote parts
/// of it as the compiler read them) with every literal of `normalized` replaced by `?`: each
/// literal token's text, and a quoted one's content, wherever it appears in `reason`, longest
/// first (a literal as short as `1` takes every `1` with it: shown too little, never a value);
/// then the quoted SQL is read as SQL and its literal tokens replaced, whatever their spelling.
pub fn reason_shown(reason: &str, normalized: &str) -> String {
    let mut literals = Vec::new();
    literals_of(normalized.as_bytes(), &mut literals);
    literals.retain(|l| !l.is_empty());
    literals.sort_by_key(|l| std::cmp::Reverse(l.len()));
    literals.dedup();
    let mut out = reason.to_string();
    for literal in &literals {
        out = out.replace(literal.as_str(), "?");
    }
    // The compiler quotes SQL between backticks, in its own spelling (`0x31` as `X'31'`,
    // escapes written otherwise): whatever lies between the first and the last backtick is
    // read as SQL and its literals taken out too.
    if let (Some(first), Some(last)) = (out.find('`'), out.rfind('`'))
        && first < last
    {
        out = format!("{}{}{}", &out[..=first], shown(&out[first + 1..last]), &out[last..]);
    }
    out
}

/// The literals of `text` as [`shown`] finds them: each token's text and, for a quoted one,
/// its content with the quotes' escapes undone.
fn literals_of(text: &[u8], out: &mut Vec<String>) {
    for token in Lexer::new(text) {
        let raw = token.text(text);
        match token.kind {
            kind if kind.is_value_literal()
                || matches!(kind, TokenKind::NationalString | TokenKind::Unterminated | TokenKind::UserVariable) =>
            {
                out.push(String::from_utf8_lossy(raw).into_owned());
                // `'a''b'`, `N'x'`, `X'..'`, `_utf8mb4'..'` (the introducer is its own token),
                // `@'user'`: the content between the first quote and the last.
                if let (Some(open), Some(close)) =
                    (raw.iter().position(|b| matches!(b, b'\'' | b'"')), raw.iter().rposition(|b| matches!(b, b'\'' | b'"')))
                {
                    let quote = raw[open];
                    let inner = String::from_utf8_lossy(&raw[open + 1..close.max(open + 1)]).into_owned();
                    let doubled = [quote as char; 2].iter().collect::<String>();
                    out.push(inner.replace(&doubled, &(quote as char).to_string()).replace('\\', ""));
                    out.push(inner);
                }
            }
            TokenKind::ExecComment => {
                let open = if raw.starts_with(b"/*M!") { 4 } else { 3 };
                literals_of(&raw[open..raw.len().saturating_sub(2).max(open)], out);
            }
            _ => {}
        }
    }
}
