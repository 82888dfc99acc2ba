//! Fuzzing every parser of client or server bytes in the proxy, with proptest at scale (why
//! proptest and not cargo-fuzz: docs/decisions.md): the packet framing, handshakes, server
//! responses, COM_STMT_EXECUTE parameters, the tokenizer and fingerprint, and admin SQL.
//! Properties: nothing panics, and what each parser promises holds (a frame stream reads back
//! as written, a shown text holds no literal, classifying stays within its bounds).
//!
//! Cases per property: `FRESHET_FUZZ_CASES` (default 5,000, which keeps this file under a
//! minute in CI; set it higher for a longer run).

use freshet_proxy::cache::params::execute_params;
use freshet_proxy::matching::lexer::{Lexer, TokenKind};
use freshet_proxy::matching::{Bounds, SqlMode, classify_bounded, shown};
use freshet_proxy::protocol::handshake::{ClientHandshake, ServerHandshake};
use freshet_proxy::protocol::response::{self, ErrPacket};
use freshet_proxy::protocol::{Capabilities, PacketIo};
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("FRESHET_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(5_000)
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() }
}

/// SQL-ish text: keywords, literals, operators, comments and raw bytes, so that the fuzzer
/// reaches the tokenizer's interesting states more often than uniform bytes would.
fn sqlish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        proptest::sample::select(vec![
            "SELECT ",
            "FROM ",
            "WHERE ",
            "IN ",
            "(",
            ")",
            ",",
            "'",
            "\"",
            "`",
            "\\",
            "/*",
            "*/",
            "/*!40101 ",
            "/*M!",
            "/*+",
            "-- ",
            "#",
            "\n",
            "?",
            "@",
            "@@",
            "0x",
            "X'",
            "b'",
            "N'",
            "_utf8mb4",
            "1",
            "-",
            "+",
            ".5",
            "1e",
            "NULL",
            "IS",
            "NOT",
            ";",
            "GRANT ",
            "IDENTIFIED BY ",
            "SET PASSWORD = ",
            "ORDER BY 1",
            "CHAR(",
            " ",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        proptest::collection::vec(any::<u8>(), 0..6),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

fn literal_kinds(text: &[u8]) -> usize {
    Lexer::new(text).filter(|t| t.kind.is_value_literal() || matches!(t.kind, TokenKind::NationalString | TokenKind::Unterminated)).count()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn tokens_cover_the_input_in_order(sql in sqlish()) {
        let mut at = 0;
        for t in Lexer::new(&sql) {
            prop_assert!(t.start >= at && t.end >= t.start && t.end <= sql.len(), "{t:?} after {at}");
            at = t.end;
        }
    }

    #[test]
    fn classifying_is_bounded_and_shows_no_literal(sql in sqlish(), max_statement in 1usize..400, max_in_list in 1usize..5) {
        let bounds = Bounds { max_statement, max_in_list };
        let query = classify_bounded(&sql, SqlMode::default(), bounds);
        if sql.len() > max_statement {
            prop_assert!(query.relay.is_some() && query.literals.is_empty());
        }
        prop_assert!(query.in_lists.iter().all(|&n| n as usize <= max_in_list));
        let text = shown(&query.fingerprint.normalized);
        prop_assert_eq!(literal_kinds(text.as_bytes()), 0, "{}", text);
    }

    #[test]
    fn server_and_client_handshakes_and_responses_parse_or_refuse(payload in proptest::collection::vec(any::<u8>(), 0..300), caps in any::<u64>()) {
        let caps = Capabilities(caps);
        let _ = ServerHandshake::parse(&payload);
        let _ = ClientHandshake::parse(&payload);
        let _ = ClientHandshake::is_ssl_request(&payload);
        let _ = ErrPacket::parse(&payload);
        let _ = response::ok_status(&payload, caps);
        let _ = response::terminator_status(&payload, caps);
        let _ = response::is_terminator(&payload, caps);
    }

    #[test]
    fn execute_parameters_parse_or_refuse(body in proptest::collection::vec(any::<u8>(), 0..200), count in 0usize..20, known in proptest::collection::vec((any::<u8>(), any::<u8>()), 0..20)) {
        let mut types = known;
        if let Ok(values) = execute_params(&body, count, &mut types) {
            prop_assert_eq!(values.len(), count);
        }
    }

    #[test]
    fn admin_statements_parse_or_refuse(sql in sqlish()) {
        let _ = freshet_proxy::admin_sql::parse(&sql);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: (cases() / 10).max(10), ..config() })]

    /// Any bytes from a peer: packets come out, or an error; never a panic or a hang.
    #[test]
    fn any_byte_stream_reads_as_packets_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..2000), limit in 1usize..4096) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (mut a, b) = tokio::io::duplex(1 << 16);
            tokio::io::AsyncWriteExt::write_all(&mut a, &bytes).await.unwrap();
            drop(a);
            let mut io = PacketIo::new(b);
            let mut read = 0usize;
            while let Ok(p) = io.read_packet(limit).await {
                prop_assert!(p.payload.len() <= limit);
                read += p.payload.len() + 4;
                prop_assert!(read <= bytes.len());
            }
            Ok(())
        })?;
    }

    /// What is written as packets reads back as the same packets.
    #[test]
    fn packets_read_back_as_written(payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3000), 1..8)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (a, b) = tokio::io::duplex(1 << 20);
            let mut writer = PacketIo::new(a);
            for (i, p) in payloads.iter().enumerate() {
                writer.queue_packet(i as u8, p);
            }
            writer.flush().await.unwrap();
            let mut reader = PacketIo::new(b);
            for (i, p) in payloads.iter().enumerate() {
                let got = reader.read_packet(1 << 20).await.unwrap();
                prop_assert_eq!(got.seq, i as u8);
                prop_assert_eq!(&got.payload[..], &p[..]);
            }
            Ok(())
        })?;
    }
}
