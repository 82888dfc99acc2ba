//! The oracle property test: random base rows, a random query from the supported set, and a
//! random interleaving of inserts, updates, deletes, replication lag, lookups, evictions,
//! budget pressure and fills that arrive late (positions before and after concurrent deltas),
//! from either fill source. Whenever replication has caught up, every filled reader entry must
//! equal a from-scratch evaluation of the query over the current base rows.

use freshet_dataflow::*;
use proptest::prelude::*;

#[path = "oracle/harness.rs"]
mod harness;
use harness::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(200), max_shrink_iters: 2000, ..ProptestConfig::default() })]
    #[test]
    fn incremental_equals_from_scratch(
        qi in 0..QUERIES.len(),
        small_budget in any::<bool>(),
        slack in 0..3usize,
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let budget = if small_budget { ByteSize(2_500) } else { ByteSize(1 << 30) };
        let mut df = Dataflow::new(catalog(), budget);
        df.set_topk_slack(slack);
        df.set_max_fill_keys(2);
        let view = df.install_sql(QUERIES[qi]).unwrap();
        Sim::run(df, vec![view], ops, qi % 2 == 0);
    }
}

/// The property tests are only as good as what they compare: with a fixed seed, the same
/// generators must make every query compare many non-empty entries.
#[test]
fn oracle_checks_are_not_vacuous() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for (name, queries) in [("QUERIES", QUERIES), ("DIMS", DIMS)] {
        let (mut stale, mut evictions) = (0, 0);
        for sql in queries.iter() {
            let (mut checked, mut nonempty) = (0, 0);
            for case in 0..20 {
                let ops = proptest::collection::vec(op(), 20..120).new_tree(&mut runner).unwrap().current();
                let sim = run_case(sql, ByteSize(1 << 30), 1, case % 2 == 0, ops);
                checked += sim.checked;
                nonempty += sim.nonempty;
                stale += sim.stale;
                evictions += sim.views.iter().map(|v| sim.df.stats(*v).unwrap().evictions).sum::<u64>();
            }
            eprintln!("{name}: {checked} compared, {nonempty} non-empty: {sql}");
            assert!(nonempty >= 10, "{name}: {sql} compared {checked} entries, only {nonempty} non-empty");
        }
        eprintln!("{name}: {stale} stale fills rejected, {evictions} evictions");
        assert!(stale > 0 && evictions > 0, "{name}: the cases must exercise stale fills and evictions");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(120), max_shrink_iters: 2000, ..ProptestConfig::default() })]
    #[test]
    fn shared_subtrees_equal_from_scratch(
        fi in 0..FAMILIES.len(),
        small_budget in any::<bool>(),
        slack in 0..3usize,
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let budget = if small_budget { ByteSize(4_000) } else { ByteSize(1 << 30) };
        let mut df = Dataflow::new(catalog(), budget);
        df.set_topk_slack(slack);
        df.set_max_fill_keys(2);
        let views: Vec<ViewId> = FAMILIES[fi].iter().map(|q| df.install_sql(q).unwrap()).collect();
        Sim::run(df, views, ops, fi % 2 == 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(150), max_shrink_iters: 2000, ..ProptestConfig::default() })]
    #[test]
    fn bounded_top_k_equals_from_scratch(
        qi in 0..TOP_K.len(),
        slack in 0..2usize,
        ops in proptest::collection::vec(op(), 40..200),
    ) {
        let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
        df.set_topk_slack(slack);
        let view = df.install_sql(TOP_K[qi]).unwrap();
        Sim::run(df, vec![view], ops, qi % 2 == 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(300), max_shrink_iters: 2000, ..ProptestConfig::default() })]
    #[test]
    fn dimension_joins_equal_from_scratch(
        qi in 0..DIMS.len(),
        small_budget in any::<bool>(),
        replica in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let budget = if small_budget { ByteSize(3_000) } else { ByteSize(1 << 30) };
        run_case(DIMS[qi], budget, 1, replica, ops);
    }
}

#[test]
fn every_dimension_query_compiles() {
    let c = catalog();
    for q in DIMS {
        compile(q, &c).unwrap_or_else(|e| panic!("{q}: {e}"));
    }
}

#[test]
fn families_share_state() {
    for fam in FAMILIES {
        let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
        let views: Vec<ViewId> = fam.iter().map(|q| df.install_sql(q).unwrap()).collect();
        // The first two of each family share operators (the third may or may not).
        assert!(df.domain_of(views[0]).contains(&views[1]), "{fam:?}");
    }
}

#[test]
fn every_oracle_query_compiles() {
    let c = catalog();
    for q in QUERIES {
        compile(q, &c).unwrap_or_else(|e| panic!("{q}: {e}"));
    }
}
