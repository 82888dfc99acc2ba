//! freshet's configuration: one TOML file, overridable by environment variables.
//!
//! ```toml
//! [upstream]
//! url = "mysql://user:pass@127.0.0.1:3306/app"
//! [listen]
//! mysql = "127.0.0.1:3307"
//! ```
//!
//! `examples/freshet.toml` documents every key with its default. Each key `K` of section `S`
//! can be overridden by the environment variable `FRESHET_S_K` (upper case, e.g.
//! `FRESHET_UPSTREAM_URL`); booleans are written `true` or `false` there, lists
//! comma-separated (`FRESHET_ADMIN_USERS=root,ops`). The cached queries (`[[cache]]`) come
//! from the file only.
//!
//! Loading never stops at the first problem: unknown sections and keys, values of the wrong
//! type, missing required keys and bad environment overrides are all collected, each with its
//! location (file:line:column or the variable's name), and returned together in one
//! [`ConfigError`]. The binary exits with [`ConfigError::EXIT_CODE`] (64, EX_USAGE).
//!
//! Every default is the one that is safe in production; it is documented on its field.

mod load;
mod server_id;
mod units;
mod url;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use load::{ConfigError, Location, Problem};
pub use units::{ByteSize, format_duration, parse_duration};
pub use url::UpstreamUrl;

/// The whole configuration, validated.
#[derive(Clone, Debug)]
pub struct Config {
    pub upstream: Upstream,
    pub listen: Listen,
    pub limits: Limits,
    pub log: Log,
    pub memory: Memory,
    pub fill: Fill,
    pub replica: Replica,
    pub warm: Warm,
    pub consistency: Consistency,
    pub admin: Admin,
    /// `[caches]`: what to do with the `[[cache]]` entries below.
    pub cache_policy: CachePolicy,
    pub binlog: Binlog,
    pub shutdown: Shutdown,
    /// The queries to cache, in file order (`[[cache]]`). Names are unique.
    pub caches: Vec<CacheSpec>,
}

/// `[upstream]`: the MySQL or MariaDB server freshet sits in front of.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// Required. Address and credentials; the credentials serve freshet's own connections
    /// (health checks, fills, binlog), never the relay.
    pub url: UpstreamUrl,
    /// TLS from freshet to the upstream. Default `preferred`, like the MySQL clients.
    pub tls: TlsMode,
    /// PEM file with the CA certificates to trust for `verify_ca` and `verify_identity`.
    /// Default: none (then those modes cannot be used).
    pub tls_ca: Option<PathBuf>,
    /// How long connecting to the upstream (TCP and TLS) may take. Default 5s.
    pub connect_timeout: Duration,
}

/// How freshet's connections to the upstream use TLS (the names of MySQL's `--ssl-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// Never.
    Disabled,
    /// When the server offers it, without verifying the certificate.
    Preferred,
    /// Always, without verifying the certificate; fail if the server does not offer it.
    Required,
    /// Always, and the certificate must be signed by `tls_ca`.
    VerifyCa,
    /// As `VerifyCa`, and the certificate must name the url's host.
    VerifyIdentity,
}

/// `[listen]`: where freshet accepts connections.
#[derive(Clone, Debug)]
pub struct Listen {
    /// MySQL protocol, for applications. Default 127.0.0.1:3307 (loopback: a sidecar's
    /// application is in the same pod).
    pub mysql: SocketAddr,
    /// HTTP admin endpoint: /metrics, /live, /ready. Default 127.0.0.1:9307.
    pub admin: SocketAddr,
    /// `tls`: whether applications are offered TLS. Default true, as a server does: a client
    /// that asks for TLS gets it, and the upstream leg of its session is TLS too.
    pub offer_tls: bool,
    /// `tls_cert`/`tls_key`: PEM certificate chain and private key presented to applications.
    /// Both or neither; default neither: a self-signed certificate is generated at each start
    /// (as MariaDB does without ssl_cert), which encrypts but proves no identity.
    pub tls: Option<ListenTls>,
    /// `trust_plain_clients`: whether a client's plaintext connection to freshet counts as
    /// secure (the sidecar case: loopback inside one pod). When false, an account the server
    /// requires TLS of (`REQUIRE SSL`) is refused over a plaintext client leg even when
    /// freshet's own leg to the server is TLS, as the server would refuse it directly.
    /// Default false.
    pub trust_plain_clients: bool,
}

/// The certificate freshet presents to applications that ask for TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenTls {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// `[limits]`: what one client may cost.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest packet (after reassembly of 16 MiB frames) a client may send; a larger one ends
    /// that session with the server's own error (1153) and a reset. Default
    /// [`MaxPacket::Server`]: the upstream's `max_allowed_packet`, so that drivers, which read
    /// that variable through freshet, may send exactly what the server accepts.
    pub max_packet: MaxPacket,
    /// Client connections served at once; more wait in the kernel's accept queue. Default 4096.
    pub max_connections: u32,
    /// Longest statement freshet reads as a query: a longer one is relayed as it is, never
    /// tokenized, normalized or parsed, and never answered from a cache (its shape in SHOW
    /// PROXIED QUERIES is its first word). Bounds what classifying one statement costs. 1KiB
    /// to 16MiB; default 256KiB, far beyond cached lookups (an IN list of 1,000 ids is ~8KiB).
    pub max_query: ByteSize,
    /// Most values an `IN (...)` list may have to be answered from a cache; a longer list is
    /// relayed. Bounds the keys one cached read looks up (each may need a fill). More than 0;
    /// default 1000.
    pub max_in_list: u32,
}

/// `[limits] max_packet`: where the client packet limit comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxPacket {
    /// `"server"`: the upstream's `max_allowed_packet`, read at start and again when freshet
    /// reconnects (a packet of that size or more is refused, as the server refuses it).
    Server,
    /// An explicit size, 1KiB..=1GiB (the protocol's maximum): packets up to it are accepted.
    Fixed(ByteSize),
}

/// `[log]`
#[derive(Clone, Debug)]
pub struct Log {
    /// A tracing filter directive, e.g. "info" or "freshet_proxy=debug,info". Default "info".
    pub level: String,
}

/// `[memory]`: what the cached views may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    /// The byte budget of all cached views together; past it, keys are evicted (and filled
    /// again on their next read). More than 0. Default 256MiB: a sidecar shares its pod's
    /// memory with the application.
    pub limit: ByteSize,
    /// The byte budget of the query shapes freshet remembers (normalized texts with their
    /// verdicts and counters, behind routing and SHOW PROXIED QUERIES), on top of `limit`;
    /// past it the least recently used shapes are forgotten. 64KiB to 1GiB; default 16MiB.
    pub query_shapes: ByteSize,
}

/// `[fill]`: cache misses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    /// How long a read that misses the cache waits for its fill from the upstream; past it the
    /// read is relayed to the upstream instead (the fill goes on, for the next read). More than
    /// 0. Default 1s: long enough for a fill of a loaded server, short enough that a stuck fill
    /// costs an application only a second.
    pub timeout: Duration,
    /// Where misses are filled from. Default `upstream`: no disk, ready in seconds.
    pub source: FillSourceKind,
}

/// `[fill] source`: the two fill sources (ARCHITECTURE.md, "Fill sources").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillSourceKind {
    /// SQL on the live server, tied to a binlog position (`upstream`).
    Upstream,
    /// The local RocksDB replica of the cached tables (`replica`, needs `[replica] path`);
    /// tables still being copied fill from the upstream meanwhile.
    Replica,
}

/// `[replica]`: the local RocksDB replica, used when `[fill] source = "replica"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replica {
    /// The RocksDB directory (created if missing; one freshet per directory). Required with
    /// `[fill] source = "replica"`; default none.
    pub path: Option<PathBuf>,
    /// Rows the snapshot copies per batch (one RocksDB write, one unit of resumption), at
    /// most: a batch also stops at a sixteenth of `memory` in bytes. 1..=1000000. Default 5000.
    pub copy_batch_rows: u32,
    /// The replica's own memory, beside `[memory] limit`: half RocksDB's write buffers (every
    /// column family's together), a quarter its block cache, a sixteenth the rows of one copy
    /// batch or index-build chunk (held about three times over). 16MiB..=64GiB. Default 128MiB.
    pub memory: ByteSize,
}

/// `[warm]`: the warm restart: which keys of each cache were read lately, kept in a file and
/// filled again in the background at the next start (either fill source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warm {
    /// The state directory where freshet keeps its file of hot keys (`warm-keys`; created if
    /// missing). Default none: no warm restart, every cache starts empty.
    pub dir: Option<PathBuf>,
    /// How many of the most recently read keys of each cache are remembered. 1..=1000000.
    /// Default 10000.
    pub keys_per_cache: u32,
    /// How often the file is written besides at shutdown (so that a killed freshet still
    /// starts warm). At least 1s. Default 60s.
    pub save_interval: Duration,
    /// How many remembered keys are filled at once at start, so that the warm-up does not
    /// stampede the fill source. 1..=1024. Default 8.
    pub concurrency: u32,
}

/// `[consistency]`: how stale a cached read may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Consistency {
    /// Replication lag (how far freshet's binlog reader is behind the upstream) above which
    /// cached reads are relayed to the upstream until the lag is back under it. 0 relays
    /// whenever any lag is measured. Default 5s.
    pub max_lag: Duration,
    /// How long freshet trusts what it learned about an account's right to read a cache (by
    /// relaying that account's first read of it) before asking the server again. Privilege
    /// changes seen in the binlog (GRANT, REVOKE, ... ) forget everything at once; this age is
    /// the safety net for changes the binlog does not show (e.g. an expired password, a
    /// server restarted with other grant tables). Default 60s.
    pub max_privilege_age: Duration,
    /// Read-your-writes per session: after a session's write, its cached reads wait until
    /// the views have applied the binlog past that write (at most `ryw_timeout`, else the
    /// read is relayed). Sessions that did not write are not slowed. Default true.
    pub read_your_writes: bool,
    /// How long a cached read after the session's own write waits for the views to apply it
    /// before it is relayed instead. Default 100ms.
    pub ryw_timeout: Duration,
}

/// `[admin]`: freshet's admin SQL (SHOW CACHES, CREATE CACHE, ...) on the MySQL listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admin {
    /// The accounts allowed to run it, as the server identifies a session (`CURRENT_USER()`,
    /// asked on the session's own connection): `user@host` exactly as the server stores the
    /// account (`ops@10.1.2.3`, `ops@%`), or a bare `user` for that user name at any host.
    /// An anonymous account is never an admin, whatever name the client gave. Empty: nobody.
    /// Default `["root"]`, who can already do anything on the upstream. In the environment
    /// (`FRESHET_ADMIN_USERS`) a comma-separated list, e.g. `root,ops@10.1.2.3`; an empty
    /// value is the empty list.
    pub users: Vec<String>,
}

/// `[caches]`: what to do with the `[[cache]]` entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachePolicy {
    /// true: a `[[cache]]` query freshet cannot cache stops start-up with an error. false: it
    /// is logged as a warning and the query is relayed like any other. Default true, so that a
    /// mistake is seen at deploy time rather than as a missing speed-up.
    pub strict: bool,
}

/// `[shutdown]`: what freshet does after SIGTERM (or SIGINT).
///
/// For `drain` it goes on as before (accepting, serving) but answers /ready with 503; then it
/// stops accepting, closes idle sessions at once and lets sessions in the middle of a command
/// finish theirs, until `grace` after the signal; then it exits 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shutdown {
    /// How long after the signal freshet may go on at most; set it to the pod's
    /// terminationGracePeriodSeconds (or a little less). More than `drain`. Default 30s,
    /// Kubernetes' default grace period.
    pub grace: Duration,
    /// How long after the signal freshet keeps accepting new connections and serving idle
    /// sessions, for an application that is stopped at the same time and drains through
    /// freshet (the classic sidecar form). Default 0s: a native sidecar is stopped only after
    /// the application has exited.
    pub drain: Duration,
}

/// `[binlog]`: freshet as a replica of the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binlog {
    /// The server id freshet registers with; it must be unique among all the replicas of the
    /// upstream (a second registration with the same id disconnects the first). Default 0:
    /// chosen at start-up from the host name and process id, see
    /// [`Binlog::effective_server_id`].
    pub server_id: u32,
}

impl Binlog {
    /// The server id to register with: `server_id`, or when it is 0 one derived from the host
    /// name and process id, in 1_000_000..=4_000_000_000 (never 0, nor the small ids servers
    /// are usually given by hand). The same host and pid always give the same id.
    pub fn effective_server_id(&self) -> u32 {
        match self.server_id {
            0 => server_id::derive(&server_id::host_name(), std::process::id()),
            id => id,
        }
    }
}

/// One `[[cache]]` entry: a query whose results freshet keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSpec {
    /// Unique among the caches; letters, digits and underscores. Used in metrics labels.
    pub name: String,
    /// A SELECT with `?` placeholders for the lookup keys; not empty.
    pub query: String,
}

impl Config {
    /// Reads and validates the file at `path`, with overrides from the process environment.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let source = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::single(
                Location::File { path: path.to_path_buf(), line: 0, column: 0 },
                format!("cannot read the config file: {e}"),
            )
        })?;
        Config::parse(&source, path, &|name| std::env::var(name).ok(), &std::env::vars().map(|(k, _)| k).collect::<Vec<_>>())
    }

    /// Validates `source` (the text of `path`); `env` looks up overrides and `env_names` lists
    /// the environment's variable names so that misspelt overrides are reported too.
    pub fn parse(
        source: &str,
        path: &std::path::Path,
        env: &dyn Fn(&str) -> Option<String>,
        env_names: &[String],
    ) -> Result<Config, ConfigError> {
        load::parse(source, path, env, env_names)
    }
}
