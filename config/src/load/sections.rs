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

use super::{Loader, Location, Problem, Raw, boolean, byte_size, duration, integer, string};
use crate::{
    Admin, Binlog, ByteSize, CachePolicy, CacheSpec, Consistency, Fill, Limits, Listen, ListenTls, Log, Memory, TlsMode, Upstream,
    UpstreamUrl,
};

impl Loader<'_> {
    pub(super) fn upstream(&mut self, root: &Table) -> Option<Upstream> {
        let t = self.section(root, "upstream");
        self.unknown_keys_in(t, "upstream", &["url", "tls", "tls_ca", "connect_timeout"]);
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
        let tls = self.value(t, "upstream", "tls", |raw| tls_mode(string(raw)?)).unwrap_or(TlsMode::Preferred);
        let tls_ca = self.value(t, "upstream", "tls_ca", |raw| Ok(PathBuf::from(string(raw)?)));
        if matches!(tls, TlsMode::VerifyCa | TlsMode::VerifyIdentity) && tls_ca.is_none() {
            let location = self.location(t, "upstream", "tls");
            self.problems.push(Problem { location, message: "tls = verify_ca / verify_identity need tls_ca, the PEM file of CAs to trust".into() });
        }
        let connect_timeout = self.value(t, "upstream", "connect_timeout", duration).unwrap_or(Duration::from_secs(5));
        Some(Upstream { url: url?, tls, tls_ca, connect_timeout })
    }

    pub(super) fn listen(&mut self, root: &Table) -> Listen {
        let t = self.section(root, "listen");
        self.unknown_keys_in(t, "listen", &["mysql", "admin", "tls_cert", "tls_key"]);
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
        Listen {
            mysql: self.value(t, "listen", "mysql", addr).unwrap_or(([127, 0, 0, 1], 3307).into()),
            admin: self.value(t, "listen", "admin", addr).unwrap_or(([127, 0, 0, 1], 9307).into()),
            tls,
        }
    }

    pub(super) fn limits(&mut self, root: &Table) -> Limits {
        let t = self.section(root, "limits");
        self.unknown_keys_in(t, "limits", &["max_packet", "max_connections"]);
        let max_packet = self
            .value(t, "limits", "max_packet", |raw| {
                let size = byte_size(raw)?;
                if size.bytes() < 1024 || size.bytes() > 1 << 30 {
                    return Err(format!("{size} is outside 1KiB..1GiB (the protocol's maximum)"));
                }
                Ok(size)
            })
            .unwrap_or(ByteSize::mib(64));
        let max_connections = self
            .value(t, "limits", "max_connections", |raw| {
                let n = integer(raw)?;
                u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| format!("{n} is not a positive count"))
            })
            .unwrap_or(4096);
        Limits { max_packet, max_connections }
    }

    pub(super) fn log(&mut self, root: &Table) -> Log {
        let t = self.section(root, "log");
        self.unknown_keys_in(t, "log", &["level"]);
        Log { level: self.value(t, "log", "level", |raw| Ok(string(raw)?.to_string())).unwrap_or_else(|| "info".into()) }
    }

    pub(super) fn memory(&mut self, root: &Table) -> Memory {
        let t = self.section(root, "memory");
        self.unknown_keys_in(t, "memory", &["limit"]);
        let limit = self
            .value(t, "memory", "limit", |raw| {
                let size = byte_size(raw)?;
                if size.bytes() == 0 { Err("must be more than 0 bytes".to_string()) } else { Ok(size) }
            })
            .unwrap_or(ByteSize::mib(256));
        Memory { limit }
    }

    pub(super) fn fill(&mut self, root: &Table) -> Fill {
        let t = self.section(root, "fill");
        self.unknown_keys_in(t, "fill", &["timeout"]);
        Fill { timeout: self.value(t, "fill", "timeout", positive_duration).unwrap_or(Duration::from_secs(1)) }
    }

    pub(super) fn consistency(&mut self, root: &Table) -> Consistency {
        let t = self.section(root, "consistency");
        self.unknown_keys_in(t, "consistency", &["max_lag"]);
        Consistency { max_lag: self.value(t, "consistency", "max_lag", duration).unwrap_or(Duration::from_secs(5)) }
    }

    pub(super) fn admin(&mut self, root: &Table) -> Admin {
        let t = self.section(root, "admin");
        self.unknown_keys_in(t, "admin", &["users"]);
        let users = self.string_list(t, "admin", "users", |user| {
            if user.is_empty() { Err("a user name cannot be empty".to_string()) } else { Ok(()) }
        });
        Admin { users: users.unwrap_or_else(|| vec!["root".to_string()]) }
    }

    /// `[caches]`, the policy; the entries themselves are `[[cache]]`, read by [`Self::caches`].
    pub(super) fn cache_policy(&mut self, root: &Table) -> CachePolicy {
        let t = self.section(root, "caches");
        self.unknown_keys_in(t, "caches", &["strict"]);
        CachePolicy { strict: self.value(t, "caches", "strict", boolean).unwrap_or(true) }
    }

    pub(super) fn binlog(&mut self, root: &Table) -> Binlog {
        let t = self.section(root, "binlog");
        self.unknown_keys_in(t, "binlog", &["server_id"]);
        let server_id = self
            .value(t, "binlog", "server_id", |raw| {
                let n = integer(raw)?;
                u32::try_from(n).map_err(|_| format!("{n} is not a server id: 0 (chosen at start-up) or 1..=4294967295"))
            })
            .unwrap_or(0);
        Binlog { server_id }
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
