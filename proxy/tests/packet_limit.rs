//! The client packet limit is the server's `max_allowed_packet` by default, and a packet over
//! it gets exactly the server's reaction: the same ERR packet with the same sequence id, then
//! a reset connection.
//!
//! This file is its own test binary with a single test because it changes the server's
//! global max_allowed_packet (cargo runs test binaries one after another, so no other test
//! sees the change); the value is restored afterwards, also when the test fails.

mod common;

use common::*;
use freshet_proxy::protocol::io::ReadError;
use mysql_async::prelude::*;

/// Sets the global max_allowed_packet for connections made from now on; restores the old
/// value when dropped.
struct GlobalPacketLimit {
    old: u64,
}

impl GlobalPacketLimit {
    async fn set(bytes: u64) -> GlobalPacketLimit {
        let mut conn = direct().await;
        let old: Option<u64> = conn.query_first("SELECT @@global.max_allowed_packet").await.unwrap();
        conn.query_drop(format!("SET GLOBAL max_allowed_packet = {bytes}")).await.unwrap();
        conn.disconnect().await.unwrap();
        GlobalPacketLimit { old: old.unwrap() }
    }
}

impl Drop for GlobalPacketLimit {
    fn drop(&mut self) {
        let old = self.old;
        // Drop cannot await; a thread with its own runtime can.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let mut conn = direct().await;
                conn.query_drop(format!("SET GLOBAL max_allowed_packet = {old}")).await.unwrap();
                conn.disconnect().await.unwrap();
            });
        })
        .join()
        .unwrap();
    }
}

/// How a connection ended after the reply.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Reset,
    Closed,
    Other(String),
}

/// A COM_QUERY of exactly `len` payload bytes whose reply is small.
fn query_of_len(len: usize) -> Vec<u8> {
    let mut q = b"\x03SELECT LENGTH('".to_vec();
    q.resize(len - 2, b'x');
    q.extend_from_slice(b"')");
    assert_eq!(q.len(), len);
    q
}

/// Sends a query of `len` bytes to `addr` and returns every frame that comes back (sequence
/// id and payload) and how the connection ended.
async fn refused(addr: &str, len: usize) -> (Vec<(u8, Vec<u8>)>, End) {
    let mut c = RawClient::connect(addr, DEFAULT_CAPS).await.unwrap();
    c.io.queue_packet(0, &query_of_len(len));
    // The server stops reading at the frame that goes over its limit: the rest of the
    // packet may not be accepted by the socket any more, and a reset may be reported here
    // (once: reads then see the end of the stream).
    let reset_while_sending = c.io.flush().await.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset);
    let mut frames = Vec::new();
    loop {
        match c.io.read_frame().await {
            Ok(frame) => frames.push((frame.seq(), frame.payload().to_vec())),
            Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => return (frames, End::Reset),
            Err(ReadError::Closed) if reset_while_sending => return (frames, End::Reset),
            Err(ReadError::Closed) => return (frames, End::Closed),
            Err(e) => return (frames, End::Other(e.to_string())),
        }
    }
}

/// The same frames, and a connection that ends. The server's own end is a reset when part of
/// the packet was still unread in its socket (the usual case) and an orderly close when it had
/// read it all into its buffer before refusing: freshet, which refuses on the header, resets.
fn assert_same_refusal(got: (Vec<(u8, Vec<u8>)>, End), direct: &(Vec<(u8, Vec<u8>)>, End)) {
    assert_eq!(got.0, direct.0, "{got:?} {direct:?}");
    assert!(matches!(direct.1, End::Reset | End::Closed), "{:?}", direct.1);
    assert_eq!(got.1, End::Reset, "{got:?} {direct:?}");
}

async fn accepted(addr: &str, len: usize) -> Vec<Vec<u8>> {
    let mut c = RawClient::connect(addr, DEFAULT_CAPS).await.unwrap();
    c.send(&query_of_len(len)).await;
    c.read_results().await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_servers_limit_and_its_reaction() {
    let direct_addr = upstream_addr();
    // One frame: the largest accepted packet is one byte under max_allowed_packet.
    let _limit = GlobalPacketLimit::set(1 << 20).await;
    let proxy = start_proxy("").await;
    let through = proxy.mysql.to_string();
    let len = (1 << 20) - 1;
    let (a, b) = (accepted(&direct_addr, len).await, accepted(&through, len).await);
    assert_ne!(a[0][0], 0xff, "the server accepts {len} bytes");
    assert_eq!(a, b);
    let direct_refusal = refused(&direct_addr, 1 << 20).await;
    assert_eq!(direct_refusal.0.len(), 1, "{direct_refusal:?}");
    assert_eq!(direct_refusal.0[0].1[..3], [0xff, 0x81, 0x04], "the server's error 1153");
    assert_same_refusal(refused(&through, 1 << 20).await, &direct_refusal);
    drop(proxy);

    // Two frames: the refusal comes at the second one, and its sequence id says so.
    // Dropped before `_limit` (reverse order), so the original value is what remains.
    let _second = GlobalPacketLimit::set(20 << 20).await;
    let proxy = start_proxy("").await;
    let through = proxy.mysql.to_string();
    let direct_refusal = refused(&direct_addr, 20 << 20).await;
    assert_eq!(direct_refusal.0[0].0, 2, "{direct_refusal:?}");
    assert_same_refusal(refused(&through, 20 << 20).await, &direct_refusal);
    // An explicit max_packet wins over the server's.
    let fixed = start_proxy("[limits]\nmax_packet = \"1MiB\"\n").await;
    let (frames, end) = refused(&fixed.mysql.to_string(), (1 << 20) + 1).await;
    assert_eq!((frames, end), (direct_refusal.0.iter().map(|(_, p)| (1, p.clone())).collect(), End::Reset));
}
