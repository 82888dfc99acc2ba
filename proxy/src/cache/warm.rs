//! The warm restart (`[warm]`, either fill source): which keys of each cache were read lately,
//! remembered in a file, and filled again in the background at the next start.
//!
//! Owns: [`HotKeys`], the per-cache record of recently read partition keys; [`Warm`], the
//! file's place, the save (at shutdown and every `[warm] save_interval`) and the warm-up's
//! progress; and the warm-up task itself.
//!
//! Invariants:
//! - the hit path pays almost nothing: a read that missed records its keys (it is slow
//!   anyway); a hit is recorded only one time in [`SAMPLE`] per thread, through a `try_lock`
//!   that gives up when another core holds it, so no read ever waits on this record;
//! - memory is bounded: a cache's record holds at most twice `[warm] keys_per_cache` keys
//!   (pruned to the most recent `keys_per_cache`), and a saved file at most that many per
//!   cache;
//! - the warm-up goes through the normal fill path (a key asked for is a hole queued like a
//!   read's miss; the writer fills it from the configured source, at the applied position),
//!   `[warm] concurrency` keys at a time, while the caches serve; it fills only keys of a
//!   cache of the same name and query in the same database, coerced to the view's key types;
//! - a missing file is a first start; a corrupt, foreign or unreadable one is a warning and a
//!   cold start, never a crash;
//! - the remembered keys read from the file are recorded as the oldest of the new run, so a
//!   save before the warm-up ends (or by a run that read little) keeps them; nothing is saved
//!   before the file was read.

mod file;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use freshet_dataflow::{Key, Reader, Value};
use tracing::{info, warn};

use super::{Cache, Engine};
use crate::metrics::{Counter, family, sample};

/// A hit is recorded once in this many per thread.
pub const SAMPLE: u32 = 16;

/// How long the warm-up waits for one round of fills before it counts the keys still
/// missing as not filled (their fills go on) and moves on.
const ROUND_TIMEOUT: Duration = Duration::from_secs(10);

/// A key larger than this (stored bytes, roughly) is not remembered.
const MAX_KEY_BYTES: usize = 4096;

thread_local! {
    static TICK: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The recently read partition keys of one cache.
pub struct HotKeys {
    limit: usize,
    inner: Mutex<Recent>,
}

#[derive(Default)]
struct Recent {
    clock: u64,
    keys: HashMap<Key, u64>,
}

impl HotKeys {
    /// A record of at most `limit` keys; 0 records nothing (no `[warm] dir`), so that reads
    /// of a freshet without a warm restart pay nothing for it.
    pub fn new(limit: usize) -> HotKeys {
        HotKeys { limit, inner: Mutex::new(Recent::default()) }
    }

    /// After a hit: one time in [`SAMPLE`] (per thread), records the keys the read named,
    /// unless another core is recording.
    pub fn sample_hit(&self, reader: &Reader, slots: Option<&[Vec<usize>]>, params: &[Value]) {
        if self.limit == 0 {
            return;
        }
        let sampled = TICK.with(|t| {
            let n = t.get().wrapping_add(1);
            t.set(n);
            n % SAMPLE == 0
        });
        if !sampled {
            return;
        }
        let Ok(keys) = reader.partition_keys(slots, params) else { return };
        if let Ok(mut r) = self.inner.try_lock() {
            self.touch(&mut r, keys);
        }
    }

    /// After a miss: records the keys that were holes.
    pub fn missed(&self, keys: &[Key]) {
        if self.limit == 0 {
            return;
        }
        let mut r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        self.touch(&mut r, keys.iter().cloned());
    }

    fn touch(&self, r: &mut Recent, keys: impl IntoIterator<Item = Key>) {
        for k in keys {
            if approx_bytes(&k) > MAX_KEY_BYTES {
                continue;
            }
            r.clock += 1;
            let t = r.clock;
            r.keys.insert(k, t);
        }
        if r.keys.len() >= 2 * self.limit {
            prune(&mut r.keys, self.limit);
        }
    }

    /// Records keys from the file as older than anything read in this run (oldest last in
    /// `keys`, as saved).
    fn seed(&self, keys: &[Key]) {
        if self.limit == 0 {
            return;
        }
        let mut r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let n = keys.len() as u64;
        // This run's reads move above the seeded keys, which take ticks 1..=n (most recent
        // highest); a key read already keeps its newer tick.
        for t in r.keys.values_mut() {
            *t += n;
        }
        r.clock += n;
        for (i, k) in keys.iter().enumerate() {
            r.keys.entry(k.clone()).or_insert(n - i as u64);
        }
        if r.keys.len() >= 2 * self.limit {
            prune(&mut r.keys, self.limit);
        }
    }

    /// The most recently read keys, most recent first, at most the limit.
    pub fn recent(&self) -> Vec<Key> {
        let r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<(&Key, u64)> = r.keys.iter().map(|(k, t)| (k, *t)).collect();
        all.sort_unstable_by_key(|(_, t)| std::cmp::Reverse(*t));
        all.into_iter().take(self.limit).map(|(k, _)| k.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Keeps the `limit` most recent keys.
fn prune(keys: &mut HashMap<Key, u64>, limit: usize) {
    let mut ticks: Vec<u64> = keys.values().copied().collect();
    let cut = ticks.len() - limit;
    let (_, threshold, _) = ticks.select_nth_unstable(cut);
    let threshold = *threshold;
    keys.retain(|_, t| *t >= threshold);
}

fn approx_bytes(k: &Key) -> usize {
    k.iter()
        .map(|v| match v {
            Value::Text(s, _) => s.len() + 8,
            Value::Bytes(b) => b.len() + 8,
            _ => 16,
        })
        .sum()
}

/// Where the warm-up stands, for /metrics and SHOW FRESHET STATUS.
#[derive(Default)]
pub struct Progress {
    /// The file has been read (or found missing or unusable): saving may begin.
    loaded: AtomicBool,
    /// The warm-up has asked for every remembered key.
    done: AtomicBool,
    /// Keys read from the file for caches that exist with the same query.
    pub remembered: Counter,
    /// Of those, found present or filled.
    pub filled: Counter,
    /// Of those, not filled: refused by the view (another key type), or not filled within a
    /// round's wait.
    pub not_filled: Counter,
    /// Milliseconds the warm-up took, once done.
    took_ms: AtomicU64,
    /// Why the start was cold, if it was (no file, corrupt, foreign).
    cold: Mutex<Option<String>>,
    pub saves: Counter,
    pub save_failures: Counter,
    /// Keys in the last file written.
    last_saved: AtomicU64,
}

/// The warm restart of one engine.
pub struct Warm {
    path: PathBuf,
    database: String,
    concurrency: usize,
    save_interval: Duration,
    save_lock: Mutex<()>,
    pub progress: Progress,
}

impl Warm {
    /// From `[warm]`; None without `dir` (no warm restart).
    pub fn new(config: &freshet_config::Warm, database: &str) -> Option<Arc<Warm>> {
        let dir = config.dir.as_ref()?;
        Some(Arc::new(Warm {
            path: file::path_in(dir),
            database: database.to_string(),
            concurrency: config.concurrency.max(1) as usize,
            save_interval: config.save_interval,
            save_lock: Mutex::new(()),
            progress: Progress::default(),
        }))
    }

    /// Reads the file, then warms the caches and saves every `save_interval`, in the
    /// background, until the engine is dropped or the returned task aborted (at its stop).
    pub fn start(self: &Arc<Self>, engine: &Arc<Engine>) -> tokio::task::AbortHandle {
        let (warm, weak) = (self.clone(), Arc::downgrade(engine));
        let task = tokio::spawn(async move {
            let path = warm.path.clone();
            let saved = tokio::task::spawn_blocking(move || file::read(&path)).await;
            let saved = match saved {
                Ok(Ok(Some(saved))) if saved.database == warm.database => Some(saved),
                Ok(Ok(Some(saved))) => {
                    warm.cold(format!("the file was written for database {}, not {}", saved.database, warm.database));
                    None
                }
                Ok(Ok(None)) => {
                    warm.set_cold("no file of hot keys yet (a first start)".into());
                    None
                }
                Ok(Err(e)) => {
                    warm.cold(e.to_string());
                    None
                }
                Err(e) => {
                    warm.cold(format!("reading the file failed: {e}"));
                    None
                }
            };
            let plan = match (saved, weak.upgrade()) {
                (Some(saved), Some(engine)) => warm.plan(&engine, saved),
                _ => Vec::new(),
            };
            warm.progress.loaded.store(true, Ordering::Release);
            // In this task, so that aborting it ends both.
            tokio::join!(warm.clone().save_every(weak.clone()), warm.warm_up(weak, plan));
        });
        task.abort_handle()
    }

    fn cold(&self, why: String) {
        warn!(file = %self.path.display(), reason = %why, "warm restart: the file of hot keys is not usable; starting cold");
        self.set_cold(why);
    }

    fn set_cold(&self, why: String) {
        *self.progress.cold.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }

    /// The remembered keys of caches that exist now with the same query, each cache's
    /// record seeded with them.
    fn plan(&self, engine: &Engine, saved: file::Saved) -> Vec<(Arc<Cache>, Vec<Key>)> {
        let mut plan = Vec::new();
        for c in saved.caches {
            let Some(cache) = engine.by_name(&c.name).filter(|cache| cache.sql == c.sql && cache.live().is_ok()) else {
                info!(cache = %c.name, keys = c.keys.len(), "warm restart: no such cache with that query now; its keys are dropped");
                continue;
            };
            let keys: Vec<Key> = c.keys.into_iter().take(cache.hot.limit).collect();
            cache.hot.seed(&keys);
            self.progress.remembered.add(keys.len() as u64);
            plan.push((cache, keys));
        }
        plan
    }

    /// Asks for the remembered keys, `concurrency` at a time, waiting for each round's fills.
    async fn warm_up(&self, engine: Weak<Engine>, plan: Vec<(Arc<Cache>, Vec<Key>)>) {
        let started = Instant::now();
        let p = &self.progress;
        for (cache, keys) in plan {
            for round in keys.chunks(self.concurrency) {
                let Some(engine) = engine.upgrade() else { return };
                let Ok(live) = cache.live() else {
                    p.not_filled.add(round.len() as u64);
                    continue;
                };
                let mut filled = engine.fills();
                let mut pending: Vec<&Key> = Vec::new();
                for k in round {
                    match live.reader.warm(k) {
                        Ok(true) => p.filled.inc(),
                        Ok(false) => pending.push(k),
                        Err(_) => p.not_filled.inc(),
                    }
                }
                let deadline = tokio::time::Instant::now() + ROUND_TIMEOUT;
                while !pending.is_empty() {
                    engine.wake_writer();
                    if tokio::time::timeout_at(deadline, filled.changed()).await.is_err() {
                        break;
                    }
                    // Looking again re-queues a key whose fill was stale or failed.
                    pending.retain(|k| match live.reader.warm(k) {
                        Ok(true) => {
                            p.filled.inc();
                            false
                        }
                        Ok(false) => true,
                        Err(_) => {
                            p.not_filled.inc();
                            false
                        }
                    });
                }
                p.not_filled.add(pending.len() as u64);
            }
        }
        let took = started.elapsed();
        p.took_ms.store(took.as_millis() as u64, Ordering::Relaxed);
        p.done.store(true, Ordering::Release);
        let (filled, not) = (p.filled.get(), p.not_filled.get());
        if filled + not > 0 {
            info!(filled, not_filled = not, took = ?took, "warm restart: remembered keys filled again");
        }
    }

    async fn save_every(self: Arc<Self>, engine: Weak<Engine>) {
        let mut tick = tokio::time::interval(self.save_interval);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(engine) = engine.upgrade() else { return };
            let saved = self.collect(&engine);
            drop(engine);
            let warm = self.clone();
            let _ = tokio::task::spawn_blocking(move || warm.write(&saved)).await;
        }
    }

    /// Writes the file now (at shutdown), unless the last one has not been read yet.
    pub fn save(&self, engine: &Engine) {
        if self.progress.loaded.load(Ordering::Acquire) {
            self.write(&self.collect(engine));
        }
    }

    fn collect(&self, engine: &Engine) -> file::Saved {
        let caches = engine
            .caches()
            .iter()
            .filter(|c| !c.runtime && c.live().is_ok())
            .map(|c| file::CacheKeys { name: c.name.clone(), sql: c.sql.clone(), keys: c.hot.recent() })
            .collect();
        file::Saved { database: self.database.clone(), caches }
    }

    fn write(&self, saved: &file::Saved) {
        let _one = self.save_lock.lock().unwrap_or_else(|e| e.into_inner());
        match file::write(&self.path, saved) {
            Ok(()) => {
                self.progress.saves.inc();
                let n: usize = saved.caches.iter().map(|c| c.keys.len()).sum();
                self.progress.last_saved.store(n as u64, Ordering::Relaxed);
            }
            Err(e) => {
                self.progress.save_failures.inc();
                warn!(file = %self.path.display(), error = %e, "warm restart: writing the file of hot keys failed");
            }
        }
    }

    /// The SHOW FRESHET STATUS lines.
    pub fn status_rows(&self) -> Vec<(&'static str, String)> {
        let p = &self.progress;
        let (remembered, filled, not) = (p.remembered.get(), p.filled.get(), p.not_filled.get());
        let state = if !p.loaded.load(Ordering::Acquire) {
            "reading the file".to_string()
        } else if let Some(why) = p.cold.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            format!("cold start: {why}")
        } else if p.done.load(Ordering::Acquire) {
            let took = p.took_ms.load(Ordering::Relaxed) as f64 / 1000.0;
            format!("done: {filled} of {remembered} keys filled in {took:.1}s ({not} not)")
        } else {
            format!("warming: {} of {remembered} keys asked", filled + not)
        };
        vec![
            ("warm_restart", state),
            ("warm_file", self.path.display().to_string()),
            ("warm_keys_saved", p.last_saved.load(Ordering::Relaxed).to_string()),
        ]
    }

    pub fn render_metrics(&self, out: &mut String) {
        let p = &self.progress;
        let gauges: [(&str, &str, u64); 4] = [
            ("freshet_proxy_warm_keys_remembered", "Keys read from the file of hot keys to fill again at start.", p.remembered.get()),
            ("freshet_proxy_warm_keys_filled", "Of the remembered keys, those present or filled again.", p.filled.get()),
            ("freshet_proxy_warm_keys_not_filled", "Of the remembered keys, those not filled (refused, or late).", p.not_filled.get()),
            (
                "freshet_proxy_warm_done",
                "1 once the warm-up has asked for every remembered key.",
                u64::from(p.done.load(Ordering::Acquire)),
            ),
        ];
        for (name, help, v) in gauges {
            family(out, name, "gauge", help);
            sample(out, name, &[], v);
        }
        family(out, "freshet_proxy_warm_saves_total", "counter", "Files of hot keys written.");
        sample(out, "freshet_proxy_warm_saves_total", &[], p.saves.get());
        family(out, "freshet_proxy_warm_save_failures_total", "counter", "Files of hot keys that could not be written.");
        sample(out, "freshet_proxy_warm_save_failures_total", &[], p.save_failures.get());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: i64) -> Key {
        vec![Value::Int(i)].into_boxed_slice()
    }

    #[test]
    fn keeps_the_most_recent_keys_within_twice_the_limit() {
        let hot = HotKeys::new(10);
        for i in 0..1000 {
            hot.missed(&[key(i)]);
            assert!(hot.len() < 20);
        }
        let recent = hot.recent();
        assert_eq!(recent, (990..1000).rev().map(key).collect::<Vec<_>>());
        // Reading an old key again makes it the most recent.
        hot.missed(&[key(991)]);
        assert_eq!(hot.recent()[0], key(991));
    }

    #[test]
    fn a_record_without_a_limit_keeps_nothing() {
        let hot = HotKeys::new(0);
        hot.missed(&[key(1), key(2)]);
        hot.seed(&[key(3)]);
        assert!(hot.is_empty());
        assert!(hot.recent().is_empty());
    }

    #[test]
    fn seeded_keys_rank_below_this_runs_reads() {
        let hot = HotKeys::new(3);
        hot.missed(&[key(100)]);
        hot.seed(&[key(1), key(2), key(3)]);
        assert_eq!(hot.recent(), vec![key(100), key(1), key(2)]);
        hot.missed(&[key(3)]);
        assert_eq!(hot.recent(), vec![key(3), key(100), key(1)]);
    }
}
