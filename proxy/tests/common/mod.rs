//! Shared by the integration tests: the real MariaDB from scripts/mariadb.sh, freshet running
//! in-process in front of it, and a raw protocol client for what drivers do not expose
//! (chosen capabilities, malformed packets, byte-for-byte reply comparison).
#![allow(dead_code)]

pub mod answers;

use std::time::Duration;

use freshet_proxy::protocol::handshake::ServerHandshake;
use freshet_proxy::protocol::io::ReadError;
use freshet_proxy::protocol::response::{self, ERR, ErrPacket, LOCAL_INFILE, OK};
use freshet_proxy::protocol::{Capabilities, PacketIo, StatusFlags};
use mysql_async::prelude::Queryable;
use sha1::{Digest, Sha1};
use tokio::net::TcpStream;

pub use freshet_testkit::freshet::Running as Proxy;
/// The test server's URL, printed by scripts/mariadb.sh.
pub use freshet_testkit::mysql_url as upstream_url;

pub fn upstream_addr() -> String {
    let url: freshet_config::UpstreamUrl = upstream_url().parse().expect("FRESHET_TEST_MYSQL_URL parses");
    url.address()
}

pub const USER: &str = "freshet";
pub const PASSWORD: &str = "freshet";
pub const DB: &str = "freshet_test";

/// Starts freshet with the test upstream and `extra` TOML appended to a minimal config.
pub async fn start_proxy(extra: &str) -> Proxy {
    start_proxy_with_url(&upstream_url(), extra).await
}

pub async fn start_proxy_with_url(url: &str, extra: &str) -> Proxy {
    start_proxy_raw(&format!(
        "[upstream]\nurl = \"{url}\"\ntls = \"disabled\"\nconnect_timeout = \"2s\"\n[listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{extra}"
    ))
    .await
}

/// Starts freshet with exactly this config text.
pub async fn start_proxy_raw(toml: &str) -> Proxy {
    freshet_testkit::freshet::start(toml).await
}

pub fn opts(addr: &str) -> mysql_async::OptsBuilder {
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(host.to_string())
        .tcp_port(port.parse().expect("port"))
        .user(Some(USER))
        .pass(Some(PASSWORD))
        .db_name(Some(DB))
        .prefer_socket(false)
}

pub async fn direct() -> mysql_async::Conn {
    mysql_async::Conn::new(opts(&upstream_addr())).await.expect("direct connection to MariaDB")
}

pub async fn through(proxy: &Proxy) -> mysql_async::Conn {
    mysql_async::Conn::new(opts(&proxy.mysql.to_string())).await.expect("connection through freshet")
}

/// Waits until the server has no connection with this id (the session's upstream connection
/// was closed); false after 10 seconds.
/// A login of freshet's own, `name`@`%` with `password`, made anew with what the binlog
/// stream needs and `grants` (`GRANT {grant} TO ...`): a test can then take its rights away
/// from freshet alone. The url to start freshet with.
pub async fn own_login(name: &str, password: &str, grants: &[String]) -> String {
    let mut admin = direct().await;
    admin.query_drop(format!("DROP USER IF EXISTS '{name}'@'%'")).await.unwrap();
    admin.query_drop(format!("CREATE USER '{name}'@'%' IDENTIFIED BY '{password}'")).await.unwrap();
    admin.query_drop(format!("GRANT RELOAD, PROCESS, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{name}'@'%'")).await.unwrap();
    for grant in grants {
        admin.query_drop(format!("GRANT {grant} TO '{name}'@'%'")).await.unwrap();
    }
    format!("mysql://{name}:{password}@{}/{DB}", upstream_addr())
}

pub async fn connection_gone(id: u32) -> bool {
    let mut conn = direct().await;
    for _ in 0..200 {
        let n: Option<u64> =
            conn.exec_first("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", (id,)).await.expect("processlist query");
        if n == Some(0) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A minimal MySQL client over freshet's own codec, with mysql_native_password.
pub struct RawClient {
    pub io: PacketIo<TcpStream>,
    pub caps: Capabilities,
    pub connection_id: u32,
}

/// What a raw client asks for by default: what drivers commonly set.
pub const DEFAULT_CAPS: u64 = Capabilities::MYSQL
    | Capabilities::LONG_FLAG
    | Capabilities::CONNECT_WITH_DB
    | Capabilities::LOCAL_FILES
    | Capabilities::PROTOCOL_41
    | Capabilities::TRANSACTIONS
    | Capabilities::SECURE_CONNECTION
    | Capabilities::MULTI_STATEMENTS
    | Capabilities::MULTI_RESULTS
    | Capabilities::PS_MULTI_RESULTS
    | Capabilities::PLUGIN_AUTH;

impl RawClient {
    pub async fn connect(addr: &str, wanted: u64) -> Result<RawClient, ErrPacket> {
        Self::connect_as(addr, wanted, USER, PASSWORD).await
    }

    pub async fn connect_as(addr: &str, wanted: u64, user: &str, password: &str) -> Result<RawClient, ErrPacket> {
        Self::connect_full(addr, wanted, user, password, None, false).await
    }

    /// A login with `command` sent right behind the handshake response, before the server's
    /// OK (as a client that pipelines may): its answer is the next to read.
    pub async fn connect_pipelined(addr: &str, wanted: u64, command: &[u8]) -> Result<RawClient, ErrPacket> {
        Self::connect_full(addr, wanted, USER, PASSWORD, Some(command), false).await
    }

    /// A login that names another plugin than the account's (the server asks it to switch)
    /// and sends, right behind its handshake response, the switch's answer (MariaDB asks with
    /// the greeting's scramble) and `command`: all before the server has asked anything.
    pub async fn connect_switch_pipelined(addr: &str, wanted: u64, command: &[u8]) -> Result<RawClient, ErrPacket> {
        Self::connect_full(addr, wanted, USER, PASSWORD, Some(command), true).await
    }

    async fn connect_full(
        addr: &str,
        wanted: u64,
        user: &str,
        password: &str,
        pipelined: Option<&[u8]>,
        switch_early: bool,
    ) -> Result<RawClient, ErrPacket> {
        let stream = TcpStream::connect(addr).await.expect("tcp connect");
        let mut io = PacketIo::new(stream);
        let greeting = io.read_packet(1 << 20).await.expect("greeting");
        if greeting.payload[0] == ERR {
            return Err(ErrPacket::parse(&greeting.payload).expect("err packet"));
        }
        let server = ServerHandshake::parse(&greeting.payload).expect("server handshake");
        let scramble = scramble_of(&greeting.payload);
        let caps = Capabilities(wanted & server.capabilities.0 & !Capabilities::SSL);
        let mut reply = caps.lower().to_le_bytes().to_vec();
        reply.extend_from_slice(&(1u32 << 30).to_le_bytes());
        reply.push(45); // utf8mb4_general_ci
        reply.extend_from_slice(&[0; 19]);
        reply.extend_from_slice(&caps.extended().to_le_bytes());
        reply.extend_from_slice(user.as_bytes());
        reply.push(0);
        let auth = native_password(password.as_bytes(), &scramble);
        reply.push(auth.len() as u8);
        reply.extend_from_slice(&auth);
        reply.extend_from_slice(DB.as_bytes());
        reply.push(0);
        reply.extend_from_slice(if switch_early { b"mysql_clear_password\0".as_slice() } else { b"mysql_native_password\0" });
        io.queue_packet(1, &reply);
        if switch_early {
            io.queue_packet(3, &native_password(password.as_bytes(), &scramble));
        }
        if let Some(command) = pipelined {
            io.queue_packet(0, command);
        }
        io.flush().await.expect("send handshake response");
        if switch_early {
            // The server's switch request, answered already.
            let p = io.read_packet(1 << 20).await.expect("auth switch");
            assert_eq!(p.payload[0], 0xfe, "an auth switch");
        }
        loop {
            let p = io.read_packet(1 << 20).await.expect("auth reply");
            match p.payload[0] {
                OK => break,
                ERR => return Err(ErrPacket::parse(&p.payload).expect("err")),
                0xfe => {
                    // Auth switch to mysql_native_password with a new scramble.
                    let rest = &p.payload[1..];
                    let name_end = rest.iter().position(|&b| b == 0).expect("plugin name");
                    let data = &rest[name_end + 1..];
                    let data = data.strip_suffix(&[0]).unwrap_or(data);
                    io.queue_packet(p.last_seq.wrapping_add(1), &native_password(password.as_bytes(), data));
                    io.flush().await.expect("auth switch reply");
                }
                other => panic!("unexpected auth packet 0x{other:02x}"),
            }
        }
        Ok(RawClient { io, caps, connection_id: server.connection_id })
    }

    /// Sends a command (sequence id 0) and flushes.
    pub async fn send(&mut self, payload: &[u8]) {
        self.io.queue_packet(0, payload);
        self.io.flush().await.expect("send command");
    }

    pub async fn query(&mut self, sql: &str) -> Vec<Vec<u8>> {
        let mut cmd = vec![0x03];
        cmd.extend_from_slice(sql.as_bytes());
        self.send(&cmd).await;
        self.read_results().await
    }

    /// Every packet of a text or binary result (all result sets), as payloads.
    pub async fn read_results(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let first = self.packet().await;
            out.push(first.clone());
            let more = match first[0] {
                OK => response::ok_status(&first, self.caps).unwrap().has(StatusFlags::MORE_RESULTS_EXISTS),
                ERR => false,
                LOCAL_INFILE => panic!("unexpected LOCAL INFILE request"),
                _ => {
                    let columns = first[0] as usize;
                    for _ in 0..columns {
                        out.push(self.packet().await);
                    }
                    if !self.caps.has(Capabilities::DEPRECATE_EOF) {
                        let eof = self.packet().await;
                        out.push(eof.clone());
                        let status = response::terminator_status(&eof, self.caps).unwrap();
                        if status.has(StatusFlags::CURSOR_EXISTS) {
                            return out;
                        }
                    }
                    let status = self.rows(&mut out).await;
                    status.is_some_and(|s| s.has(StatusFlags::MORE_RESULTS_EXISTS))
                }
            };
            if !more {
                return out;
            }
        }
    }

    /// Packets up to a terminator (its status) or an ERR (None).
    pub async fn rows(&mut self, out: &mut Vec<Vec<u8>>) -> Option<StatusFlags> {
        loop {
            let p = self.packet().await;
            out.push(p.clone());
            if response::is_terminator(&p, self.caps) {
                return Some(response::terminator_status(&p, self.caps).unwrap());
            }
            if p[0] == ERR {
                return None;
            }
        }
    }

    pub async fn packet(&mut self) -> Vec<u8> {
        self.io.read_packet(1 << 30).await.expect("reply packet").payload.to_vec()
    }

    pub async fn try_packet(&mut self) -> Result<Vec<u8>, ReadError> {
        self.io.read_packet(1 << 30).await.map(|p| p.payload.to_vec())
    }
}

fn scramble_of(greeting: &[u8]) -> Vec<u8> {
    let version_end = greeting[1..].iter().position(|&b| b == 0).unwrap() + 2;
    let part1 = &greeting[version_end + 4..version_end + 12];
    let part2_at = version_end + 12 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
    let part2 = &greeting[part2_at..part2_at + 12];
    [part1, part2].concat()
}

/// mysql_native_password: SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password))).
pub fn native_password(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = Sha1::digest(password);
    let stage2 = Sha1::digest(stage1);
    let mut h = Sha1::new();
    h.update(&scramble[..20.min(scramble.len())]);
    h.update(stage2);
    let mix = h.finalize();
    stage1.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect()
}

/// Waits up to 5 seconds for `condition`: session teardown (and its metrics) runs just after
/// the client has seen its connection close.
pub async fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    for _ in 0..250 {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Waits until freshet (`conn` is a session through it) has applied the server's binlog as it
/// ends now: SHOW FRESHET STATUS's `binlog_applied_position` at or past SHOW MASTER STATUS's (other
/// tests may write meanwhile, so past is fine).
pub async fn caught_up(conn: &mut mysql_async::Conn) {
    caught_up_with(conn, &mut direct().await).await;
}

/// [`caught_up`] with the binlog of the server behind `server`.
pub async fn caught_up_with(conn: &mut mysql_async::Conn, server: &mut mysql_async::Conn) {
    let end: mysql_async::Row = server.query_first("SHOW MASTER STATUS").await.unwrap().unwrap();
    let end = (end.get::<String, _>(0).unwrap(), end.get::<u64, _>(1).unwrap());
    let reached = |v: &str| {
        let Some((file, offset)) = v.rsplit_once(':') else { return false };
        // Binlog file names of one server share a prefix and a fixed-width number.
        (file, offset.parse::<u64>().unwrap_or(0)) >= (end.0.as_str(), end.1)
    };
    for _ in 0..500 {
        let status: Vec<(String, String)> = conn.query("SHOW FRESHET STATUS").await.unwrap();
        // What the views applied, not what the stream delivered: a read right after the
        // stream delivers may still see the views' previous step.
        if status.iter().any(|(k, v)| k == "binlog_applied_position" && reached(v)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("freshet did not reach {}:{}", end.0, end.1);
}

/// A COM_STMT_PREPARE of `sql` on `client`; the statement id and its parameter count.
pub async fn prepare(client: &mut RawClient, sql: &str) -> (u32, u16) {
    let mut cmd = vec![0x16];
    cmd.extend_from_slice(sql.as_bytes());
    client.send(&cmd).await;
    let first = client.packet().await;
    assert_eq!(first[0], 0, "prepare OK");
    let id = u32::from_le_bytes([first[1], first[2], first[3], first[4]]);
    let columns = u16::from_le_bytes([first[5], first[6]]);
    let params = u16::from_le_bytes([first[7], first[8]]);
    let eof = !client.caps.has(freshet_proxy::protocol::Capabilities::DEPRECATE_EOF);
    for count in [params, columns] {
        if count > 0 {
            for _ in 0..count + u16::from(eof) {
                client.packet().await;
            }
        }
    }
    (id, params)
}

/// A COM_STMT_EXECUTE payload for statement `id`: no cursor, one iteration, then `rest`.
pub fn execute(id: u32, rest: &[u8]) -> Vec<u8> {
    let mut cmd = vec![0x17];
    cmd.extend_from_slice(&id.to_le_bytes());
    cmd.push(0);
    cmd.extend_from_slice(&1u32.to_le_bytes());
    cmd.extend_from_slice(rest);
    cmd
}

/// A size this process's `/proc/self/status` reports (`VmRSS`, `VmHWM`, ...), in bytes.
pub fn process_status_bytes(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.strip_prefix(key).is_some_and(|rest| rest.starts_with(':'))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}
