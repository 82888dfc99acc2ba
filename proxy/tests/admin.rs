//! The admin endpoint and the binary's handling of its config.

mod common;

use common::*;
use mysql_async::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn http(addr: std::net::SocketAddr, request: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let status = out[9..12].parse().unwrap();
    (status, out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string())
}

async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    http(addr, &format!("GET {path} HTTP/1.1\r\nHost: freshet\r\n\r\n")).await
}

#[tokio::test(flavor = "multi_thread")]
async fn live_ready_and_metrics() {
    let proxy = start_proxy("").await;
    assert_eq!(get(proxy.admin, "/live").await, (200, "live\n".into()));
    assert_eq!(get(proxy.admin, "/ready").await, (200, "ready\n".into()));
    let mut conn = through(&proxy).await;
    // The driver runs its own setup queries on connect; count from here.
    let before = proxy.metrics.commands_relayed(freshet_proxy::protocol::Command::Query);
    conn.query_drop("SELECT 1").await.unwrap();
    let _ = conn.query_drop("SELECT * FROM no_such_table").await;
    conn.disconnect().await.unwrap();
    // The session ends just after the client's COM_QUIT has been relayed.
    assert!(eventually(|| proxy.metrics.connections_open.get() == 0).await);
    let (status, body) = get(proxy.admin, "/metrics").await;
    assert_eq!(status, 200);
    let queries = before + 2;
    for expected in [
        "freshet_proxy_client_connections_total 1\n".to_string(),
        "freshet_proxy_client_connections_open 0\n".into(),
        format!("freshet_proxy_commands_total{{command=\"query\"}} {queries}\n"),
        format!("freshet_proxy_relay_duration_seconds_count{{command=\"query\"}} {queries}\n"),
        "freshet_proxy_server_errors_total 1\n".into(),
        "freshet_proxy_sessions_ended_total{reason=\"quit\"} 1\n".into(),
        "freshet_upstream_ready 1\n".into(),
    ] {
        assert!(body.contains(&expected), "missing {expected:?} in\n{body}");
    }
    // Every sample line is "name{labels} value" with a numeric value.
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "bad sample line {line:?}");
    }
    assert_eq!(get(proxy.admin, "/nope").await.0, 404);
    assert_eq!(http(proxy.admin, "POST /live HTTP/1.1\r\n\r\n").await.0, 405);
    assert_eq!(http(proxy.admin, "HEAD /live HTTP/1.1\r\n\r\n").await, (200, String::new()));
}

fn freshet() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_freshet"));
    cmd.env_remove("FRESHET_CONFIG");
    cmd
}

#[test]
fn bad_config_exits_64_with_every_problem() {
    let dir = std::env::temp_dir().join(format!("freshet-admin-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(&path, "[upstream]\nurl = \"nope\"\n[listen]\nmysql = \"x\"\ncolour = 1\n").unwrap();
    let out = freshet().arg("--config").arg(&path).env("FRESHET_LIMITS_MAX_PACKET", "lots").output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("4 problems"), "{stderr}");
    assert!(stderr.contains("bad.toml:2:7: url"), "{stderr}");
    assert!(stderr.contains("bad.toml:4:9: mysql"), "{stderr}");
    assert!(stderr.contains("unknown key \"colour\""), "{stderr}");
    assert!(stderr.contains("environment variable FRESHET_LIMITS_MAX_PACKET"), "{stderr}");

    let out = freshet().output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = freshet().arg("--config").arg(dir.join("missing.toml")).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the config file"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn example_config_is_valid_and_documents_every_key() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/freshet.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    freshet_config::Config::parse(&text, &path, &|_| None, &[]).expect("examples/freshet.toml is valid");
    for key in ["url", "password", "tls", "tls_ca", "connect_timeout", "grace", "drain", "mysql", "admin", "max_packet", "max_connections", "level", "name", "query"] {
        assert!(text.contains(&format!("{key} =")), "examples/freshet.toml does not document {key}");
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_accepting_and_lets_sessions_finish() {
    let (mysql, admin) = (free_port(), free_port());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_freshet"))
        .env_remove("FRESHET_CONFIG")
        .env("FRESHET_UPSTREAM_URL", upstream_url())
        .env("FRESHET_UPSTREAM_TLS", "disabled")
        .env("FRESHET_LISTEN_MYSQL", format!("127.0.0.1:{mysql}"))
        .env("FRESHET_LISTEN_ADMIN", format!("127.0.0.1:{admin}"))
        .env("FRESHET_LOG_LEVEL", "warn")
        .arg("--config")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/freshet.toml"))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{mysql}");
    let mut conn = None;
    for _ in 0..100 {
        if let Ok(c) = mysql_async::Conn::new(opts(&addr)).await {
            conn = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut conn = conn.expect("freshet binary accepts connections");
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    // New connections are refused once the listener is closed ...
    let refused = eventually(|| std::net::TcpStream::connect(&addr).is_err()).await;
    assert!(refused, "freshet still accepts connections after SIGTERM");
    let admin_addr: std::net::SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    assert_eq!(get(admin_addr, "/ready").await, (503, "not ready: shutting down\n".into()));
    // ... while the open session keeps working until its client leaves.
    let one: Option<i32> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    assert!(child.try_wait().unwrap().is_none(), "freshet exited with a session still open");
    conn.disconnect().await.unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await.expect("freshet exits once sessions end").unwrap();
    assert!(status.success(), "{status:?}");
}
