//! The replica server id freshet registers with when the config leaves it to freshet (0).
//!
//! The upstream drops a replica connection when another one registers with the same server
//! id, so every sidecar in front of one upstream needs its own. The id is derived from the
//! host name and the process id: in Kubernetes each pod has its own host name (and the
//! sidecar is often pid 1 in every pod), on a shared host the pids differ. It is a hash, not a
//! random number, so that a restarted process on the same host with the same pid gets the same
//! id (the upstream then simply replaces the stale registration) and so that it can be
//! predicted in tests. Collisions are possible but unlikely: two sidecars collide with
//! probability 1 in 4·10⁹.
//!
//! The range [`AUTO_MIN`]..=[`AUTO_MAX`] stays clear of the small ids people give their
//! servers by hand (the test MariaDB is 1) and of 0, which the upstream refuses.

/// Smallest id chosen automatically.
pub const AUTO_MIN: u32 = 1_000_000;
/// Largest id chosen automatically.
pub const AUTO_MAX: u32 = 4_000_000_000;

/// The id for a process `pid` on the host named `host`: deterministic, in AUTO_MIN..=AUTO_MAX.
pub(crate) fn derive(host: &str, pid: u32) -> u32 {
    // FNV-1a: stable across Rust releases, unlike std's DefaultHasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in host.bytes().chain([0xff]).chain(pid.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    // splitmix64's finaliser, so that host names differing only in their last character
    // (app-0, app-1) spread over the whole range.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    let span = u64::from(AUTO_MAX - AUTO_MIN) + 1;
    // h % span < span <= AUTO_MAX - AUTO_MIN + 1, so the sum is at most AUTO_MAX and fits a u32.
    AUTO_MIN + (h % span) as u32
}

/// This machine's host name, or "" when it cannot be found (then only the pid tells sidecars
/// apart).
pub(crate) fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .chain(std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_deterministic_and_in_range() {
        assert_eq!(derive("app-0", 1), derive("app-0", 1));
        assert_ne!(derive("app-0", 1), derive("app-1", 1));
        assert_ne!(derive("app-0", 1), derive("app-0", 2));
        for host in ["", "a", "app-0", "app-1", "a-very-long-pod-name-7f9c8d6b5-x2z4q"] {
            for pid in [0, 1, 2, 4242, u32::MAX] {
                let id = derive(host, pid);
                assert!((AUTO_MIN..=AUTO_MAX).contains(&id), "{host} {pid} -> {id}");
            }
        }
    }

    #[test]
    fn pods_with_pid_1_spread_over_the_range() {
        let ids: std::collections::HashSet<u32> = (0..1000).map(|i| derive(&format!("app-{i}"), 1)).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().any(|id| *id < 2_000_000_000) && ids.iter().any(|id| *id > 3_000_000_000));
    }
}
