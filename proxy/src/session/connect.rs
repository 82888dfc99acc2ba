//! The connection phase: relaying the handshake so that the client authenticates against the
//! upstream itself, and freshet never sees or keeps a password.
//!
//! ```text
//! client            freshet                              upstream
//!    |                 |---------- TCP connect ------------->|
//!    |<-- handshake ---|<-------- initial handshake ---------|  capabilities narrowed
//!    |--- response --->|------ [SSL request, TLS] ---------->|  optional, to upstream only
//!    |                 |-------- handshake response -------->|  capabilities narrowed
//!    |<===== auth switch / more data / OK / ERR: relayed both ways =====>|
//! ```
//!
//! The upstream leg is TLS when the client's is (under `[upstream] tls = preferred`), or
//! always with `required` and the verify modes ([`crate::upstream::UpstreamConnector::use_tls`]).
//! When freshet upgrades the upstream leg to TLS, that leg carries one packet more (the SSL
//! request) than the client's, so sequence ids are shifted by one between the legs until the
//! authentication ends. When the upstream leg is TLS and the client's is not, the server's OK
//! is held until the account is known not to require TLS ([`super::require_tls`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::metrics::UpstreamFailure;
use crate::protocol::handshake::{ClientHandshake, ServerHandshake};
use crate::protocol::io::Packet;
use crate::protocol::response::{ERR, ErrPacket, OK, codes};
use crate::protocol::{Capabilities, PacketIo, StatusFlags};
use crate::tls::{MaybeTls, Rewind};
use crate::upstream::{ConnectError, UpstreamStream};

use super::require_tls::RequireTlsCheck;
use super::sha2_bridge::{self, BridgeError, BridgeKey};
use super::state::SessionState;
use super::{ClientStream, Session, SessionError, Shared};

/// How long a client may take to complete the handshake and authentication (MySQL's own
/// connect_timeout default). An unauthenticated client must not hold an upstream connection.
const AUTH_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshake packets are small; anything larger is not a handshake.
const HANDSHAKE_LIMIT: usize = 64 * 1024;

pub(super) async fn establish(client: TcpStream, shared: Arc<Shared>) -> Result<Session, SessionError> {
    if shared.packet_limit.due() {
        // The server's max_allowed_packet may have changed since it was read (it applies to
        // connections made after a SET GLOBAL); this session keeps the limit it starts with.
        let shared = shared.clone();
        tokio::spawn(async move {
            let upstream = &shared.config.upstream;
            if let Ok(Err(e)) = tokio::time::timeout(upstream.connect_timeout, shared.packet_limit.read_from_server(upstream)).await {
                tracing::warn!(error = %e, "cannot read the upstream's max_allowed_packet");
            }
        });
    }
    let host = client.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let mut client = PacketIo::new(MaybeTls::Plain(client));
    let tcp = match shared.upstream.connect().await {
        Ok(tcp) => tcp,
        Err(e) => {
            // A server may answer a connection with an ERR packet instead of its handshake
            // (e.g. "Too many connections"); clients report it as the reason.
            let reply = ErrPacket::new(codes::CANNOT_CONNECT, "08S01", format!("freshet: {e}"));
            send_and_flush(&mut client, 0, &reply.encode()).await;
            return Err(SessionError::Upstream(e.to_string(), UpstreamFailure::Connect));
        }
    };
    let upstream = PacketIo::new(tcp);
    // Read before the server authenticates the session: a privilege change it may have missed
    // moves the generation past this one.
    let login_generation = shared.engine.get().map(|e| e.access.generation());
    let login_at = std::time::Instant::now();
    match tokio::time::timeout(AUTH_TIMEOUT, handshake(client, upstream, &shared, host)).await {
        Ok(Ok(established)) => Ok(Session {
            client: established.client,
            upstream: established.upstream,
            caps: established.caps,
            status: established.status,
            statements: Default::default(),
            shared,
            upstream_idle: true,
            upstream_rested: std::time::Instant::now(),
            answered_since_rest: false,
            keep_alive_timer: Box::pin(tokio::time::sleep(std::time::Duration::from_secs(86_400))),
            keep_alive_set: None,
            queued_without_look: 0,
            client_stopped_sending: false,
            auth: established.auth,
            state: established.state,
            identity: None,
            memo: Default::default(),
            memo_epoch: 0,
            memo_generation: login_generation,
            memo_rights_read: 0,
            reread_generation: login_generation,
            errored: false,
            privileges_changed_in_part: false,
            login_generation,
            login_at,
            refused_with: None,
            types_before: None,
            login_rights_epoch: 0,
            shapes: Default::default(),
            owed: Default::default(),
            learning: None,
            using_up_next_transaction: false,
            unlogged_write: false,
            unlogged_in_transaction: false,
            refused_at: None,
            relayed: None,
            capture: None,
            own: super::ryw::OwnWrites::default(),
            encoded: Default::default(),
            columns_memo: Default::default(),
        }),
        Ok(Err(e)) => Err(e),
        // The client's sequence is unknown here; closing says enough to a stalled client.
        Err(_) => Err(SessionError::Upstream("authentication did not finish in time".into(), UpstreamFailure::Protocol)),
    }
}

struct Established {
    client: PacketIo<ClientStream>,
    upstream: PacketIo<UpstreamStream>,
    caps: Capabilities,
    status: StatusFlags,
    auth: AuthState,
    state: SessionState,
}

/// The handshake; errors that call for an ERR packet have sent it to the client.
async fn handshake(
    mut client: PacketIo<ClientStream>,
    mut upstream: PacketIo<TcpStream>,
    shared: &Shared,
    host: String,
) -> Result<Established, SessionError> {
    let (server, offered, mut reply) = match greet(&mut client, &mut upstream, shared).await {
        Ok(greeted) => greeted,
        Err(e) => return Err(report(&mut client, e).await),
    };
    if ClientHandshake::is_ssl_request(&reply.payload) {
        let Some(acceptor) = &shared.client_tls else {
            let e = protocol_error(codes::SSL_CONNECTION, "TLS requested, but freshet has no [listen] tls_cert", reply.last_seq);
            return Err(report(&mut client, e).await);
        };
        let (MaybeTls::Plain(tcp), hello) = client.into_parts().map_err(SessionError::ClientIo)? else {
            return Err(SessionError::ClientGone);
        };
        let tls = acceptor.accept(Rewind::new(hello, tcp)).await.map_err(SessionError::ClientIo)?;
        client = PacketIo::new(MaybeTls::Tls(Box::new(tls)));
        reply = client.read_packet(HANDSHAKE_LIMIT).await.map_err(SessionError::from_client)?;
    }
    match authenticate(&mut client, upstream, shared, &server, (offered, host), &reply).await {
        Ok((mut upstream, caps, status, auth, state)) => {
            // Both legs agreed on compression with the same capabilities; it starts after
            // the OK (the upstream's may have started already, for the REQUIRE SSL check).
            if caps.has(Capabilities::COMPRESS) {
                client.start_compression();
                if !upstream.is_compressed() {
                    upstream.start_compression();
                }
            }
            Ok(Established { client, upstream, caps, status, auth, state })
        }
        Err(e) => Err(report(&mut client, e).await),
    }
}

/// Sends the ERR packet an error calls for, if any, and hands the error back.
async fn report(client: &mut PacketIo<ClientStream>, e: SessionError) -> SessionError {
    if let SessionError::ClientProtocol { reply, seq } | SessionError::PacketTooLarge { reply, seq } = &e {
        send_and_flush(client, *seq, &reply.encode()).await;
    }
    e
}

/// Relays the server's greeting, narrowed to what freshet relays; returns the client's reply.
async fn greet(
    client: &mut PacketIo<ClientStream>,
    upstream: &mut PacketIo<TcpStream>,
    shared: &Shared,
) -> Result<(ServerHandshake, Capabilities, Packet), SessionError> {
    let greeting = upstream.read_packet(HANDSHAKE_LIMIT).await.map_err(SessionError::from_upstream)?;
    if greeting.payload.first() == Some(&ERR) {
        // Relay the server's refusal (too many connections, host blocked, ...) as it is.
        send_and_flush(client, greeting.seq, &greeting.payload).await;
        return Err(SessionError::Upstream("upstream refused the connection".into(), UpstreamFailure::Connect));
    }
    let server = ServerHandshake::parse(&greeting.payload)
        .map_err(|e| SessionError::Upstream(format!("upstream handshake: {e}"), UpstreamFailure::Protocol))?;
    tracing::Span::current().record("conn_id", server.connection_id);
    let mut offered = Capabilities(server.capabilities.0 & Capabilities::RELAYABLE);
    if shared.client_tls.is_some() {
        offered.0 |= Capabilities::SSL;
    }
    send(client, 0, &server.with_capabilities(offered)).await?;
    let reply = client.read_packet(HANDSHAKE_LIMIT).await.map_err(SessionError::from_client)?;
    Ok((server, offered, reply))
}

/// Forwards the client's handshake response (over TLS if configured) and relays the
/// authentication exchange to its end.
async fn authenticate(
    client: &mut PacketIo<ClientStream>,
    mut upstream: PacketIo<TcpStream>,
    shared: &Shared,
    server: &ServerHandshake,
    (offered, host): (Capabilities, String),
    reply: &Packet,
) -> Result<(PacketIo<UpstreamStream>, Capabilities, StatusFlags, AuthState, SessionState), SessionError> {
    let response = ClientHandshake::parse(&reply.payload)
        .map_err(|e| protocol_error(codes::HANDSHAKE, &format!("Bad handshake: {e}"), reply.last_seq))?;
    let span = tracing::Span::current();
    span.record("user", response.user.as_str());
    if let Some(db) = &response.database {
        span.record("db", db.as_str());
    }
    // TLS is per leg: the SSL bit is never part of what the session negotiated.
    let caps = Capabilities(response.capabilities.0 & offered.0 & !Capabilities::SSL);

    let tls_failure = |e: ConnectError| {
        shared.metrics.upstream_failure(UpstreamFailure::Tls);
        SessionError::ClientProtocol {
            reply: ErrPacket::new(codes::SSL_CONNECTION, "HY000", format!("freshet: {e}")),
            seq: reply.last_seq.wrapping_add(1),
        }
    };
    let client_plain = matches!(client.get_ref(), MaybeTls::Plain(_));
    let use_tls = shared.upstream.use_tls(!client_plain, server.capabilities.has(Capabilities::SSL)).map_err(tls_failure)?;
    // The handshake response goes out as packet 1 on a plain leg and as packet 2 after an SSL
    // request on a TLS leg; the two legs' sequence ids differ by `shift` until auth ends.
    let (mut upstream, upstream_seq) = if use_tls {
        let with_ssl = Capabilities(caps.0 | Capabilities::SSL);
        upstream.queue_packet(1, &response.ssl_request(with_ssl));
        upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
        // The server says nothing between the SSL request and the TLS handshake.
        let (tcp, unread) = upstream.into_parts().map_err(|e| SessionError::Upstream(e.to_string(), UpstreamFailure::Tls))?;
        if !unread.is_empty() {
            return Err(SessionError::Upstream("upstream spoke before the TLS handshake".into(), UpstreamFailure::Tls));
        }
        let mut upstream = PacketIo::new(shared.upstream.upgrade(tcp).await.map_err(tls_failure)?);
        upstream.queue_packet(2, &response.with_capabilities(with_ssl));
        (upstream, 2u8)
    } else {
        let (tcp, unread) = upstream.into_parts().map_err(|e| SessionError::Upstream(e.to_string(), UpstreamFailure::Protocol))?;
        let mut upstream = PacketIo::with_buffer(MaybeTls::Plain(tcp), unread);
        upstream.queue_packet(1, &response.with_capabilities(caps));
        (upstream, 1u8)
    };
    upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
    let mut auth = AuthState { scramble: server.scramble.clone(), plugin: server.auth_plugin.clone() };
    // A plaintext client's leg is checked unless trusted; a TLS client's cipher always.
    let check = use_tls && (!client_plain || !shared.config.listen.trust_plain_clients);
    let relay = AuthRelay {
        shift: upstream_seq.wrapping_sub(reply.seq),
        state: &mut auth,
        bridge: (use_tls && client_plain).then_some(&shared.sha2_key),
        require_tls: check.then(|| RequireTlsCheck {
            caps,
            user: response.user.clone(),
            host,
            password: response.has_password,
            client_cipher: super::require_tls::client_cipher(client.get_ref()),
        }),
    };
    let status = relay_auth(client, &mut upstream, relay).await?;
    let mut state = SessionState::new(response.user.clone());
    state.client_collation(u16::from(response.collation));
    Ok((upstream, caps, status, auth, state))
}

/// The scramble and plugin in force: from the greeting, replaced by each auth switch.
#[derive(Debug, Clone, Default)]
pub(super) struct AuthState {
    pub scramble: Vec<u8>,
    pub plugin: String,
}

impl AuthState {
    /// Takes the plugin and scramble of an auth switch request (0xfe, name, NUL, data).
    fn switch(&mut self, payload: &[u8]) {
        let rest = &payload[1..];
        if let Some(end) = rest.iter().position(|&b| b == 0) {
            self.plugin = String::from_utf8_lossy(&rest[..end]).into_owned();
            let data = &rest[end + 1..];
            self.scramble = data.strip_suffix(&[0]).unwrap_or(data).to_vec();
        }
    }
}

/// How one authentication exchange is relayed.
pub(super) struct AuthRelay<'a> {
    /// Upstream sequence id minus client sequence id (the legs differ by their SSL requests).
    pub shift: u8,
    pub state: &'a mut AuthState,
    /// Set when the client leg is plain and the upstream leg TLS: caching_sha2_password's
    /// key exchange is then answered by freshet ([`sha2_bridge`]).
    pub bridge: Option<&'a tokio::sync::OnceCell<Arc<BridgeKey>>>,
    /// Set when a plaintext client's login goes over a TLS leg and plaintext is not trusted:
    /// the server's OK is held until the account is known not to require TLS.
    pub require_tls: Option<RequireTlsCheck>,
}

/// Where a caching_sha2_password full authentication stands, when freshet bridges it.
enum FullAuth {
    No,
    Requested,
    KeySent(Arc<BridgeKey>),
}

/// Relays the authentication exchange until the upstream accepts (OK) or refuses (ERR).
///
/// Which side speaks next depends on the plugin (caching_sha2_password's fast path has the
/// server send two packets in a row; a public-key request has the client speak twice), so
/// both sides are read at once and whatever arrives is forwarded. Returns the OK's status.
pub(super) async fn relay_auth<C, U>(
    client: &mut PacketIo<C>,
    upstream: &mut PacketIo<U>,
    relay: AuthRelay<'_>,
) -> Result<StatusFlags, SessionError>
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    U: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let AuthRelay { mut shift, state, bridge, require_tls } = relay;
    let mut full_auth = FullAuth::No;
    loop {
        tokio::select! {
            biased;
            frame = upstream.read_frame() => {
                let frame = frame.map_err(SessionError::from_upstream)?;
                let payload = frame.payload();
                if payload.first() == Some(&0xfe) && payload.len() > 1 {
                    state.switch(payload);
                }
                if bridge.is_some() && state.plugin == sha2_bridge::PLUGIN && payload == sha2_bridge::PERFORM_FULL_AUTH {
                    full_auth = FullAuth::Requested;
                }
                if payload.first() == Some(&OK) && let Some(check) = &require_tls {
                    let client_seq = frame.seq().wrapping_sub(shift);
                    if check.caps.has(Capabilities::COMPRESS) && !upstream.is_compressed() {
                        upstream.start_compression();
                    }
                    if check.refuses(upstream).await? {
                        return Err(SessionError::ClientProtocol { reply: check.refusal(), seq: client_seq });
                    }
                }
                client.queue_frame_with_seq(&frame, frame.seq().wrapping_sub(shift));
                client.flush().await.map_err(SessionError::ClientIo)?;
                match payload.first() {
                    Some(&OK) => {
                        let caps = Capabilities(Capabilities::PROTOCOL_41);
                        return Ok(crate::protocol::response::ok_status(payload, caps).unwrap_or_default());
                    }
                    Some(&ERR) => return Err(SessionError::AuthFailed),
                    _ => {}
                }
            }
            frame = client.read_frame() => {
                let frame = frame.map_err(SessionError::from_client)?;
                let reply_seq = frame.seq().wrapping_add(1);
                match (&full_auth, bridge) {
                    (FullAuth::Requested, Some(cell)) if frame.payload() == [sha2_bridge::REQUEST_PUBLIC_KEY] => {
                        let key = cell.get_or_try_init(generate_key).await.map_err(|e| access_denied(&e, reply_seq))?.clone();
                        client.queue_packet(reply_seq, &key.key_packet());
                        client.flush().await.map_err(SessionError::ClientIo)?;
                        // The upstream never sees the key request and its answer.
                        shift = shift.wrapping_sub(2);
                        full_auth = FullAuth::KeySent(key);
                    }
                    (FullAuth::KeySent(key), _) if frame.payload().len() == key.size() => {
                        let password = key.decrypt_password(frame.payload(), &state.scramble).map_err(|e| access_denied(&e, reply_seq))?;
                        upstream.queue_packet(frame.seq().wrapping_add(shift), &password);
                        upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
                        full_auth = FullAuth::No;
                    }
                    _ => {
                        upstream.queue_frame_with_seq(&frame, frame.seq().wrapping_add(shift));
                        upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
                    }
                }
            }
        }
    }
}

/// RSA-2048, like MySQL's own key; generated on a blocking thread (it takes a while).
async fn generate_key() -> Result<Arc<BridgeKey>, BridgeError> {
    tokio::task::spawn_blocking(|| BridgeKey::generate(2048).map(Arc::new)).await.map_err(|e| BridgeError::KeyGen(e.to_string()))?
}

fn access_denied(e: &BridgeError, seq: u8) -> SessionError {
    SessionError::ClientProtocol { reply: ErrPacket::new(1045, "28000", format!("Access denied: freshet: {e}")), seq }
}

fn protocol_error(code: u16, message: &str, last_seq: u8) -> SessionError {
    SessionError::ClientProtocol { reply: ErrPacket::new(code, "08S01", message), seq: last_seq.wrapping_add(1) }
}

async fn send(client: &mut PacketIo<ClientStream>, seq: u8, payload: &[u8]) -> Result<(), SessionError> {
    client.queue_packet(seq, payload);
    client.flush().await.map_err(SessionError::ClientIo)
}

async fn send_and_flush(client: &mut PacketIo<ClientStream>, seq: u8, payload: &[u8]) {
    client.queue_packet(seq, payload);
    let _ = client.flush().await;
}

#[cfg(test)]
mod tests {
    //! caching_sha2_password cannot be exercised live here (MariaDB has no server side for
    //! it), so these drive [`relay_auth`] with the packets a MySQL 8 server sends, in the order
    //! it sends them, and check what each side receives.

    use super::*;
    use tokio::io::DuplexStream;

    struct Legs {
        relay_client: PacketIo<DuplexStream>,
        relay_upstream: PacketIo<DuplexStream>,
        app: PacketIo<DuplexStream>,
        server: PacketIo<DuplexStream>,
    }

    fn legs() -> Legs {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let (c, d) = tokio::io::duplex(64 * 1024);
        Legs { relay_client: PacketIo::new(a), app: PacketIo::new(b), relay_upstream: PacketIo::new(c), server: PacketIo::new(d) }
    }

    async fn send(io: &mut PacketIo<DuplexStream>, seq: u8, payload: &[u8]) {
        io.queue_packet(seq, payload);
        io.flush().await.unwrap();
    }

    async fn recv(io: &mut PacketIo<DuplexStream>) -> (u8, Vec<u8>) {
        let p = io.read_packet(1 << 20).await.unwrap();
        (p.seq, p.payload.to_vec())
    }

    fn plain_relay(state: &mut AuthState, shift: u8) -> AuthRelay<'_> {
        AuthRelay { shift, state, bridge: None, require_tls: None }
    }

    fn sha2_state() -> AuthState {
        AuthState { scramble: (b'a'..=b't').collect(), plugin: sha2_bridge::PLUGIN.into() }
    }

    fn ok() -> Vec<u8> {
        crate::protocol::response::ok_packet(StatusFlags(StatusFlags::AUTOCOMMIT)).to_vec()
    }

    #[tokio::test]
    async fn caching_sha2_fast_path_over_a_tls_upstream() {
        let Legs { mut relay_client, mut relay_upstream, mut app, mut server } = legs();
        // The upstream leg carried the SSL request too: its sequence ids are one ahead.
        let relay = tokio::spawn(async move {
            let mut state = sha2_state();
            relay_auth(&mut relay_client, &mut relay_upstream, plain_relay(&mut state, 1)).await
        });
        send(&mut server, 3, &[0x01, 0x03]).await; // fast_auth_success
        send(&mut server, 4, &ok()).await;
        assert_eq!(recv(&mut app).await, (2, vec![0x01, 0x03]));
        assert_eq!(recv(&mut app).await, (3, ok()));
        assert!(relay.await.unwrap().unwrap().has(StatusFlags::AUTOCOMMIT));
    }

    #[tokio::test]
    async fn caching_sha2_full_authentication_with_the_servers_public_key() {
        let Legs { mut relay_client, mut relay_upstream, mut app, mut server } = legs();
        let relay = tokio::spawn(async move {
            let mut state = sha2_state();
            relay_auth(&mut relay_client, &mut relay_upstream, plain_relay(&mut state, 0)).await
        });
        send(&mut server, 2, &[0x01, 0x04]).await; // perform_full_authentication
        assert_eq!(recv(&mut app).await, (2, vec![0x01, 0x04]));
        send(&mut app, 3, &[0x02]).await; // request_public_key
        assert_eq!(recv(&mut server).await, (3, vec![0x02]));
        let key = [&[0x01u8][..], b"-----BEGIN PUBLIC KEY-----\nMIIBIjAN...\n-----END PUBLIC KEY-----\n"].concat();
        send(&mut server, 4, &key).await;
        assert_eq!(recv(&mut app).await, (4, key));
        let encrypted = vec![0xa5; 256];
        send(&mut app, 5, &encrypted).await;
        assert_eq!(recv(&mut server).await, (5, encrypted));
        send(&mut server, 6, &ok()).await;
        assert_eq!(recv(&mut app).await, (6, ok()));
        relay.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn refusal_ends_the_exchange() {
        let Legs { mut relay_client, mut relay_upstream, mut app, mut server } = legs();
        let relay = tokio::spawn(async move {
            let mut state = sha2_state();
            relay_auth(&mut relay_client, &mut relay_upstream, plain_relay(&mut state, 0)).await
        });
        let err = ErrPacket::new(1045, "28000", "Access denied").encode();
        send(&mut server, 2, &err).await;
        assert_eq!(recv(&mut app).await, (2, err));
        assert!(matches!(relay.await.unwrap(), Err(SessionError::AuthFailed)));
    }

    /// A MySQL 8 server over TLS wants the password in clear; the plain client asks for the
    /// RSA key. freshet answers with its own key and hands the server the decrypted password.
    #[tokio::test]
    async fn caching_sha2_full_authentication_bridged_to_a_tls_upstream() {
        let Legs { mut relay_client, mut relay_upstream, mut app, mut server } = legs();
        let key = Arc::new(BridgeKey::generate(1024).unwrap());
        let cell = tokio::sync::OnceCell::new_with(Some(key));
        let relay = tokio::spawn(async move {
            let mut state = sha2_state();
            let relay = AuthRelay { shift: 1, state: &mut state, bridge: Some(&cell), require_tls: None };
            relay_auth(&mut relay_client, &mut relay_upstream, relay).await
        });
        send(&mut server, 3, &[0x01, 0x04]).await;
        assert_eq!(recv(&mut app).await, (2, vec![0x01, 0x04]));
        send(&mut app, 3, &[0x02]).await;
        let (seq, key_packet) = recv(&mut app).await;
        assert_eq!(seq, 4);
        let scramble: Vec<u8> = (b'a'..=b't').collect();
        let encrypted = sha2_bridge::encrypt_like_a_client(&key_packet, "pa55word", &scramble);
        send(&mut app, 5, &encrypted).await;
        // The server saw neither the key request nor the key: its next packet is number 4.
        assert_eq!(recv(&mut server).await, (4, b"pa55word\0".to_vec()));
        send(&mut server, 5, &ok()).await;
        assert_eq!(recv(&mut app).await, (6, ok()));
        relay.await.unwrap().unwrap();
    }

    #[test]
    fn auth_switch_replaces_plugin_and_scramble() {
        let mut state = AuthState::default();
        state.switch(b"\xfecaching_sha2_password\0abcdefghijklmnopqrst\0");
        assert_eq!(state.plugin, "caching_sha2_password");
        assert_eq!(state.scramble, b"abcdefghijklmnopqrst");
    }
}
