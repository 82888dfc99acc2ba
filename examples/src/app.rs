//! The application's fixed parts: its schema, its freshet config, the read queries taken from
//! that config, and how it connects.

use anyhow::Context;
use mysql_async::{Conn, Opts, OptsBuilder};

/// `news/schema.sql`: DROP and CREATE of the four tables.
pub const SCHEMA_SQL: &str = include_str!("../news/schema.sql");

/// `news/freshet.toml`: the config whose `[[cache]]` entries are the application's reads.
pub const FRESHET_TOML: &str = include_str!("../news/freshet.toml");

/// The statements of [`SCHEMA_SQL`], without comments, in order.
pub fn schema_statements() -> Vec<String> {
    let without_comments: String = SCHEMA_SQL.lines().filter(|l| !l.trim_start().starts_with("--")).map(|l| format!("{l}\n")).collect();
    without_comments.split(";\n").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// What a read query's single `?` stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// A story id (`stories.id`, `comments.story_id`).
    Story,
    /// A user id.
    User,
    /// No parameter.
    None,
}

/// One kind of read: the name of its `[[cache]]` entry and what it is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadKind {
    /// The cache name in `news/freshet.toml`.
    pub cache: &'static str,
    /// Its parameter.
    pub param: Param,
    /// Relative frequency in the workload (story pages dominate, as on a real site).
    pub weight: u32,
}

/// The application's reads. Each must have a `[[cache]]` entry of the same name.
pub const READS: [ReadKind; 4] = [
    ReadKind { cache: "story_with_votes", param: Param::Story, weight: 40 },
    ReadKind { cache: "story_comments", param: Param::Story, weight: 30 },
    ReadKind { cache: "user_karma", param: Param::User, weight: 10 },
    ReadKind { cache: "top_stories", param: Param::None, weight: 20 },
];

/// The parsed `news/freshet.toml` (validated by freshet's own config crate; no environment
/// overrides, so that the result does not depend on who runs it).
pub fn config() -> anyhow::Result<freshet_config::Config> {
    freshet_config::Config::parse(FRESHET_TOML, std::path::Path::new("examples/news/freshet.toml"), &|_| None, &[])
        .map_err(|e| anyhow::anyhow!("examples/news/freshet.toml: {e}"))
}

/// The SQL of each of [`READS`], in the same order, from the config's `[[cache]]` entries.
pub fn read_queries() -> anyhow::Result<Vec<(ReadKind, String)>> {
    let config = config()?;
    READS
        .iter()
        .map(|kind| {
            let spec = config.caches.iter().find(|c| c.name == kind.cache);
            let spec = spec.with_context(|| format!("examples/news/freshet.toml has no [[cache]] named {}", kind.cache))?;
            Ok((*kind, spec.query.clone()))
        })
        .collect()
}

/// Connection options for `url`, always over TCP. mysql_async otherwise asks the server for
/// its unix socket and, when that path exists on this host, reconnects through it: an
/// application pointed at freshet would silently talk to MariaDB directly.
pub fn tcp_opts(url: &str) -> anyhow::Result<Opts> {
    let opts = Opts::from_url(url).with_context(|| format!("bad MySQL URL {url:?}"))?;
    Ok(OptsBuilder::from_opts(opts).prefer_socket(false).into())
}

/// A connection to `url` over TCP.
pub async fn connect(url: &str) -> anyhow::Result<Conn> {
    Conn::new(tcp_opts(url)?).await.with_context(|| format!("connecting to {}", redact(url)))
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            let user = creds.split(':').next().unwrap_or(creds);
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_has_drop_and_four_tables() {
        let s = schema_statements();
        assert_eq!(s.len(), 5, "{s:#?}");
        assert!(s[0].starts_with("DROP TABLE"));
        assert!(s[1..].iter().all(|t| t.starts_with("CREATE TABLE")));
    }

    #[test]
    fn every_read_has_a_cache() {
        let q = read_queries().unwrap();
        assert_eq!(q.len(), READS.len());
        let config = config().unwrap();
        assert_eq!(config.caches.len(), READS.len(), "a [[cache]] the workload never reads");
    }

    #[test]
    fn redacts_password() {
        assert_eq!(redact("mysql://u:secret@h:1/db"), "mysql://u:***@h:1/db");
    }
}
