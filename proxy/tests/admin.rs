//! The admin endpoint (probes, metrics), shutdown, and the binary's handling of its config
//! (`freshet check`, `--version`, exit statuses).

mod common;

use std::sync::Arc;

use common::*;
use freshet_testkit::http::{get, request as http};
use mysql_async::prelude::*;

#[tokio::test(flavor = "multi_thread")]
async fn live_ready_and_metrics() {
    let proxy = start_proxy("").await;
    assert_eq!(get(proxy.admin, "/live").await, (200, "live\n".into()));
    assert_eq!(get(proxy.admin, "/ready").await, (200, "ready\n".into()));
    assert_eq!(get(proxy.admin, "/startup").await, (200, "started\n".into()));
    assert_eq!(get(proxy.admin, "/startup?caches").await, (200, "started\n".into()), "no caches: nothing to wait for");
    assert_eq!(get(proxy.admin, "/startup?caches=1").await, (200, "started\n".into()));
    assert_eq!(get(proxy.admin, "/health").await, (200, "healthy\n".into()));
    let mut conn = through(&proxy).await;
    // The driver runs its own setup queries on connect; count from here. A session counts a
    // command after its reply is sent, so the client may see a reply before its count: once
    // a ping is answered, every command before it has been counted.
    conn.ping().await.unwrap();
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
        "freshet_shutting_down 0\n".into(),
        "freshet_proxy_upstream_failures_total{kind=\"lost\"} 0\n".into(),
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
    for key in [
        "url",
        "password",
        "tls",
        "tls_ca",
        "connect_timeout",
        "grace",
        "drain",
        "mysql",
        "admin",
        "max_packet",
        "max_connections",
        "level",
        "name",
        "query",
    ] {
        assert!(text.contains(&format!("{key} =")), "examples/freshet.toml does not document {key}");
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_closes_idle_sessions_and_exits_0() {
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
    // The idle session is closed at once (as a native sidecar, the application is gone by
    // now), and freshet exits 0 without waiting out [shutdown] grace (30s).
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait()).await.expect("freshet exits").unwrap();
    assert!(status.success(), "{status:?}");
    assert!(conn.query_drop("SELECT 1").await.is_err(), "the idle session was closed");
    assert!(std::net::TcpStream::connect(&addr).is_err(), "nothing listens any more");
}

/// freshet in this process with `extra` config, its run future stopped by the returned sender.
async fn server(extra: &str) -> (freshet_proxy::Server, tokio::sync::oneshot::Sender<()>, tokio::sync::oneshot::Receiver<()>) {
    let toml = format!(
        "[upstream]\nurl = \"{}\"\ntls = \"disabled\"\n[listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{extra}",
        upstream_url()
    );
    let server = freshet_testkit::freshet::bind(&toml).await;
    let (stop, stopped) = tokio::sync::oneshot::channel();
    (server, stop, stopped)
}

async fn processlist_has(direct: &mut mysql_async::Conn, info: &str) -> bool {
    let n: Option<u64> = direct.exec_first("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", (info,)).await.unwrap();
    n == Some(1)
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_closes_idle_sessions_at_once_and_lets_a_busy_one_finish() {
    let (server, stop, stopped) = server("").await;
    let (mysql, admin, metrics) = (server.mysql_addr().to_string(), server.admin_addr(), server.metrics());
    let run = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    let mut idle = mysql_async::Conn::new(opts(&mysql)).await.unwrap();
    // Commands first: the session's wait for the stop lasts across them.
    for _ in 0..3 {
        idle.query_drop("SELECT 1").await.unwrap();
    }
    // The busy session waits on a lock this test holds, so it is mid-command for as long as
    // the test wants, whatever the machine's speed.
    let mut holder = direct().await;
    let _: Option<i32> = holder.query_first("SELECT GET_LOCK('freshet_shutdown_test', 60)").await.unwrap();
    let mut busy = mysql_async::Conn::new(opts(&mysql)).await.unwrap();
    let busy_query = "SELECT GET_LOCK('freshet_shutdown_test', 60) AS busy";
    let busy_task = tokio::spawn(async move {
        let got: Option<i32> = busy.query_first(busy_query).await.unwrap();
        (busy, got)
    });
    let mut watcher = direct().await;
    let mut running = false;
    for _ in 0..250 {
        running = processlist_has(&mut watcher, busy_query).await;
        if running {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(running, "the busy session's query reached the server");

    stop.send(()).unwrap();
    // The idle session is closed without waiting for the busy one ...
    assert!(eventually(|| metrics.sessions_ended(freshet_proxy::metrics::SessionEnd::Shutdown) == 1).await, "idle session closed");
    assert!(idle.query_drop("SELECT 1").await.is_err(), "the idle session's connection is closed");
    assert!(!busy_task.is_finished() && !run.is_finished(), "the busy session is still served");
    assert_eq!(get(admin, "/ready").await, (503, "not ready: shutting down\n".into()));
    assert!(std::net::TcpStream::connect(&mysql).is_err(), "no new connections");
    // ... which finishes its command once the lock is free, then ends too; then run returns.
    let _: Option<i32> = holder.query_first("SELECT RELEASE_LOCK('freshet_shutdown_test')").await.unwrap();
    let (mut busy, got) = busy_task.await.unwrap();
    assert_eq!(got, Some(1));
    run.await.unwrap().expect("run ends cleanly");
    assert!(busy.query_drop("SELECT 1").await.is_err(), "the busy session was closed after its command");
    assert_eq!(metrics.sessions_ended(freshet_proxy::metrics::SessionEnd::Shutdown), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn during_drain_freshet_still_accepts_and_serves() {
    let (server, stop, stopped) = server("[shutdown]\ndrain = \"20s\"\ngrace = \"30s\"\n").await;
    let (mysql, admin) = (server.mysql_addr().to_string(), server.admin_addr());
    let run = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    let mut before = mysql_async::Conn::new(opts(&mysql)).await.unwrap();
    stop.send(()).unwrap();
    assert!(eventually_async(|| async { get(admin, "/ready").await.0 == 503 }).await, "/ready says 503 during the drain");
    // The application, stopped at the same time, still gets new connections and answers.
    let mut during = mysql_async::Conn::new(opts(&mysql)).await.expect("accepts during the drain");
    let one: Option<i32> = during.query_first("SELECT 1").await.unwrap();
    let two: Option<i32> = before.query_first("SELECT 2").await.unwrap();
    assert_eq!((one, two), (Some(1), Some(2)));
    assert!(!run.is_finished());
    run.abort();
}

async fn eventually_async<F: std::future::Future<Output = bool>>(mut condition: impl FnMut() -> F) -> bool {
    for _ in 0..250 {
        if condition().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_does_not_follow_the_upstream_but_startup_and_health_do() {
    // Nothing listens on port 1 of loopback.
    let proxy = start_proxy_with_url("mysql://freshet:freshet@127.0.0.1:1/freshet_test", "").await;
    assert_eq!(get(proxy.admin, "/ready").await, (200, "ready\n".into()), "the application's pod stays in service");
    assert_eq!(get(proxy.admin, "/live").await, (200, "live\n".into()));
    let (status, body) = get(proxy.admin, "/startup").await;
    assert_eq!(status, 503);
    assert!(body.starts_with("not started: upstream unreachable"), "{body}");
    let (status, body) = get(proxy.admin, "/health").await;
    assert_eq!((status, body.starts_with("not healthy: upstream unreachable")), (503, true), "{body}");
}

#[test]
fn version_and_check() {
    let out = freshet().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("freshet {}\n", env!("CARGO_PKG_VERSION")));

    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/freshet.toml");
    let check = |url: &str| {
        freshet()
            .arg("check")
            .arg("--config")
            .arg(&example)
            .env("FRESHET_UPSTREAM_URL", url)
            .env("FRESHET_UPSTREAM_TLS", "disabled")
            .env("FRESHET_UPSTREAM_CONNECT_TIMEOUT", "2s")
            .output()
            .unwrap()
    };
    let out = check(&upstream_url());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("ok: config is valid (0 caches)\nok: upstream "), "{text}");
    assert!(text.contains("logged in as freshet"), "{text}");

    let out = check("mysql://freshet:wrong-password@127.0.0.1:1/freshet_test");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FAILED: upstream 127.0.0.1:1: cannot log in"), "{text}");
    // A bad config is the usual exit 64, before any connection.
    let out = freshet().args(["check", "--config", "/nonexistent.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}

#[tokio::test(flavor = "multi_thread")]
async fn check_builds_the_caches() {
    let mut conn = direct().await;
    conn.query_drop("CREATE TABLE IF NOT EXISTS check_items (id INT PRIMARY KEY, name VARCHAR(20)) ENGINE=InnoDB").await.unwrap();
    let dir = std::env::temp_dir().join(format!("freshet-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("freshet.toml");
    let config = format!(
        "[upstream]\nurl = \"{}\"\ntls = \"disabled\"\n[[cache]]\nname = \"items\"\nquery = \"SELECT id, name FROM check_items WHERE id = ?\"\n",
        upstream_url()
    );
    let run = |text: &str| {
        std::fs::write(&path, text).unwrap();
        let out = freshet().arg("check").arg("--config").arg(&path).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (good, good_text) = run(&config);
    let (bad, bad_text) = run(&config.replace("check_items", "no_such_table"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(good, Some(0), "{good_text}");
    assert!(good_text.contains("ok: binlog settings and grants fit") && good_text.ends_with("ok: 1 of 1 caches built\n"), "{good_text}");
    assert_eq!(bad, Some(1), "{bad_text}");
    assert!(bad_text.contains("FAILED: ") && bad_text.contains("no_such_table"), "{bad_text}");
}

/// At `[log] level = "debug"` the log is freshet's own: the SQL parser's debug lines, which
/// quote the whole text of what it parses (a client's `SELECT PASSWORD('...')`, a key given to
/// AES_ENCRYPT), stay out (an audit of what freshet tells whom).
#[tokio::test(flavor = "multi_thread")]
async fn the_debug_log_does_not_quote_what_clients_send() {
    let mut conn = direct().await;
    conn.query_drop("CREATE TABLE IF NOT EXISTS check_items (id INT PRIMARY KEY, name VARCHAR(20)) ENGINE=InnoDB").await.unwrap();
    let dir = std::env::temp_dir().join(format!("freshet-debug-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("freshet.toml");
    let config = format!(
        "[upstream]\nurl = \"{}\"\ntls = \"disabled\"\n[log]\nlevel = \"debug\"\n[[cache]]\nname = \"items\"\nquery = \"SELECT id, name, 'marker_7f3a' AS m FROM check_items WHERE id = ?\"\n",
        upstream_url()
    );
    std::fs::write(&path, config).unwrap();
    let out = freshet().arg("check").arg("--config").arg(&path).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("marker_7f3a"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_connection_lost_mid_command_is_counted() {
    use freshet_proxy::metrics::UpstreamFailure;
    let proxy = start_proxy("").await;
    let mut conn = through(&proxy).await;
    let query = "SELECT SLEEP(30) AS lost_mid_command";
    let task = tokio::spawn(async move { conn.query_drop(query).await });
    let mut killer = direct().await;
    let mut id = None;
    for _ in 0..250 {
        id = killer.exec_first("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = ?", (query,)).await.unwrap();
        if id.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let id: u64 = id.expect("the query reached the server");
    killer.query_drop(format!("KILL {id}")).await.unwrap();
    assert!(task.await.unwrap().is_err(), "the client sees the session end");
    assert!(eventually(|| proxy.metrics.upstream_failures(UpstreamFailure::Lost) == 1).await, "counted as lost");
    let (_, body) = get(proxy.admin, "/metrics").await;
    assert!(body.contains("freshet_proxy_upstream_failures_total{kind=\"lost\"} 1\n"), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_ends_the_engine_tasks() {
    let mut conn = direct().await;
    conn.query_drop("CREATE TABLE IF NOT EXISTS shutdown_items (id INT PRIMARY KEY, name VARCHAR(20)) ENGINE=InnoDB").await.unwrap();
    let (server, stop, stopped) = server(
        "[admin]\nusers = [\"freshet\"]\n[[cache]]\nname = \"items\"\nquery = \"SELECT id, name FROM shutdown_items WHERE id = ?\"\n",
    )
    .await;
    let engine = server.engine().get().expect("the engine started with the server").clone();
    let run = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    assert!(Arc::strong_count(&engine) > 1, "the engine's tasks hold it while they run");
    stop.send(()).unwrap();
    run.await.unwrap().unwrap();
    // The writer (and the admin endpoint, and the server) let go of the engine: only this
    // test's handle is left once its tasks have ended.
    assert!(eventually(|| Arc::strong_count(&engine) == 1).await, "engine still held by {} others", Arc::strong_count(&engine) - 1);
    assert!(!engine.caught_up(), "a stopped engine vouches for nothing");
}

/// The engine's tasks end with the shutdown even while something still holds the engine (a
/// session past the grace period, a test): the server's position is no longer polled. (The
/// poll used to run until the last handle to the engine was dropped.)
#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_engine_stops_polling_the_server() {
    let mut conn = direct().await;
    conn.query_drop("CREATE TABLE IF NOT EXISTS shutdown_polled (id INT PRIMARY KEY, name VARCHAR(20)) ENGINE=InnoDB").await.unwrap();
    let (server, stop, stopped) =
        server("[[cache]]\nname = \"polled\"\nquery = \"SELECT id, name FROM shutdown_polled WHERE id = ?\"\n").await;
    let engine = server.engine().get().expect("the engine started with the server").clone();
    let run = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    assert!(eventually(|| engine.freshness().server_polled).await, "the server's position is polled while freshet runs");
    stop.send(()).unwrap();
    run.await.unwrap().unwrap();
    assert!(eventually(|| !engine.freshness().server_polled).await, "still polling the server after the shutdown");
}

#[tokio::test(flavor = "multi_thread")]
async fn not_ready_while_every_connection_is_in_use() {
    let proxy = start_proxy("[limits]\nmax_connections = 1\n").await;
    assert_eq!(get(proxy.admin, "/ready").await, (200, "ready\n".into()));
    let conn = through(&proxy).await;
    assert_eq!(get(proxy.admin, "/ready").await, (503, "not ready: all [limits] max_connections = 1 are in use\n".into()));
    conn.disconnect().await.unwrap();
    assert!(eventually_async(|| async { get(proxy.admin, "/ready").await.0 == 200 }).await, "ready again");
}
