//! Hostile or broken clients end their own session cleanly — with an ERR packet where the
//! protocol allows one — and nothing else: other sessions go on, the process stays up, and
//! the session's upstream connection is closed, not leaked.

mod common;

use common::*;
use freshet_proxy::metrics::SessionEnd;
use freshet_proxy::protocol::io::ReadError;
use freshet_proxy::protocol::response::ErrPacket;
use freshet_testkit::http;
use mysql_async::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Reads the ERR packet that should end the session, then expects the connection closed.
async fn expect_err_then_close(c: &mut RawClient) -> ErrPacket {
    let payload = c.packet().await;
    let err = ErrPacket::parse(&payload).unwrap_or_else(|_| panic!("expected ERR, got {payload:?}"));
    assert!(matches!(c.try_packet().await, Err(ReadError::Closed | ReadError::Io(_))), "connection should be closed");
    err
}

/// After a bad session: its upstream connection is gone and a new session works.
async fn proxy_still_serves(proxy: &Proxy, upstream_id: u32) {
    assert!(connection_gone(upstream_id).await, "upstream connection {upstream_id} leaked");
    let mut conn = through(proxy).await;
    let one: Option<i32> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    conn.disconnect().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_order_sequence_id() {
    let proxy = start_proxy("").await;
    let mut c = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    c.io.queue_packet(5, b"\x03SELECT 1");
    c.io.flush().await.unwrap();
    let err = expect_err_then_close(&mut c).await;
    assert_eq!(err.code, 1156);
    proxy_still_serves(&proxy, c.connection_id).await;
    assert!(eventually(|| proxy.metrics.sessions_ended(SessionEnd::ClientProtocol) == 1).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn empty_and_unknown_commands() {
    let proxy = start_proxy("").await;
    for payload in [&b""[..], &[0x42u8][..], &[0xee, 1, 2, 3][..]] {
        let mut c = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
        c.send(payload).await;
        // The server's answer, and the session goes on as the server keeps it.
        let err = ErrPacket::parse(&c.packet().await).unwrap();
        assert_eq!(err.code, 1047, "{payload:?}");
        assert_eq!(&err.sql_state, b"08S01");
        assert_ne!(c.query("SELECT 1").await[0][0], 0xff, "{payload:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn packet_over_the_limit() {
    let proxy = start_proxy("[limits]\nmax_packet = \"1MiB\"\n").await;
    let mut c = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    // A command that fits passes.
    let ok = c.query(&format!("SELECT '{}'", "x".repeat(512 * 1024))).await;
    assert_ne!(ok[0][0], 0xff);
    // The header of a 2 MiB packet is enough for freshet to refuse it, before buffering it.
    let len = 2u32 << 20;
    let mut raw = c.io;
    let header = [len as u8, (len >> 8) as u8, (len >> 16) as u8, 0];
    let stream = raw_stream(&mut raw);
    // One write: freshet may refuse, and reset, as soon as it has the header.
    stream.write_all(&[&header[..], b"\x03SELECT"].concat()).await.unwrap();
    // The server's reaction: its ERR packet, then a reset.
    let mut reply = vec![0; 1024];
    let mut got = 0;
    let end = loop {
        match stream.read(&mut reply[got..]).await {
            Ok(0) => break "closed".to_string(),
            Ok(n) => got += n,
            Err(e) => break format!("{:?}", e.kind()),
        }
    };
    assert_eq!(end, "ConnectionReset");
    assert_eq!(reply[3], 1, "sequence id");
    let err = ErrPacket::parse(&reply[4..got]).unwrap();
    assert_eq!(err.code, 1153);
    assert_eq!(err.message, "Got a packet bigger than 'max_allowed_packet' bytes");
    proxy_still_serves(&proxy, c.connection_id).await;
    assert!(eventually(|| proxy.metrics.sessions_ended(SessionEnd::PacketTooLarge) == 1).await);
}

/// The socket under a client, to write bytes that are not well-formed packets. Nothing is
/// buffered in `io` between commands, so writing around it is safe.
fn raw_stream(io: &mut freshet_proxy::protocol::PacketIo<tokio::net::TcpStream>) -> &mut tokio::net::TcpStream {
    io.get_mut()
}

#[tokio::test(flavor = "multi_thread")]
async fn client_disconnects_mid_result() {
    let proxy = start_proxy("").await;
    let mut c = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    // A result far larger than any socket buffer, from MariaDB's sequence engine.
    c.send(b"\x03SELECT seq, REPEAT('x', 200) FROM seq_1_to_5000000").await;
    for _ in 0..100 {
        c.packet().await;
    }
    let id = c.connection_id;
    drop(c);
    proxy_still_serves(&proxy, id).await;
    assert!(eventually(|| proxy.metrics.sessions_ended(SessionEnd::ClientGone) == 1).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_or_missing_handshake_response() {
    // TLS is offered by default; this freshet is told not to, for the TLS request below.
    let proxy = start_proxy("tls = false\n").await;
    // Garbage instead of a handshake response.
    let mut io = freshet_proxy::protocol::PacketIo::new(tokio::net::TcpStream::connect(proxy.mysql).await.unwrap());
    let greeting = io.read_packet(1 << 20).await.unwrap();
    let hs = freshet_proxy::protocol::handshake::ServerHandshake::parse(&greeting.payload).unwrap();
    io.queue_packet(1, &[0x8f, 0xa2, 0, 0, 1]);
    io.flush().await.unwrap();
    let err = ErrPacket::parse(&io.read_packet(1 << 20).await.unwrap().payload).unwrap();
    assert_eq!(err.code, 1043);
    proxy_still_serves(&proxy, hs.connection_id).await;

    // A TLS request, although freshet does not offer TLS.
    let mut io = freshet_proxy::protocol::PacketIo::new(tokio::net::TcpStream::connect(proxy.mysql).await.unwrap());
    let greeting = io.read_packet(1 << 20).await.unwrap();
    let hs = freshet_proxy::protocol::handshake::ServerHandshake::parse(&greeting.payload).unwrap();
    let mut ssl = ((1u32 << 9) | (1 << 11) | (1 << 15)).to_le_bytes().to_vec();
    ssl.extend_from_slice(&[0; 28]);
    io.queue_packet(1, &ssl);
    io.flush().await.unwrap();
    let err = ErrPacket::parse(&io.read_packet(1 << 20).await.unwrap().payload).unwrap();
    assert_eq!(err.code, 2026);
    proxy_still_serves(&proxy, hs.connection_id).await;

    // A client that connects and leaves without answering.
    let mut stream = tokio::net::TcpStream::connect(proxy.mysql).await.unwrap();
    let mut io = freshet_proxy::protocol::PacketIo::new(&mut stream);
    let greeting = io.read_packet(1 << 20).await.unwrap();
    let hs = freshet_proxy::protocol::handshake::ServerHandshake::parse(&greeting.payload).unwrap();
    drop(io);
    drop(stream);
    proxy_still_serves(&proxy, hs.connection_id).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_upstream_is_a_clear_error() {
    // Nothing listens on port 1 of loopback.
    let proxy = start_proxy_with_url("mysql://freshet:freshet@127.0.0.1:1/freshet_test", "").await;
    match mysql_async::Conn::new(opts(&proxy.mysql.to_string())).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1105);
            assert!(e.message.contains("127.0.0.1:1"), "{}", e.message);
        }
        other => panic!("expected error 1105, got {:?}", other.map(|_| ())),
    }
    // The mariadb client shows it too: a client-side code (2003, CR_CONN_HOST_ERROR) in a
    // server's ERR packet was "Received malformed packet" to it (an audit).
    let port = proxy.mysql.port().to_string();
    let out = tokio::process::Command::new("mariadb")
        .args(["--no-defaults", "--protocol=tcp", "-h127.0.0.1", "-P", &port, "-ufreshet", "-pfreshet", "-e", "SELECT 1"])
        .output()
        .await
        .expect("the mariadb client (installed by scripts/mariadb.sh)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot connect to the upstream"), "{stderr}");
    // The process is still serving: its admin endpoint answers, and says the upstream is
    // unreachable (/health; /ready stays 200, see the admin tests).
    let (status, body) = http::get(proxy.admin, "/health").await;
    assert_eq!(status, 503, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_closing_an_idle_connection_closes_the_clients() {
    let proxy = start_proxy("").await;
    let mut c = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let reply = c.query("SET SESSION wait_timeout = 1").await;
    assert_eq!(reply[0][0], 0);
    // Without sending anything, the client sees the connection end (as it would directly).
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            if c.try_packet().await.is_err() {
                return;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "client connection still open after the upstream closed it");
    assert!(connection_gone(c.connection_id).await);
    assert!(eventually(|| proxy.metrics.sessions_ended(SessionEnd::UpstreamClosed) == 1).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_over_the_limit_wait_for_a_free_slot() {
    let proxy = start_proxy("[limits]\nmax_connections = 2\n").await;
    let first = through(&proxy).await;
    let mut second = through(&proxy).await;
    // The third client's TCP connect completes (kernel backlog) but nobody greets it yet.
    let third = tokio::spawn({
        let addr = proxy.mysql.to_string();
        async move { mysql_async::Conn::new(opts(&addr)).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!third.is_finished(), "a third session was served despite max_connections = 2");
    assert_eq!(proxy.metrics.connections_open.get(), 2);
    first.disconnect().await.unwrap();
    let mut third =
        tokio::time::timeout(std::time::Duration::from_secs(5), third).await.expect("served once a slot frees").unwrap().unwrap();
    let one: Option<i32> = third.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    second.query_drop("SELECT 1").await.unwrap();
}

/// A client that sends a slow statement, then the first bytes of another, and closes. The
/// unread bytes tell the server that the client may still be there: it runs the statement to
/// its end, then reads, finds the end and ends the session. Through freshet the same: the
/// session and its server connection end when the answer comes, not after (before session 46
/// the unread bytes hid the close, and a fuzzer held sessions until the server's
/// `wait_timeout`) and not before (session 46 ended them at once, cutting the statement
/// short where the server would not, which in session 51 also lost a command a client that
/// only stopped sending had pipelined: relay.rs, `a_client_that_closed_its_sending_side_gets_its_answer`).
#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_closes_behind_unread_bytes_ends_its_session_when_answered() {
    let proxy = start_proxy("").await;
    let mut admin = direct().await;
    for addr in [upstream_addr(), proxy.mysql.to_string()] {
        let mut c = RawClient::connect(&addr, DEFAULT_CAPS).await.unwrap();
        let id = c.query("SELECT CONNECTION_ID()").await;
        let id: u32 = String::from_utf8_lossy(&id[id.len() - 2][1..]).parse().unwrap();
        c.send(b"\x03SELECT SLEEP(3)").await;
        let (mut stream, _) = c.io.into_parts().unwrap();
        stream.write_all(&[0x05]).await.unwrap();
        drop(stream);
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let running: Option<u64> =
            admin.exec_first("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", (id,)).await.unwrap();
        assert_eq!(running, Some(1), "{addr}: the statement was cut short");
        assert!(connection_gone(id).await, "{addr}: the server's session stays after its answer");
    }
}
