//! A real driver (mysql_async) accepts the result sets freshet builds itself
//! ([`freshet_proxy::protocol::synth`]): a tiny in-test server speaks just enough protocol to
//! let the driver in, then answers every COM_QUERY with a [`SynthResult`]. No MariaDB is
//! involved: the server under test is freshet's own encoding. mysql_async always asks for
//! DEPRECATE_EOF when it is offered, so the classic EOF layout is covered byte for byte by the
//! unit tests in `protocol::synth`.

use freshet_proxy::protocol::handshake::ClientHandshake;
use freshet_proxy::protocol::response::ok_packet;
use freshet_proxy::protocol::synth::{SynthColumn, SynthResult, SynthType};
use freshet_proxy::protocol::{Capabilities, Command, PacketIo, StatusFlags};
use mysql_async::consts::{ColumnFlags, ColumnType};
use mysql_async::prelude::Queryable;
use tokio::net::{TcpListener, TcpStream};

/// What the mini server offers: enough for a 4.1 client with native password.
const SERVER_CAPS: u64 = Capabilities::MYSQL
    | Capabilities::LONG_FLAG
    | Capabilities::CONNECT_WITH_DB
    | Capabilities::PROTOCOL_41
    | Capabilities::TRANSACTIONS
    | Capabilities::SECURE_CONNECTION
    | Capabilities::MULTI_RESULTS
    | Capabilities::PLUGIN_AUTH
    | Capabilities::PLUGIN_AUTH_LENENC_DATA
    | Capabilities::CONNECT_ATTRS
    | Capabilities::DEPRECATE_EOF;

const STATUS: StatusFlags = StatusFlags(StatusFlags::AUTOCOMMIT);

fn result() -> SynthResult {
    SynthResult {
        columns: vec![
            SynthColumn::new("name", SynthType::Text),
            SynthColumn::new("n", SynthType::Int),
            SynthColumn::new("u", SynthType::UInt),
            SynthColumn::new("ratio", SynthType::Double),
        ],
        rows: vec![
            vec![Some("by_id".into()), Some("-7".into()), None, Some("0.25".into())],
            vec![Some("é 😀".into()), Some(i64::MAX.to_string()), Some(u64::MAX.to_string()), Some("1e300".into())],
            vec![Some(String::new()), Some("0".into()), Some("0".into()), Some("-1.5".into())],
        ],
    }
}

/// HandshakeV10 offering mysql_native_password, as a MariaDB-like server.
fn handshake() -> Vec<u8> {
    let mut p = vec![10];
    p.extend_from_slice(b"5.5.5-10.11.0-MariaDB-synth\0");
    p.extend_from_slice(&7u32.to_le_bytes()); // connection id
    p.extend_from_slice(b"abcdefgh\0"); // scramble part 1, filler
    p.extend_from_slice(&(SERVER_CAPS as u16).to_le_bytes());
    p.push(45); // utf8mb4_general_ci
    p.extend_from_slice(&STATUS.0.to_le_bytes());
    p.extend_from_slice(&((SERVER_CAPS >> 16) as u16).to_le_bytes());
    p.push(21); // scramble length
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(b"ijklmnopqrst\0");
    p.extend_from_slice(b"mysql_native_password\0");
    p
}

/// One client: handshake, accept any credentials, answer queries until COM_QUIT.
async fn serve(stream: TcpStream) {
    let mut io = PacketIo::new(stream);
    io.queue_packet(0, &handshake());
    io.flush().await.unwrap();
    let response = io.read_packet(1 << 16).await.unwrap();
    let client = ClientHandshake::parse(&response.payload).expect("a 4.1 handshake response");
    let deprecate_eof = client.capabilities.has(Capabilities::DEPRECATE_EOF);
    assert!(deprecate_eof, "mysql_async asks for DEPRECATE_EOF when offered; this test covers that layout");
    io.queue_packet(response.last_seq.wrapping_add(1), &ok_packet(STATUS));
    io.flush().await.unwrap();
    while let Ok(command) = io.read_packet(1 << 20).await {
        let seq = command.last_seq.wrapping_add(1);
        match command.payload.first().copied().and_then(Command::from_byte) {
            Some(Command::Quit) | None => return,
            Some(Command::Query) => {
                result().queue(&mut io, seq, deprecate_eof, STATUS);
            }
            Some(_) => {
                io.queue_packet(seq, &ok_packet(STATUS));
            }
        }
        io.flush().await.unwrap();
    }
}

#[tokio::test]
async fn mysql_async_reads_synthesized_results() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        serve(stream).await;
    });
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some("anyone"))
        .pass(Some("anything"))
        .prefer_socket(false)
        // Known up front, so the driver does not ask the server with a query of its own.
        .max_allowed_packet(Some(1 << 24))
        .wait_timeout(Some(28_800));
    let mut conn = mysql_async::Conn::new(opts).await.expect("the mini server lets the driver in");

    let rows: Vec<(String, i64, Option<u64>, f64)> = conn.query("SHOW CACHES").await.unwrap();
    assert_eq!(
        rows,
        vec![
            ("by_id".to_string(), -7, None, 0.25),
            ("é 😀".to_string(), i64::MAX, Some(u64::MAX), 1e300),
            (String::new(), 0, Some(0), -1.5),
        ]
    );

    let mut reply = conn.query_iter("SHOW CACHES").await.unwrap();
    let columns = reply.columns().expect("a result set");
    let seen: Vec<_> = columns.iter().map(|c| (c.name_str().into_owned(), c.org_name_str().into_owned(), c.column_type())).collect();
    assert_eq!(
        seen,
        [
            ("name".to_string(), "name".to_string(), ColumnType::MYSQL_TYPE_VAR_STRING),
            ("n".to_string(), "n".to_string(), ColumnType::MYSQL_TYPE_LONGLONG),
            ("u".to_string(), "u".to_string(), ColumnType::MYSQL_TYPE_LONGLONG),
            ("ratio".to_string(), "ratio".to_string(), ColumnType::MYSQL_TYPE_DOUBLE),
        ]
    );
    assert_eq!(columns[0].character_set(), 45);
    assert!(columns[2].flags().contains(ColumnFlags::UNSIGNED_FLAG) && !columns[1].flags().contains(ColumnFlags::UNSIGNED_FLAG));
    assert!(columns.iter().all(|c| !c.flags().contains(ColumnFlags::NOT_NULL_FLAG)));
    let rows: Vec<mysql_async::Row> = reply.collect().await.unwrap();
    assert_eq!(rows.len(), 3);
    drop(reply);

    // The connection is still in step: the terminator ended the reply where the driver expected.
    conn.ping().await.unwrap();
    let again: Option<(String, i64, Option<u64>, f64)> = conn.query_first("SHOW CACHES").await.unwrap();
    assert_eq!(again, Some(("by_id".to_string(), -7, None, 0.25)));
    conn.disconnect().await.unwrap();
    server.await.unwrap();
}
