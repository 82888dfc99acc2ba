//! What the end-to-end tests of the news example share (`correctness.rs`, `faults.rs`): freshet
//! run in this process in front of a MariaDB, writers straight to MariaDB that cover every way a
//! row can enter, leave or move between cache keys, readers through freshet, and the final
//! comparison of cached answers with MariaDB's own.
//!
//! With `World::faults` set, writers and readers outlive a server that goes away: a failed
//! statement reconnects and goes on (counted in `fault_errors`), instead of failing the test.

#![allow(dead_code)]

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use freshet_examples::app::{self, Param, ReadKind};
use freshet_examples::load;
use freshet_examples::rng::{Rng, Zipf};
use freshet_proxy::cache::{Engine, RelayReason};
use mysql_async::prelude::*;
use mysql_async::{Conn, Params, Row, TxOpts, Value};

pub const SIZES: load::Sizes = load::Sizes { users: 200, stories: 500, votes: 3_000, comments: 2_000 };
/// Between a writer's transactions, so that on two cores the readers and freshet's binlog
/// applier get their share.
pub const WRITER_PAUSE: Duration = Duration::from_millis(3);
/// Attempts at getting one read answered from the cache before the test gives up on it.
pub const ATTEMPTS: usize = 50;
/// Reads remembered for the comparison (the last ones of the storm).
const RECENT: usize = 300;
/// Retries of a transaction that deadlocked or timed out on a lock.
const TX_RETRIES: usize = 20;
const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
const ER_LOCK_DEADLOCK: u16 = 1213;
const LOCK_WAIT: &str = "SET SESSION innodb_lock_wait_timeout = 5";

/// The test server's URL; fails the test (never skips) when it is not set.
#[allow(unused_imports)] // faults.rs starts its own servers
pub use freshet_testkit::mysql_url as server_url;
/// `server`'s URL with its database replaced by `db`.
pub use freshet_testkit::url_with_db as url_for;

/// freshet's config: the example's `[[cache]]` entries verbatim, pointed at `upstream`, with a
/// small memory budget and a lag bound that keeps reads cached during the write storm.
pub fn freshet_toml(upstream: &str, memory: &str, max_lag: &str, replica: Option<&std::path::Path>) -> String {
    let example = app::config().expect("examples/news/freshet.toml parses");
    let mut toml = format!(
        "[upstream]\nurl = \"{upstream}\"\ntls = \"disabled\"\nconnect_timeout = \"5s\"\n\
         [listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
         [memory]\nlimit = \"{memory}\"\n[fill]\ntimeout = \"2s\"\n[consistency]\nmax_lag = \"{max_lag}\"\n\
         [admin]\nusers = [\"freshet\"]\n"
    );
    if let Some(path) = replica {
        toml = toml.replace("[fill]\n", "[fill]\nsource = \"replica\"\n");
        toml.push_str(&format!("[replica]\npath = \"{}\"\ncopy_batch_rows = 500\n", path.display()));
    }
    for cache in &example.caches {
        let query = cache.query.replace('\\', "\\\\").replace('"', "\\\"");
        toml.push_str(&format!("[[cache]]\nname = \"{}\"\nquery = \"{query}\"\n", cache.name));
    }
    toml
}

/// freshet in this process; stops when dropped.
pub struct Freshet {
    pub url: String,
    /// The admin HTTP listener (`/ready`).
    pub admin: std::net::SocketAddr,
    pub engine: Arc<Engine>,
    /// Serves until dropped.
    pub _running: freshet_testkit::freshet::Running,
}

/// With `replica`, `[fill] source = "replica"` with its RocksDB directory there.
pub async fn start_freshet(upstream: &str, db: &str, memory: &str, max_lag: &str, replica: Option<&std::path::Path>) -> Freshet {
    let toml = freshet_toml(upstream, memory, max_lag, replica);
    let config = freshet_testkit::freshet::config(&toml);
    assert_eq!(config.caches.len(), app::READS.len());
    let server = freshet_proxy::Server::bind(config).await.expect("freshet starts");
    let engine = server.engine().get().cloned().expect("the cache engine starts at bind with [[cache]] entries");
    let running = freshet_testkit::freshet::spawn(server);
    let url = url_for(&format!("mysql://freshet:freshet@{}/x", running.mysql), db);
    Freshet { url, admin: running.admin, engine, _running: running }
}

/// Ids the writers hand out and what they did, shared by all tasks.
pub struct World {
    pub next_story: AtomicU64,
    pub next_user: AtomicU64,
    pub deleted_stories: Mutex<Vec<u64>>,
    pub transactions: AtomicU64,
    pub statements: AtomicU64,
    pub retries: AtomicU64,
    pub reads: AtomicU64,
    pub read_errors: Mutex<Vec<String>>,
    /// The last [`RECENT`] reads (query index, key), oldest first.
    pub recent: Mutex<VecDeque<(usize, Option<u64>)>>,
    pub writing: AtomicBool,
    /// The writers stop after this many transactions (the cap bounds how far the tables, and
    /// top_stories' single partition, grow).
    pub max_transactions: u64,
    /// The server may go away: failed statements reconnect and go on instead of failing.
    pub faults: bool,
    /// Statements and reads that failed because the server was away (`faults` only).
    pub fault_errors: AtomicU64,
}

impl World {
    /// A world on the freshly loaded tables (ids above [`SIZES`] are new).
    pub fn new(max_transactions: u64, faults: bool) -> World {
        World::with_ids(max_transactions, faults, SIZES.stories + 1, SIZES.users + 1)
    }

    /// A world on tables an earlier one wrote to: new ids start above the largest the database
    /// holds, so that no insert of this world collides with a row of the last.
    pub async fn continuing(conn: &mut Conn, max_transactions: u64, faults: bool) -> World {
        let story: Option<u64> = conn.query_first("SELECT MAX(id) FROM stories").await.unwrap().flatten();
        let user: Option<u64> = conn.query_first("SELECT MAX(id) FROM users").await.unwrap().flatten();
        let (story, user) = (story.unwrap_or(0).max(SIZES.stories), user.unwrap_or(0).max(SIZES.users));
        World::with_ids(max_transactions, faults, story + 1, user + 1)
    }

    fn with_ids(max_transactions: u64, faults: bool, next_story: u64, next_user: u64) -> World {
        World {
            max_transactions,
            faults,
            fault_errors: AtomicU64::new(0),
            next_story: AtomicU64::new(next_story),
            next_user: AtomicU64::new(next_user),
            deleted_stories: Mutex::new(Vec::new()),
            transactions: AtomicU64::new(0),
            statements: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            read_errors: Mutex::new(Vec::new()),
            recent: Mutex::new(VecDeque::new()),
            writing: AtomicBool::new(true),
        }
    }

    pub fn max_story(&self) -> u64 {
        self.next_story.load(Ordering::Relaxed) - 1
    }

    pub fn max_user(&self) -> u64 {
        self.next_user.load(Ordering::Relaxed) - 1
    }
}

/// Key choices: mostly the generator's hot ids (so that writes land on cached partitions),
/// sometimes any id including new and never-existing ones.
pub struct Keys {
    pub stories: Zipf,
    pub users: Zipf,
}

impl Keys {
    pub fn new() -> Keys {
        Keys { stories: Zipf::new(SIZES.stories, 1.0), users: Zipf::new(SIZES.users, 0.8) }
    }

    pub fn story(&self, rng: &mut Rng, world: &World) -> u64 {
        if rng.percent(70) { self.stories.sample(rng) } else { rng.uniform(world.max_story() + 3) }
    }

    pub fn user(&self, rng: &mut Rng, world: &World) -> u64 {
        if rng.percent(80) { self.users.sample(rng) } else { rng.uniform(world.max_user() + 2) }
    }
}

/// The writes. Each is one or more statements with their parameters, decided before the
/// transaction runs so that a retry repeats exactly the same thing.
#[derive(Clone, Copy, Debug)]
pub enum Write {
    NewVote,
    RetractVote,
    MoveVote,
    NewComment,
    DeleteComment,
    EditComment,
    MoveComment,
    RenameUser,
    NewUser,
    ChangeAuthor,
    RetitleStory,
    NewStory,
    DeleteStory,
}

impl Write {
    const WEIGHTED: [(Write, u32); 13] = [
        (Write::NewVote, 20),
        (Write::RetractVote, 12),
        (Write::MoveVote, 8),
        (Write::NewComment, 12),
        (Write::DeleteComment, 6),
        (Write::EditComment, 4),
        (Write::MoveComment, 6),
        (Write::RenameUser, 8),
        (Write::NewUser, 2),
        (Write::ChangeAuthor, 6),
        (Write::RetitleStory, 5),
        (Write::NewStory, 4),
        (Write::DeleteStory, 3),
    ];

    pub fn pick(rng: &mut Rng) -> Write {
        let total: u32 = Self::WEIGHTED.iter().map(|(_, w)| w).sum();
        let mut x = (rng.next_u64() % u64::from(total)) as u32;
        for (write, weight) in Self::WEIGHTED {
            if x < weight {
                return write;
            }
            x -= weight;
        }
        Write::NewVote
    }

    /// The statements of this write.
    pub fn statements(self, rng: &mut Rng, keys: &Keys, world: &World, serial: u64) -> Vec<(&'static str, Vec<Value>)> {
        let story = keys.story(rng, world);
        let user = keys.user(rng, world);
        let u = |n: u64| Value::UInt(n);
        let s = |t: String| Value::Bytes(t.into_bytes());
        match self {
            Write::NewVote => vec![("INSERT IGNORE INTO votes (user_id, story_id) VALUES (?, ?)", vec![u(user), u(story)])],
            Write::RetractVote => {
                vec![(
                    "DELETE FROM votes WHERE story_id = ? AND user_id >= ? ORDER BY user_id LIMIT 1",
                    vec![u(story), u(rng.uniform(SIZES.users))],
                )]
            }
            Write::MoveVote => {
                // A vote leaves one story's partition for another's; IGNORE skips a user who
                // already voted on the target.
                let to = keys.story(rng, world);
                vec![(
                    "UPDATE IGNORE votes SET story_id = ? WHERE story_id = ? AND user_id >= ? ORDER BY user_id LIMIT 1",
                    vec![u(to), u(story), u(rng.uniform(SIZES.users))],
                )]
            }
            Write::NewComment => vec![(
                "INSERT INTO comments (story_id, author_id, body, created_at) VALUES (?, ?, ?, NOW())",
                vec![u(story), u(user), s(format!("Comment #{serial} by user {user}: «it's 'quoted'» ✓"))],
            )],
            Write::DeleteComment => vec![("DELETE FROM comments WHERE story_id = ? ORDER BY id DESC LIMIT 1", vec![u(story)])],
            Write::EditComment => {
                vec![(
                    "UPDATE comments SET body = ? WHERE story_id = ? ORDER BY id LIMIT 1",
                    vec![s(format!("edited #{serial}")), u(story)],
                )]
            }
            Write::MoveComment => {
                let to = keys.story(rng, world);
                vec![("UPDATE comments SET story_id = ? WHERE story_id = ? ORDER BY id LIMIT 1", vec![u(to), u(story)])]
            }
            Write::RenameUser => vec![match rng.next_u64() % 4 {
                0 => ("UPDATE users SET name = ? WHERE id = ?", vec![s(format!("user{user} ✎{serial}")), u(user)]),
                // Equal to the old name under utf8mb4_general_ci, yet a different value.
                1 => ("UPDATE users SET name = IF(BINARY name = BINARY UPPER(name), LOWER(name), UPPER(name)) WHERE id = ?", vec![u(user)]),
                2 => (
                    "UPDATE users SET name = IF(name LIKE '% ', TRIM(TRAILING ' ' FROM name), CONCAT(name, ' ')) WHERE id = ?",
                    vec![u(user)],
                ),
                _ => ("UPDATE users SET name = ? WHERE id = ?", vec![s(format!("user{user}")), u(user)]),
            }],
            Write::NewUser => {
                let id = world.next_user.fetch_add(1, Ordering::Relaxed);
                vec![("INSERT INTO users (id, name) VALUES (?, ?)", vec![u(id), s(format!("newcomer{id}"))])]
            }
            Write::ChangeAuthor => vec![("UPDATE stories SET author_id = ? WHERE id = ?", vec![u(user), u(story)])],
            Write::RetitleStory => vec![match rng.next_u64() % 3 {
                0 => ("UPDATE stories SET title = ? WHERE id = ?", vec![s(format!("Story {story} — take {serial}")), u(story)]),
                1 => (
                    "UPDATE stories SET title = IF(BINARY title = BINARY UPPER(title), LOWER(title), UPPER(title)) WHERE id = ?",
                    vec![u(story)],
                ),
                _ => (
                    "UPDATE stories SET title = IF(title LIKE '% ', TRIM(TRAILING ' ' FROM title), CONCAT(title, ' ')) WHERE id = ?",
                    vec![u(story)],
                ),
            }],
            Write::NewStory => {
                let id = world.next_story.fetch_add(1, Ordering::Relaxed);
                vec![
                    (
                        "INSERT INTO stories (id, author_id, title, url, created_at) VALUES (?, ?, ?, ?, NOW())",
                        vec![u(id), u(user), s(format!("Fresh story {id}")), s(format!("https://example.com/new/{id}"))],
                    ),
                    ("INSERT IGNORE INTO votes (user_id, story_id) VALUES (?, ?)", vec![u(user), u(id)]),
                ]
            }
            Write::DeleteStory => vec![
                ("DELETE FROM votes WHERE story_id = ?", vec![u(story)]),
                ("DELETE FROM comments WHERE story_id = ?", vec![u(story)]),
                ("DELETE FROM stories WHERE id = ?", vec![u(story)]),
            ],
        }
    }
}

/// One writer: transactions of one to four writes until the deadline, retrying deadlocks.
pub async fn writer(url: String, world: Arc<World>, seed: u64, until: Instant) {
    let mut conn = reconnect(&url, until, Some(LOCK_WAIT)).await;
    let keys = Keys::new();
    let mut rng = Rng::new(seed);
    let mut serial = seed << 40;
    while Instant::now() < until && world.transactions.load(Ordering::Relaxed) < world.max_transactions {
        let writes = if rng.percent(35) { 2 + rng.next_u64() % 3 } else { 1 };
        let mut plan = Vec::new();
        let mut deleted = Vec::new();
        for _ in 0..writes {
            serial += 1;
            let write = Write::pick(&mut rng);
            let statements = write.statements(&mut rng, &keys, &world, serial);
            if let Write::DeleteStory = write {
                deleted.push(statements[0].1[0].clone());
            }
            plan.extend(statements);
        }
        let mut tries = 0;
        loop {
            match run_transaction(&mut conn, &plan).await {
                Ok(()) => break,
                Err(mysql_async::Error::Server(e)) if matches!(e.code, ER_LOCK_DEADLOCK | ER_LOCK_WAIT_TIMEOUT) && tries < TX_RETRIES => {
                    tries += 1;
                    world.retries.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if world.faults && Instant::now() < until && server_went_away(&e) => {
                    // The server went away (or came back and dropped us): the transaction may
                    // or may not have committed; either is fine, the final comparison reads
                    // what MariaDB has. Reconnect and go on with the next one.
                    world.fault_errors.fetch_add(1, Ordering::Relaxed);
                    drop(e);
                    conn = reconnect(&url, until, Some(LOCK_WAIT)).await;
                    break;
                }
                Err(e) => panic!("writer transaction failed: {e}\n{plan:?}"),
            }
        }
        world.transactions.fetch_add(1, Ordering::Relaxed);
        world.statements.fetch_add(plan.len() as u64, Ordering::Relaxed);
        world.deleted_stories.lock().unwrap().extend(deleted.into_iter().map(mysql_async::from_value::<u64>));
        tokio::time::sleep(WRITER_PAUSE).await;
    }
    let _ = conn.disconnect().await;
}

/// Whether `e` says the server or the connection went away (what a fault round expects), as
/// opposed to an error of the statement itself, such as a duplicate key, which is the test's
/// own bug and fails it.
fn server_went_away(e: &mysql_async::Error) -> bool {
    const ER_SERVER_SHUTDOWN: u16 = 1053;
    const ER_QUERY_INTERRUPTED: u16 = 1317;
    const ER_CONNECTION_KILLED: u16 = 1927;
    match e {
        mysql_async::Error::Server(e) => {
            matches!(e.code, ER_SERVER_SHUTDOWN | ER_QUERY_INTERRUPTED | ER_CONNECTION_KILLED | ER_LOCK_DEADLOCK | ER_LOCK_WAIT_TIMEOUT)
        }
        _ => true,
    }
}

/// A new connection to `url`, retried until it works; gives up a minute after `until`.
/// `setup` runs first on it (a writer's short lock wait; a reader through freshet takes none,
/// as a session setting would have its reads relayed).
pub async fn reconnect(url: &str, until: Instant, setup: Option<&str>) -> Conn {
    loop {
        match app::connect(url).await {
            Ok(mut conn) => match setup {
                None => return conn,
                Some(sql) if conn.query_drop(sql).await.is_ok() => return conn,
                Some(_) => {}
            },
            Err(e) if Instant::now() > until + Duration::from_secs(60) => panic!("cannot reconnect to {url}: {e}"),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One statement in autocommit mode, several in one explicit transaction.
pub async fn run_transaction(conn: &mut Conn, plan: &[(&'static str, Vec<Value>)]) -> Result<(), mysql_async::Error> {
    if let [(sql, params)] = plan {
        return conn.exec_drop(*sql, Params::Positional(params.clone())).await;
    }
    let mut tx = conn.start_transaction(TxOpts::default()).await?;
    for (sql, params) in plan {
        if let Err(e) = tx.exec_drop(*sql, Params::Positional(params.clone())).await {
            let _ = tx.rollback().await;
            return Err(e);
        }
    }
    tx.commit().await
}

/// One of the cached queries with its key (None: no parameter).
#[derive(Clone, Debug)]
pub struct Read {
    pub kind: ReadKind,
    pub sql: String,
    pub key: Option<u64>,
}

impl Read {
    /// The SQL with the key as a literal (text protocol).
    pub fn literal(&self) -> String {
        match self.key {
            Some(k) => self.sql.replace('?', &k.to_string()),
            None => self.sql.clone(),
        }
    }

    pub async fn run(&self, conn: &mut Conn, prepared: bool) -> Result<Vec<Row>, mysql_async::Error> {
        match (prepared, self.key) {
            (false, _) => conn.query(self.literal()).await,
            (true, Some(k)) => conn.exec(&self.sql, (k,)).await,
            (true, None) => conn.exec(&self.sql, ()).await,
        }
    }

    pub fn ordered(&self) -> bool {
        self.sql.contains("ORDER BY")
    }
}

/// One reader through freshet: random cached queries, literal or prepared, until the writers
/// stop.
pub async fn reader(url: String, world: Arc<World>, queries: Arc<Vec<(ReadKind, String)>>, seed: u64) {
    let mut conn = app::connect(&url).await.expect("reader connects through freshet");
    let keys = Keys::new();
    let mut rng = Rng::new(seed);
    while world.writing.load(Ordering::Relaxed) {
        let i = pick_read(&queries, &mut rng);
        let (kind, sql) = queries[i].clone();
        let key = match kind.param {
            Param::Story => Some(keys.story(&mut rng, &world)),
            Param::User => Some(keys.user(&mut rng, &world)),
            Param::None => None,
        };
        let read = Read { kind, sql, key };
        if let Err(e) = read.run(&mut conn, rng.percent(50)).await {
            if world.faults {
                world.fault_errors.fetch_add(1, Ordering::Relaxed);
                conn = reconnect(&url, Instant::now(), None).await;
            } else {
                world.read_errors.lock().unwrap().push(format!("{} key {:?}: {e}", read.kind.cache, read.key));
            }
        }
        world.reads.fetch_add(1, Ordering::Relaxed);
        let mut recent = world.recent.lock().unwrap();
        recent.push_back((i, read.key));
        if recent.len() > RECENT {
            recent.pop_front();
        }
    }
    let _ = conn.disconnect().await;
}

/// The index of one of the cached queries, as often as the example's weights say.
pub fn pick_read(queries: &[(ReadKind, String)], rng: &mut Rng) -> usize {
    let total: u32 = queries.iter().map(|(k, _)| k.weight).sum();
    let mut x = (rng.next_u64() % u64::from(total.max(1))) as u32;
    for (i, (kind, _)) in queries.iter().enumerate() {
        if x < kind.weight {
            return i;
        }
        x -= kind.weight;
    }
    0
}

/// The server's binlog position now, as the dataflow's position.
pub async fn server_position(conn: &mut Conn) -> u64 {
    let (file, position): (String, u64) = conn
        .query_first("SHOW MASTER STATUS")
        .await
        .unwrap()
        .map(|r: Row| {
            let file: String = r.get(0).unwrap();
            let position: u64 = r.get(1).unwrap();
            (file, position)
        })
        .expect("binary logging is on (scripts/mariadb.sh)");
    freshet_cdc::BinlogPos::new(file, u32::try_from(position).unwrap()).position().unwrap().0
}

/// Rows as values; sorted (by their rendering) unless the query orders them.
pub fn normalized(rows: Vec<Row>, ordered: bool) -> Vec<Vec<Value>> {
    let mut rows: Vec<Vec<Value>> = rows.into_iter().map(Row::unwrap).collect();
    if !ordered {
        rows.sort_by_cached_key(|r| rendered(r));
    }
    rows
}

/// One row in full (Value's Debug cuts text short), for sorting and for messages.
pub fn rendered(row: &[Value]) -> String {
    let values: Vec<String> = row
        .iter()
        .map(|v| match v {
            Value::Bytes(b) => format!("{:?}", String::from_utf8_lossy(b)),
            other => format!("{other:?}"),
        })
        .collect();
    format!("({})", values.join(", "))
}

pub fn rendered_rows(rows: &[Vec<Value>]) -> String {
    format!("[{}]", rows.iter().map(|r| rendered(r)).collect::<Vec<_>>().join(", "))
}

/// Counts of one cache's view.
pub fn stats(engine: &Engine, cache: &str) -> freshet_dataflow::ViewStats {
    engine.by_name(cache).unwrap_or_else(|| panic!("cache {cache} exists")).stats()
}

/// What the comparison found.
#[derive(Default)]
pub struct Verdicts {
    pub compared: u64,
    pub mismatches: Vec<String>,
    pub never_cached: Vec<String>,
}

/// Reads `read` through freshet until freshet answers it from the cache, then compares that
/// answer with MariaDB's.
pub async fn compare(freshet: &Freshet, through: &mut Conn, direct: &mut Conn, read: &Read, prepared: bool, out: &mut Verdicts) {
    let engine = &freshet.engine;
    let protocol = if prepared { "prepared" } else { "text" };
    let mut cached = None;
    for _ in 0..ATTEMPTS {
        let (engine_hits, view_hits) = (engine.counters.hits.get(), stats(engine, read.kind.cache).hits);
        let rows = read.run(through, prepared).await.unwrap_or_else(|e| panic!("{} through freshet: {e}", read.literal()));
        // The engine counts a hit just after the answer is flushed: give it a moment.
        let mut served = engine.counters.hits.get() > engine_hits;
        if !served {
            tokio::time::sleep(Duration::from_millis(10)).await;
            served = engine.counters.hits.get() > engine_hits;
        }
        if served && stats(engine, read.kind.cache).hits > view_hits {
            cached = Some(rows);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Some(cached) = cached else {
        out.never_cached.push(format!("{} ({protocol})", read.literal()));
        return;
    };
    let upstream = read.run(direct, prepared).await.unwrap_or_else(|e| panic!("{} on MariaDB: {e}", read.literal()));
    let (ours, theirs) = (normalized(cached, read.ordered()), normalized(upstream, read.ordered()));
    out.compared += 1;
    if ours != theirs {
        let m = format!(
            "MISMATCH {} key {:?} ({protocol}):\n  {}\n  freshet: {}\n  mariadb: {}",
            read.kind.cache,
            read.key,
            read.literal(),
            rendered_rows(&ours),
            rendered_rows(&theirs)
        );
        eprintln!("{m}");
        out.mismatches.push(m);
    }
}

/// The keys to compare after a storm: first what the readers read last, newest first (those
/// partitions are the likeliest to have stayed in memory through the writes, i.e. to have been
/// maintained incrementally rather than refilled; each read that misses fills, and may evict
/// others); then stories that were hot, deleted, new, anywhere or never existed; users likewise;
/// the front page.
pub fn sample(world: &World, queries: &[(ReadKind, String)]) -> Vec<Read> {
    let mut rng = Rng::new(0x5A3F1E);
    let max_story = world.max_story();
    let mut stories: Vec<u64> = (1..=40).collect();
    stories.extend(world.deleted_stories.lock().unwrap().iter().take(40));
    stories.extend((SIZES.stories + 1..=max_story).rev().take(20));
    stories.extend([max_story + 1, max_story + 2]);
    while stories.len() < 150 {
        stories.push(rng.uniform(max_story));
    }
    let max_user = world.max_user();
    let mut users: Vec<u64> = (1..=30).collect();
    users.extend((SIZES.users + 1..=max_user).rev().take(10));
    users.push(max_user + 1);
    while users.len() < 100 {
        users.push(rng.uniform(max_user));
    }
    let mut picks: Vec<(usize, Option<u64>)> = world.recent.lock().unwrap().iter().rev().copied().collect();
    for (i, (kind, _)) in queries.iter().enumerate() {
        match kind.param {
            Param::Story => picks.extend(stories.iter().map(|&k| (i, Some(k)))),
            Param::User => picks.extend(users.iter().map(|&k| (i, Some(k)))),
            Param::None => picks.push((i, None)),
        }
    }
    let mut seen = HashSet::new();
    picks.retain(|p| seen.insert(*p));
    picks.into_iter().map(|(i, key)| Read { kind: queries[i].0, sql: queries[i].1.clone(), key }).collect()
}

/// Every read of `sample` through freshet (until answered from the cache) and directly, with
/// both protocols, then the front page again after the fills and evictions of the comparisons
/// themselves.
pub async fn compare_sample(freshet: &Freshet, direct_url: &str, sample: &[Read]) -> Verdicts {
    let mut through = app::connect(&freshet.url).await.unwrap();
    let mut direct = app::connect(direct_url).await.unwrap();
    let mut verdicts = Verdicts::default();
    for read in sample {
        for prepared in [false, true] {
            compare(freshet, &mut through, &mut direct, read, prepared, &mut verdicts).await;
        }
    }
    if let Some(top) = sample.iter().find(|r| r.key.is_none()) {
        for prepared in [false, true] {
            compare(freshet, &mut through, &mut direct, top, prepared, &mut verdicts).await;
        }
    }
    verdicts
}

/// Waits until the engine has applied the server's binlog up to where it is now.
pub async fn catch_up(engine: &Engine, direct: &mut Conn, within: Duration) {
    let target = server_position(direct).await;
    let deadline = Instant::now() + within;
    while engine.gate.applied().0 < target {
        assert!(Instant::now() < deadline, "the binlog was not applied up to the server's position within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Never past where the server is: a position freshet kept from an earlier history (before
    // RESET MASTER, on a server since replaced) is not caught up, whatever it compares as.
    let now = server_position(direct).await;
    let applied = engine.gate.applied().0;
    assert!(applied <= now, "applied position {applied:#x} is past the server's {now:#x}");
}

/// The relay reasons counted so far, for messages.
pub fn relayed(engine: &Engine) -> String {
    let relayed: Vec<String> = RelayReason::ALL
        .iter()
        .enumerate()
        .map(|(i, r)| (r.label(), engine.counters.relayed[i].get()))
        .filter(|(_, n)| *n > 0)
        .map(|(l, n)| format!("{l} {n}"))
        .collect();
    relayed.join(", ")
}
