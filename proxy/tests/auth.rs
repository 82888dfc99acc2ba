//! Authentication is the client's own, against the upstream, through freshet: auth switches,
//! plugins freshet knows nothing about, wrong passwords, and TLS on the upstream leg.

mod common;

use common::*;
use mysql_async::prelude::*;

#[tokio::test(flavor = "multi_thread")]
async fn wrong_password_gets_the_servers_error() {
    let proxy = start_proxy("").await;
    for addr in [upstream_addr(), proxy.mysql.to_string()] {
        let err = RawClient::connect_as(&addr, DEFAULT_CAPS, USER, "wrong").await.err().expect("login must fail");
        assert_eq!(err.code, 1045, "{addr}");
        assert_eq!(&err.sql_state, b"28000");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_switch_request_is_relayed() {
    let proxy = start_proxy("").await;
    // Starting with a plugin the account does not use makes the server ask to switch; the
    // raw client answers the switch with mysql_native_password and the new scramble.
    let stream = tokio::net::TcpStream::connect(proxy.mysql).await.unwrap();
    let mut io = freshet_proxy::protocol::PacketIo::new(stream);
    let greeting = io.read_packet(1 << 20).await.unwrap();
    let caps = DEFAULT_CAPS as u32;
    let mut reply = caps.to_le_bytes().to_vec();
    reply.extend_from_slice(&(1u32 << 24).to_le_bytes());
    reply.push(45);
    reply.extend_from_slice(&[0; 23]);
    reply.extend_from_slice(b"freshet\0");
    reply.push(0); // empty auth data for the first plugin
    reply.extend_from_slice(b"freshet_test\0client_ed25519\0");
    io.queue_packet(greeting.last_seq.wrapping_add(1), &reply);
    io.flush().await.unwrap();
    let switch = io.read_packet(1 << 20).await.unwrap();
    assert_eq!(switch.payload[0], 0xfe, "expected an auth switch request");
    let rest = &switch.payload[1..];
    let name_end = rest.iter().position(|&b| b == 0).unwrap();
    assert_eq!(&rest[..name_end], b"mysql_native_password");
    let scramble = rest[name_end + 1..].strip_suffix(&[0]).unwrap_or(&rest[name_end + 1..]);
    io.queue_packet(switch.last_seq.wrapping_add(1), &native_password(PASSWORD.as_bytes(), scramble));
    io.flush().await.unwrap();
    let ok = io.read_packet(1 << 20).await.unwrap();
    assert_eq!(ok.payload[0], 0, "expected OK after the switch, got {:?}", ok.payload);
}

/// MariaDB's ed25519 plugin, through the MariaDB command-line client: a plugin freshet has
/// no code for, relayed all the same.
#[tokio::test(flavor = "multi_thread")]
async fn ed25519_with_the_mariadb_client() {
    let mut admin = direct().await;
    let installed: Option<String> =
        admin.query_first("SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'").await.unwrap();
    if installed.is_none() {
        admin.query_drop("INSTALL SONAME 'auth_ed25519'").await.unwrap();
    }
    admin.query_drop("CREATE USER IF NOT EXISTS 'edu'@'127.0.0.1' IDENTIFIED VIA ed25519 USING PASSWORD('ed secret')").await.unwrap();
    let proxy = start_proxy("").await;
    let port = proxy.mysql.port().to_string();
    let out = tokio::process::Command::new("mariadb")
        .args(["--no-defaults", "--protocol=tcp", "-h127.0.0.1", "-P", &port, "-uedu", "-ped secret", "-N", "-e", "SELECT CURRENT_USER()"])
        .output()
        .await
        .expect("the mariadb client (installed by scripts/mariadb.sh)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "edu@127.0.0.1");
    let bad = tokio::process::Command::new("mariadb")
        .args(["--no-defaults", "--protocol=tcp", "-h127.0.0.1", "-P", &port, "-uedu", "-pnope", "-e", "SELECT 1"])
        .output()
        .await
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("1045"), "{}", String::from_utf8_lossy(&bad.stderr));
}

fn tls_ca() -> String {
    std::env::var("FRESHET_TEST_TLS_CA").expect("FRESHET_TEST_TLS_CA, printed by scripts/mariadb.sh")
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_to_the_upstream() {
    for mode in ["required", "verify_ca", "verify_identity"] {
        // The test certificate names localhost and 127.0.0.1; the name check uses the url's host.
        let url = upstream_url().replace("127.0.0.1", "localhost");
        let toml_tls = format!("tls = \"{mode}\"\ntls_ca = \"{}\"\n", tls_ca());
        let proxy = start_proxy_tls(&url, &toml_tls).await;
        let mut conn = through(&proxy).await;
        let version: Option<(String, String)> = conn.query_first("SHOW SESSION STATUS LIKE 'Ssl_version'").await.unwrap();
        let version = version.map(|(_, v)| v).unwrap_or_default();
        assert!(version.starts_with("TLSv1"), "{mode}: Ssl_version = {version:?}");
        conn.disconnect().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn untrusted_upstream_certificate_is_refused() {
    // The system's public CAs did not sign the test server's certificate.
    let toml_tls = "tls = \"verify_identity\"\ntls_ca = \"/etc/ssl/certs/ca-certificates.crt\"\n";
    if !std::path::Path::new("/etc/ssl/certs/ca-certificates.crt").exists() {
        eprintln!("skipped: no system CA bundle");
        return;
    }
    let proxy = start_proxy_tls(&upstream_url(), toml_tls).await;
    match mysql_async::Conn::new(opts(&proxy.mysql.to_string())).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 2026);
            assert!(e.message.contains("TLS"), "{}", e.message);
        }
        other => panic!("expected error 2026, got {:?}", other.map(|_| ())),
    }
}

/// Like `start_proxy_with_url`, but with `[upstream]` TLS keys instead of tls = "disabled".
async fn start_proxy_tls(url: &str, tls_keys: &str) -> Proxy {
    start_proxy_raw(&format!(
        "[upstream]\nurl = \"{url}\"\n{tls_keys}connect_timeout = \"2s\"\n[listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n"
    ))
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_from_applications() {
    let dir = std::path::Path::new(&tls_ca()).parent().unwrap().to_path_buf();
    let listen_tls = format!(
        "[listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
        dir.join("server-cert.pem").display(),
        dir.join("server-key.pem").display()
    );
    let url = upstream_url().replace("127.0.0.1", "localhost");
    for upstream_tls in ["tls = \"disabled\"\n".to_string(), format!("tls = \"verify_identity\"\ntls_ca = \"{}\"\n", tls_ca())] {
        let proxy = start_proxy_raw(&format!("[upstream]\nurl = \"{url}\"\n{upstream_tls}{listen_tls}")).await;
        // The driver refuses to go on unless freshet offers TLS and presents a certificate
        // signed by the CA for 127.0.0.1.
        let ssl = mysql_async::SslOpts::default().with_root_certs(vec![std::path::PathBuf::from(tls_ca()).into()]);
        let mut conn = mysql_async::Conn::new(opts(&proxy.mysql.to_string()).ssl_opts(Some(ssl))).await.unwrap();
        let version: Option<(String, String)> = conn.query_first("SHOW SESSION STATUS LIKE 'Ssl_version'").await.unwrap();
        let upstream_version = version.map(|(_, v)| v).unwrap_or_default();
        assert_eq!(upstream_version.starts_with("TLSv1"), upstream_tls.contains("verify"), "{upstream_tls}: {upstream_version:?}");
        conn.disconnect().await.unwrap();
        // Plain clients are still served.
        let mut plain = through(&proxy).await;
        plain.query_drop("SELECT 1").await.unwrap();
        plain.disconnect().await.unwrap();
    }
}

/// TLS that encrypts without checking the certificate (freshet's own is generated at start).
fn any_cert() -> mysql_async::SslOpts {
    mysql_async::SslOpts::default().with_danger_accept_invalid_certs(true)
}

async fn cipher_of(opts: mysql_async::OptsBuilder) -> Result<String, mysql_async::Error> {
    let mut conn = mysql_async::Conn::new(opts).await?;
    let cipher: Option<(String, String)> = conn.query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'").await?;
    conn.disconnect().await?;
    Ok(cipher.map(|(_, v)| v).unwrap_or_default())
}

fn as_user(opts: mysql_async::OptsBuilder, user: &str, tls: bool) -> mysql_async::OptsBuilder {
    opts.user(Some(user)).pass(Some("pw")).db_name(None::<String>).ssl_opts(tls.then(any_cert))
}

/// What a login ends with: the session's Ssl_cipher being empty or not, or the error.
async fn login(opts: mysql_async::OptsBuilder) -> String {
    match cipher_of(opts).await {
        Ok(cipher) if cipher.is_empty() => "plaintext".into(),
        Ok(_) => "tls".into(),
        Err(mysql_async::Error::Server(e)) => format!("{} {}", e.code, e.message),
        Err(e) => format!("error: {e}"),
    }
}

/// freshet's default TLS model: TLS is offered to clients with a generated certificate; a
/// client's leg decides the server's leg (`preferred`), so that the session looks as it does
/// directly — also to accounts created REQUIRE SSL. With `required` the server's leg is always
/// TLS, and a REQUIRE SSL account over a plaintext client leg is still refused, unless
/// `trust_plain_clients` says the plaintext leg is safe.
#[tokio::test(flavor = "multi_thread")]
async fn tls_follows_the_client_and_require_ssl_is_honoured() {
    let mut root = direct().await;
    for (user, require) in [("tlsmodel_ssl", "REQUIRE SSL"), ("tlsmodel_plain", "")] {
        root.query_drop(format!("DROP USER IF EXISTS '{user}'@'127.0.0.1'")).await.unwrap();
        root.query_drop(format!("CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw' {require}")).await.unwrap();
    }
    let direct_addr = upstream_addr();
    let mut expected = Vec::new();
    for user in ["tlsmodel_ssl", "tlsmodel_plain"] {
        for tls in [false, true] {
            expected.push(login(as_user(opts(&direct_addr), user, tls)).await);
        }
    }
    assert!(expected[0].starts_with("1045 Access denied for user 'tlsmodel_ssl'@'127.0.0.1'"), "{expected:?}");
    assert_eq!(expected[1..], ["tls", "plaintext", "tls"]);

    let base = |upstream: &str, listen: &str| {
        format!(
            "[upstream]\nurl = \"{}\"\n{upstream}\n[listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{listen}\n",
            upstream_url()
        )
    };
    // With `required` a plaintext client's session is TLS on the server's leg; the REQUIRE SSL
    // account is still refused over plaintext, unless plaintext is trusted.
    let tls_always = [expected[0].clone(), "tls".into(), "tls".into(), "tls".into()].to_vec();
    let trusted = ["tls", "tls", "tls", "tls"].map(String::from).to_vec();
    for (config, want) in [
        // The default: upstream tls = preferred, a generated certificate, plaintext not trusted.
        (base("", ""), &expected),
        (base("tls = \"required\"", ""), &tls_always),
        (base("tls = \"required\"", "trust_plain_clients = true"), &trusted),
    ] {
        let proxy = start_proxy_raw(&config).await;
        let mut got = Vec::new();
        for user in ["tlsmodel_ssl", "tlsmodel_plain"] {
            for tls in [false, true] {
                got.push(login(as_user(opts(&proxy.mysql.to_string()), user, tls)).await);
            }
        }
        assert_eq!(&got, want, "{config}");
        // The REQUIRE SSL check runs after the OK, when a compressed session is compressed.
        let compressed = as_user(opts(&proxy.mysql.to_string()), "tlsmodel_ssl", false).compression(Some(mysql_async::Compression::fast()));
        assert_eq!(login(compressed).await, want[0], "{config}, compressed");
    }
    // tls = false: nothing offered, a client that insists cannot connect.
    let proxy = start_proxy_raw(&base("", "tls = false")).await;
    assert!(login(as_user(opts(&proxy.mysql.to_string()), "tlsmodel_plain", true)).await.starts_with("error"));
    assert_eq!(login(as_user(opts(&proxy.mysql.to_string()), "tlsmodel_plain", false)).await, "plaintext");
}

/// Logs in with the mariadb client over TLS of the given version: the session's cipher, or
/// the error.
async fn cli_cipher(port: u16, user: &str, tls_version: &str) -> String {
    let out = tokio::process::Command::new("mariadb")
        .args(["--no-defaults", "--protocol=tcp", "-h127.0.0.1", "-P", &port.to_string(), &format!("-u{user}"), "-ppw", "--ssl"])
        .args(["--ssl-verify-server-cert=0", &format!("--tls-version={tls_version}"), "--connect-expired-password", "-N"])
        .args(["-e", "SHOW SESSION STATUS LIKE 'Ssl_cipher'"])
        .output()
        .await
        .expect("the mariadb client (installed by scripts/mariadb.sh)");
    if out.status.success() {
        String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1).unwrap_or("").to_string()
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("1045") { "1045".into() } else { err.lines().find(|l| l.contains("ERROR")).unwrap_or(&err).to_string() }
    }
}

/// `REQUIRE CIPHER 'c'`: the server compares `c` with the cipher of the connection it sees,
/// which through freshet is freshet's own leg. A client whose TLS with freshet uses another
/// cipher must be refused as the server refuses it directly (an audit: an account requiring
/// TLS 1.3's TLS_AES_256_GCM_SHA384 logged in through freshet over TLS 1.2 and read cached
/// rows, because freshet's leg to the server was TLS 1.3).
#[tokio::test(flavor = "multi_thread")]
async fn require_cipher_is_checked_against_the_clients_own_tls() {
    let mut root = direct().await;
    let user = "tlsmodel_cipher";
    root.query_drop(format!("DROP USER IF EXISTS '{user}'@'127.0.0.1'")).await.unwrap();
    root.query_drop(format!("CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw' REQUIRE CIPHER 'TLS_AES_256_GCM_SHA384'")).await.unwrap();
    // An expired password's sandbox, where the server answers every statement but SET
    // PASSWORD with 1820 (the check's question too): such a TLS client is let in as directly.
    let expired = "tlsmodel_expired";
    root.query_drop(format!("DROP USER IF EXISTS '{expired}'@'127.0.0.1'")).await.unwrap();
    root.query_drop(format!("CREATE USER '{expired}'@'127.0.0.1' IDENTIFIED BY 'pw' PASSWORD EXPIRE")).await.unwrap();
    let direct_port: u16 = upstream_addr().rsplit(':').next().unwrap().parse().unwrap();
    let sandbox = cli_cipher(direct_port, expired, "TLSv1.3").await;
    assert!(sandbox.contains("1820"), "directly, the expired account's session: {sandbox}");
    assert_eq!(cli_cipher(direct_port, user, "TLSv1.2").await, "1045", "directly over TLS 1.2");
    assert_eq!(cli_cipher(direct_port, user, "TLSv1.3").await, "TLS_AES_256_GCM_SHA384", "directly over TLS 1.3");
    for upstream in ["preferred", "required"] {
        let config = format!(
            "[upstream]\nurl = \"{}\"\ntls = \"{upstream}\"\n[listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n",
            upstream_url()
        );
        let proxy = start_proxy_raw(&config).await;
        let port = proxy.mysql.port();
        assert_eq!(cli_cipher(port, user, "TLSv1.2").await, "1045", "through freshet over TLS 1.2 (upstream {upstream})");
        assert_eq!(cli_cipher(port, user, "TLSv1.3").await, "TLS_AES_256_GCM_SHA384", "through freshet over TLS 1.3 (upstream {upstream})");
        assert_eq!(cli_cipher(port, expired, "TLSv1.3").await, sandbox, "through freshet, the expired account (upstream {upstream})");
    }
}

/// freshet's own connections (readiness probe, binlog, fills, the packet limit) use TLS as
/// `[upstream] tls` says; `preferred` means TLS when the server offers it, as the test server
/// does. Checked from the server's side, on the connection itself.
#[tokio::test(flavor = "multi_thread")]
async fn own_connections_honour_upstream_tls() {
    for (mode, want_tls) in [("preferred", true), ("required", true), ("disabled", false)] {
        let toml = format!("[upstream]\nurl = \"{}\"\ntls = \"{mode}\"\n", upstream_url());
        let config = freshet_testkit::freshet::config(&toml);
        let (mut conn, _) = freshet_proxy::upstream::connect_own(&config.upstream).await.unwrap();
        let cipher: Option<(String, String)> = conn.query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'").await.unwrap();
        let cipher = cipher.map(|(_, v)| v).unwrap_or_default();
        assert_eq!(!cipher.is_empty(), want_tls, "{mode}: Ssl_cipher = {cipher:?}");
        conn.disconnect().await.unwrap();
    }
}
