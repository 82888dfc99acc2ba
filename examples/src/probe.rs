//! Small clients the demo uses to look at freshet from the application's side.
//!
//! - [`table`]: one statement's result as an aligned text table (freshet's admin SQL, `SHOW
//!   CACHES` and friends, printed over the same driver as the application uses).
//! - [`freshness`]: how long a write made directly on MariaDB takes to show in the answer of a
//!   cached read through freshet — a vote on a story, read back with `story_with_votes`.
//!
//! Both connect over TCP only ([`app::connect`]).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mysql_async::prelude::*;
use mysql_async::{Row, Value};

use crate::app;

/// The result of `sql` on `url` as a text table, without the columns named in `hide`.
pub async fn table(url: &str, sql: &str, hide: &[String]) -> anyhow::Result<String> {
    let mut conn = app::connect(url).await?;
    let mut result = conn.query_iter(sql).await.with_context(|| format!("running {sql}"))?;
    let columns: Vec<String> = result.columns_ref().iter().map(|c| c.name_str().into_owned()).collect();
    let rows: Vec<Row> = result.collect().await?;
    drop(result);
    conn.disconnect().await?;
    if columns.is_empty() {
        return Ok("(no result set)".to_string());
    }
    let shown: Vec<usize> = (0..columns.len()).filter(|&i| !hide.iter().any(|h| h.eq_ignore_ascii_case(&columns[i]))).collect();
    let columns: Vec<String> = shown.iter().map(|&i| columns[i].clone()).collect();
    let cells: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| {
            let mut values: Vec<Option<Value>> = Row::unwrap(r).into_iter().map(Some).collect();
            shown.iter().map(|&i| values[i].take().map_or_else(String::new, render)).collect()
        })
        .collect();
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| cells.iter().map(|r| r[i].chars().count()).chain([columns[i].chars().count()]).max().unwrap_or(0))
        .collect();
    let line = |values: &[String]| {
        let padded: Vec<String> = values.iter().zip(&widths).map(|(v, w)| format!("{v:<w$}")).collect();
        format!("| {} |", padded.join(" | "))
    };
    let rule = format!("+{}+", widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("+"));
    let mut out = vec![rule.clone(), line(&columns), rule.clone()];
    out.extend(cells.iter().map(|r| line(r)));
    out.push(rule);
    Ok(out.join("\n"))
}

fn render(v: Value) -> String {
    match v {
        Value::NULL => "NULL".to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
        other => other.as_sql(true),
    }
}

/// What [`freshness`] saw.
#[derive(Debug)]
pub struct Freshness {
    pub story: u64,
    pub voter: u64,
    pub before: i64,
    /// The count through freshet once it changed, and how long after the write's commit.
    pub seen: Option<(i64, Duration)>,
}

/// Reads story `story`'s vote count through `via` (freshet) with the cached query, adds a vote
/// by a user who has none on it directly on `direct` (MariaDB), polls through `via` until the
/// count changes or `limit` passes, then removes the vote again.
pub async fn freshness(direct: &str, via: &str, story: u64, limit: Duration) -> anyhow::Result<Freshness> {
    let sql = app::read_queries()?
        .into_iter()
        .find(|(k, _)| k.cache == "story_with_votes")
        .map(|(_, sql)| sql)
        .context("news/freshet.toml has no story_with_votes")?;
    let mut cached = app::connect(via).await?;
    let mut server = app::connect(direct).await?;
    let read = cached.prep(&sql).await?;
    let count = |row: Option<(u64, String, String, i64)>| row.map(|r| r.3).context("no such story");
    let before = count(cached.exec_first(&read, (story,)).await?)?;
    let voter: Option<u64> =
        server.exec_first("SELECT MIN(id) FROM users WHERE id NOT IN (SELECT user_id FROM votes WHERE story_id = ?)", (story,)).await?;
    let Some(voter) = voter else { bail!("every user has voted on story {story}") };
    server.exec_drop("INSERT INTO votes (user_id, story_id) VALUES (?, ?)", (voter, story)).await?;
    let written = Instant::now();
    let mut seen = None;
    while written.elapsed() < limit {
        let now = count(cached.exec_first(&read, (story,)).await?)?;
        if now != before {
            seen = Some((now, written.elapsed()));
            break;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    server.exec_drop("DELETE FROM votes WHERE user_id = ? AND story_id = ?", (voter, story)).await?;
    cached.disconnect().await?;
    server.disconnect().await?;
    Ok(Freshness { story, voter, before, seen })
}
