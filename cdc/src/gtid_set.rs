//! MySQL GTID sets (`uuid:1-5:7,uuid2:1-3`), as `gtid_executed` and `SHOW MASTER STATUS` print
//! them. Used by the MySQL 8 fill fence; unit-tested only (no MySQL 8 server here).
//!
//! Invariant: intervals per source are sorted, disjoint and non-adjacent (normalised on
//! parse), so equality of sets is equality of the structure.

use std::collections::BTreeMap;
use std::fmt;

/// A set of MySQL GTIDs: per source UUID (lower-case, with tag if any), closed intervals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GtidSet {
    sets: BTreeMap<String, Vec<(u64, u64)>>,
}

impl GtidSet {
    /// Parses the server's text form; whitespace and newlines are ignored. `None` if malformed.
    pub fn parse(s: &str) -> Option<GtidSet> {
        let mut out = GtidSet::default();
        let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        for part in clean.split(',').filter(|p| !p.is_empty()) {
            let mut fields = part.split(':');
            let uuid = fields.next()?.to_ascii_lowercase();
            if uuid.len() != 36 || !uuid.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                return None;
            }
            let mut tag = String::new();
            for f in fields {
                if f.chars().next()?.is_ascii_digit() {
                    let (a, b) = match f.split_once('-') {
                        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
                        None => {
                            let n = f.parse().ok()?;
                            (n, n)
                        }
                    };
                    if a == 0 || b < a {
                        return None;
                    }
                    let key = if tag.is_empty() { uuid.clone() } else { format!("{uuid}:{tag}") };
                    out.sets.entry(key).or_default().push((a, b));
                } else {
                    tag = f.to_ascii_lowercase();
                }
            }
        }
        for v in out.sets.values_mut() {
            normalise(v);
        }
        Some(out)
    }

    /// True if every GTID of `other` is in `self`.
    pub fn contains_all(&self, other: &GtidSet) -> bool {
        other.sets.iter().all(|(k, ivs)| {
            let mine = self.sets.get(k).map(Vec::as_slice).unwrap_or(&[]);
            ivs.iter().all(|&(a, b)| mine.iter().any(|&(x, y)| x <= a && b <= y))
        })
    }

    /// Number of GTIDs in the set.
    pub fn count(&self) -> u64 {
        self.sets.values().flatten().map(|(a, b)| b - a + 1).sum()
    }
}

fn normalise(v: &mut Vec<(u64, u64)>) {
    v.sort();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for &(a, b) in v.iter() {
        match out.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    *v = out;
}

impl fmt::Display for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .sets
            .iter()
            .map(|(k, ivs)| {
                let r: Vec<String> = ivs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
                format!("{k}:{}", r.join(":"))
            })
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const U1: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const U2: &str = "4f22fa47-71ca-11e1-9e33-c80aa9429562";

    #[test]
    fn parse_normalise_compare() {
        let a = GtidSet::parse(&format!("{U1}:1-5:6-7:9,\n{U2}:3")).unwrap();
        assert_eq!(a.to_string(), format!("{U1}:1-7:9,{U2}:3"));
        assert_eq!(a.count(), 9);
        let b = GtidSet::parse(&format!("{}:2-4", U1.to_uppercase())).unwrap();
        assert!(a.contains_all(&b));
        assert!(!b.contains_all(&a));
        assert_eq!(GtidSet::parse(""), Some(GtidSet::default()));
        assert_eq!(GtidSet::parse("nonsense:1"), None);
        assert_eq!(GtidSet::parse(&format!("{U1}:5-3")), None);
        let tagged = GtidSet::parse(&format!("{U1}:1-3:tag:1-2")).unwrap();
        assert_eq!(tagged.count(), 5);
    }

    proptest! {
        #[test]
        fn display_round_trips(ivs in proptest::collection::vec((1u64..100, 0u64..5), 0..8)) {
            let text: Vec<String> = ivs.iter().map(|(a, l)| format!("{U1}:{a}-{}", a + l)).collect();
            let s = GtidSet::parse(&text.join(",")).unwrap();
            prop_assert_eq!(GtidSet::parse(&s.to_string()).unwrap(), s);
        }
    }
}
