//! The full parse: which cache, if any, answers a query shape. Runs once per new fingerprint;
//! its verdict is kept in the [`VerdictTable`](crate::matching::VerdictTable).
//!
//! A query matches a cache when it is the cached query with other literal values, slot for
//! slot (fingerprint slots are in text order):
//! 1. **Same text.** The normalized texts are equal (whitespace, comments, keyword case,
//!    backticks and literal values aside). No SQL parse.
//! 2. **Same plan.** Otherwise both normalized texts are compiled by the dataflow with every
//!    literal as a `?` and the plans compared ([`CompiledQuery::same_plan`]): this is what
//!    makes `stories.id` and `id`, or an alias, the same query. With every literal a
//!    parameter, equal plans mean literal `i` of one plays the role of literal `i` of the
//!    other.
//! 3. **IN list for `= ?`.** A query with `col IN (...)` where the cache has `col = ?` matches
//!    if the dataflow says the plans differ only in that arity and a list reads the same rows
//!    as the union of single lookups ([`CompiledQuery::same_plan_except_arity`]).
//!
//! The cache's own slots say what each literal is for: a `?` of the cached query becomes a
//! lookup parameter, a constant (`status = 'live'`, `LIMIT 10`) must be repeated exactly by the
//! query (checked per query: a different constant is relayed, never answered from the view).
//! An IN list of the cached query is of placeholders, which a read's list of the same length
//! feeds, or of constants, which a read's list must repeat value for value. Invariant: a
//! pattern maps its own text's slots ([`Pattern::new`] refuses one that does not, such as a
//! list of constants and placeholders): a cache no read could match, its own text included,
//! is refused where it is defined rather than built, said available and never asked.

use std::sync::{Arc, RwLock};

use freshet_dataflow::{Catalog, CompiledQuery, compile};

use super::route::{Match, ParamMap, SlotUse, Verdict};
use crate::matching::{Literal, Query, Slot};

use super::CacheId;

/// What a cache's query looks like to the matcher; built when the cache is created, its plan
/// compiled again whenever the catalog changes ([`Pattern::recompile`]).
#[derive(Debug)]
pub struct Pattern {
    pub normalized: String,
    slots: Vec<PatternSlot>,
    /// The normalized text compiled with every literal as a parameter, against the catalog
    /// sessions match with (None: not compilable that way, e.g. `LIMIT ?`; then only the same
    /// text matches). A plan of an older schema would never equal a query's under the new one
    /// (`SELECT *` of a table that gained a column): the cache's other spellings would be
    /// relayed for good.
    general: RwLock<Option<Arc<CompiledQuery>>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PatternSlot {
    /// The cached query's `?` number p.
    Placeholder(u16),
    /// A constant, rendered.
    Const(Box<[u8]>),
    /// An IN list of the cached query's own: of placeholders, matched by exact arity; of
    /// constants, repeated exactly.
    List(Vec<PatternSlot>),
}

impl Pattern {
    /// The pattern of a cached query's text, or why its text cannot serve as one.
    pub fn new(query: &Query<'_>, catalog: &Catalog) -> Result<Pattern, String> {
        if let Some(reason) = query.relay {
            return Err(reason.to_string());
        }
        let mut slots = Vec::new();
        for_each_slot(query, |slot, literals| {
            let kinds: Vec<PatternSlot> = literals.iter().map(pattern_slot).collect();
            match slot {
                Slot::One(_) => slots.extend(kinds),
                Slot::InList(_) => slots.push(PatternSlot::List(kinds)),
            }
        });
        // Its own text must match it (see the module's header).
        let own: Vec<bool> = query.fingerprint.slots.iter().map(|s| matches!(s, Slot::InList(_))).collect();
        if map_slots(&slots, &own, false).is_none() {
            return Err(unmatched(&slots));
        }
        let pattern = Pattern { normalized: query.fingerprint.normalized.clone(), slots, general: RwLock::new(None) };
        pattern.recompile(catalog);
        Ok(pattern)
    }

    /// A pattern no query matches (a cache that could not be built).
    pub fn never(sql: &str) -> Pattern {
        Pattern { normalized: format!("\0{sql}"), slots: Vec::new(), general: RwLock::new(None) }
    }

    /// Compiles the pattern's plan against `catalog` (after DDL: before sessions match with
    /// it, see `Registry::publish_catalog`).
    pub fn recompile(&self, catalog: &Catalog) {
        let general =
            if self.normalized.starts_with('\0') { None } else { compile(&generalize(&self.normalized), catalog).ok().map(Arc::new) };
        *self.general.write().unwrap_or_else(|e| e.into_inner()) = general;
    }

    fn general(&self) -> Option<Arc<CompiledQuery>> {
        self.general.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Why a pattern's own slots do not map onto its text's.
fn unmatched(slots: &[PatternSlot]) -> String {
    let mixed = slots.iter().any(|s| matches!(s, PatternSlot::List(items) if list_use(items).is_none()));
    if mixed {
        "an IN list of the cached query mixes constants and placeholders, so no read would match it: \
         write its values all as constants or all as placeholders"
            .to_string()
    } else {
        "no read would match the cached query, not even its own text (freshet cannot map its literals)".to_string()
    }
}

fn pattern_slot(lit: &Literal<'_>) -> PatternSlot {
    match lit {
        Literal::Placeholder(p) => PatternSlot::Placeholder(u16::try_from(*p).unwrap_or(u16::MAX)),
        other => {
            let mut out = Vec::new();
            other.render(&mut out);
            PatternSlot::Const(out.into())
        }
    }
}

/// Calls `f` with each fingerprint slot and the literals it holds.
pub fn for_each_slot<'q>(query: &Query<'q>, mut f: impl FnMut(Slot, &[Literal<'q>])) {
    let mut at = 0;
    let mut lists = query.in_lists.iter();
    for slot in &query.fingerprint.slots {
        let n = match slot {
            Slot::One(_) => 1,
            Slot::InList(_) => lists.next().copied().unwrap_or(0) as usize,
        };
        let end = (at + n).min(query.literals.len());
        f(*slot, &query.literals[at..end]);
        at = end;
    }
}

/// A normalized text as SQL with every literal a parameter: `?` stays, an IN list `(...)`
/// becomes two parameters (two, so that "a list" and "one value" compile differently).
fn generalize(normalized: &str) -> String {
    normalized.replace("(...)", "(?, ?)")
}

/// The caches a verdict is taken against: id, pattern.
pub type Candidates<'a> = &'a [(CacheId, &'a Pattern)];

/// The verdict for a query shape. `catalog` is the current one (for the same-plan path).
pub fn verdict(query: &Query<'_>, caches: Candidates<'_>, catalog: &Catalog) -> Verdict {
    if let Some(reason) = query.relay {
        return Verdict::relay(reason);
    }
    let kinds: Vec<bool> = query.fingerprint.slots.iter().map(|s| matches!(s, Slot::InList(_))).collect();
    // 1. Same text: every cache written so (caches of one shape differ in their constants).
    let same_text: Vec<Match> = caches
        .iter()
        .filter(|(_, pattern)| pattern.normalized == query.fingerprint.normalized)
        .filter_map(|(id, pattern)| Some(Match { id: *id, params: map_slots(&pattern.slots, &kinds, false)? }))
        .collect();
    if !same_text.is_empty() {
        return Verdict::Cache(same_text.into());
    }
    // A text far longer than any cache's is not the same plan written otherwise: it is not
    // compiled (the SQL parser takes ~0.5 us a byte, in the session's task, and a client may
    // send a new 256 KiB shape each time). An IN list is one `(...)` whatever its length.
    let longest = caches.iter().map(|(_, p)| p.normalized.len()).max().unwrap_or(0);
    if query.fingerprint.normalized.len() > LONGER_THAN_ANY.0 * longest + LONGER_THAN_ANY.1 {
        return Verdict::relay(TOO_LONG);
    }
    // 2. and 3.: compile the query's shape once, off the runtime's worker (`off_worker`).
    let general = match off_worker(|| compile(&generalize(&query.fingerprint.normalized), catalog)) {
        Ok(q) => q,
        Err(refusal) => return Verdict::relay(&format!("not cacheable: {}", refusal.reason)),
    };
    let mut same_plan = Vec::new();
    for (id, pattern) in caches {
        let Some(theirs) = pattern.general() else { continue };
        let theirs = &*theirs;
        let params = general
            .same_plan(theirs)
            .then(|| map_slots(&pattern.slots, &kinds, false))
            .flatten()
            .or_else(|| general.same_plan_except_arity(theirs).then(|| map_slots(&pattern.slots, &kinds, true)).flatten());
        same_plan.extend(params.map(|params| Match { id: *id, params }));
    }
    if !same_plan.is_empty() {
        return Verdict::Cache(same_plan.into());
    }
    Verdict::relay(NO_CACHE)
}

/// Runs `f`, a compile (parse and plan: ~1 ms a KiB of text in the release build, a shape
/// at a time), telling a multi-threaded runtime that it blocks: the runtime hands the
/// worker's other sessions to another thread meanwhile, so one session's new shapes do not
/// hold up the cached reads queued behind it. Elsewhere (a current-thread runtime, no
/// runtime) `f` just runs.
fn off_worker<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// A normalized text longer than this many times the longest cache's normalized text, plus
/// this many bytes, is taken to match no cache without compiling it.
const LONGER_THAN_ANY: (usize, usize) = (4, 4096);

/// The reason of a verdict for such a text.
const TOO_LONG: &str = "not compiled: its text is far longer than any cache's query";

/// The reason of a verdict for a query freshet could cache but no cache matches.
const NO_CACHE: &str = "cacheable, but no cache matches it (CREATE CACHE FROM <the query> to cache it)";

/// True for the verdict of a cacheable query that no cache matches (as opposed to one that
/// cannot be cached at all).
pub fn is_no_cache(verdict: &Verdict) -> bool {
    matches!(verdict, Verdict::Relay { reason } if **reason == *NO_CACHE)
}

/// Slot uses for a query whose slots are lists where `lists[i]`; `in_for_eq`: a query list
/// may stand for a cached `= ?`. None if the slots do not line up.
fn map_slots(pattern: &[PatternSlot], lists: &[bool], in_for_eq: bool) -> Option<ParamMap> {
    if pattern.len() != lists.len() {
        return None;
    }
    let mut uses = Vec::with_capacity(pattern.len());
    for (p, &is_list) in pattern.iter().zip(lists) {
        uses.push(match (p, is_list) {
            (PatternSlot::Placeholder(i), false) => SlotUse::Param(*i),
            (PatternSlot::Placeholder(i), true) if in_for_eq => SlotUse::InParam(*i),
            (PatternSlot::Const(c), false) => SlotUse::Const(c.clone()),
            (PatternSlot::List(items), true) => list_use(items)?,
            _ => return None,
        });
    }
    Some(ParamMap { slots: uses.into() })
}

/// What a cached IN list is for: consecutive placeholders, which a read's list of the same
/// length feeds (checked at binding); or constants, which a read's list must repeat. A list of
/// both: None (refused when the cache is made, [`Pattern::new`]).
fn list_use(items: &[PatternSlot]) -> Option<SlotUse> {
    match items.first()? {
        PatternSlot::Placeholder(first) => {
            let consecutive = items
                .iter()
                .enumerate()
                .all(|(k, s)| u16::try_from(k).ok().and_then(|k| first.checked_add(k)).is_some_and(|p| *s == PatternSlot::Placeholder(p)));
            consecutive.then_some(SlotUse::List { first: *first, arity: items.len() as u16 })
        }
        _ => {
            let constants: Option<Vec<Box<[u8]>>> =
                items.iter().map(|s| if let PatternSlot::Const(c) = s { Some(c.clone()) } else { None }).collect();
            constants.map(|c| SlotUse::ConstList(c.into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use freshet_dataflow::{ColumnSchema, SqlType, TableSchema};

    use super::*;
    use crate::matching::{SqlMode, classify};

    fn catalog() -> Catalog {
        let mut c = Catalog::new();
        let int = SqlType::Int { bytes: 4, unsigned: false };
        c.add(TableSchema::new(
            "items",
            vec![
                ColumnSchema::new("id", int.clone()).not_null(),
                ColumnSchema::new("grp", int.clone()),
                ColumnSchema::new("name", SqlType::Text),
            ],
            vec![0],
        ))
        .unwrap();
        c
    }

    fn verdict_for(cached: &str, query: &str) -> Verdict {
        let catalog = catalog();
        let pattern = Pattern::new(&classify(cached.as_bytes(), SqlMode::default()), &catalog).unwrap();
        verdict(&classify(query.as_bytes(), SqlMode::default()), &[(CacheId(1), &pattern)], &catalog)
    }

    fn uses(v: &Verdict) -> Vec<SlotUse> {
        match v {
            Verdict::Cache(matches) if matches[..] == [matches[0].clone()] && matches[0].id == CacheId(1) => {
                matches[0].params.slots.to_vec()
            }
            other => panic!("expected the cache, got {other:?}"),
        }
    }

    #[test]
    fn same_text_and_same_plan_match_slot_for_slot() {
        let cached = "SELECT id, name FROM items WHERE id = ?";
        assert_eq!(uses(&verdict_for(cached, "select id, name from items where id = 5")), [SlotUse::Param(0)]);
        assert_eq!(uses(&verdict_for(cached, "SELECT items.id, items.name FROM items WHERE items.id = 5")), [SlotUse::Param(0)]);
        assert_eq!(uses(&verdict_for(cached, "SELECT i.id, i.name FROM items i WHERE i.id = 5")), [SlotUse::Param(0)]);
        // A different column list or filter is another query.
        assert!(matches!(verdict_for(cached, "SELECT id FROM items WHERE id = 5"), Verdict::Relay { .. }));
        assert!(matches!(verdict_for(cached, "SELECT id, name FROM items WHERE grp = 5"), Verdict::Relay { .. }));
    }

    /// A text far longer than any cache's query is not compiled to find its plan (an audit:
    /// texts of 250 KB, each another shape, cost 100-160 ms each in the SQL parser and held
    /// up other sessions' reads); an IN list and a text of about a cache's length still are.
    #[test]
    fn a_text_far_longer_than_any_caches_is_not_compiled() {
        let cached = "SELECT id, name FROM items WHERE grp = ?";
        let long = format!("SELECT id, name FROM items WHERE grp = COALESCE({} 1)", "grp, ".repeat(2_000));
        match verdict_for(cached, &long) {
            Verdict::Relay { reason } => assert!(reason.contains("longer than"), "{reason}"),
            other => panic!("{other:?}"),
        }
        let list = format!("SELECT id, name FROM items WHERE grp IN ({})", vec!["7"; 500].join(", "));
        assert!(matches!(verdict_for(cached, &list), Verdict::Cache(_)));
        assert!(matches!(
            verdict_for(cached, "SELECT its_items.id, its_items.name FROM items AS its_items WHERE its_items.grp = 1"),
            Verdict::Cache(_)
        ));
    }

    #[test]
    fn constants_of_the_cached_query_must_be_repeated() {
        let cached = "SELECT id, name FROM items WHERE grp = ? ORDER BY id LIMIT 10";
        let expected = [SlotUse::Param(0), SlotUse::Const(b"10".as_slice().into())];
        assert_eq!(uses(&verdict_for(cached, "SELECT id, name FROM items WHERE grp = 3 ORDER BY id LIMIT 20")), expected);
    }

    /// Caches of one shape but for a constant: a read is theirs whose constants it repeats,
    /// written as the cache writes them or otherwise (the same plan); one with neither's
    /// constant goes to the first, whose binding relays it.
    #[test]
    fn of_caches_differing_in_a_constant_a_read_goes_to_the_one_it_repeats() {
        let catalog = catalog();
        let pattern = |sql: &str| Pattern::new(&classify(sql.as_bytes(), SqlMode::default()), &catalog).unwrap();
        let (ten, five) = (
            pattern("SELECT id, name FROM items WHERE grp = ? AND id > 10"),
            pattern("SELECT id, name FROM items WHERE grp = ? AND id > 5"),
        );
        let caches = [(CacheId(1), &ten), (CacheId(2), &five)];
        for (sql, want) in [
            ("SELECT id, name FROM items WHERE grp = 3 AND id > 10", CacheId(1)),
            ("SELECT id, name FROM items WHERE grp = 3 AND id > 5", CacheId(2)),
            ("SELECT items.id, items.name FROM items WHERE items.grp = 3 AND items.id > 5", CacheId(2)),
            ("SELECT id, name FROM items WHERE grp = 3 AND id > 7", CacheId(1)),
        ] {
            let query = classify(sql.as_bytes(), SqlMode::default());
            let v = verdict(&query, &caches, &catalog);
            assert_eq!(v.matches().len(), 2, "{sql}: {v:?}");
            assert_eq!(super::super::route::interpret(&v, &query).map(|(id, _)| id), Ok(want), "{sql}");
        }
    }

    /// The cache that answers a read (EXPLAIN CACHE's) is one whose constants the read
    /// repeats, of a shape of one cache as of several; `interpret` takes the only one
    /// unchecked, and the first when none is repeated (the binding relays the read).
    #[test]
    fn the_answering_cache_is_one_whose_constants_the_read_repeats() {
        use super::super::route::{answering, interpret};
        let catalog = catalog();
        let pattern = |sql: &str| Pattern::new(&classify(sql.as_bytes(), SqlMode::default()), &catalog).unwrap();
        let (ten, five) = (
            pattern("SELECT id, name FROM items WHERE grp = ? AND id > 10"),
            pattern("SELECT id, name FROM items WHERE grp = ? AND id > 5"),
        );
        let (lists_two, lists_three) =
            (pattern("SELECT id, name FROM items WHERE id IN (?, ?)"), pattern("SELECT id, name FROM items WHERE id IN (?, ?, ?)"));
        let two = [(CacheId(1), &ten), (CacheId(2), &five)];
        let one = [(CacheId(1), &ten)];
        let lists = [(CacheId(1), &lists_two), (CacheId(2), &lists_three)];
        for (caches, sql, want) in [
            (&two[..], "SELECT id, name FROM items WHERE grp = 3 AND id > 5", Some(CacheId(2))),
            (&two[..], "SELECT id, name FROM items WHERE grp = 3 AND id > 7", None),
            (&one[..], "SELECT id, name FROM items WHERE grp = 3 AND id > 10", Some(CacheId(1))),
            (&one[..], "SELECT id, name FROM items WHERE grp = 3 AND id > 7", None),
            (&lists[..], "SELECT id, name FROM items WHERE id IN (1, 2, 3)", Some(CacheId(2))),
            (&lists[..], "SELECT id, name FROM items WHERE id IN (1, 2, 3, 4)", None),
        ] {
            let query = classify(sql.as_bytes(), SqlMode::default());
            let v = verdict(&query, caches, &catalog);
            assert_eq!(answering(&v, &query), want, "{sql}: {v:?}");
            if caches.len() == 1 {
                assert_eq!(interpret(&v, &query).map(|(id, _)| id), Ok(CacheId(1)), "one cache: taken unchecked");
            }
        }
    }

    /// A text with a reason of its own to be relayed is relayed, whatever its shape's verdict.
    #[test]
    fn a_texts_own_relay_reason_outweighs_its_shapes_verdict() {
        let cached = "SELECT id, name FROM items WHERE grp = ?";
        let sql = "SELECT id, name FROM items WHERE grp = 3";
        let v = verdict_for(cached, sql);
        let mut query = classify(sql.as_bytes(), SqlMode::default());
        assert!(super::super::route::interpret(&v, &query).is_ok());
        query.relay = Some("a session-dependent function (NOW(), RAND(), UUID(), LAST_INSERT_ID(), ...)");
        assert_eq!(super::super::route::interpret(&v, &query).err(), Some(super::super::RelayReason::NotCacheable));
    }

    #[test]
    fn in_lists_stand_for_eq_only_where_results_merge() {
        let cached = "SELECT id, name FROM items WHERE grp = ?";
        assert_eq!(uses(&verdict_for(cached, "SELECT id, name FROM items WHERE grp IN (1, 2, 3)")), [SlotUse::InParam(0)]);
        // A per-key LIMIT is not the IN list's LIMIT; an ungrouped COUNT is one row, not one
        // per key.
        let limited = "SELECT id, name FROM items WHERE grp = ? ORDER BY id LIMIT 5";
        assert!(matches!(
            verdict_for(limited, "SELECT id, name FROM items WHERE grp IN (1, 2) ORDER BY id LIMIT 5"),
            Verdict::Relay { .. }
        ));
        let counted = "SELECT COUNT(*) FROM items WHERE grp = ?";
        assert!(matches!(verdict_for(counted, "SELECT COUNT(*) FROM items WHERE grp IN (1, 2)"), Verdict::Relay { .. }));
    }

    #[test]
    fn a_cached_in_list_of_placeholders_matches_lists_by_position() {
        let cached = "SELECT id, name FROM items WHERE id IN (?, ?)";
        assert_eq!(uses(&verdict_for(cached, "SELECT id, name FROM items WHERE id IN (4, 5, 6)")), [SlotUse::List { first: 0, arity: 2 }]);
    }

    /// A cached IN list of constants is matched, and its binding takes a read's list only if
    /// it repeats it, value for value (it was refused by `map_slots`: the cache was built,
    /// said available, and never served, not even its own text; an audit of session 53).
    #[test]
    fn a_cached_in_list_of_constants_answers_that_list_only() {
        let catalog = catalog();
        let cached = "SELECT id, name FROM items WHERE grp = ? AND id IN (3, 53, 103)";
        let view = compile(cached, &catalog).unwrap();
        for (sql, answered) in [
            ("SELECT id, name FROM items WHERE grp = 1 AND id IN (3, 53, 103)", true),
            ("SELECT items.id, items.name FROM items WHERE items.grp = 1 AND items.id IN (3, 53, 103)", true),
            ("SELECT id, name FROM items WHERE grp = ? AND id IN (3, 53, 103)", true),
            ("SELECT id, name FROM items WHERE grp = 1 AND id IN (3, 53, 104)", false),
            ("SELECT id, name FROM items WHERE grp = 1 AND id IN (53, 3, 103)", false),
            ("SELECT id, name FROM items WHERE grp = 1 AND id IN (3, 53)", false),
            ("SELECT id, name FROM items WHERE grp = 1 AND id IN (3, 53, 103, 104)", false),
            ("SELECT id, name FROM items WHERE grp = 1 AND id IN (3, 53, ?)", false),
        ] {
            let query = classify(sql.as_bytes(), SqlMode::default());
            let v = verdict_for(cached, sql);
            let Verdict::Cache(matches) = &v else { panic!("{sql}: {v:?}") };
            let bound = super::super::route::Binding::new(&query, &matches[0].params, &view);
            assert_eq!(bound.err(), (!answered).then_some(super::super::RelayReason::Constant), "{sql}");
        }
    }

    /// A cached query whose own text would not match it is refused where it is defined, saying
    /// why: an IN list of constants and placeholders (it was accepted, and never served).
    #[test]
    fn a_pattern_its_own_text_would_not_match_is_refused() {
        let catalog = catalog();
        for mixed in ["SELECT id, name FROM items WHERE id IN (?, 3)", "SELECT id, name FROM items WHERE grp = ? AND id IN (3, ?, 5)"] {
            let err = Pattern::new(&classify(mixed.as_bytes(), SqlMode::default()), &catalog).unwrap_err();
            assert!(err.contains("IN list") && err.contains("constants and placeholders"), "{mixed}: {err}");
        }
    }

    #[test]
    fn relays_say_why() {
        let cached = "SELECT id, name FROM items WHERE id = ?";
        let Verdict::Relay { reason } = verdict_for(cached, "SELECT id, NOW() FROM items WHERE id = 1") else { panic!() };
        assert!(reason.contains("session-dependent"), "{reason}");
        let Verdict::Relay { reason } = verdict_for(cached, "SELECT grp FROM items WHERE id = 1") else { panic!() };
        assert!(reason.starts_with("cacheable"), "{reason}");
        let Verdict::Relay { reason } = verdict_for(cached, "SELECT nope FROM items WHERE id = 1") else { panic!() };
        assert!(reason.starts_with("not cacheable"), "{reason}");
    }
}
