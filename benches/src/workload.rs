//! The harness's workloads: what each one creates in the target's database, the statements a
//! connection prepares, and one read or one write.
//!
//! - `point`: `SELECT id, k, c, pad FROM load_items WHERE id = ?` (the sysbench-style point
//!   select by primary key); writes are `UPDATE load_items SET k = k + 1 WHERE id = ?` on keys
//!   drawn the same way, so they land on the rows being read.
//! - `story-point`: `SELECT id, title, author_id FROM stories WHERE id = ?` on the news
//!   example's tables (the point read of issue 15's relay figures); writes as `story`'s.
//! - `story`: the news example's `story_with_votes` (a story with its vote count, a LEFT JOIN
//!   and a GROUP BY), its SQL taken from `examples/news/freshet.toml` so that it is exactly
//!   the text freshet is asked to cache; writes are, equally often, a vote on a story drawn the
//!   same way as the reads (`INSERT IGNORE`) and the retraction of one (`DELETE` by primary
//!   key), from a uniformly drawn user. The tables are the news example's, filled by its
//!   generator (`news load`'s code) with `rows` stories, `rows / 5` users and `5 * rows` votes.
//!
//! Both create and fill their tables in the target's database when they are missing or have
//! another size, and leave them otherwise (writes of earlier runs included). The database
//! itself is created when missing. [`Workload::cache_config`] prints the `[[cache]]` entries
//! that make freshet cache exactly these reads.
//!
//! Rows are read in full and decoded into the types MariaDB sends; a row of another shape
//! counts as an error, so that a cached answer encoded differently from the server's shows up.

use anyhow::{Context, bail};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder, Row, Statement};

use freshet_examples::load::{self, Sizes};

/// A deadlocked write (two vote writers crossing on `votes`' secondary index) is retried up to
/// this many times, as an application would, before it counts as an error.
const DEADLOCK_RETRIES: u32 = 3;
const ER_LOCK_DEADLOCK: u16 = 1213;

const POINT_READ: &str = "SELECT id, k, c, pad FROM load_items WHERE id = ?";
const STORY_POINT_READ: &str = "SELECT id, title, author_id FROM stories WHERE id = ?";
const POINT_WRITE: &str = "UPDATE load_items SET k = k + 1 WHERE id = ?";
const VOTE: &str = "INSERT IGNORE INTO votes (user_id, story_id) VALUES (?, ?)";
const RETRACT: &str = "DELETE FROM votes WHERE user_id = ? AND story_id = ?";
/// The `[[cache]]` of `examples/news/freshet.toml` that the story workload reads.
const STORY_CACHE: &str = "story_with_votes";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Point,
    StoryPoint,
    Story,
}

impl Workload {
    pub fn parse(name: &str) -> anyhow::Result<Workload> {
        match name {
            "point" => Ok(Workload::Point),
            "story-point" => Ok(Workload::StoryPoint),
            "story" => Ok(Workload::Story),
            other => bail!("unknown workload {other:?}: point, story-point or story"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::Point => "point",
            Workload::StoryPoint => "story-point",
            Workload::Story => "story",
        }
    }

    /// One line saying what the workload does, for the report.
    pub fn describe(self, rows: u64) -> String {
        match self {
            Workload::Point => format!("point select by primary key on load_items ({rows} rows); writes: UPDATE of the row's k"),
            Workload::StoryPoint => {
                format!("story by primary key ({rows} stories, {} users); writes: INSERT IGNORE / DELETE of a vote", users(rows))
            }
            Workload::Story => {
                format!("story_with_votes ({rows} stories, {} users); writes: INSERT IGNORE / DELETE of a vote", users(rows))
            }
        }
    }

    /// The read, with `?` for the key.
    pub fn read_sql(self) -> anyhow::Result<String> {
        match self {
            Workload::Point => Ok(POINT_READ.to_string()),
            Workload::StoryPoint => Ok(STORY_POINT_READ.to_string()),
            Workload::Story => {
                let queries = freshet_examples::app::read_queries()?;
                let (_, sql) =
                    queries.into_iter().find(|(k, _)| k.cache == STORY_CACHE).context("no story_with_votes in the news example")?;
                Ok(sql)
            }
        }
    }

    /// The `[[cache]]` entry (TOML) under which freshet should cache this workload's read.
    pub fn cache_config(self) -> anyhow::Result<String> {
        let name = match self {
            Workload::Point => "load_items_by_id",
            Workload::StoryPoint => "story_by_id",
            Workload::Story => STORY_CACHE,
        };
        let sql = self.read_sql()?;
        // The SQL holds no `"` or `\` (both are fixed texts of this repository).
        anyhow::ensure!(!sql.contains(['"', '\\']), "cannot quote {sql:?} as a TOML basic string");
        Ok(format!("[[cache]]\nname = \"{name}\"\nquery = \"{sql}\"\n"))
    }

    /// Creates the database named in `url` when missing, and the workload's tables with `rows`
    /// rows (stories for `story`) when they are missing or of another size.
    pub async fn setup(self, url: &str, rows: u64) -> anyhow::Result<()> {
        let opts = tcp_opts(url)?;
        let db = opts.db_name().context("the target URL must name a database")?.to_string();
        let mut conn = Conn::new(OptsBuilder::from_opts(opts).db_name(None::<String>)).await.context("connecting for setup")?;
        conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS `{}`", db.replace('`', "``"))).await?;
        conn.query_drop(format!("USE `{}`", db.replace('`', "``"))).await?;
        match self {
            Workload::Point => setup_items(&mut conn, rows).await?,
            Workload::Story | Workload::StoryPoint => {
                let sizes = story_sizes(rows);
                let have = |t: &str| {
                    format!("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '{t}'")
                };
                let exists: Option<u64> = conn.query_first(have("stories")).await?;
                let mut fresh = exists == Some(1);
                if fresh {
                    let s: Option<u64> = conn.query_first("SELECT COUNT(*) FROM stories").await?;
                    let u: Option<u64> = conn.query_first("SELECT COUNT(*) FROM users").await?;
                    fresh = s == Some(sizes.stories) && u == Some(sizes.users);
                }
                if !fresh {
                    load::load(url, sizes).await.context("filling the news tables")?;
                }
            }
        }
        conn.disconnect().await?;
        Ok(())
    }
}

fn users(rows: u64) -> u64 {
    (rows / 5).max(10)
}

fn story_sizes(rows: u64) -> Sizes {
    let stories = rows.max(1);
    let users = users(rows);
    // news load draws distinct pairs and wants at most half of them.
    let votes = (5 * stories).min(users * stories / 2);
    Sizes { users, stories, votes, comments: 0 }
}

async fn setup_items(conn: &mut Conn, rows: u64) -> anyhow::Result<()> {
    conn.query_drop(
        "CREATE TABLE IF NOT EXISTS load_items (id BIGINT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL) \
         ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci",
    )
    .await?;
    let have: Option<u64> = conn.query_first("SELECT COUNT(*) FROM load_items").await?;
    if have != Some(rows) {
        conn.query_drop("TRUNCATE load_items").await?;
        for start in (1..=rows).step_by(1000) {
            let values: Vec<String> =
                (start..(start + 1000).min(rows + 1)).map(|i| format!("({i}, {}, '{:0>120}', '{:0>60}')", i % 1000, i, i * 7)).collect();
            conn.query_drop(format!("INSERT INTO load_items VALUES {}", values.join(","))).await?;
        }
    }
    Ok(())
}

/// Connection options for `url`, always over TCP. mysql_async otherwise asks the server for
/// its unix socket and, when that path exists on this host, reconnects through it: a target
/// behind freshet would silently be measured as direct MariaDB.
pub fn tcp_opts(url: &str) -> anyhow::Result<Opts> {
    Ok(OptsBuilder::from_opts(Opts::from_url(url)?).prefer_socket(false).into())
}

/// One connection running one workload.
pub struct Session {
    workload: Workload,
    text: bool,
    users: u64,
    conn: Conn,
    read_sql: String,
    read: Statement,
    writes: Vec<Statement>,
}

impl Session {
    pub async fn open(url: &str, workload: Workload, text: bool, rows: u64) -> anyhow::Result<Session> {
        let mut conn = Conn::new(tcp_opts(url)?).await?;
        let read_sql = workload.read_sql()?;
        let read = conn.prep(&read_sql).await?;
        let writes = match workload {
            Workload::Point => vec![conn.prep(POINT_WRITE).await?],
            Workload::Story | Workload::StoryPoint => vec![conn.prep(VOTE).await?, conn.prep(RETRACT).await?],
        };
        Ok(Session { workload, text, users: users(rows), conn, read_sql, read, writes })
    }

    /// Reads `key` and checks the shape of what came back.
    pub async fn read(&mut self, key: u64) -> Result<(), String> {
        let rows: Vec<Row> = if self.text {
            self.conn.query(self.read_sql.replacen('?', &key.to_string(), 1)).await
        } else {
            self.conn.exec(&self.read, (key,)).await
        }
        .map_err(|e| e.to_string())?;
        for row in rows {
            let shaped = match self.workload {
                Workload::Point => mysql_async::from_row_opt::<(u64, i32, String, String)>(row).map(drop),
                Workload::StoryPoint => mysql_async::from_row_opt::<(u64, String, u64)>(row).map(drop),
                Workload::Story => mysql_async::from_row_opt::<(u64, String, String, i64)>(row).map(drop),
            };
            shaped.map_err(|e| format!("read of key {key}: unexpected row {:?}", e.0))?;
        }
        Ok(())
    }

    /// One write on `key`; `pick` (any random number) chooses the user and the kind of write.
    pub async fn write(&mut self, key: u64, pick: u64) -> Result<(), String> {
        let mut tries = 0;
        loop {
            let result = match self.workload {
                Workload::Point => self.conn.exec_drop(&self.writes[0], (key,)).await,
                Workload::Story | Workload::StoryPoint => {
                    let user = (pick >> 1) % self.users + 1;
                    self.conn.exec_drop(&self.writes[(pick & 1) as usize], (user, key)).await
                }
            };
            match result {
                Err(mysql_async::Error::Server(ref e)) if e.code == ER_LOCK_DEADLOCK && tries < DEADLOCK_RETRIES => tries += 1,
                r => return r.map_err(|e| e.to_string()),
            }
        }
    }

    pub async fn close(self) -> anyhow::Result<()> {
        self.conn.disconnect().await?;
        Ok(())
    }
}
