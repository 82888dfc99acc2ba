//! What each section means: its keys, their types, their checks and their defaults.
//!
//! One method per section, reading through the [`Loader`] so that every value may come from
//! the environment or the file and every problem is recorded with its location. A default
//! written here is the one documented on the field in `lib.rs` and in `examples/freshet.toml`.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use toml_edit::Table;

use super::{Loader, Location, Problem, Raw, boolean, byte_size, byte_size_in, duration, integer, string};
use crate::{
    Admin, Binlog, ByteSize, CachePolicy, CacheSpec, Consistency, Fill, FillSourceKind, Limits, Listen, ListenTls, Log, MaxPacket, Memory,
    Replica, Shutdown, TlsMode, Upstream, UpstreamUrl, Warm,
};

/// Every key of every section, as the loader accepts them; the example config's test checks
/// that examples/freshet.toml documents each one in its section.
const KEYS: &[(&str, &[&str])] = &[
    ("upstream", &["url", "password", "tls", "tls_ca", "connect_timeout"]),
    ("listen", &["mysql", "admin", "tls", "tls_cert", "tls_key", "trust_plain_clients"]),
    ("limits", &["max_packet", "max_connections", "max_query", "max_in_list"]),
    ("log", &["level"]),
    ("memory", &["limit", "query_shapes"]),
    ("fill", &["timeout", "source"]),
    ("replica", &["path", "copy_batch_rows", "memory"]),
    ("warm", &["dir", "keys_per_cache", "save_interval", "concurrency"]),
    ("consistency", &["max_lag", "max_privilege_age", "read_your_writes", "ryw_timeout"]),
    ("admin", &["users"]),
    ("caches", &["strict"]),
    ("binlog", &["server_id"]),
    ("shutdown", &["grace", "drain"]),
];

/// The keys of `section` in [`KEYS`].
fn keys(section: &str) -> &'static [&'static str] {
    KEYS.iter().find(|(s, _)| *s == section).map_or(&[], |(_, k)| k)
}

impl Loader<'_> {
    pub(super) fn upstream(&mut self, root: &Table) -> Option<Upstream> {
        let t = self.section(root, "upstream");
        self.unknown_keys_in(t, "upstream", keys("upstream"));
        let url = self.value(t, "upstream", "url", |raw| string(raw)?.parse::<UpstreamUrl>());
        let url = match url {
            Some(url) => Some(url),
            None if !self.has(t, "upstream", "url") => {
                self.problems.push(Problem {
                    location: Location::Missing { path: self.path.to_path_buf(), key: "[upstream] url".into() },
                    message: "required: the server to relay to, e.g. url = \"mysql://user:pass@127.0.0.1:3306/app\"".into(),
                });
                None
            }
            None => None,
        };
        // The password apart from the url, so that it can come from a Secret through
        // FRESHET_UPSTREAM_PASSWORD while the rest of the url sits in a ConfigMap.
        let password = self.value(t, "upstream", "password", |raw| Ok(string(raw)?.to_string()));
        let url = url.map(|url| match password {
            Some(password) => UpstreamUrl { password: Some(password), ..url },
            None => url,
        });
        let tls = self.value(t, "upstream", "tls", |raw| tls_mode(string(raw)?)).unwrap_or(TlsMode::Preferred);
        let tls_ca = self.value(t, "upstream", "tls_ca", |raw| Ok(PathBuf::from(string(raw)?)));
        if matches!(tls, TlsMode::VerifyCa | TlsMode::VerifyIdentity) && tls_ca.is_none() {
            let location = self.location(t, "upstream", "tls");
            self.problems
                .push(Problem { location, message: "tls = verify_ca / verify_identity need tls_ca, the PEM file of CAs to trust".into() });
        }
        let connect_timeout = self.value(t, "upstream", "connect_timeout", duration).unwrap_or(Duration::from_secs(5));
        Some(Upstream { url: url?, tls, tls_ca, connect_timeout })
    }

    pub(super) fn listen(&mut self, root: &Table) -> Listen {
        let t = self.section(root, "listen");
        self.unknown_keys_in(t, "listen", keys("listen"));
        let offer_tls = self.value(t, "listen", "tls", boolean).unwrap_or(true);
        let trust_plain_clients = self.value(t, "listen", "trust_plain_clients", boolean).unwrap_or(false);
        let addr = |raw: &Raw| -> Result<SocketAddr, String> {
            let s = string(raw)?;
            s.parse().map_err(|_| format!("{s:?} is not an address like \"127.0.0.1:3307\""))
        };
        let path = |raw: &Raw| Ok(PathBuf::from(string(raw)?));
        let cert = self.value(t, "listen", "tls_cert", path);
        let key = self.value(t, "listen", "tls_key", path);
        let tls = match (cert, key) {
            (Some(cert), Some(key)) => Some(ListenTls { cert, key }),
            (None, None) => None,
            (cert, _) => {
                let (given, missing) = if cert.is_some() { ("tls_cert", "tls_key") } else { ("tls_key", "tls_cert") };
                let location = self.location(t, "listen", given);
                self.problems.push(Problem { location, message: format!("{given} needs {missing} as well") });
                None
            }
        };
        if !offer_tls && tls.is_some() {
            let location = self.location(t, "listen", "tls");
            self.problems.push(Problem { location, message: "tls = false, but tls_cert/tls_key are set: which is meant?".into() });
        }
        Listen {
            mysql: self.value(t, "listen", "mysql", addr).unwrap_or(([127, 0, 0, 1], 3307).into()),
            admin: self.value(t, "listen", "admin", addr).unwrap_or(([127, 0, 0, 1], 9307).into()),
            offer_tls,
            tls,
            trust_plain_clients,
        }
    }

    pub(super) fn limits(&mut self, root: &Table) -> Limits {
        let t = self.section(root, "limits");
        self.unknown_keys_in(t, "limits", keys("limits"));
        let max_packet = self
            .value(t, "limits", "max_packet", |raw| {
                if string(raw).is_ok_and(|s| s == "server") {
                    return Ok(MaxPacket::Server);
                }
                let size = byte_size(raw)?;
                if size.bytes() < 1024 || size.bytes() > 1 << 30 {
                    return Err(format!("{size} is outside 1KiB..1GiB (the protocol's maximum)"));
                }
                Ok(MaxPacket::Fixed(size))
            })
            .unwrap_or(MaxPacket::Server);
        let max_connections = self
            .value(t, "limits", "max_connections", |raw| {
                let n = integer(raw)?;
                u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| format!("{n} is not a positive count"))
            })
            .unwrap_or(4096);
        let max_query =
            self.value(t, "limits", "max_query", |raw| byte_size_in(raw, 1 << 10, 16 << 20, "1KiB..16MiB")).unwrap_or(ByteSize::kib(256));
        let max_in_list = self
            .value(t, "limits", "max_in_list", |raw| {
                let n = integer(raw)?;
                u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| format!("{n} is not a positive count"))
            })
            .unwrap_or(1000);
        Limits { max_packet, max_connections, max_query, max_in_list }
    }

    pub(super) fn log(&mut self, root: &Table) -> Log {
        let t = self.section(root, "log");
        self.unknown_keys_in(t, "log", keys("log"));
        Log { level: self.value(t, "log", "level", |raw| Ok(string(raw)?.to_string())).unwrap_or_else(|| "info".into()) }
    }

    pub(super) fn memory(&mut self, root: &Table) -> Memory {
        let t = self.section(root, "memory");
        self.unknown_keys_in(t, "memory", keys("memory"));
        let limit = self
            .value(t, "memory", "limit", |raw| {
                let size = byte_size(raw)?;
                if size.bytes() == 0 { Err("must be more than 0 bytes".to_string()) } else { Ok(size) }
            })
            .unwrap_or(ByteSize::mib(256));
        let query_shapes =
            self.value(t, "memory", "query_shapes", |raw| byte_size_in(raw, 64 << 10, 1 << 30, "64KiB..1GiB")).unwrap_or(ByteSize::mib(16));
        Memory { limit, query_shapes }
    }

    pub(super) fn fill(&mut self, root: &Table) -> Fill {
        let t = self.section(root, "fill");
        self.unknown_keys_in(t, "fill", keys("fill"));
        let source = self
            .value(t, "fill", "source", |raw| match string(raw)? {
                "upstream" => Ok(FillSourceKind::Upstream),
                "replica" => Ok(FillSourceKind::Replica),
                other => Err(format!("{other:?} is not one of upstream, replica")),
            })
            .unwrap_or(FillSourceKind::Upstream);
        Fill { timeout: self.value(t, "fill", "timeout", positive_duration).unwrap_or(Duration::from_secs(1)), source }
    }

    /// `[replica]`; `source` is `[fill] source`, which makes `path` required.
    pub(super) fn replica(&mut self, root: &Table, source: FillSourceKind) -> Replica {
        let t = self.section(root, "replica");
        self.unknown_keys_in(t, "replica", keys("replica"));
        let path = self.value(t, "replica", "path", |raw| {
            let s = string(raw)?;
            if s.is_empty() { Err("the path is empty".to_string()) } else { Ok(PathBuf::from(s)) }
        });
        if source == FillSourceKind::Replica && path.is_none() && !self.has(t, "replica", "path") {
            self.problems.push(Problem {
                location: Location::Missing { path: self.path.to_path_buf(), key: "[replica] path".into() },
                message: "required with [fill] source = \"replica\": the RocksDB directory, e.g. path = \"freshet-replica\"".into(),
            });
        }
        let copy_batch_rows = self
            .value(t, "replica", "copy_batch_rows", |raw| {
                let n = integer(raw)?;
                u32::try_from(n).ok().filter(|n| (1..=1_000_000).contains(n)).ok_or_else(|| format!("{n} is outside 1..=1000000"))
            })
            .unwrap_or(5_000);
        let memory =
            self.value(t, "replica", "memory", |raw| byte_size_in(raw, 16 << 20, 64 << 30, "16MiB..64GiB")).unwrap_or(ByteSize::mib(128));
        Replica { path, copy_batch_rows, memory }
    }

    pub(super) fn warm(&mut self, root: &Table) -> Warm {
        let t = self.section(root, "warm");
        self.unknown_keys_in(t, "warm", keys("warm"));
        let dir = self.value(t, "warm", "dir", |raw| {
            let s = string(raw)?;
            if s.is_empty() { Err("the path is empty".to_string()) } else { Ok(PathBuf::from(s)) }
        });
        let bounded = |raw: &Raw, max: u32| {
            let n = integer(raw)?;
            u32::try_from(n).ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| format!("{n} is outside 1..={max}"))
        };
        let keys_per_cache = self.value(t, "warm", "keys_per_cache", |raw| bounded(raw, 1_000_000)).unwrap_or(10_000);
        let concurrency = self.value(t, "warm", "concurrency", |raw| bounded(raw, 1024)).unwrap_or(8);
        let save_interval = self
            .value(t, "warm", "save_interval", |raw| {
                let d = duration(raw)?;
                if d < Duration::from_secs(1) { Err("must be at least 1s".to_string()) } else { Ok(d) }
            })
            .unwrap_or(Duration::from_secs(60));
        Warm { dir, keys_per_cache, save_interval, concurrency }
    }

    pub(super) fn consistency(&mut self, root: &Table) -> Consistency {
        let t = self.section(root, "consistency");
        self.unknown_keys_in(t, "consistency", keys("consistency"));
        Consistency {
            max_lag: self.value(t, "consistency", "max_lag", duration).unwrap_or(Duration::from_secs(5)),
            max_privilege_age: self.value(t, "consistency", "max_privilege_age", duration).unwrap_or(Duration::from_secs(60)),
            read_your_writes: self.value(t, "consistency", "read_your_writes", boolean).unwrap_or(true),
            ryw_timeout: self.value(t, "consistency", "ryw_timeout", duration).unwrap_or(Duration::from_millis(100)),
        }
    }

    pub(super) fn admin(&mut self, root: &Table) -> Admin {
        let t = self.section(root, "admin");
        self.unknown_keys_in(t, "admin", keys("admin"));
        let users = self.string_list(t, "admin", "users", |user| match user.split_once('@') {
            _ if user.is_empty() => Err("a user name cannot be empty".to_string()),
            Some(("", _)) => Err("an anonymous account (empty user name) is never an admin".to_string()),
            Some((_, "")) => Err("write user@host, or the user name alone for any host".to_string()),
            _ => Ok(()),
        });
        Admin { users: users.unwrap_or_else(|| vec!["root".to_string()]) }
    }

    /// `[caches]`, the policy; the entries themselves are `[[cache]]`, read by [`Self::caches`].
    pub(super) fn cache_policy(&mut self, root: &Table) -> CachePolicy {
        let t = self.section(root, "caches");
        self.unknown_keys_in(t, "caches", keys("caches"));
        CachePolicy { strict: self.value(t, "caches", "strict", boolean).unwrap_or(true) }
    }

    pub(super) fn binlog(&mut self, root: &Table) -> Binlog {
        let t = self.section(root, "binlog");
        self.unknown_keys_in(t, "binlog", keys("binlog"));
        let server_id = self
            .value(t, "binlog", "server_id", |raw| {
                let n = integer(raw)?;
                u32::try_from(n).map_err(|_| format!("{n} is not a server id: 0 (chosen at start-up) or 1..=4294967295"))
            })
            .unwrap_or(0);
        Binlog { server_id }
    }

    pub(super) fn shutdown(&mut self, root: &Table) -> Shutdown {
        let t = self.section(root, "shutdown");
        self.unknown_keys_in(t, "shutdown", keys("shutdown"));
        let grace = self.value(t, "shutdown", "grace", positive_duration).unwrap_or(Duration::from_secs(30));
        let drain = self.value(t, "shutdown", "drain", duration).unwrap_or(Duration::ZERO);
        if drain >= grace {
            let location = self.location(t, "shutdown", "drain");
            let message = format!("drain ({drain:?}) must be shorter than grace ({grace:?}): sessions need time to finish after it");
            self.problems.push(Problem { location, message });
        }
        Shutdown { grace, drain }
    }

    pub(super) fn caches(&mut self, root: &Table) -> Vec<CacheSpec> {
        let Some(item) = root.get("cache") else { return Vec::new() };
        let Some(array) = item.as_array_of_tables() else {
            let location = self.span_location(item.span());
            self.problems.push(Problem { location, message: "cache must be written as [[cache]] tables".into() });
            return Vec::new();
        };
        let mut seen = HashSet::new();
        let mut caches = Vec::new();
        for table in array.iter() {
            self.unknown_keys_in(Some(table), "cache", &["name", "query"]);
            let name = self.file_value(Some(table), "name", |raw| cache_name(string(raw)?));
            let query = self.file_value(Some(table), "query", |raw| {
                let q = string(raw)?.trim();
                if q.is_empty() { Err("the query is empty".to_string()) } else { Ok(q.to_string()) }
            });
            for (key, present) in [("name", name.is_some()), ("query", query.is_some())] {
                if !present && table.get(key).is_none() {
                    let location = self.span_location(table.span());
                    self.problems.push(Problem { location, message: format!("[[cache]] needs a {key}") });
                }
            }
            if let (Some(name), Some(query)) = (name, query) {
                if !seen.insert(name.clone()) {
                    let location = self.location(Some(table), "cache", "name");
                    self.problems.push(Problem { location, message: format!("a cache named {name:?} is already defined") });
                    continue;
                }
                caches.push(CacheSpec { name, query });
            }
        }
        caches
    }
}

fn positive_duration(raw: &Raw) -> Result<Duration, String> {
    let d = duration(raw)?;
    if d.is_zero() { Err("must be more than 0".to_string()) } else { Ok(d) }
}

fn tls_mode(s: &str) -> Result<TlsMode, String> {
    Ok(match s {
        "disabled" => TlsMode::Disabled,
        "preferred" => TlsMode::Preferred,
        "required" => TlsMode::Required,
        "verify_ca" => TlsMode::VerifyCa,
        "verify_identity" => TlsMode::VerifyIdentity,
        other => return Err(format!("{other:?} is not one of disabled, preferred, required, verify_ca, verify_identity")),
    })
}

fn cache_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok { Ok(s.to_string()) } else { Err(format!("{s:?} must be 1-64 letters, digits or underscores")) }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::tests::{load, messages};
    use super::KEYS;
    use crate::{Admin, Binlog, ByteSize, CachePolicy, Consistency, Fill, FillSourceKind, Memory, Replica, Shutdown, Warm};

    const URL: &str = "[upstream]\nurl = \"mysql://u@h\"\n";

    /// `messages` of a config that must fail, given the text after the [upstream] section.
    fn problems(rest: &str, env: &[(&str, &str)]) -> Vec<String> {
        messages(load(&format!("{URL}{rest}"), env).unwrap_err())
    }

    fn assert_problems(got: &[String], expected: &[&str]) {
        for e in expected {
            assert!(got.iter().any(|g| g.starts_with(e)), "missing {e:?} in {got:#?}");
        }
        assert_eq!(got.len(), expected.len(), "{got:#?}");
    }

    #[test]
    fn cached_query_keys_default_to_safe_values() {
        let c = load(URL, &[]).unwrap();
        assert_eq!(c.memory, Memory { limit: ByteSize::mib(256), query_shapes: ByteSize::mib(16) });
        assert_eq!(c.fill, Fill { timeout: Duration::from_secs(1), source: FillSourceKind::Upstream });
        assert_eq!(c.replica, Replica { path: None, copy_batch_rows: 5_000, memory: ByteSize::mib(128) });
        assert_eq!(c.warm, Warm { dir: None, keys_per_cache: 10_000, save_interval: Duration::from_secs(60), concurrency: 8 });
        assert_eq!(
            c.consistency,
            Consistency {
                max_lag: Duration::from_secs(5),
                max_privilege_age: Duration::from_secs(60),
                read_your_writes: true,
                ryw_timeout: Duration::from_millis(100)
            }
        );
        assert_eq!(c.admin, Admin { users: vec!["root".to_string()] });
        assert_eq!(c.cache_policy, CachePolicy { strict: true });
        assert_eq!(c.binlog, Binlog { server_id: 0 });
    }

    #[test]
    fn cached_query_keys_take_valid_values() {
        let src = format!(
            "{URL}[memory]\nlimit = \"1GiB\"\n[fill]\ntimeout = \"250ms\"\n[consistency]\nmax_lag = \"0s\"\n\
             [admin]\nusers = [\"root\", \"ops\"]\n[caches]\nstrict = false\n[binlog]\nserver_id = 4294967295\n"
        );
        let c = load(&src, &[]).unwrap();
        assert_eq!(c.memory.limit, ByteSize(1 << 30));
        assert_eq!(c.fill.timeout, Duration::from_millis(250));
        assert_eq!(c.consistency.max_lag, Duration::ZERO);
        assert_eq!(c.admin.users, ["root", "ops"]);
        assert!(!c.cache_policy.strict);
        assert_eq!(c.binlog.server_id, u32::MAX);
        assert_eq!(c.binlog.effective_server_id(), u32::MAX);

        let c = load(&format!("{URL}[memory]\nlimit = 4096\n[admin]\nusers = []\n[binlog]\nserver_id = 7\n"), &[]).unwrap();
        assert_eq!(c.memory.limit, ByteSize(4096));
        assert!(c.admin.users.is_empty());
        assert_eq!(c.binlog.effective_server_id(), 7);
    }

    #[test]
    fn wrong_types_are_reported_where_they_are_written() {
        let src = "\
[memory]
limit = true
[fill]
timeout = 1
[consistency]
max_lag = \"soon\"
[admin]
users = \"root\"
[caches]
strict = \"yes\"
[binlog]
server_id = 1.5
";
        let got = problems(src, &[]);
        assert_problems(
            &got,
            &[
                "f.toml:4:9: limit: expected a size like \"64MiB\", found a boolean",
                "f.toml:6:11: timeout: expected a duration like \"5s\"",
                "f.toml:8:11: max_lag: \"soon\" does not start with a number",
                "f.toml:10:9: users: expected an array of strings like [\"root\"], found a string",
                "f.toml:12:10: strict: \"yes\" is not true or false",
                "f.toml:14:13: server_id: expected an integer, found a float",
            ],
        );
        let got = problems("[admin]\nusers = [\"root\", 2, \"\", [\"x\"]]\n[caches]\nstrict = 1\n", &[]);
        assert_problems(
            &got,
            &[
                "f.toml:4:18: users: expected a string, found an integer",
                "f.toml:4:21: users: a user name cannot be empty",
                "f.toml:4:25: users: expected a string, found an array",
                "f.toml:6:10: strict: expected true or false, found an integer",
            ],
        );
    }

    #[test]
    fn zero_and_out_of_range_values_are_rejected() {
        let src = "\
[memory]
limit = \"0MiB\"
[fill]
timeout = \"0ms\"
[binlog]
server_id = -1
";
        let got = problems(src, &[]);
        assert_problems(
            &got,
            &[
                "f.toml:4:9: limit: must be more than 0 bytes",
                "f.toml:6:11: timeout: must be more than 0",
                "f.toml:8:13: server_id: -1 is not a server id",
            ],
        );
        let got = problems("[memory]\nlimit = -1\n[binlog]\nserver_id = 4294967296\n", &[]);
        assert_problems(&got, &["f.toml:4:9: limit: -1 is negative", "f.toml:6:13: server_id: 4294967296 is not a server id"]);
        assert_problems(&problems("[memory]\nlimit = 0\n", &[]), &["f.toml:4:9: limit: must be more than 0 bytes"]);
    }

    #[test]
    fn environment_overrides_cached_query_keys() {
        let src = format!(
            "{URL}[memory]\nlimit = \"1GiB\"\n[fill]\ntimeout = \"2s\"\n[consistency]\nmax_lag = \"1m\"\n\
             [admin]\nusers = [\"root\"]\n[caches]\nstrict = true\n[binlog]\nserver_id = 9\n"
        );
        let env = [
            ("FRESHET_MEMORY_LIMIT", "64MiB"),
            ("FRESHET_FILL_TIMEOUT", "250ms"),
            ("FRESHET_CONSISTENCY_MAX_LAG", "0s"),
            ("FRESHET_ADMIN_USERS", "a,b"),
            ("FRESHET_CACHES_STRICT", "false"),
            ("FRESHET_BINLOG_SERVER_ID", "42"),
        ];
        let c = load(&src, &env).unwrap();
        assert_eq!(c.memory.limit, ByteSize::mib(64));
        assert_eq!(c.fill.timeout, Duration::from_millis(250));
        assert_eq!(c.consistency.max_lag, Duration::ZERO);
        assert_eq!(c.admin.users, ["a", "b"]);
        assert!(!c.cache_policy.strict);
        assert_eq!(c.binlog.server_id, 42);

        let users = |v: &str| load(URL, &[("FRESHET_ADMIN_USERS", v)]).map(|c| c.admin.users);
        assert_eq!(users(" ops , root ").unwrap(), ["ops", "root"]);
        assert_eq!(users("ops").unwrap(), ["ops"]);
        assert!(users("").unwrap().is_empty());
        assert_eq!(
            messages(users("a,,b").unwrap_err()),
            ["environment variable FRESHET_ADMIN_USERS: entry 2: a user name cannot be empty"]
        );
        assert!(load(URL, &[("FRESHET_CACHES_STRICT", "true")]).unwrap().cache_policy.strict);
    }

    #[test]
    fn bad_environment_overrides_name_their_variable() {
        let env = [
            ("FRESHET_MEMORY_LIMIT", "0"),
            ("FRESHET_FILL_TIMEOUT", "1"),
            ("FRESHET_CONSISTENCY_MAX_LAG", "-5s"),
            ("FRESHET_CACHES_STRICT", "yes"),
            ("FRESHET_BINLOG_SERVER_ID", "-3"),
            ("FRESHET_BINLOG_SERVERID", "3"),
            ("FRESHET_CACHE_STRICT", "ignored: [[cache]] has no overrides"),
        ];
        let got = messages(load(URL, &env).unwrap_err());
        assert_problems(
            &got,
            &[
                "environment variable FRESHET_MEMORY_LIMIT: must be more than 0 bytes",
                "environment variable FRESHET_FILL_TIMEOUT: duration \"1\" needs a unit",
                "environment variable FRESHET_CONSISTENCY_MAX_LAG: \"-5s\" does not start with a number",
                "environment variable FRESHET_CACHES_STRICT: \"yes\" is not true or false",
                "environment variable FRESHET_BINLOG_SERVER_ID: -3 is not a server id",
                "environment variable FRESHET_BINLOG_SERVERID: overrides no known key",
            ],
        );
    }

    #[test]
    fn unknown_keys_in_the_new_sections_are_rejected() {
        let src = "\
[memory]
limt = \"1GiB\"
[caches]
strict = true
enabled = true
[binlog]
server-id = 3
[fill]
timeout = \"1s\"
consistency = 1
";
        let got = problems(src, &[]);
        assert_problems(
            &got,
            &[
                "f.toml:4:1: unknown key \"limt\" in [memory]; known: limit",
                "f.toml:7:1: unknown key \"enabled\" in [caches]; known: strict",
                "f.toml:9:1: unknown key \"server-id\" in [binlog]; known: server_id",
                "f.toml:12:1: unknown key \"consistency\" in [fill]; known: timeout, source",
            ],
        );
        let got = messages(load(&format!("admin = [\"root\"]\ncaches = true\n{URL}"), &[]).unwrap_err());
        assert_problems(&got, &["f.toml:1:9: admin must be a table: [admin]", "f.toml:2:10: caches must be a table: [caches]"]);
    }

    #[test]
    fn cache_entries_need_unique_well_formed_names_and_a_query() {
        let src = "\
[caches]
strict = false
[[cache]]
name = \"story-votes\"
query = \"SELECT 1\"
[[cache]]
name = \"ok_1\"
query = \"  \"
[[cache]]
name = \"ok_1\"
query = \"SELECT 2\"
[[cache]]
name = \"ok_2\"
query = \"SELECT 3\"
[[cache]]
name = \"ok_2\"
query = \"SELECT 4\"
[[cache]]
name = \"\"
query = \"SELECT 5\"
";
        let got = problems(src, &[]);
        assert_problems(
            &got,
            &[
                "f.toml:6:8: name: \"story-votes\" must be 1-64 letters, digits or underscores",
                "f.toml:10:9: query: the query is empty",
                "f.toml:18:8: a cache named \"ok_2\" is already defined",
                "f.toml:21:8: name: \"\" must be 1-64 letters",
            ],
        );
        let c = load(&format!("{URL}[caches]\nstrict = false\n[[cache]]\nname = \"Story_9\"\nquery = \" SELECT 1 \"\n"), &[]).unwrap();
        assert_eq!((c.caches[0].name.as_str(), c.caches[0].query.as_str(), c.cache_policy.strict), ("Story_9", "SELECT 1", false));
    }

    /// examples/freshet.toml writes out every key with its default: it parses, names each key,
    /// and gives the values a config without those keys gets.
    #[test]
    fn the_example_config_documents_every_key_with_its_default() {
        let example = include_str!("../../../examples/freshet.toml");
        for (section, keys) in KEYS {
            let start = example.find(&format!("\n[{section}]\n")).unwrap_or_else(|| panic!("examples/freshet.toml has no [{section}]"));
            let body = &example[start + section.len() + 3..];
            let body = &body[..body.find("\n[").unwrap_or(body.len())];
            for key in *keys {
                assert!(body.contains(&format!("{key} =")), "examples/freshet.toml does not document [{section}] {key}");
            }
        }
        for key in ["name", "query"] {
            assert!(example.contains(&format!("{key} =")), "examples/freshet.toml does not document [[cache]] {key}");
        }
        let e = load(example, &[]).unwrap();
        let d = load(URL, &[]).unwrap();
        assert_eq!(
            (e.upstream.tls, e.upstream.tls_ca, e.upstream.connect_timeout),
            (d.upstream.tls, d.upstream.tls_ca, d.upstream.connect_timeout)
        );
        assert_eq!((e.listen.mysql, e.listen.admin, e.listen.tls), (d.listen.mysql, d.listen.admin, d.listen.tls));
        assert_eq!((e.listen.offer_tls, e.listen.trust_plain_clients), (d.listen.offer_tls, d.listen.trust_plain_clients));
        assert_eq!(
            (e.limits.max_packet, e.limits.max_connections, e.log.level),
            (d.limits.max_packet, d.limits.max_connections, d.log.level)
        );
        assert_eq!((e.limits.max_query, e.limits.max_in_list), (d.limits.max_query, d.limits.max_in_list));
        assert_eq!(
            (e.memory, e.fill, e.consistency, e.admin, e.cache_policy, e.binlog),
            (d.memory, d.fill, d.consistency, d.admin, d.cache_policy, d.binlog)
        );
        assert_eq!(e.replica, d.replica);
        assert_eq!(e.warm, d.warm);
    }

    #[test]
    fn the_warm_restart_keys_are_checked() {
        let c =
            load(&format!("{URL}[warm]\ndir = \"state\"\nkeys_per_cache = 50\nsave_interval = \"5s\"\nconcurrency = 2\n"), &[]).unwrap();
        assert_eq!(c.warm, Warm { dir: Some("state".into()), keys_per_cache: 50, save_interval: Duration::from_secs(5), concurrency: 2 });
        let got = problems("[warm]\ndir = \"\"\nkeys_per_cache = 0\nsave_interval = \"10ms\"\nconcurrency = 5000\n", &[]);
        assert_problems(
            &got,
            &[
                "f.toml:4:7: dir: the path is empty",
                "f.toml:5:18: keys_per_cache: 0 is outside 1..=1000000",
                "f.toml:6:17: save_interval: must be at least 1s",
                "f.toml:7:15: concurrency: 5000 is outside 1..=1024",
            ],
        );
        let c = load(URL, &[("FRESHET_WARM_DIR", "/var/lib/freshet"), ("FRESHET_WARM_KEYS_PER_CACHE", "9")]).unwrap();
        assert_eq!((c.warm.dir, c.warm.keys_per_cache), (Some("/var/lib/freshet".into()), 9));
    }

    #[test]
    fn the_replica_source_needs_a_path_and_checks_its_keys() {
        let c = load(
            &format!("{URL}[fill]\nsource = \"replica\"\n[replica]\npath = \"data/replica\"\ncopy_batch_rows = 100\nmemory = \"1GiB\"\n"),
            &[],
        )
        .unwrap();
        assert_eq!(c.fill.source, FillSourceKind::Replica);
        assert_eq!(c.replica, Replica { path: Some("data/replica".into()), copy_batch_rows: 100, memory: ByteSize::mib(1024) });
        // A path alone does not switch the source.
        let c = load(&format!("{URL}[replica]\npath = \"r\"\n"), &[]).unwrap();
        assert_eq!(c.fill.source, FillSourceKind::Upstream);

        let got = problems("[fill]\nsource = \"disk\"\n[replica]\npath = \"\"\ncopy_batch_rows = 0\nsize = 1\nmemory = \"1MiB\"\n", &[]);
        assert_problems(
            &got,
            &[
                "f.toml:4:10: source: \"disk\" is not one of upstream, replica",
                "f.toml:6:8: path: the path is empty",
                "f.toml:7:19: copy_batch_rows: 0 is outside 1..=1000000",
                "f.toml:8:1: unknown key \"size\" in [replica]; known: path, copy_batch_rows, memory",
                "f.toml:9:10: memory: 1MiB is outside 16MiB..64GiB",
            ],
        );
        assert_problems(
            &problems("[fill]\nsource = \"replica\"\n", &[]),
            &["f.toml: [replica] path: required with [fill] source = \"replica\""],
        );

        let env = [("FRESHET_FILL_SOURCE", "replica"), ("FRESHET_REPLICA_PATH", "r2"), ("FRESHET_REPLICA_COPY_BATCH_ROWS", "7")];
        let c = load(URL, &env).unwrap();
        assert_eq!((c.fill.source, c.replica.path, c.replica.copy_batch_rows), (FillSourceKind::Replica, Some("r2".into()), 7));
        let got = messages(load(URL, &[("FRESHET_FILL_SOURCE", "Replica")]).unwrap_err());
        assert_problems(&got, &["environment variable FRESHET_FILL_SOURCE: \"Replica\" is not one of upstream, replica"]);
    }

    /// What hostile input may cost: defaults, overrides, and values refused.
    #[test]
    fn hostile_input_bounds() {
        let d = load(URL, &[]).unwrap();
        assert_eq!((d.limits.max_query, d.limits.max_in_list, d.memory.query_shapes), (ByteSize::kib(256), 1000, ByteSize::mib(16)));
        let c = load(
            &format!("{URL}[limits]\nmax_query = \"1MiB\"\nmax_in_list = 5\n[memory]\nquery_shapes = \"1MiB\"\n"),
            &[("FRESHET_LIMITS_MAX_IN_LIST", "7")],
        )
        .unwrap();
        assert_eq!((c.limits.max_query, c.limits.max_in_list, c.memory.query_shapes), (ByteSize::mib(1), 7, ByteSize::mib(1)));
        let got = messages(
            load(&format!("{URL}[limits]\nmax_query = \"10B\"\nmax_in_list = 0\n[memory]\nquery_shapes = \"1KiB\"\n"), &[]).unwrap_err(),
        );
        assert_eq!(got.len(), 3, "{got:#?}");
        assert!(got[0].contains("max_query") && got[1].contains("max_in_list") && got[2].contains("query_shapes"), "{got:#?}");
    }

    #[test]
    fn an_automatic_server_id_is_stable_and_never_0_or_1() {
        let auto = Binlog { server_id: 0 };
        let id = auto.effective_server_id();
        assert_eq!(id, auto.effective_server_id());
        assert!((1_000_000..=4_000_000_000).contains(&id), "{id}");
        assert_eq!(Binlog { server_id: 1 }.effective_server_id(), 1);
    }

    #[test]
    fn shutdown_keys_default_and_validate() {
        let c = load(URL, &[]).unwrap();
        assert_eq!(c.shutdown, Shutdown { grace: Duration::from_secs(30), drain: Duration::ZERO });
        let c = load(&format!("{URL}[shutdown]\ngrace = \"60s\"\ndrain = \"10s\"\n"), &[("FRESHET_SHUTDOWN_GRACE", "45s")]).unwrap();
        assert_eq!(c.shutdown, Shutdown { grace: Duration::from_secs(45), drain: Duration::from_secs(10) });
        let got = problems("[shutdown]\ngrace = \"0s\"\n", &[]);
        assert_problems(&got, &["f.toml:4:9: grace: must be more than 0"]);
        let got = problems("[shutdown]\ngrace = \"5s\"\ndrain = \"5s\"\n", &[]);
        assert_problems(&got, &["f.toml:5:9: drain (5s) must be shorter than grace (5s)"]);
    }

    #[test]
    fn the_password_can_come_apart_from_the_url() {
        let c = load(URL, &[("FRESHET_UPSTREAM_PASSWORD", "s3cret:@/")]).unwrap();
        assert_eq!((c.upstream.url.user.as_str(), c.upstream.url.password.as_deref()), ("u", Some("s3cret:@/")));
        let c = load("[upstream]\nurl = \"mysql://u:old@h\"\npassword = \"new\"\n", &[]).unwrap();
        assert_eq!(c.upstream.url.password.as_deref(), Some("new"));
        assert!(!format!("{:?}", c.upstream.url).contains("new"), "the password is masked");
    }
}
