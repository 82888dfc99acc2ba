//! freshet-null: the ceiling. A MySQL-protocol server that does no work: it accepts any login
//! and answers every query with the same one-row result set, built once at start-up. Whatever
//! a MySQL-protocol cache does per read, it cannot be cheaper than this on the same machine
//! (the same kernel, loopback, wakeups and client library), so `scripts/figures` reports every
//! target also as a ratio to this one, measured in the same run.
//!
//! ```text
//! freshet-null [--listen 127.0.0.1:33321]
//! ```
//!
//! What it answers, by command:
//! - handshake: protocol 10, mysql_native_password, any user and password accepted (OK);
//! - COM_QUERY: `SELECT @@a, @@b, ...` (client libraries read settings at connect) gets one
//!   row of that many columns, each `67108864`; anything starting with SELECT (or SHOW) gets
//!   the constant row; anything else an OK packet;
//! - COM_STMT_PREPARE: a statement with as many parameters as the text has `?`, and for a
//!   SELECT the constant row's columns; COM_STMT_EXECUTE: the constant row in the binary
//!   protocol, or OK;
//! - COM_PING, COM_INIT_DB, COM_STMT_RESET, COM_SET_OPTION, COM_RESET_CONNECTION: OK;
//!   COM_STMT_CLOSE: nothing; COM_QUIT: close; anything else: ERR 1047.
//!
//! The constant row, `('1', '1', 'abc', '1')` in four VAR_STRING columns, converts to the
//! shapes `freshet-load` checks for both of its workloads. Client capabilities are honoured
//! for DEPRECATE_EOF only; no TLS, no compression.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;
const CLIENT_TRANSACTIONS: u32 = 0x2000;
const CLIENT_MULTI_RESULTS: u32 = 0x2_0000;
const CLIENT_PS_MULTI_RESULTS: u32 = 0x4_0000;
const CLIENT_LONG_PASSWORD: u32 = 0x1;
const CLIENT_LONG_FLAG: u32 = 0x4;
const CLIENT_CONNECT_WITH_DB: u32 = 0x8;
const CLIENT_DEPRECATE_EOF: u32 = 0x100_0000;
const SERVER_CAPABILITIES: u32 = CLIENT_LONG_PASSWORD
    | CLIENT_LONG_FLAG
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
    | CLIENT_DEPRECATE_EOF;
/// SERVER_STATUS_AUTOCOMMIT.
const STATUS: u16 = 0x0002;
const VAR_STRING: u8 = 0xfd;
const UTF8MB4_GENERAL_CI: u16 = 45;
const ROW: [&str; 4] = ["1", "1", "abc", "1"];
const COLUMNS: [&str; 4] = ["a", "b", "c", "d"];

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let mut listen = "127.0.0.1:33321".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--listen" => listen = args.next().context("--listen needs an address")?,
            other => anyhow::bail!("unknown argument {other}; usage: freshet-null [--listen ADDR]"),
        }
    }
    // The backlog freshet's listener has (proxy/src/lib.rs), so that a burst of a thousand
    // connections is not dropped here either.
    let addr: std::net::SocketAddr = listen.parse().with_context(|| format!("--listen {listen} is not an address"))?;
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr).with_context(|| format!("binding {listen}"))?;
    let listener = socket.listen(4096)?;
    eprintln!("freshet-null listening on {listen}");
    let replies = Arc::new(Replies::new());
    let mut next_id = 1u32;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let replies = replies.clone();
        let id = next_id;
        next_id = next_id.wrapping_add(1);
        tokio::spawn(async move {
            // A client that goes away or sends nonsense ends only its own connection.
            let _ = Conn::new(stream, replies, id).run().await;
        });
    }
}

/// Every reply this server can give, encoded once (payloads without headers), for both
/// settings of DEPRECATE_EOF.
struct Replies {
    ok: Vec<u8>,
    text_row: [Vec<Vec<u8>>; 2],
    binary_row: [Vec<Vec<u8>>; 2],
    column_defs: Vec<Vec<u8>>,
}

impl Replies {
    fn new() -> Replies {
        let column_defs: Vec<Vec<u8>> = COLUMNS.iter().map(|name| column_def(name)).collect();
        let text: Vec<u8> = ROW.iter().flat_map(|v| lenenc_str(v.as_bytes())).collect();
        // Binary row: header 0x00, NULL bitmap of (columns + 7 + 2) / 8 bytes, the values.
        let mut binary = vec![0u8; 1 + (ROW.len() + 9) / 8];
        binary.extend(ROW.iter().flat_map(|v| lenenc_str(v.as_bytes())));
        let set = |row: &[u8], deprecate_eof: bool| {
            let mut out = vec![vec![ROW.len() as u8]];
            out.extend(column_defs.iter().cloned());
            if !deprecate_eof {
                out.push(eof());
            }
            out.push(row.to_vec());
            out.push(if deprecate_eof { ok_eof() } else { eof() });
            out
        };
        Replies {
            ok: ok(),
            text_row: [set(&text, false), set(&text, true)],
            binary_row: [set(&binary, false), set(&binary, true)],
            column_defs,
        }
    }
}

struct Conn {
    reader: BufReader<tokio::io::ReadHalf<TcpStream>>,
    writer: tokio::io::WriteHalf<TcpStream>,
    out: Vec<u8>,
    replies: Arc<Replies>,
    id: u32,
    deprecate_eof: bool,
    /// Prepared statements: id -> whether the statement returns the row.
    statements: HashMap<u32, bool>,
    next_statement: u32,
}

impl Conn {
    fn new(stream: TcpStream, replies: Arc<Replies>, id: u32) -> Conn {
        let (r, w) = tokio::io::split(stream);
        Conn {
            reader: BufReader::with_capacity(64 * 1024, r),
            writer: w,
            out: Vec::with_capacity(4096),
            replies,
            id,
            deprecate_eof: false,
            statements: HashMap::new(),
            next_statement: 1,
        }
    }

    async fn run(mut self) -> std::io::Result<()> {
        self.handshake().await?;
        loop {
            let (_, payload) = self.read().await?;
            let Some((&command, body)) = payload.split_first() else { return Ok(()) };
            match command {
                0x01 => return Ok(()), // COM_QUIT
                0x03 => self.query(body),
                0x16 => self.prepare(body),
                0x17 => self.execute(body),
                0x19 => {
                    // COM_STMT_CLOSE: no reply.
                    if let Some(id) = body.get(..4) {
                        self.statements.remove(&u32::from_le_bytes([id[0], id[1], id[2], id[3]]));
                    }
                    continue;
                }
                0x02 | 0x0e | 0x1a | 0x1b | 0x1f => {
                    let ok = self.replies.ok.clone();
                    self.queue(1, &ok);
                }
                _ => {
                    let err = err(1047, b"08S01", b"Unknown command");
                    self.queue(1, &err);
                }
            }
            self.flush().await?;
        }
    }

    async fn handshake(&mut self) -> std::io::Result<()> {
        let mut hs = vec![10u8];
        hs.extend_from_slice(b"11.0.0-freshet-null\0");
        hs.extend_from_slice(&self.id.to_le_bytes());
        let scramble = *b"0123456789abcdefghij";
        hs.extend_from_slice(&scramble[..8]);
        hs.push(0);
        hs.extend_from_slice(&(SERVER_CAPABILITIES as u16).to_le_bytes());
        hs.extend_from_slice(&UTF8MB4_GENERAL_CI.to_le_bytes()[..1]);
        hs.extend_from_slice(&STATUS.to_le_bytes());
        hs.extend_from_slice(&((SERVER_CAPABILITIES >> 16) as u16).to_le_bytes());
        hs.push(21); // auth plugin data length
        hs.extend_from_slice(&[0; 10]);
        hs.extend_from_slice(&scramble[8..]);
        hs.push(0);
        hs.extend_from_slice(b"mysql_native_password\0");
        self.queue(0, &hs);
        self.flush().await?;
        let (seq, response) = self.read().await?;
        let client_caps = response.get(..4).map_or(0, |c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        self.deprecate_eof = client_caps & CLIENT_DEPRECATE_EOF != 0;
        let ok = self.replies.ok.clone();
        self.queue(seq.wrapping_add(1), &ok);
        self.flush().await
    }

    fn query(&mut self, sql: &[u8]) {
        let first = first_word(sql);
        if first.eq_ignore_ascii_case(b"select") && sql.windows(2).any(|w| w == b"@@") {
            let n = sql.windows(2).filter(|w| *w == b"@@").count();
            let packets = settings_row(n, self.deprecate_eof);
            self.queue_all(&packets);
        } else if first.eq_ignore_ascii_case(b"select") || first.eq_ignore_ascii_case(b"show") {
            let replies = self.replies.clone();
            self.queue_all(&replies.text_row[usize::from(self.deprecate_eof)]);
        } else {
            let ok = self.replies.ok.clone();
            self.queue(1, &ok);
        }
    }

    fn prepare(&mut self, sql: &[u8]) {
        let params = sql.iter().filter(|&&b| b == b'?').count() as u16;
        let returns_row = first_word(sql).eq_ignore_ascii_case(b"select");
        let id = self.next_statement;
        self.next_statement = self.next_statement.wrapping_add(1);
        self.statements.insert(id, returns_row);
        let columns: u16 = if returns_row { ROW.len() as u16 } else { 0 };
        let mut head = vec![0u8];
        head.extend_from_slice(&id.to_le_bytes());
        head.extend_from_slice(&columns.to_le_bytes());
        head.extend_from_slice(&params.to_le_bytes());
        head.extend_from_slice(&[0, 0, 0]); // filler, warnings
        let mut packets = vec![head];
        if params > 0 {
            packets.extend((0..params).map(|_| column_def("?")));
            if !self.deprecate_eof {
                packets.push(eof());
            }
        }
        if columns > 0 {
            packets.extend(self.replies.column_defs.iter().cloned());
            if !self.deprecate_eof {
                packets.push(eof());
            }
        }
        self.queue_all(&packets);
    }

    fn execute(&mut self, body: &[u8]) {
        let id = body.get(..4).map(|id| u32::from_le_bytes([id[0], id[1], id[2], id[3]]));
        match id.and_then(|id| self.statements.get(&id)) {
            Some(true) => {
                let replies = self.replies.clone();
                self.queue_all(&replies.binary_row[usize::from(self.deprecate_eof)]);
            }
            Some(false) => {
                let ok = self.replies.ok.clone();
                self.queue(1, &ok);
            }
            None => {
                let err = err(1243, b"HY000", b"Unknown prepared statement handler");
                self.queue(1, &err);
            }
        }
    }

    fn queue_all(&mut self, packets: &[Vec<u8>]) {
        for (i, p) in packets.iter().enumerate() {
            self.queue((i + 1) as u8, p);
        }
    }

    fn queue(&mut self, seq: u8, payload: &[u8]) {
        let len = payload.len() as u32;
        self.out.extend_from_slice(&len.to_le_bytes()[..3]);
        self.out.push(seq);
        self.out.extend_from_slice(payload);
    }

    /// One write per reply.
    async fn flush(&mut self) -> std::io::Result<()> {
        self.writer.write_all(&self.out).await?;
        self.out.clear();
        Ok(())
    }

    /// One packet (payloads of 16 MiB and more are not expected from the clients measured).
    async fn read(&mut self) -> std::io::Result<(u8, Vec<u8>)> {
        let mut header = [0u8; 4];
        self.reader.read_exact(&mut header).await?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
        let mut payload = vec![0u8; len];
        self.reader.read_exact(&mut payload).await?;
        Ok((header[3], payload))
    }
}

fn first_word(sql: &[u8]) -> &[u8] {
    let start = sql.iter().position(|b| !b.is_ascii_whitespace() && *b != b'(').unwrap_or(sql.len());
    let rest = &sql[start..];
    let end = rest.iter().position(|b| !b.is_ascii_alphabetic()).unwrap_or(rest.len());
    &rest[..end]
}

fn settings_row(n: usize, deprecate_eof: bool) -> Vec<Vec<u8>> {
    let mut out = vec![vec![n as u8]];
    out.extend((0..n).map(|i| column_def(&format!("@@{i}"))));
    if !deprecate_eof {
        out.push(eof());
    }
    out.push((0..n).flat_map(|_| lenenc_str(b"67108864")).collect());
    out.push(if deprecate_eof { ok_eof() } else { eof() });
    out
}

fn lenenc_str(s: &[u8]) -> Vec<u8> {
    // Every string here is shorter than 251 bytes: a one-byte length.
    let mut out = Vec::with_capacity(s.len() + 1);
    out.push(s.len() as u8);
    out.extend_from_slice(s);
    out
}

fn column_def(name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    for part in [&b"def"[..], b"", b"", b"", name.as_bytes(), name.as_bytes()] {
        out.extend(lenenc_str(part));
    }
    out.push(0x0c);
    out.extend_from_slice(&UTF8MB4_GENERAL_CI.to_le_bytes());
    out.extend_from_slice(&(255u32 * 4).to_le_bytes());
    out.push(VAR_STRING);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.push(39);
    out.extend_from_slice(&[0, 0]);
    out
}

fn ok() -> Vec<u8> {
    let mut out = vec![0, 0, 0];
    out.extend_from_slice(&STATUS.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

fn ok_eof() -> Vec<u8> {
    let mut out = ok();
    out[0] = 0xfe;
    out
}

fn eof() -> Vec<u8> {
    let mut out = vec![0xfe, 0, 0];
    out.extend_from_slice(&STATUS.to_le_bytes());
    out
}

fn err(code: u16, state: &[u8; 5], message: &[u8]) -> Vec<u8> {
    let mut out = vec![0xff];
    out.extend_from_slice(&code.to_le_bytes());
    out.push(b'#');
    out.extend_from_slice(state);
    out.extend_from_slice(message);
    out
}
