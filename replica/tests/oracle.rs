//! The dataflow's oracle property tests with the RocksDB store as the replica fill source:
//! the store follows the replicated batches (as the engine's writer applies them, before the
//! views) and answers every replica fill at the position it has applied. Each case opens a
//! fresh store in a temporary directory.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use freshet_dataflow::*;
use freshet_replica::{CopyState, ReplicaStore};
use proptest::prelude::*;

#[path = "../../dataflow/tests/oracle/harness.rs"]
mod harness;
use harness::*;

/// A store in its own directory, removed on drop.
struct Rocks {
    store: ReplicaStore,
    dir: PathBuf,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Rocks {
    fn new() -> Rocks {
        let dir =
            std::env::temp_dir().join(format!("freshet-replica-oracle-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        let store = ReplicaStore::open(&dir).unwrap();
        for t in catalog().tables() {
            store.register(t).unwrap();
            // An empty table copied at position 0: the stream brings every row.
            assert_eq!(
                store.write_copy_batch(t, store.copy_progress(&t.name).unwrap().1, Position(0), &[], true).unwrap(),
                CopyState::Done { ready_at: Position(0) }
            );
        }
        Rocks { store, dir }
    }
}

impl Drop for Rocks {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl ReplicaUnderTest for Rocks {
    fn apply(&mut self, batch: &Batch) {
        self.store.apply(batch).unwrap();
    }
    fn fill(&mut self, req: &FillRequest) -> Result<FillResponse, FillError> {
        let resp = (&self.store).fill(req)?;
        assert!(matches!(resp.data, FillData::BaseRows(_)));
        Ok(resp)
    }
}

fn rocks_case(sql: &str, budget: ByteSize, ops: Vec<Op>) -> Sim {
    let mut df = Dataflow::new(catalog(), budget);
    df.set_topk_slack(1);
    df.set_max_fill_keys(2);
    let view = df.install_sql(sql).unwrap();
    Sim::run_with(df, vec![view], ops, true, Some(Box::new(Rocks::new())))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(60), max_shrink_iters: 500, ..ProptestConfig::default() })]
    #[test]
    fn replica_fills_equal_from_scratch(
        qi in 0..QUERIES.len() + DIMS.len(),
        small_budget in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..100),
    ) {
        let sql = if qi < QUERIES.len() { QUERIES[qi] } else { DIMS[qi - QUERIES.len()] };
        let budget = if small_budget { ByteSize(3_000) } else { ByteSize(1 << 30) };
        rocks_case(sql, budget, ops);
    }
}

/// With a fixed seed, every query compares entries filled from RocksDB, and most queries compare
/// non-empty (a few joins are selective enough to match rarely in short runs).
#[test]
fn replica_oracle_is_not_vacuous() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut total, mut nonempty_total) = (0, 0);
    for sql in QUERIES.iter().chain(DIMS.iter()) {
        let (mut checked, mut nonempty) = (0, 0);
        for _ in 0..6 {
            let ops = proptest::collection::vec(op(), 40..120).new_tree(&mut runner).unwrap().current();
            let sim = rocks_case(sql, ByteSize(1 << 30), ops);
            checked += sim.checked;
            nonempty += sim.nonempty;
        }
        eprintln!("{checked} compared, {nonempty} non-empty: {sql}");
        assert!(checked >= 6, "{sql}: only {checked} entries compared");
        total += 1;
        nonempty_total += usize::from(nonempty >= 3);
    }
    assert!(nonempty_total * 10 >= total * 8, "only {nonempty_total} of {total} queries compared 3 non-empty entries");
}
