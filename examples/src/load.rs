//! `news load`: creates the schema in the URL's database (creating the database if needed)
//! and fills it with generated data.
//!
//! The data is a deterministic function of [`Sizes`]: the same sizes give the same rows, so a
//! run can be repeated and a test can rely on it. Popularity is skewed the way a news site's
//! is: stories draw votes and comments with Zipf skew [`POPULARITY_SKEW`] (story 1 is the most
//! popular), authors write stories with the same skew (user 1 is the most prolific), voters
//! and commenters are uniform. Rows go in with multi-row INSERTs of [`BATCH`] rows.

use std::collections::HashSet;

use anyhow::{Context, bail};
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};

use crate::app;
use crate::rng::{Rng, Zipf};

/// Zipf exponent of story and author popularity in the generated data.
pub const POPULARITY_SKEW: f64 = 0.8;
/// Rows per INSERT.
pub const BATCH: usize = 1000;
const SEED: u64 = 0x6e65_7773; // "news"

/// How many rows of each table to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Users, ids `1..=users`.
    pub users: u64,
    /// Stories, ids `1..=stories`.
    pub stories: u64,
    /// Votes, distinct (user, story) pairs; at most `users * stories`.
    pub votes: u64,
    /// Comments, ids `1..=comments`.
    pub comments: u64,
}

impl Default for Sizes {
    fn default() -> Sizes {
        Sizes { users: 1_000, stories: 5_000, votes: 50_000, comments: 20_000 }
    }
}

/// Creates the database named in `url` if missing, (re)creates the tables and fills them.
pub async fn load(url: &str, sizes: Sizes) -> anyhow::Result<()> {
    if sizes.users == 0 || sizes.stories == 0 {
        bail!("need at least one user and one story");
    }
    if u128::from(sizes.votes) * 2 > u128::from(sizes.users) * u128::from(sizes.stories) {
        bail!("--votes {} is more than half of users x stories; the generator draws distinct pairs", sizes.votes);
    }
    let opts = app::tcp_opts(url)?;
    let db = opts.db_name().context("the URL must name a database, e.g. mysql://user:pass@host:port/news")?.to_string();
    let mut conn = Conn::new(OptsBuilder::from_opts(opts).db_name(None::<String>)).await.context("connecting for load")?;
    conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS `{}`", db.replace('`', "``"))).await?;
    conn.query_drop(format!("USE `{}`", db.replace('`', "``"))).await?;
    for stmt in app::schema_statements() {
        conn.query_drop(&stmt).await.with_context(|| format!("schema: {stmt}"))?;
    }
    let mut rng = Rng::new(SEED);
    let popular_story = Zipf::new(sizes.stories, POPULARITY_SKEW);
    let prolific_user = Zipf::new(sizes.users, POPULARITY_SKEW);

    let users = (1..=sizes.users).map(|id| format!("({id}, 'user{id}')"));
    insert(&mut conn, "users (id, name)", users).await?;

    let stories = (1..=sizes.stories).map(|id| {
        let author = prolific_user.sample(&mut rng);
        format!("({id}, {author}, 'Story {id}', 'https://example.com/{id}', TIMESTAMP '2026-01-01 00:00:00' + INTERVAL {id} MINUTE)")
    });
    let stories: Vec<String> = stories.collect();
    insert(&mut conn, "stories (id, author_id, title, url, created_at)", stories.into_iter()).await?;

    let mut pairs = HashSet::with_capacity(sizes.votes as usize);
    while (pairs.len() as u64) < sizes.votes {
        // Terminates: at most half of all pairs are wanted (checked above), and every pair has
        // a non-zero probability, so each draw succeeds with probability bounded away from 0.
        pairs.insert((rng.uniform(sizes.users), popular_story.sample(&mut rng)));
    }
    let mut pairs: Vec<(u64, u64)> = pairs.into_iter().collect();
    pairs.sort_unstable(); // HashSet order is not deterministic; the rows must be.
    insert(&mut conn, "votes (user_id, story_id)", pairs.iter().map(|(u, s)| format!("({u}, {s})"))).await?;

    let comments: Vec<String> = (1..=sizes.comments)
        .map(|id| {
            let (story, author) = (popular_story.sample(&mut rng), rng.uniform(sizes.users));
            format!("({id}, {story}, {author}, 'Comment {id} on story {story}', TIMESTAMP '2026-01-02 00:00:00' + INTERVAL {id} SECOND)")
        })
        .collect();
    insert(&mut conn, "comments (id, story_id, author_id, body, created_at)", comments.into_iter()).await?;
    conn.disconnect().await?;
    Ok(())
}

/// INSERTs `rows` (SQL tuples of generated, quote-free text) into `target` in batches.
async fn insert(conn: &mut Conn, target: &str, rows: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let mut batch = Vec::with_capacity(BATCH);
    let mut rows = rows.peekable();
    while rows.peek().is_some() {
        batch.clear();
        batch.extend(rows.by_ref().take(BATCH));
        conn.query_drop(format!("INSERT INTO {target} VALUES {}", batch.join(",")))
            .await
            .with_context(|| format!("inserting into {target}"))?;
    }
    Ok(())
}
