//! The tokenizer: MySQL/MariaDB lexical rules over the raw COM_QUERY bytes.
//!
//! Owns token boundaries and kinds only; what a token means (keyword, literal value, session
//! dependence) is decided by [`super::fingerprint`]. Invariants:
//! - never panics and never allocates: every token is a byte range into the input;
//! - every byte of the input is either inside exactly one token or skipped as whitespace or
//!   an ordinary comment;
//! - malformed input (an unterminated string, quoted identifier or comment) yields one
//!   [`TokenKind::Unterminated`] token and then the end, never an error the caller must handle.
//!
//! Assumptions, named by the [`SqlMode`](super::fingerprint::SqlMode) a query is classified
//! under: backslash escapes are active (no `NO_BACKSLASH_ESCAPES`), and `"..."` is a string (no
//! `ANSI_QUOTES`). With either mode the same bytes mean something else, so a session whose
//! sql_mode has them relays instead (the routing layer's gate asks the server for the mode).
//!
//! Comments: `-- ` (dash dash then whitespace/control or end), `#`, and `/* */` are skipped.
//! `/*!...*/`, `/*M!...*/` (executable in MySQL/MariaDB) and `/*+...*/` (optimizer hints) are
//! returned as one [`TokenKind::ExecComment`] token: the fingerprint makes such a query
//! non-cacheable, because its meaning depends on the server version that reads it.

/// What kind of token a byte range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A bare word: keyword, identifier or function name (`select`, `stories`, `_utf8mb4`).
    Word,
    /// `` `...` ``; the range includes the backticks.
    QuotedIdent,
    /// Digits with no `.` or exponent.
    Integer,
    /// Digits with a `.` and no exponent (`1.5`, `.5`, `1.`).
    Decimal,
    /// A number with an exponent (`1e3`, `1.5E-2`).
    Float,
    /// `0x1F`; the range includes the `0x`.
    HexNumber,
    /// `0b101`; the range includes the `0b`.
    BitNumber,
    /// `X'1F'`; the range includes `X'` and `'`.
    HexString,
    /// `B'101'`; the range includes `B'` and `'`.
    BitString,
    /// `'...'`; the range includes the quotes. Escapes are left in place.
    SingleQuoted,
    /// `"..."`; the range includes the quotes (a string unless ANSI_QUOTES).
    DoubleQuoted,
    /// `N'...'`; the range includes `N'` and `'`.
    NationalString,
    /// `?`
    Placeholder,
    /// `@name`, `@'name'`, `` @`name` ``
    UserVariable,
    /// `@@name`, `@@session.name`
    SystemVariable,
    /// Operators and punctuation, one to three bytes (`(`, `,`, `<=>`, `->>`).
    Symbol,
    /// `/*! */`, `/*M! */` or `/*+ */`.
    ExecComment,
    /// A string, quoted identifier or comment without its end; always the last token.
    Unterminated,
}

impl TokenKind {
    /// A literal that carries a value (a number, a string of any quoting, hex or bit): what
    /// fingerprints take out as parameters and what shown texts hide.
    pub fn is_value_literal(self) -> bool {
        matches!(
            self,
            TokenKind::Integer
                | TokenKind::Decimal
                | TokenKind::Float
                | TokenKind::HexNumber
                | TokenKind::BitNumber
                | TokenKind::HexString
                | TokenKind::BitString
                | TokenKind::SingleQuoted
                | TokenKind::DoubleQuoted
        )
    }
}

/// One token: its kind and the byte range `start..end` in the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn text<'q>(&self, input: &'q [u8]) -> &'q [u8] {
        input.get(self.start..self.end).unwrap_or(&[])
    }

    pub fn is_symbol(&self, input: &[u8], symbol: &[u8]) -> bool {
        self.kind == TokenKind::Symbol && self.text(input) == symbol
    }
}

/// An iterator of tokens over a query's bytes.
pub struct Lexer<'q> {
    input: &'q [u8],
    pos: usize,
    done: bool,
}

/// Bytes that may continue an unquoted identifier (any byte >= 0x80 too: MySQL allows
/// non-ASCII letters, and a multi-byte UTF-8 sequence never contains ASCII bytes).
fn is_ident_byte(b: u8) -> bool {
    IDENT[usize::from(b)]
}

/// [`is_ident_byte`] per byte value: one load per byte of a word instead of four comparisons.
const IDENT: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        table[i] = b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80;
        i += 1;
    }
    table
};

/// Three-byte, then two-byte operators, longest first.
const SYMBOLS_3: [&[u8]; 2] = [b"<=>", b"->>"];
const SYMBOLS_2: [&[u8]; 10] = [b"<=", b">=", b"<>", b"!=", b":=", b"||", b"&&", b"<<", b">>", b"->"];

impl<'q> Lexer<'q> {
    pub fn new(input: &'q [u8]) -> Lexer<'q> {
        Lexer { input, pos: 0, done: false }
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.input.get(self.pos + ahead).copied()
    }

    /// Skips whitespace and ordinary comments. Returns an ExecComment or Unterminated token
    /// if one starts here.
    fn skip_trivia(&mut self) -> Option<Token> {
        loop {
            let b = self.peek(0)?;
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => self.pos += 1,
                b'#' => self.skip_line(),
                // `--` starts a comment only when followed by whitespace, a control byte or
                // the end; `1--2` is 1 minus minus 2.
                b'-' if self.peek(1) == Some(b'-') && self.peek(2).is_none_or(|c| c <= b' ') => self.skip_line(),
                b'/' if self.peek(1) == Some(b'*') => {
                    let start = self.pos;
                    let exec = matches!(self.peek(2), Some(b'!' | b'+')) || (self.peek(2) == Some(b'M') && self.peek(3) == Some(b'!'));
                    match find(&self.input[self.pos + 2..], b"*/") {
                        Some(i) => {
                            self.pos += 2 + i + 2;
                            if exec {
                                return Some(Token { kind: TokenKind::ExecComment, start, end: self.pos });
                            }
                        }
                        None => {
                            self.pos = self.input.len();
                            return Some(Token { kind: TokenKind::Unterminated, start, end: self.pos });
                        }
                    }
                }
                _ => return None,
            }
        }
    }

    /// A `#` or `-- ` comment: to the end of the line, or to a NUL byte, where the server's
    /// lexer ends it too (the NUL is then a character of the statement, which the server
    /// refuses unless it ends the text).
    fn skip_line(&mut self) {
        match self.input[self.pos..].iter().position(|&c| c == b'\n' || c == 0) {
            Some(i) if self.input[self.pos + i] == 0 => self.pos += i,
            Some(i) => self.pos += i + 1,
            None => self.pos = self.input.len(),
        }
    }

    /// Scans a quoted run whose opening quote is at `self.pos + open`; returns its kind
    /// (`kind` if closed, Unterminated if not) and moves past it. `escapes` says whether a
    /// backslash escapes the next byte (strings yes, identifiers no); a doubled quote is always
    /// an escaped quote.
    fn quoted(&mut self, open: usize, kind: TokenKind, escapes: bool) -> TokenKind {
        let quote = self.input[self.pos + open];
        let mut i = self.pos + open + 1;
        while let Some(&c) = self.input.get(i) {
            if escapes && c == b'\\' {
                i += 2;
            } else if c == quote {
                if self.input.get(i + 1) == Some(&quote) {
                    i += 2;
                } else {
                    self.pos = i + 1;
                    return kind;
                }
            } else {
                i += 1;
            }
        }
        self.pos = self.input.len();
        TokenKind::Unterminated
    }

    fn ident_run(&self, from: usize) -> usize {
        let mut i = from;
        while self.input.get(i).is_some_and(|&c| is_ident_byte(c)) {
            i += 1;
        }
        i
    }

    fn digit_run(&self, from: usize) -> usize {
        let mut i = from;
        while self.input.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    }

    /// A number starting at `self.pos` (a digit, or `.` followed by a digit). A run that goes
    /// on with identifier bytes is an identifier (`1abc`, `0xZZ` are names in MySQL).
    fn number(&mut self) -> TokenKind {
        let start = self.pos;
        let input = self.input;
        if input[start] == b'0' && matches!(self.peek(1), Some(b'x' | b'b')) {
            let hex = self.peek(1) == Some(b'x');
            let mut i = start + 2;
            while input.get(i).is_some_and(|c| if hex { c.is_ascii_hexdigit() } else { matches!(c, b'0' | b'1') }) {
                i += 1;
            }
            if i > start + 2 && !input.get(i).is_some_and(|&c| is_ident_byte(c)) {
                self.pos = i;
                return if hex { TokenKind::HexNumber } else { TokenKind::BitNumber };
            }
        }
        let mut i = self.digit_run(start);
        let mut kind = TokenKind::Integer;
        if input.get(i) == Some(&b'.') {
            kind = TokenKind::Decimal;
            i = self.digit_run(i + 1);
        }
        if matches!(input.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(input.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if input.get(j).is_some_and(u8::is_ascii_digit) {
                i = self.digit_run(j);
                kind = TokenKind::Float;
            }
        }
        if kind == TokenKind::Integer && input.get(i).is_some_and(|&c| is_ident_byte(c)) {
            self.pos = self.ident_run(i);
            return TokenKind::Word;
        }
        self.pos = i;
        kind
    }

    fn variable(&mut self) -> TokenKind {
        // self.pos is at '@'.
        if self.peek(1) == Some(b'@') {
            let mut i = self.ident_run(self.pos + 2);
            // @@session.name, @@global.name
            while self.input.get(i) == Some(&b'.') && self.input.get(i + 1).is_some_and(|&c| is_ident_byte(c)) {
                i = self.ident_run(i + 1);
            }
            self.pos = i;
            return TokenKind::SystemVariable;
        }
        match self.peek(1) {
            Some(b'\'' | b'"') => self.quoted(1, TokenKind::UserVariable, true),
            Some(b'`') => self.quoted(1, TokenKind::UserVariable, false),
            _ => {
                self.pos = self.ident_run(self.pos + 1);
                TokenKind::UserVariable
            }
        }
    }

    fn symbol(&mut self) -> TokenKind {
        let rest = &self.input[self.pos..];
        // Only these bytes start a two- or three-byte operator.
        let len = if !matches!(rest.first(), Some(b'<' | b'>' | b'!' | b':' | b'|' | b'&' | b'-')) {
            1
        } else if SYMBOLS_3.iter().any(|s| rest.starts_with(s)) {
            3
        } else if SYMBOLS_2.iter().any(|s| rest.starts_with(s)) {
            2
        } else {
            // A UTF-8 continuation can't start a token (is_ident_byte takes >= 0x80), so a
            // symbol is always one ASCII byte here.
            1
        };
        self.pos += len;
        TokenKind::Symbol
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        if self.done {
            return None;
        }
        if let Some(token) = self.skip_trivia() {
            self.done = token.kind == TokenKind::Unterminated;
            return Some(token);
        }
        let start = self.pos;
        let b = self.peek(0)?;
        let next = self.peek(1);
        let kind = match b {
            b'\'' => self.quoted(0, TokenKind::SingleQuoted, true),
            b'"' => self.quoted(0, TokenKind::DoubleQuoted, true),
            b'`' => self.quoted(0, TokenKind::QuotedIdent, false),
            b'x' | b'X' if next == Some(b'\'') => self.quoted(1, TokenKind::HexString, false),
            b'b' | b'B' if next == Some(b'\'') => self.quoted(1, TokenKind::BitString, false),
            b'n' | b'N' if next == Some(b'\'') => self.quoted(1, TokenKind::NationalString, true),
            b'0'..=b'9' => self.number(),
            b'.' if next.is_some_and(|c| c.is_ascii_digit()) => self.number(),
            b'?' => {
                self.pos += 1;
                TokenKind::Placeholder
            }
            b'@' => self.variable(),
            c if is_ident_byte(c) => {
                self.pos = self.ident_run(start);
                TokenKind::Word
            }
            _ => self.symbol(),
        };
        self.done = kind == TokenKind::Unterminated;
        Some(Token { kind, start, end: self.pos })
    }
}

/// Where `needle` first occurs in `haystack`: a comment's end, searched for with SIMD, as a
/// comment may be most of a 16 MiB text.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use TokenKind::*;

    fn kinds(sql: &str) -> Vec<(TokenKind, String)> {
        Lexer::new(sql.as_bytes()).map(|t| (t.kind, String::from_utf8_lossy(t.text(sql.as_bytes())).into_owned())).collect()
    }

    fn k(kind: TokenKind, text: &str) -> (TokenKind, String) {
        (kind, text.to_string())
    }

    #[test]
    fn words_symbols_and_placeholders() {
        assert_eq!(
            kinds("SELECT a.b,c FROM t WHERE x<=>? AND y->>'$.z'"),
            vec![
                k(Word, "SELECT"),
                k(Word, "a"),
                k(Symbol, "."),
                k(Word, "b"),
                k(Symbol, ","),
                k(Word, "c"),
                k(Word, "FROM"),
                k(Word, "t"),
                k(Word, "WHERE"),
                k(Word, "x"),
                k(Symbol, "<=>"),
                k(Placeholder, "?"),
                k(Word, "AND"),
                k(Word, "y"),
                k(Symbol, "->>"),
                k(SingleQuoted, "'$.z'"),
            ]
        );
    }

    #[test]
    fn comments_are_skipped() {
        assert_eq!(kinds("a -- c\nb # d\nc /* e */ d"), vec![k(Word, "a"), k(Word, "b"), k(Word, "c"), k(Word, "d")]);
        assert_eq!(kinds("a --"), vec![k(Word, "a")]);
        // `--` without whitespace after is two minus signs.
        assert_eq!(kinds("1--2"), vec![k(Integer, "1"), k(Symbol, "-"), k(Symbol, "-"), k(Integer, "2")]);
    }

    #[test]
    fn executable_comments_and_hints_are_tokens() {
        assert_eq!(kinds("SELECT /*!40001 SQL_NO_CACHE */ 1")[1], k(ExecComment, "/*!40001 SQL_NO_CACHE */"));
        assert_eq!(kinds("SELECT /*M!100000 x */ 1")[1].0, ExecComment);
        assert_eq!(kinds("SELECT /*+ BKA(t) */ 1")[1].0, ExecComment);
    }

    #[test]
    fn strings_with_escapes() {
        assert_eq!(
            kinds(r"'it\'s' 'it''s' 'a\\' x"),
            vec![k(SingleQuoted, r"'it\'s'"), k(SingleQuoted, "'it''s'"), k(SingleQuoted, r"'a\\'"), k(Word, "x")]
        );
        assert_eq!(kinds(r#""say \"hi\"" "a""b""#), vec![k(DoubleQuoted, r#""say \"hi\"""#), k(DoubleQuoted, r#""a""b""#)]);
        assert_eq!(kinds("N'x' _utf8mb4'y'"), vec![k(NationalString, "N'x'"), k(Word, "_utf8mb4"), k(SingleQuoted, "'y'")]);
    }

    #[test]
    fn backtick_identifiers() {
        assert_eq!(kinds("`my table`.`a``b`"), vec![k(QuotedIdent, "`my table`"), k(Symbol, "."), k(QuotedIdent, "`a``b`")]);
        // A backslash does not escape inside backticks.
        assert_eq!(kinds(r"`a\` x"), vec![k(QuotedIdent, r"`a\`"), k(Word, "x")]);
    }

    #[test]
    fn numbers() {
        assert_eq!(
            kinds("1 1.5 .5 1. 1e3 1.5E-2 0x1F X'1f' 0b101 b'101'"),
            vec![
                k(Integer, "1"),
                k(Decimal, "1.5"),
                k(Decimal, ".5"),
                k(Decimal, "1."),
                k(Float, "1e3"),
                k(Float, "1.5E-2"),
                k(HexNumber, "0x1F"),
                k(HexString, "X'1f'"),
                k(BitNumber, "0b101"),
                k(BitString, "b'101'"),
            ]
        );
        // Identifiers may start with digits.
        assert_eq!(kinds("1abc 0xZZ 0x"), vec![k(Word, "1abc"), k(Word, "0xZZ"), k(Word, "0x")]);
        // `1e` is not an exponent: the number 1 then... MySQL reads `1e` as an identifier.
        assert_eq!(kinds("1e"), vec![k(Word, "1e")]);
    }

    #[test]
    fn variables() {
        assert_eq!(
            kinds("@a @'b c' @@session.sql_mode @@x"),
            vec![k(UserVariable, "@a"), k(UserVariable, "@'b c'"), k(SystemVariable, "@@session.sql_mode"), k(SystemVariable, "@@x"),]
        );
    }

    #[test]
    fn unterminated_input_ends_with_one_unterminated_token() {
        for sql in ["SELECT 'abc", "SELECT \"abc", "SELECT `abc", "SELECT /* abc", "SELECT 'a\\'", "SELECT X'1", "SELECT @'x"] {
            let tokens = kinds(sql);
            assert_eq!(tokens.last().map(|t| t.0), Some(Unterminated), "{sql}");
            assert_eq!(tokens.iter().filter(|t| t.0 == Unterminated).count(), 1, "{sql}");
        }
    }

    #[test]
    fn multibyte_identifiers() {
        assert_eq!(kinds("SELECT café FROM t"), vec![k(Word, "SELECT"), k(Word, "café"), k(Word, "FROM"), k(Word, "t")]);
    }
}
