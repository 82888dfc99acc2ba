//! The queries the example application caches, which join tables on keys other than the
//! parameter ("dimensions"): comments with their authors, a story with its author, and a
//! user's karma through stories and votes. Each is maintained through writes to every table
//! (join keys changing included), filled from both sources, and compared with a from-scratch
//! evaluation; their cost bounds name the dimension tables.

use freshet_dataflow::eval::eval;
use freshet_dataflow::*;

const COMMENTS: &str =
    "SELECT comments.id, comments.body, users.name FROM comments JOIN users ON users.id = comments.author_id WHERE comments.story_id = ?";
const STORY: &str =
    "SELECT stories.id, stories.title, users.name FROM stories JOIN users ON users.id = stories.author_id WHERE stories.id = ?";
const KARMA: &str = "SELECT users.id, COUNT(votes.user_id) FROM users JOIN stories ON stories.author_id = users.id JOIN votes ON votes.story_id = stories.id WHERE users.id = ? GROUP BY users.id";
const KARMA_FROM_VOTES: &str = "SELECT users.id, COUNT(votes.user_id) FROM votes JOIN stories ON stories.id = votes.story_id JOIN users ON users.id = stories.author_id WHERE users.id = ? GROUP BY users.id";
const KARMA_LEFT: &str = "SELECT users.id, users.name, COUNT(votes.user_id) FROM users LEFT JOIN stories ON stories.author_id = users.id LEFT JOIN votes ON votes.story_id = stories.id WHERE users.id = ? GROUP BY users.id, users.name";

use freshet_testkit::catalog::news as catalog;

fn int(i: i64) -> Value {
    Value::Int(i)
}
fn text(s: &str) -> Value {
    Value::text(s, Collation::Utf8mb4GeneralCi)
}

struct World {
    df: Dataflow,
    store: MemStore,
    pos: u64,
    views: Vec<ViewId>,
}

impl World {
    fn write(&mut self, f: impl FnOnce(&mut Batch)) {
        self.pos += 1;
        let mut b = Batch::new(Position(self.pos));
        f(&mut b);
        self.store.apply(&b);
        self.df.apply(&b).unwrap();
    }
    /// Reads keys 1..=4 of every view (filling misses from one source), then checks every
    /// filled entry against the oracle. Returns how many entries were compared.
    fn read_and_check(&mut self, replica: bool) -> usize {
        for &v in &self.views {
            let r = self.df.reader(v).unwrap();
            for k in 1..=4 {
                let _ = r.lookup(&[int(k)]).unwrap();
            }
        }
        if replica {
            self.df.run_fills(&mut MemReplica { store: &self.store }).unwrap();
        } else {
            self.df.run_fills(&mut MemUpstream { store: &self.store }).unwrap();
        }
        let mut n = 0;
        for &v in &self.views {
            let q = self.df.query(v).unwrap().clone();
            let r = self.df.reader(v).unwrap();
            for key in self.df.filled_keys(v) {
                let Lookup::Hit(rows) = r.lookup(&key).unwrap() else { continue };
                let mut got = rows.iter().map(|r| Row::from(r.to_vec())).collect::<Vec<Row>>();
                got.sort();
                let keys = std::iter::once(key.clone()).collect();
                let mut want: Vec<Row> =
                    eval(&q.root, &self.store, Some(&keys)).into_iter().map(|r| r[..q.visible].to_vec().into()).collect();
                want.sort();
                assert_eq!(got, want, "{} key {key:?}", q.sql);
                n += 1;
            }
        }
        n
    }
}

#[test]
fn example_application_queries_stay_exact() {
    for replica in [false, true] {
        let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
        let views = [COMMENTS, STORY, KARMA, KARMA_LEFT, KARMA_FROM_VOTES].iter().map(|q| df.install_sql(q).unwrap()).collect();
        let mut w = World { df, store: MemStore::new(), pos: 0, views };
        w.write(|b| {
            for (u, name) in [(1, "ann"), (2, "bob"), (3, "cy"), (4, "dee")] {
                b.insert("users", vec![int(u), text(name)].into());
            }
            for (s, a) in [(1, 1), (2, 1), (3, 2)] {
                b.insert("stories", vec![int(s), int(a), text("t")].into());
            }
            for (c, s, a) in [(1, 1, 2), (2, 1, 3), (3, 2, 2)] {
                b.insert("comments", vec![int(c), int(s), int(a), text("hi")].into());
            }
            for (u, s) in [(2, 1), (3, 1), (3, 2), (1, 3)] {
                b.insert("votes", vec![int(u), int(s)].into());
            }
        });
        let mut compared = w.read_and_check(replica);
        // Dimension updates: a rename reaches every partition holding the user.
        w.write(|b| {
            b.update("users", vec![int(2), text("bob")].into(), vec![int(2), text("rob")].into());
        });
        compared += w.read_and_check(replica);
        // A vote on a story of user 1 (a dimension delta routed by story id), a new story
        // (its votes are not held: the karma partition is evicted and refills), a comment
        // by a user the partition does not hold, and a story changing author.
        w.write(|b| {
            b.insert("votes", vec![int(4), int(2)].into());
        });
        compared += w.read_and_check(replica);
        w.write(|b| {
            b.insert("stories", vec![int(4), int(1), text("new")].into());
            b.insert("votes", vec![int(2), int(4)].into());
        });
        compared += w.read_and_check(replica);
        w.write(|b| {
            b.insert("comments", vec![int(4), int(1), int(4), text("yo")].into());
        });
        compared += w.read_and_check(replica);
        w.write(|b| {
            b.update("stories", vec![int(2), int(1), text("t")].into(), vec![int(2), int(3), text("t")].into());
            b.delete("votes", vec![int(3), int(1)].into());
            b.delete("users", vec![int(3), text("cy")].into());
        });
        compared += w.read_and_check(replica);
        assert!(compared >= 40, "compared only {compared} entries");
        let karma = w.views[2];
        let Lookup::Hit(rows) = w.df.reader(karma).unwrap().lookup(&[int(1)]).unwrap() else { panic!("karma miss") };
        // Stories 1 and 4 are user 1's now: votes (2,1) and (2,4).
        assert_eq!(rows.iter().map(|r| Row::from(r.to_vec())).collect::<Vec<Row>>(), vec![Row::from(vec![int(1), int(2)])]);
        let Lookup::Hit(rows) = w.df.reader(w.views[4]).unwrap().lookup(&[int(1)]).unwrap() else { panic!("karma miss") };
        assert_eq!(rows.iter().map(|r| Row::from(r.to_vec())).collect::<Vec<Row>>(), vec![Row::from(vec![int(1), int(2)])]);
    }
}

#[test]
fn cost_bounds_name_dimension_tables() {
    let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
    let v = df.install_sql(COMMENTS).unwrap();
    let c = df.cost(v).unwrap();
    assert_eq!(c.tables.len(), 2);
    assert!(!c.tables[0].dimension && c.tables[1].dimension, "{c:?}");
    assert_eq!(c.tables[1].table, "users");
    assert!(matches!(c.tables[1].write, Bound::FanOut(_)), "{c:?}");
    assert!(!matches!(c.tables[0].write, Bound::FanOut(_)), "{c:?}");
    let v = df.install_sql(KARMA).unwrap();
    let c = df.cost(v).unwrap();
    let dims: Vec<&str> = c.tables.iter().filter(|t| t.dimension).map(|t| t.table.as_str()).collect();
    assert_eq!(dims, vec!["votes"]);
}

/// The server's binlog history starts again (RESET MASTER, or another server behind the same
/// address): positions from there are lower than those applied. After `restart_at` the views
/// are empty, batches of the new history apply in order, and a dimension delta logged for a
/// partition that was pending in the old history is not replayed into a fill of the new one.
#[test]
fn a_new_binlog_history_starts_lower_and_replays_nothing_of_the_old() {
    let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
    let views = vec![df.install_sql(STORY).unwrap()];
    let mut w = World { df, store: MemStore::new(), pos: 0, views };
    w.write(|b| {
        b.insert("users", vec![int(1), text("ann")].into());
        for s in [1, 2] {
            b.insert("stories", vec![int(s), int(1), text("t")].into());
        }
    });
    assert!(w.read_and_check(false) >= 2, "keys 1 and 2 filled and checked");
    // Story 2 becomes a hole whose fill is not answered before the history ends; a rename of
    // its author is logged for that fill to replay.
    let story = w.views[0];
    w.df.evict(story, &vec![int(2)].into_boxed_slice());
    assert!(matches!(w.df.reader(story).unwrap().lookup(&[int(2)]).unwrap(), Lookup::Miss(_)));
    assert_eq!(w.df.fill_requests().len(), 1);
    w.pos = 100;
    w.write(|b| {
        b.update("users", vec![int(1), text("ann")].into(), vec![int(1), text("bob")].into());
    });
    // The new history: the server's rows are as they are, its positions start at 10.
    w.df.restart_at(Position(10));
    w.store.restart_at(Position(10));
    w.pos = 10;
    assert!(w.df.filled_keys(story).is_empty(), "everything evicted");
    assert!(w.read_and_check(false) >= 2, "keys 1 and 2 filled from the new history and checked");
    w.write(|b| {
        b.insert("stories", vec![int(3), int(1), text("u")].into());
    });
    assert!(w.read_and_check(false) >= 3);
    let Lookup::Hit(rows) = w.df.reader(story).unwrap().lookup(&[int(2)]).unwrap() else { panic!("story 2 missing") };
    assert_eq!(rows.iter().map(|r| Row::from(r.to_vec())).collect::<Vec<Row>>(), vec![Row::from(vec![int(2), text("t"), text("bob")])]);
}
