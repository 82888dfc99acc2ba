//! `freshet check --config FILE`: is this config going to work against this upstream? For
//! init containers, CI and people, it runs what start-up would run and exits, listening on
//! nothing.
//!
//! Checked, in order, each step only when the one before passed: the config (already loaded
//! by the caller), the upstream (reachable, the url's credentials log in, a ping answers),
//! and with `[[cache]]` entries the engine's start-up: binlog settings and grants
//! (`freshet_cdc::check_upstream`, with the cached tables), every cache built, the binlog
//! stream opened. Without caches the binlog checks run too, but as warnings: only a later
//! CREATE CACHE would need them.

use anyhow::{Context, anyhow};
use mysql_async::prelude::Queryable;

use freshet_config::Config;

use crate::cache::Engine;

/// What `check` found: lines to print, and whether everything that must pass did.
pub struct Report {
    pub lines: Vec<String>,
    pub ok: bool,
}

/// Runs the checks; never panics on a bad upstream, each problem is a line of the report.
pub async fn check(config: &Config) -> Report {
    let mut lines = vec![format!("ok: config is valid ({} cache{})", config.caches.len(), if config.caches.len() == 1 { "" } else { "s" })];
    let upstream = &config.upstream;
    let mut conn = match connect(config).await {
        Ok((conn, version)) => {
            lines.push(format!("ok: upstream {} reachable, logged in as {}, server {version}", upstream.url.address(), upstream.url.user));
            conn
        }
        Err(e) => {
            lines.push(format!("FAILED: upstream {}: {e:#}", upstream.url.address()));
            return Report { lines, ok: false };
        }
    };
    if config.caches.is_empty() {
        match &upstream.url.database {
            Some(db) => match freshet_cdc::check_upstream(&mut conn, db, &[]).await {
                Ok(()) => lines.push("ok: binlog settings and grants would let CREATE CACHE work".into()),
                Err(e) => lines.push(format!("warning: no [[cache]] needs them now, but CREATE CACHE would fail: {e}")),
            },
            None => lines.push("warning: the url names no database; CREATE CACHE would fail".into()),
        }
        let _ = conn.disconnect().await;
        return Report { lines, ok: true };
    }
    let _ = conn.disconnect().await;
    // A check fills nothing: no warm-up, and no file of hot keys written at its stop.
    let config = &freshet_config::Config { warm: freshet_config::Warm { dir: None, ..config.warm.clone() }, ..config.clone() };
    match Engine::start(config).await {
        Ok(engine) => {
            let caches = engine.caches();
            let unavailable: Vec<String> =
                caches.iter().filter_map(|c| c.live().err().map(|reason| format!("{}: {reason}", c.name))).collect();
            lines.push("ok: binlog settings and grants fit; the binlog stream opened".into());
            lines.push(format!("ok: {} of {} caches built", caches.len() - unavailable.len(), caches.len()));
            for u in unavailable {
                lines.push(format!("warning: cache {u} ([caches] strict = false: its queries are relayed)"));
            }
            engine.stop();
            Report { lines, ok: true }
        }
        Err(e) => {
            lines.push(format!("FAILED: {e:#}"));
            Report { lines, ok: false }
        }
    }
}

/// A login with the url's credentials and a ping, under `[upstream] connect_timeout`.
async fn connect(config: &Config) -> anyhow::Result<(mysql_async::Conn, String)> {
    let timeout = config.upstream.connect_timeout;
    let (mut conn, _) = tokio::time::timeout(timeout, crate::upstream::connect_own(&config.upstream))
        .await
        .map_err(|_| anyhow!("no answer within [upstream] connect_timeout = {timeout:?}"))?
        .context("cannot log in")?;
    conn.ping().await.context("ping")?;
    let version: Option<String> = conn.query_first("SELECT VERSION()").await.context("SELECT VERSION()")?;
    Ok((conn, version.unwrap_or_default()))
}
