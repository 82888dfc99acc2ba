//! `news compare`: the workload against several targets — MariaDB directly and freshet in front
//! of it — interleaved round by round (target A, target B, A, B, ...), so that a shared, noisy
//! machine slows them alike. Each target's rounds are pooled (counts and times add up,
//! latencies merge), and the report puts the targets side by side per kind of operation, with
//! the last target's latency over the first's.
//!
//! Does not own: which answers came from memory and which were relayed; freshet reports that
//! itself (`/metrics`, `SHOW CACHES`), and the demo script prints it next to this table.

use std::fmt;

use crate::workload::{self, Options, Report};

/// Each target's pooled report, in the order given.
pub struct Comparison {
    /// (name, report) per target.
    pub targets: Vec<(String, Report)>,
}

/// Runs the workload `rounds` times against each of `targets` (name, URL), interleaved.
pub async fn run(targets: &[(String, String)], opts: &Options, rounds: usize) -> anyhow::Result<Comparison> {
    let mut pooled: Vec<Option<Report>> = targets.iter().map(|_| None).collect();
    for _ in 0..rounds.max(1) {
        for ((name, url), into) in targets.iter().zip(&mut pooled) {
            let report = workload::run(url, opts.clone()).await.map_err(|e| e.context(format!("workload on {name}")))?;
            match into {
                Some(r) => r.merge(&report),
                None => *into = Some(report),
            }
        }
    }
    let targets = targets.iter().zip(pooled).filter_map(|((name, _), r)| Some((name.clone(), r?))).collect();
    Ok(Comparison { targets })
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some((_, first)) = self.targets.first() else { return Ok(()) };
        let (_, last) = &self.targets[self.targets.len() - 1];
        write!(f, "{:<18}", "")?;
        for (name, _) in &self.targets {
            write!(f, " | {name:^26}")?;
        }
        writeln!(f, " | {:^15}", format!("{} / {}", self.targets[self.targets.len() - 1].0, self.targets[0].0))?;
        write!(f, "{:<18}", "kind")?;
        for _ in &self.targets {
            write!(f, " | {:>8} {:>8} {:>8}", "ops/s", "p50 us", "p99 us")?;
        }
        writeln!(f, " | {:>7} {:>7}", "p50", "p99")?;
        let ratio = |a: u32, b: u32| if b == 0 { String::from("-") } else { format!("{:.2}x", f64::from(a) / f64::from(b)) };
        for (i, kind) in first.kinds.iter().enumerate() {
            write!(f, "{:<18}", kind.name)?;
            for (_, r) in &self.targets {
                let k = &r.kinds[i];
                let qps = k.ops as f64 / r.elapsed.as_secs_f64().max(1e-9);
                write!(f, " | {:>8.0} {:>8} {:>8}", qps, k.percentile_us(0.5), k.percentile_us(0.99))?;
            }
            let (a, b) = (&last.kinds[i], kind);
            writeln!(
                f,
                " | {:>7} {:>7}",
                ratio(a.percentile_us(0.5), b.percentile_us(0.5)),
                ratio(a.percentile_us(0.99), b.percentile_us(0.99))
            )?;
        }
        write!(f, "{:<18}", "total")?;
        for (_, r) in &self.targets {
            write!(f, " | {:>8.0} {:>8} {:>8}", r.ops() as f64 / r.elapsed.as_secs_f64().max(1e-9), "", "")?;
        }
        let x = last.ops() as f64
            / last.elapsed.as_secs_f64().max(1e-9)
            / (first.ops() as f64 / first.elapsed.as_secs_f64().max(1e-9)).max(1e-9);
        write!(f, " | ops/s {x:.2}x")?;
        for (name, r) in &self.targets {
            if r.errors() > 0 {
                write!(f, "\n{name}: {} errors", r.errors())?;
                for k in r.kinds.iter().filter(|k| k.first_error.is_some()) {
                    write!(f, "\n  {}: {}", k.name, k.first_error.as_deref().unwrap_or_default())?;
                }
            }
        }
        Ok(())
    }
}
