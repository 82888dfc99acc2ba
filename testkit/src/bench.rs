//! Criterion benches whose steps can also be counted in instructions.
//!
//! A bench declares each step with [`step`] instead of `Criterion::bench_function`. Normally
//! that is all it does. With `FRESHET_BENCH_ITERS=N` set (iteration mode), each step whose
//! name matches the bench's filter argument (a substring, or the whole name with `--exact`, as
//! criterion reads them) instead prints `step NAME`, runs once to warm up and then exactly N
//! times in [`freshet_bench_iterations`], without criterion's sampling and analysis; benches
//! that are not [`step`]s return early when [`iterations`] is set. `scripts/budgets` runs the
//! bench binaries so under callgrind, collecting only inside that function, and reports the
//! instructions per iteration of each step (the figures and budgets in docs/decisions.md).

use std::hint::black_box;

use criterion::Criterion;

/// N in iteration mode (`FRESHET_BENCH_ITERS`), None otherwise.
pub fn iterations() -> Option<u64> {
    let n = std::env::var("FRESHET_BENCH_ITERS").ok()?;
    Some(n.parse().unwrap_or_else(|_| panic!("FRESHET_BENCH_ITERS={n} is not a number of iterations")))
}

/// Benchmarks `f` as `name`: with criterion, or N times in iteration mode.
pub fn step<R>(c: &mut Criterion, name: &str, mut f: impl FnMut() -> R) {
    let Some(n) = iterations() else {
        c.bench_function(name, |b| b.iter(&mut f));
        return;
    };
    if selected(name) {
        println!("step {name}");
        black_box(f());
        freshet_bench_iterations(n, &mut f);
    }
}

/// The measured loop; `scripts/budgets` finds it by this name (`--toggle-collect`).
#[inline(never)]
fn freshet_bench_iterations<R>(n: u64, f: &mut impl FnMut() -> R) {
    for _ in 0..n {
        black_box(f());
    }
}

/// Whether the filter argument (the first that is not a flag) selects `name`.
fn selected(name: &str) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exact = args.iter().any(|a| a == "--exact");
    match args.iter().find(|a| !a.starts_with('-')) {
        None => true,
        Some(filter) if exact => name == filter,
        Some(filter) => name.contains(filter.as_str()),
    }
}
