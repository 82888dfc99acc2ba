//! One client session: its connection, its own upstream connection, and the command loop.
//!
//! A session is established in [`connect`] (the handshake, relayed so that the client
//! authenticates against the upstream itself) and then serves commands in [`command`] until
//! the client quits or something breaks. Each command is read whole from the client, then
//! dispatched: admin statements are answered in [`admin`], reads matched to a cache go through
//! the routing layer (`cache::route`) from [`cached`], which writes the answer's packets, and
//! everything else is relayed. [`state`] reads what the session's own statements may have
//! changed, a text's statements one at a time ([`statements`]): whether they may have turned
//! binlogging off is [`binlogging`]'s to say, where the tokenizer may read them otherwise than
//! the server [`misreading`]'s. [`probe`] asks the server who the session is (account,
//! database, settings) when that matters.
//!
//! Invariants:
//! - Between commands both connections are idle: the whole reply to the previous command has
//!   been relayed. The session parses replies just enough to find their end (result-set
//!   terminators, MORE_RESULTS_EXISTS, LOCAL INFILE requests), so it always knows when it may
//!   answer a command itself.
//! - `status` holds the server status flags of the last OK/EOF seen, so the session knows
//!   whether a transaction is open or autocommit is off (cached reads are relayed then).
//! - `identity` is the server's own answer about the session, or None: it is dropped
//!   whenever a command may have changed it, and asked again before the next cached read.
//! - The upstream connection lives exactly as long as the session: it is closed when the
//!   session ends, whatever the reason, with COM_QUIT when it is between commands. The client's
//!   connection ends as a direct one would: reset when the server reset the upstream's or
//!   refused a packet over max_allowed_packet, closed in order otherwise.

mod admin;
mod binlogging;
mod cached;
mod command;
mod connect;
mod execute;
mod glance;
mod misreading;
mod owed;
mod probe;
mod reply;
mod require_tls;
mod ryw;
mod sha2_bridge;
mod state;
mod statements;

/// A hit's result set, queued for the client (a step of the hit path with a bench of its own).
pub use cached::{Encoded, Reply, queue_answer};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tracing::{Instrument, debug, info_span, warn};

use freshet_config::Config;

use crate::metrics::{ProxyMetrics, SessionEnd, UpstreamFailure};
use crate::protocol::io::ReadError;
use crate::protocol::response::ErrPacket;
use crate::protocol::{Capabilities, PacketIo, StatusFlags};
use crate::tls::MaybeTls;
use crate::upstream::{UpstreamConnector, UpstreamStream};

/// ER_SERVER_SHUTDOWN: "Server shutdown in progress".
const SERVER_SHUTDOWN: u16 = 1053;

/// A client connection, before or after its TLS upgrade.
pub type ClientStream = MaybeTls<tokio_rustls::server::TlsStream<crate::tls::Rewind<TcpStream>>>;

/// What all sessions share.
pub struct Shared {
    pub config: Arc<Config>,
    pub upstream: UpstreamConnector,
    pub metrics: Arc<ProxyMetrics>,
    /// TLS towards applications, unless `[listen] tls = false`.
    pub client_tls: Option<tokio_rustls::TlsAcceptor>,
    /// The largest packet a client may send (`[limits] max_packet`, by default the server's).
    pub packet_limit: crate::upstream::PacketLimit,
    /// freshet's RSA key for caching_sha2_password across a plain and a TLS leg; made on
    /// first use.
    pub sha2_key: tokio::sync::OnceCell<Arc<sha2_bridge::BridgeKey>>,
    /// The cache engine: started with the server when `[[cache]]` entries exist, else by the
    /// first CREATE CACHE.
    pub engine: EngineCell,
    /// Cancelled when freshet shuts down: idle sessions close at once.
    pub stop: Arc<crate::shutdown::Stop>,
}

/// Where the cache engine lives once started (shared with the admin endpoint).
pub type EngineCell = Arc<tokio::sync::OnceCell<Arc<crate::cache::Engine>>>;

/// What the session knows of a statement the client prepared (ids are the upstream's).
#[derive(Debug, Clone)]
pub struct PreparedStatement {
    pub sql: bytes::Bytes,
    pub params: u16,
    pub columns: u16,
    /// Set when the statement's text is a cached query's shape.
    pub route: Option<cached::PreparedRoute>,
    /// Its text runs other statements (`statements::runs_statements`): an error tells nothing of
    /// what ran.
    pub runs_statements: bool,
}

/// The session's prepared statements by id. The id 0xffffffff names the statement prepared
/// last (MariaDB's, for a PREPARE and an EXECUTE sent together): what is looked up under it
/// is that statement, so the types an execute sends through it are the statement's.
#[derive(Default)]
struct Statements {
    by_id: BTreeMap<u32, PreparedStatement>,
    last: Option<u32>,
}

impl Statements {
    /// MariaDB's id of the statement prepared last.
    const LAST: u32 = u32::MAX;

    fn id(&self, id: u32) -> Option<u32> {
        if id == Self::LAST { self.last } else { Some(id) }
    }

    fn get(&self, id: &u32) -> Option<&PreparedStatement> {
        self.by_id.get(&self.id(*id)?)
    }

    fn get_mut(&mut self, id: &u32) -> Option<&mut PreparedStatement> {
        let id = self.id(*id)?;
        self.by_id.get_mut(&id)
    }

    fn insert(&mut self, id: u32, statement: PreparedStatement) {
        self.last = Some(id);
        self.by_id.insert(id, statement);
    }

    fn remove(&mut self, id: &u32) -> Option<PreparedStatement> {
        let id = self.id(*id)?;
        if self.last == Some(id) {
            self.last = None;
        }
        self.by_id.remove(&id)
    }

    fn clear(&mut self) {
        self.by_id.clear();
        self.last = None;
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut PreparedStatement> {
        self.by_id.values_mut()
    }

    /// A prepare the server refused: MariaDB's "last" names no statement then.
    fn refused(&mut self) {
        self.last = None;
    }
}

pub struct Session {
    client: PacketIo<ClientStream>,
    upstream: PacketIo<UpstreamStream>,
    /// Capabilities both the client and freshet agreed on; they shape every reply.
    caps: Capabilities,
    status: StatusFlags,
    /// By the server's statement id. A B-tree, not a hash map: every execute looks its
    /// statement up, and a few comparisons of a u32 cost less than hashing it with SipHash.
    statements: Statements,
    shared: Arc<Shared>,
    /// True while the upstream is between commands (it can be sent COM_QUIT).
    upstream_idle: bool,
    /// When the upstream last finished a command: the server's `wait_timeout` counts from
    /// there, however many reads freshet answered since (`Session::rest_upstream`).
    upstream_rested: std::time::Instant,
    /// A read was answered from a view since then: the client is busy while the server hears
    /// nothing (`Session::keep_alive_at`).
    answered_since_rest: bool,
    /// The keep-alive's timer, one per session and set again only when its instant moves
    /// (after a command reached the server), so that a hit registers no timer of its own.
    keep_alive_timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// The instant `keep_alive_timer` is set to.
    keep_alive_set: Option<std::time::Instant>,
    /// Commands the client had waiting since the upstream was last looked at
    /// (`command::LOOK_EVERY`).
    queued_without_look: u32,
    /// The client's end was found closed during a command and freshet ended its own sending
    /// side to the server (`Session::upstream_frame`).
    client_stopped_sending: bool,
    /// The authentication scramble and plugin in force, for COM_CHANGE_USER.
    auth: connect::AuthState,
    /// What the session's own statements say about it (unfollowed, stale, unlogged).
    state: state::SessionState,
    /// Who the server says the session is, and its database and settings (the probe's
    /// answer); None until asked, and again after anything that may change it.
    identity: Option<crate::cache::route::Identity>,
    /// What this session's account may read, as far as this session has asked.
    memo: crate::cache::access::Memo,
    /// `SessionState::rights_epoch` when the memo was last kept: a USE (or COM_INIT_DB) since
    /// makes the server read the session's database privileges again, so what the session
    /// learnt for itself is forgotten at the next probe if a privilege change was seen since
    /// its login.
    memo_epoch: u64,
    /// The access generation read before the server last surely read the session's
    /// privileges, as of the memo's keeping (its login, or the last USE or COM_INIT_DB before
    /// the memo was kept): its privileges are of that generation or later, so a re-read (one
    /// that may be) clears the memo only if a privilege change was seen since.
    memo_generation: Option<u64>,
    /// `SessionState::rights_read_epoch` when `memo_generation` was taken.
    memo_rights_read: u64,
    /// The access generation read before the last statement that surely made the server
    /// read the session's privileges again was sent (`SessionState::rights_read_epoch`).
    reread_generation: Option<u64>,
    /// The server answered the command being relayed with an error (one of its results).
    errored: bool,
    /// The server answered the command being relayed with an error that says a privilege
    /// statement took effect in part, unlogged (`access::changed_privileges_in_part`).
    privileges_changed_in_part: bool,
    /// The access generation read before the server last authenticated the session (login,
    /// COM_CHANGE_USER): what the session learns under a later one is its own
    /// (`route::Standing::login_generation`).
    login_generation: Option<u64>,
    /// When the server last authenticated the session (`route::Standing::login_at`).
    login_at: std::time::Instant,
    /// `SessionState::rights_epoch` when the server last authenticated the session: if it
    /// moved since (USE, COM_INIT_DB, a statement not followed such as SET ROLE), the server
    /// read the session's privileges again after its login (`route::Standing::reread`).
    login_rights_epoch: u64,
    /// The statement id, types and `server_has_types` of a routed statement before the execute
    /// being relayed sent types (or was sent with them): the server takes an execute's types
    /// only if it accepts the execute, so a refusal (1210, 1835) gives them back.
    types_before: Option<execute::TypesBefore>,
    /// The error code of the last one-row question's refusal (the probe's), if it was refused.
    refused_with: Option<u16>,
    /// The relayed read in progress teaches the account's right to a cache.
    learning: Option<crate::cache::access::Learning>,
    /// The relayed read in progress is a cached table's, relayed for what was set for the next
    /// transaction: answered with rows, the server used that up (`Session::learn_from`).
    using_up_next_transaction: bool,
    /// The command in progress may write while binlogging is off: evict after it.
    unlogged_write: bool,
    /// An unlogged write was evicted inside a transaction still open: others refill from what
    /// is committed until it ends, so its end (COMMIT, `SET autocommit = 1`, a statement that
    /// commits implicitly, a rollback) evicts again (`Session::after_relayed`).
    unlogged_in_transaction: bool,
    /// The result (counted from 1) at which the server refused a statement of the command in
    /// progress before running it ([`crate::cache::access::refused_before_running`]).
    refused_at: Option<usize>,
    /// The verdict entry of the relayed query in progress, to count it when it ends.
    relayed: cached::Relayed,
    /// Column definitions being captured from the reply in progress.
    capture: Option<Capture>,
    /// Read-your-writes: whether the session wrote, and what its next cached read waits for.
    own: ryw::OwnWrites,
    /// The rows of the cached answer being written, kept between answers for their buffers.
    encoded: cached::Encoded,
    /// The column definitions of the last cached answer, for the next hit of its shape.
    columns_memo: crate::cache::ColumnsMemo,
    /// Text shapes of cached queries this session sent, to classify their next texts without
    /// tokenizing them (`matching::shape`).
    shapes: crate::matching::Shapes,
    /// The last read answered from a view, until the server runs a statement of the session's
    /// (`owed`: sent first if that statement may read the diagnostics the read would have left).
    owed: owed::Owed,
}

/// Why a session stopped; logged once and counted, where it ends.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("client closed the connection")]
    ClientGone,
    #[error("client I/O error: {0}")]
    ClientIo(std::io::Error),
    /// The client broke the protocol; `reply` is sent to it before closing.
    #[error("client protocol error: {}", reply.message)]
    ClientProtocol { reply: ErrPacket, seq: u8 },
    #[error("client packet too large: {}", reply.message)]
    PacketTooLarge { reply: ErrPacket, seq: u8 },
    #[error("authentication failed at the upstream")]
    AuthFailed,
    #[error("{0}")]
    Upstream(String, UpstreamFailure),
    #[error("the upstream closed the idle connection")]
    UpstreamClosedIdle,
    /// The upstream reset its connection (wait_timeout, a crash); the client's is reset too.
    #[error("the upstream reset the connection")]
    UpstreamReset,
    /// freshet is shutting down and the session was waiting for a command.
    #[error("freshet is shutting down")]
    ShuttingDown,
}

impl SessionError {
    fn end(&self) -> SessionEnd {
        match self {
            SessionError::ClientGone | SessionError::ClientIo(_) => SessionEnd::ClientGone,
            SessionError::ClientProtocol { .. } => SessionEnd::ClientProtocol,
            SessionError::PacketTooLarge { .. } => SessionEnd::PacketTooLarge,
            SessionError::AuthFailed => SessionEnd::AuthFailed,
            SessionError::Upstream(..) => SessionEnd::Upstream,
            SessionError::UpstreamClosedIdle | SessionError::UpstreamReset => SessionEnd::UpstreamClosed,
            SessionError::ShuttingDown => SessionEnd::Shutdown,
        }
    }

    fn from_client(e: ReadError) -> Self {
        match e {
            ReadError::Closed => SessionError::ClientGone,
            ReadError::Io(e) => SessionError::ClientIo(e),
            // Word for word and sequence id for sequence id what the server sends (drivers
            // match on the text); the session then ends with a reset, as the server's does.
            ReadError::TooLarge { seq, .. } => SessionError::PacketTooLarge {
                reply: ErrPacket::new(
                    crate::protocol::response::codes::PACKET_TOO_LARGE,
                    "08S01",
                    "Got a packet bigger than 'max_allowed_packet' bytes".to_string(),
                ),
                seq: seq.wrapping_add(1),
            },
            ReadError::OutOfOrder { expected } => SessionError::ClientProtocol {
                reply: ErrPacket::new(crate::protocol::response::codes::OUT_OF_ORDER, "08S01", "Got packets out of order"),
                seq: expected,
            },
        }
    }

    fn from_upstream(e: ReadError) -> Self {
        if let ReadError::Io(io) = &e
            && io.kind() == std::io::ErrorKind::ConnectionReset
        {
            return SessionError::UpstreamReset;
        }
        SessionError::Upstream(format!("upstream connection lost: {e}"), UpstreamFailure::Lost)
    }
}

/// Serves one client connection to its end. Never panics on bad input; logs the end once.
pub async fn serve(client: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let span =
        info_span!("session", client = %peer, user = tracing::field::Empty, db = tracing::field::Empty, conn_id = tracing::field::Empty);
    async move {
        let metrics = shared.metrics.clone();
        metrics.connections_total.inc();
        metrics.connections_open.inc();
        let _ = client.set_nodelay(true);
        let end = match connect::establish(client, shared).await {
            Ok(mut session) => {
                let result = session.run().await;
                session.close(&result).await;
                result
            }
            Err(e) => Err(e),
        };
        let end = match end {
            Ok(()) => SessionEnd::Quit,
            Err(e) => {
                // Every failure of freshet's side of the upstream is counted here, once.
                if let SessionError::Upstream(_, kind) = &e {
                    metrics.upstream_failure(*kind);
                }
                match e.end() {
                    SessionEnd::ClientGone | SessionEnd::AuthFailed | SessionEnd::UpstreamClosed | SessionEnd::Shutdown => {
                        debug!(reason = %e, "session ended")
                    }
                    _ => warn!(reason = %e, "session ended"),
                }
                e.end()
            }
        };
        metrics.session_ended(end);
        metrics.connections_open.dec();
    }
    .instrument(span)
    .await
}

impl Session {
    /// Closes both connections. The client first gets the ERR packet the error calls for.
    async fn close(&mut self, result: &Result<(), SessionError>) {
        if let Err(SessionError::ClientProtocol { reply, seq } | SessionError::PacketTooLarge { reply, seq }) = result {
            self.client.queue_packet(*seq, &reply.encode());
            let _ = self.client.flush().await;
        }
        if let Err(SessionError::ShuttingDown) = result {
            // What a server shutting down tells its idle clients (ER_SERVER_SHUTDOWN), so that
            // a driver reports why its pooled connection went away.
            let reply = ErrPacket::new(SERVER_SHUTDOWN, "08S01", "freshet is shutting down".to_string());
            self.client.queue_packet(0, &reply.encode());
            let _ = self.client.flush().await;
        }
        if self.upstream_idle
            && !matches!(result, Err(SessionError::Upstream(..) | SessionError::UpstreamClosedIdle | SessionError::UpstreamReset))
        {
            self.upstream.queue_packet(0, &[crate::protocol::Command::Quit as u8]);
            let _ = self.upstream.flush().await;
        }
        let _ = self.upstream.shutdown().await;
        self.account_bytes();
        // The client's connection ends as a direct one would: reset when the server reset
        // the upstream's, and after a packet over max_allowed_packet (the server resets then
        // too), else closed in order.
        // And after a frame refused as out of order whose payload had begun to come: the
        // server closes with those bytes unread.
        let unread = matches!(result, Err(SessionError::ClientProtocol { reply, .. }) if reply.code == crate::protocol::response::codes::OUT_OF_ORDER)
            && self.client.buffered() > 4;
        if unread || matches!(result, Err(SessionError::UpstreamReset | SessionError::PacketTooLarge { .. })) {
            self.client.get_ref().reset_on_drop();
        } else {
            let _ = self.client.shutdown().await;
        }
    }

    /// The upstream finished a command and waits for the next: the server's idle clock starts.
    fn rest_upstream(&mut self) {
        self.upstream_idle = true;
        self.upstream_rested = std::time::Instant::now();
        self.answered_since_rest = false;
    }

    /// When the server's session must hear from freshet again, if reads were answered from a
    /// view since it last did: half the session's `wait_timeout` after its last command (the
    /// server counts the timeout from there; a direct client would have kept it busy).
    fn keep_alive_at(&self) -> Option<std::time::Instant> {
        let identity = self.identity.as_ref().filter(|_| self.answered_since_rest)?;
        Some(self.upstream_rested + identity.keep_alive)
    }

    /// [`Session::keep_alive_at`], with the session's timer set to it.
    fn arm_keep_alive(&mut self) -> Option<std::time::Instant> {
        let at = self.keep_alive_at()?;
        if self.keep_alive_set != Some(at) {
            self.keep_alive_timer.as_mut().reset(at.into());
            self.keep_alive_set = Some(at);
        }
        Some(at)
    }

    /// Keeps the server's session alive while the client reads cached answers: a COM_PING,
    /// its OK dropped. The ping sets `ROW_COUNT()` to 0 and keeps the rest; no client sees
    /// that, since a read answered here is owed (`owed.rs`) and is sent again, setting
    /// `ROW_COUNT()` to -1, before any statement that may read the diagnostics.
    async fn keep_alive(&mut self) -> Result<(), SessionError> {
        tracing::debug!("the session's upstream connection nears its wait_timeout: pinged");
        self.upstream.queue_packet(0, &[crate::protocol::Command::Ping as u8]);
        self.upstream_idle = false;
        self.upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
        let ok = self.upstream.read_packet(1024).await.map_err(SessionError::from_upstream)?;
        if ok.payload.first() != Some(&crate::protocol::response::OK) {
            return Err(SessionError::Upstream(
                "upstream protocol error: a keep-alive ping not answered with OK".into(),
                crate::metrics::UpstreamFailure::Protocol,
            ));
        }
        self.rest_upstream();
        Ok(())
    }

    /// Moves the byte counts of both connections into the metrics.
    fn account_bytes(&mut self) {
        let m = &self.shared.metrics;
        let (client_in, client_out) = self.client.take_counts();
        let (up_in, up_out) = self.upstream.take_counts();
        m.bytes_from_clients.add(client_in);
        m.bytes_to_clients.add(client_out);
        m.bytes_from_upstream.add(up_in);
        m.bytes_to_upstream.add(up_out);
    }
}

/// Column definitions being captured from a relayed reply, for the shape `key`; `noted`: the
/// registry's count of forgets before the query went upstream (see `Registry::store_columns`);
/// `status`: the status flags that ended the result set (how the server ran the read).
struct Capture {
    key: crate::cache::ColumnsKey,
    defs: Vec<bytes::Bytes>,
    noted: u64,
    status: u16,
}
