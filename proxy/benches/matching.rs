//! Cost of classifying a query on the hit path (tokenize, fingerprint, extract literals) and
//! of looking its fingerprint up in the verdict table, for the example app's read shapes; and
//! of classifying a text of a shape the session has learnt (`matching::shape`), with another
//! value than the learnt text's.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use freshet_proxy::cache::route::{ParamMap, Verdict, VerdictTable};
use freshet_proxy::matching::{Bounds, CacheId, Shapes, SqlMode, classify, classify_with_tokens};
use freshet_testkit::bench::step;

fn bench(c: &mut Criterion) {
    let queries = [
        ("point_select", "SELECT id, title, url, author_id FROM stories WHERE id = 4242"),
        (
            "story_votes",
            "SELECT stories.id, stories.title, COUNT(votes.user_id) AS votes FROM stories LEFT JOIN votes ON votes.story_id = stories.id WHERE stories.id = 17 GROUP BY stories.id, stories.title",
        ),
        ("in_list", "SELECT id, title FROM stories WHERE id IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10) AND author_id = 'u_42'"),
    ];
    let table = VerdictTable::new(10_000);
    for (name, sql) in queries {
        let query = classify(sql.as_bytes(), SqlMode::default());
        table.insert(&query.fingerprint, Verdict::cache(CacheId(1), ParamMap::default()));
        step(c, &format!("matching/classify/{name}"), || classify(black_box(sql.as_bytes()), SqlMode::default()));
        // What a session's read of a text of a shape it has not learnt costs (the tokens are
        // what learning the shape needs).
        step(c, &format!("matching/classify_with_tokens/{name}"), || classify_with_tokens(black_box(sql.as_bytes()), Bounds::default()));
        step(c, &format!("matching/classify_and_lookup/{name}"), || {
            let query = classify(black_box(sql.as_bytes()), SqlMode::default());
            table.get(&query.fingerprint).is_some()
        });
        // IN lists are not learnt.
        if name != "in_list" {
            let mut shapes = Shapes::default();
            let learnt = sql.replace("4242", "1").replace("= 17", "= 1");
            let (mut query, tokens) = classify_with_tokens(learnt.as_bytes(), Bounds::default());
            shapes.learn(learnt.as_bytes(), &mut query, &tokens);
            assert!(shapes.classify(sql.as_bytes(), Bounds::default()).is_some(), "{name}: the learnt shape spells it");
            step(c, &format!("matching/known_shape/{name}"), || shapes.classify(black_box(sql.as_bytes()), Bounds::default()));
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
