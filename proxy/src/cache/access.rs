//! Who may read which cache, as the server decided it.
//!
//! freshet holds no copy of the server's grant logic. For each account (as the server
//! identifies a session: `CURRENT_USER()` and its active role) and each cache, the first read
//! is relayed and its outcome remembered: rows mean the account may read the cache, an access
//! error (1142, 1143, 1044, ...) means it may not. MySQL and MariaDB grant per table and
//! column, never per row, and every query matched to a cache reads the same tables and
//! columns (same text, same plan, or an IN list for its `= ?`), so one relayed read answers
//! for every key, warm or cold: a fill (done with freshet's own account) never returns a key
//! to an account that could not have read it.
//!
//! Invariants:
//! - what was learned is forgotten when privileges may have changed ([`Access::forget_all`],
//!   on the binlog's GRANT/REVOKE/..., writes to the `mysql` schema and schema changes of the
//!   tables caches read, since `SELECT *` reads an added column) and after
//!   `[consistency] max_privilege_age`;
//! - an outcome is kept only if no such change happened while its read was in flight (the
//!   generation it was asked under is still current), so a REVOKE racing a read cannot
//!   leave a stale "allowed";
//! - a denied account is relayed (the server answers it) until its entry ages out.
//!
//! Sessions keep a copy of what they use ([`Memo`]): the per-read check is a scan of a few
//! entries and one atomic load, with no lock and no allocation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::CacheId;

/// How many (account, cache) outcomes are kept; past it the table starts over (every
/// account's next read of each cache is relayed once more).
const CAPACITY: usize = 100_000;

/// ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR, ER_SPECIFIC_ACCESS_DENIED_ERROR,
/// ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR, ER_VIEW_INVALID (a view whose
/// definer lost rights): the server refused the account.
const DENIED: [u16; 6] = [1044, 1045, 1227, 1142, 1143, 1356];

/// Errors the server gives before it runs any of a statement: it checks the text's syntax
/// and the account's rights first. ER_PARSE_ERROR, ER_SYNTAX_ERROR, the access errors of
/// [`DENIED`] but a view's (1356 comes while running), ER_PASSWORD_ANONYMOUS_USER,
/// ER_PASSWORD_NOT_ALLOWED, ER_PROCACCESS_DENIED_ERROR, ER_OPTION_PREVENTS_STATEMENT
/// (`read_only`), ER_CANT_CREATE_USER_WITH_GRANT, ER_ACCESS_DENIED_NO_PASSWORD_ERROR (a role
/// or PROXY its grantor does not administer). Not among them: a failed REVOKE's 1147 or a
/// CREATE USER's 1396, which may have taken effect for some of the statement's accounts.
const REFUSED: [u16; 13] = [1064, 1149, 1044, 1045, 1227, 1142, 1143, 1131, 1132, 1370, 1290, 1410, 1698];

/// Errors of a privilege statement that failed for some of its accounts after it took effect
/// for others, which the server then logs nowhere: ER_NONEXISTING_GRANT,
/// ER_NONEXISTING_TABLE_GRANT, ER_CANNOT_USER, ER_NONEXISTING_PROC_GRANT,
/// ER_CANNOT_GRANT_ROLE, ER_CANNOT_REVOKE_ROLE, ER_PASSWORD_NO_MATCH (`REVOKE SELECT ON t FROM
/// a, nobody` takes `a`'s right and answers 1141; `GRANT ... TO a, nobody` gives it and
/// answers 1133).
const IN_PART: [u16; 7] = [1133, 1141, 1147, 1396, 1403, 1961, 1962];

/// Whether `err` (an ERR packet's payload) says a privilege statement may have taken effect
/// in part, unlogged ([`IN_PART`]), wherever it ran: in the text, or in a block, a CALL or an
/// EXECUTE the text ran.
pub fn changed_privileges_in_part(err: &[u8]) -> bool {
    err.first() == Some(&crate::protocol::response::ERR)
        && err.get(1..3).is_some_and(|b| IN_PART.contains(&u16::from_le_bytes([b[0], b[1]])))
}

/// Whether `err` (an ERR packet's payload) says the server ran nothing of the statement.
pub fn refused_before_running(err: &[u8]) -> bool {
    err.first() == Some(&crate::protocol::response::ERR)
        && err.get(1..3).is_some_and(|b| REFUSED.contains(&u16::from_le_bytes([b[0], b[1]])))
}

/// What the server said about one account reading one cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Learned {
    pub allowed: bool,
    /// [`Access::generation`] when it was learned.
    generation: u64,
    expires: Instant,
    /// When the session that learned it logged in: a session that logged in earlier may have
    /// other global and database privileges (a GRANT the binlog does not carry reaches only
    /// later logins), so it does not read this (in the account's table).
    login: Instant,
}

/// The outcome of checking an account against a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Denied,
    /// Not known: relay this read and learn from the server's answer.
    Unknown {
        generation: u64,
    },
}

/// A read being relayed to learn an account's right to a cache.
#[derive(Clone, Debug)]
pub struct Learning {
    pub account: Arc<str>,
    pub cache: CacheId,
    generation: u64,
    /// When the session logged in, if under `generation`: what it may read is then what any
    /// new session of its account may, until `max_age` after its login. Otherwise the outcome
    /// is the session's alone (MariaDB keeps a session's global and database privileges from
    /// its login: after `REVOKE SELECT ON db.*`, a session that logged in before still reads,
    /// a new one is refused). Counted from the login, not the read: a change the binlog does
    /// not carry (a REVOKE that fails for one of its accounts) leaves the generation as it
    /// was, and an old session re-learning after each expiry would renew its account's right
    /// for ever.
    login: Option<Instant>,
}

/// What every session has learned, shared.
pub struct Access {
    generation: AtomicU64,
    max_age: Duration,
    learned: RwLock<HashMap<(Arc<str>, CacheId), Learned>>,
    /// Times privileges may have changed (binlog events).
    pub resets: crate::metrics::Counter,
}

impl Access {
    pub fn new(max_age: Duration) -> Access {
        Access { generation: AtomicU64::new(0), max_age, learned: RwLock::new(HashMap::new()), resets: Default::default() }
    }

    /// Bumped whenever what was learned is forgotten.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Privileges may have changed: forget everything learned.
    pub fn forget_all(&self) {
        let mut learned = self.learned.write().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        learned.clear();
        self.resets.inc();
    }

    fn lookup(&self, account: &Arc<str>, cache: CacheId, now: Instant) -> Option<Learned> {
        let learned = self.learned.read().unwrap_or_else(|e| e.into_inner());
        let entry = learned.get(&(account.clone(), cache)).copied()?;
        (entry.generation == self.generation() && now < entry.expires).then_some(entry)
    }

    /// Keeps the outcome of a relayed read whose first reply packet is `first` (an ERR packet
    /// or a result set's column count), for the account if the learning is account-wide, and
    /// in the session's `memo` either way. Other answers (OK, an unrelated error such as a
    /// deadlock or a killed query) teach nothing.
    pub fn learn(&self, learning: &Learning, first: &[u8], now: Instant, memo: &mut Memo) {
        let allowed = match first.first() {
            Some(&crate::protocol::response::ERR) => {
                let code = first.get(1..3).map(|b| u16::from_le_bytes([b[0], b[1]]));
                if !code.is_some_and(|c| DENIED.contains(&c)) {
                    return;
                }
                false
            }
            Some(&crate::protocol::response::OK) | None => return,
            Some(_) => true,
        };
        let mut map = self.learned.write().unwrap_or_else(|e| e.into_inner());
        // Checked under the lock `forget_all` takes: a change seen meanwhile wins.
        if self.generation() != learning.generation {
            return;
        }
        let entry = Learned { allowed, generation: learning.generation, expires: now + self.max_age, login: learning.login.unwrap_or(now) };
        memo.keep(learning.cache, entry);
        let Some((login, expires)) = learning.login.map(|at| (at, at + self.max_age)).filter(|&(_, e)| e > now) else {
            return;
        };
        if map.len() >= CAPACITY {
            map.clear();
        }
        map.insert((learning.account.clone(), learning.cache), Learned { expires, login, ..entry });
    }
}

/// When the server last authenticated a session (login, COM_CHANGE_USER).
#[derive(Clone, Copy, Debug)]
pub struct Login {
    /// [`Access::generation`] read before it (None if the engine did not exist yet).
    pub generation: Option<u64>,
    pub at: Instant,
}

/// One session's copy of what it has used, for its current account.
#[derive(Debug, Default)]
pub struct Memo {
    entries: Vec<(CacheId, Learned)>,
}

impl Memo {
    /// May `account` read `cache`? Asks the shared table only when this session has no
    /// current answer, and then takes only what a session that logged in no later than this
    /// one learned, under the generation this one logged in under (`login`): what a session
    /// older than a privilege change may read is its own, either way (a GRANT ON db.* or ON
    /// *.* reaches only sessions that log in after it, a REVOKE of them only those too, and
    /// a change the binlog does not carry leaves the generation as it was).
    pub fn check(&mut self, access: &Access, account: &Arc<str>, cache: CacheId, login: Login, now: Instant) -> Verdict {
        let generation = access.generation();
        let current = |l: &Learned| l.generation == generation && now < l.expires;
        let found = match self.entries.iter().position(|(c, _)| *c == cache) {
            Some(i) if current(&self.entries[i].1) => Some(self.entries[i].1),
            Some(i) => {
                self.entries.swap_remove(i);
                None
            }
            None => None,
        };
        let learned = match found {
            Some(l) => l,
            None => match access.lookup(account, cache, now).filter(|l| login.generation == Some(generation) && l.login <= login.at) {
                Some(l) => {
                    self.entries.push((cache, l));
                    l
                }
                None => return Verdict::Unknown { generation },
            },
        };
        if learned.allowed { Verdict::Allowed } else { Verdict::Denied }
    }

    /// What the session learnt of `cache` itself.
    fn keep(&mut self, cache: CacheId, learned: Learned) {
        self.entries.retain(|(c, _)| *c != cache);
        self.entries.push((cache, learned));
    }

    /// The account changed (CHANGE_USER, RESET_CONNECTION, SET ROLE...): start over.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

impl Learning {
    pub fn new(account: Arc<str>, cache: CacheId, generation: u64, login: Option<Instant>) -> Learning {
        Learning { account, cache, generation, login }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session that logged in after every session of the test, under the current generation.
    fn younger(access: &Access) -> Login {
        Login { generation: Some(access.generation()), at: Instant::now() + Duration::from_secs(3600) }
    }

    fn err(code: u16) -> Vec<u8> {
        let mut p = vec![0xff];
        p.extend_from_slice(&code.to_le_bytes());
        p.extend_from_slice(b"#42000denied");
        p
    }

    #[test]
    fn learns_rows_and_denials_and_forgets_them_on_a_privilege_change() {
        let access = Access::new(Duration::from_secs(60));
        let (a, b): (Arc<str>, Arc<str>) = ("app@%".into(), "spy@%".into());
        let now = Instant::now();
        let mut memo = Memo::default();
        let Verdict::Unknown { generation } = memo.check(&access, &a, CacheId(1), younger(&access), now) else { panic!() };
        access.learn(&Learning::new(a.clone(), CacheId(1), generation, Some(now)), &[3], now, &mut Memo::default());
        access.learn(&Learning::new(b.clone(), CacheId(1), generation, Some(now)), &err(1142), now, &mut Memo::default());
        assert_eq!(memo.check(&access, &a, CacheId(1), younger(&access), now), Verdict::Allowed);
        assert_eq!(Memo::default().check(&access, &b, CacheId(1), younger(&access), now), Verdict::Denied);
        // Another cache is another question; an unrelated error teaches nothing.
        access.learn(&Learning::new(a.clone(), CacheId(2), generation, Some(now)), &err(1213), now, &mut memo);
        assert!(matches!(memo.check(&access, &a, CacheId(2), younger(&access), now), Verdict::Unknown { .. }));
        access.forget_all();
        assert!(matches!(memo.check(&access, &a, CacheId(1), younger(&access), now), Verdict::Unknown { .. }));
        // An answer to a read asked before the change is not kept.
        access.learn(&Learning::new(a.clone(), CacheId(1), generation, Some(now)), &[3], now, &mut memo);
        assert!(matches!(memo.check(&access, &a, CacheId(1), younger(&access), now), Verdict::Unknown { .. }));
    }

    /// A session that logged in before the last privilege change keeps what it learns.
    #[test]
    fn what_an_older_session_learns_is_its_own() {
        let access = Access::new(Duration::from_secs(60));
        let a: Arc<str> = "5:app@%".into();
        let now = Instant::now();
        access.forget_all();
        let mut old = Memo::default();
        let Verdict::Unknown { generation } = old.check(&access, &a, CacheId(1), Login { generation: Some(0), at: now }, now) else {
            panic!()
        };
        access.learn(&Learning::new(a.clone(), CacheId(1), generation, None), &[3], now, &mut old);
        assert_eq!(old.check(&access, &a, CacheId(1), Login { generation: Some(0), at: now }, now), Verdict::Allowed);
        assert!(matches!(Memo::default().check(&access, &a, CacheId(1), younger(&access), now), Verdict::Unknown { .. }));
        access.forget_all();
        assert!(matches!(old.check(&access, &a, CacheId(1), Login { generation: Some(0), at: now }, now), Verdict::Unknown { .. }));
    }

    /// ... nor does it read what sessions younger than the change learnt: its global and
    /// database privileges are its login's (an audit: served after a GRANT ON db.* that it
    /// cannot see).
    #[test]
    fn an_older_session_reads_only_what_it_learns() {
        let access = Access::new(Duration::from_secs(60));
        let a: Arc<str> = "5:app@%".into();
        let now = Instant::now();
        let before = access.generation();
        access.forget_all();
        let mut new = Memo::default();
        let Verdict::Unknown { generation } = new.check(&access, &a, CacheId(1), younger(&access), now) else { panic!() };
        access.learn(&Learning::new(a.clone(), CacheId(1), generation, Some(now)), &[3], now, &mut new);
        assert_eq!(Memo::default().check(&access, &a, CacheId(1), younger(&access), now), Verdict::Allowed);
        let mut old = Memo::default();
        assert!(matches!(old.check(&access, &a, CacheId(1), Login { generation: Some(before), at: now }, now), Verdict::Unknown { .. }));
        assert!(
            matches!(old.check(&access, &a, CacheId(1), Login { generation: None, at: now }, now), Verdict::Unknown { .. }),
            "logged in before the engine"
        );
    }

    /// ... and under one generation, a session does not read what a session that logged in
    /// after it learnt: a change the binlog does not carry (a GRANT that fails for one of its
    /// accounts) may lie between their logins (an audit).
    #[test]
    fn a_session_reads_only_what_sessions_no_younger_learnt() {
        let access = Access::new(Duration::from_secs(60));
        let a: Arc<str> = "5:app@%".into();
        let old = Instant::now();
        let new = old + Duration::from_secs(5);
        access.learn(&Learning::new(a.clone(), CacheId(1), access.generation(), Some(new)), &[3], new, &mut Memo::default());
        let at = |at: Instant| Login { generation: Some(access.generation()), at };
        assert!(matches!(Memo::default().check(&access, &a, CacheId(1), at(old), new), Verdict::Unknown { .. }));
        assert_eq!(Memo::default().check(&access, &a, CacheId(1), at(new), new), Verdict::Allowed);
        assert_eq!(Memo::default().check(&access, &a, CacheId(1), at(new + Duration::from_secs(1)), new), Verdict::Allowed);
    }

    /// What a session learns holds for its account until `max_age` after the session's login,
    /// however late the read: an old session cannot renew its account's right.
    #[test]
    fn an_account_wide_right_ages_from_the_login() {
        let access = Access::new(Duration::from_secs(60));
        let a: Arc<str> = "app@%".into();
        let login = Instant::now();
        let later = login + Duration::from_secs(50);
        let mut own = Memo::default();
        access.learn(&Learning::new(a.clone(), CacheId(1), access.generation(), Some(login)), &[3], later, &mut own);
        assert_eq!(Memo::default().check(&access, &a, CacheId(1), younger(&access), later), Verdict::Allowed);
        let past = login + Duration::from_secs(61);
        assert!(matches!(Memo::default().check(&access, &a, CacheId(1), younger(&access), past), Verdict::Unknown { .. }));
        assert_eq!(own.check(&access, &a, CacheId(1), younger(&access), past), Verdict::Allowed, "the session's own holds from its read");
        // Learned past its login's age: the session's alone.
        let mut own = Memo::default();
        access.learn(&Learning::new(a.clone(), CacheId(2), access.generation(), Some(login)), &[3], past, &mut own);
        assert!(matches!(Memo::default().check(&access, &a, CacheId(2), younger(&access), past), Verdict::Unknown { .. }));
        assert_eq!(own.check(&access, &a, CacheId(2), younger(&access), past), Verdict::Allowed);
    }

    #[test]
    fn what_was_learned_ages_out() {
        let access = Access::new(Duration::from_secs(60));
        let a: Arc<str> = "app@%".into();
        let now = Instant::now();
        let mut memo = Memo::default();
        access.learn(&Learning::new(a.clone(), CacheId(1), access.generation(), Some(now)), &[3], now, &mut Memo::default());
        assert_eq!(memo.check(&access, &a, CacheId(1), younger(&access), now), Verdict::Allowed);
        assert!(matches!(memo.check(&access, &a, CacheId(1), younger(&access), now + Duration::from_secs(61)), Verdict::Unknown { .. }));
    }
}
