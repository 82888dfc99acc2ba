//! Turning TOML text plus environment overrides into a [`Config`], collecting every problem.
//!
//! A [`Loader`] walks the document section by section. Each typed value is looked up first in
//! the environment, then in the file, then defaults; a value that fails to parse is recorded as
//! a [`Problem`] and replaced by its default so that the walk goes on and finds the next
//! problem. Keys that no section asked for are reported as unknown at the end.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml_edit::{Document, Item, Table, Value};

use crate::{ByteSize, Config, parse_duration};

mod sections;

/// Where a problem was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// In the file; line and column count from 1 (0 when the whole file is meant).
    File { path: PathBuf, line: usize, column: usize },
    /// In an environment variable.
    Env(String),
    /// A key that is missing, written as `[section] key`.
    Missing { path: PathBuf, key: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub location: Location,
    pub message: String,
}

/// Every problem found in a config; never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub problems: Vec<Problem>,
}

impl ConfigError {
    /// EX_USAGE from sysexits.h, the exit status for a bad config.
    pub const EXIT_CODE: i32 = 64;

    pub(crate) fn single(location: Location, message: String) -> Self {
        ConfigError { problems: vec![Problem { location, message }] }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File { path, line: 0, .. } => write!(f, "{}", path.display()),
            Location::File { path, line, column } => write!(f, "{}:{line}:{column}", path.display()),
            Location::Env(name) => write!(f, "environment variable {name}"),
            Location::Missing { path, key } => write!(f, "{}: {key}", path.display()),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        writeln!(f, "invalid configuration ({n} problem{}):", if n == 1 { "" } else { "s" })?;
        for p in &self.problems {
            writeln!(f, "  {}: {}", p.location, p.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// The sections whose keys the environment may override.
const ENV_SECTIONS: [&str; 13] =
    ["upstream", "listen", "limits", "log", "memory", "fill", "replica", "warm", "consistency", "admin", "caches", "binlog", "shutdown"];

pub(crate) fn parse(source: &str, path: &Path, env: &dyn Fn(&str) -> Option<String>, env_names: &[String]) -> Result<Config, ConfigError> {
    let doc = Document::parse(source.to_string()).map_err(|e| {
        let (line, column) = e.span().map(|s| line_col(source, s.start)).unwrap_or((0, 0));
        ConfigError::single(Location::File { path: path.to_path_buf(), line, column }, e.message().to_string())
    })?;
    let mut loader = Loader { source, path, env, problems: Vec::new(), used_env: HashSet::new() };
    let root: &Table = &doc;

    let upstream = loader.upstream(root);
    let listen = loader.listen(root);
    let limits = loader.limits(root);
    let log = loader.log(root);
    let memory = loader.memory(root);
    let fill = loader.fill(root);
    let replica = loader.replica(root, fill.source);
    let warm = loader.warm(root);
    let consistency = loader.consistency(root);
    let admin = loader.admin(root);
    let cache_policy = loader.cache_policy(root);
    let binlog = loader.binlog(root);
    let shutdown = loader.shutdown(root);
    let caches = loader.caches(root);
    let mut sections = ENV_SECTIONS.to_vec();
    sections.push("cache");
    loader.unknown_keys(root, "", &sections);
    loader.unknown_env(env_names);

    match upstream {
        Some(upstream) if loader.problems.is_empty() => Ok(Config {
            upstream,
            listen,
            limits,
            log,
            memory,
            fill,
            replica,
            warm,
            consistency,
            admin,
            cache_policy,
            binlog,
            shutdown,
            caches,
        }),
        _ => Err(ConfigError { problems: loader.problems }),
    }
}

/// A value as written, before it is given its type.
enum Raw<'a> {
    Str(&'a str),
    Int(i64),
    Bool(bool),
    Other(&'static str),
}

struct Loader<'a> {
    source: &'a str,
    path: &'a Path,
    env: &'a dyn Fn(&str) -> Option<String>,
    problems: Vec<Problem>,
    used_env: HashSet<String>,
}

impl Loader<'_> {
    /// The table of a section, or None when it is absent (all its keys take their defaults).
    fn section<'t>(&mut self, root: &'t Table, name: &str) -> Option<&'t Table> {
        let item = root.get(name)?;
        match item.as_table() {
            Some(t) => Some(t),
            None => {
                let location = self.span_location(item.span());
                self.problems.push(Problem { location, message: format!("{name} must be a table: [{name}]") });
                None
            }
        }
    }

    fn has(&self, t: Option<&Table>, section: &str, key: &str) -> bool {
        (self.env)(&env_name(section, key)).is_some() || t.is_some_and(|t| t.contains_key(key))
    }

    /// A key's value from the environment, else the file; None if absent or invalid (then a
    /// problem has been recorded).
    fn value<T>(&mut self, t: Option<&Table>, section: &str, key: &str, parse: impl Fn(&Raw) -> Result<T, String>) -> Option<T> {
        let var = env_name(section, key);
        if let Some(text) = (self.env)(&var) {
            self.used_env.insert(var.clone());
            return match parse(&Raw::Str(&text)) {
                Ok(v) => Some(v),
                Err(message) => {
                    self.problems.push(Problem { location: Location::Env(var), message });
                    None
                }
            };
        }
        self.file_value(t, key, parse)
    }

    fn file_value<T>(&mut self, t: Option<&Table>, key: &str, parse: impl Fn(&Raw) -> Result<T, String>) -> Option<T> {
        let item = t?.get(key)?;
        let raw = match item {
            Item::Value(Value::String(s)) => Raw::Str(s.value()),
            Item::Value(Value::Integer(i)) => Raw::Int(*i.value()),
            Item::Value(Value::Boolean(b)) => Raw::Bool(*b.value()),
            Item::Value(other) => Raw::Other(value_type(other)),
            other => Raw::Other(other.type_name()),
        };
        match parse(&raw) {
            Ok(v) => Some(v),
            Err(message) => {
                let location = self.span_location(item.span());
                self.problems.push(Problem { location, message: format!("{key}: {message}") });
                None
            }
        }
    }

    /// A list of strings: an array in the file, comma-separated in the environment ("a,b"; an
    /// empty variable is the empty list). `check` vets each entry; a problem points at the
    /// entry. None if absent or invalid.
    fn string_list(
        &mut self,
        t: Option<&Table>,
        section: &str,
        key: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Option<Vec<String>> {
        let var = env_name(section, key);
        if let Some(text) = (self.env)(&var) {
            self.used_env.insert(var.clone());
            let entries: Vec<String> =
                if text.trim().is_empty() { Vec::new() } else { text.split(',').map(|e| e.trim().to_string()).collect() };
            let mut ok = true;
            for (i, entry) in entries.iter().enumerate() {
                if let Err(message) = check(entry) {
                    self.problems.push(Problem { location: Location::Env(var.clone()), message: format!("entry {}: {message}", i + 1) });
                    ok = false;
                }
            }
            return ok.then_some(entries);
        }
        let item = t?.get(key)?;
        let Some(array) = item.as_array() else {
            let location = self.span_location(item.span());
            let found = item.as_value().map_or(item.type_name(), value_type);
            self.problems
                .push(Problem { location, message: format!("{key}: expected an array of strings like [\"root\"], found {found}") });
            return None;
        };
        let mut entries = Vec::with_capacity(array.len());
        let mut ok = true;
        for value in array.iter() {
            let checked = match value {
                Value::String(s) => check(s.value()).map(|()| s.value().to_string()),
                other => Err(format!("expected a string, found {}", value_type(other))),
            };
            match checked {
                Ok(entry) => entries.push(entry),
                Err(message) => {
                    let location = self.span_location(value.span());
                    self.problems.push(Problem { location, message: format!("{key}: {message}") });
                    ok = false;
                }
            }
        }
        ok.then_some(entries)
    }

    fn location(&self, t: Option<&Table>, section: &str, key: &str) -> Location {
        let var = env_name(section, key);
        if (self.env)(&var).is_some() {
            return Location::Env(var);
        }
        self.span_location(t.and_then(|t| t.get(key)).and_then(Item::span))
    }

    fn span_location(&self, span: Option<std::ops::Range<usize>>) -> Location {
        let (line, column) = span.map(|s| line_col(self.source, s.start)).unwrap_or((0, 0));
        Location::File { path: self.path.to_path_buf(), line, column }
    }

    fn unknown_keys(&mut self, t: &Table, section: &str, known: &[&str]) {
        for (key, _) in t.iter() {
            if !known.contains(&key) {
                let span = t.key(key).and_then(|k| k.span());
                let location = self.span_location(span);
                let what = if section.is_empty() {
                    format!("unknown section or key {key:?}")
                } else {
                    format!("unknown key {key:?} in [{section}]")
                };
                self.problems.push(Problem { location, message: format!("{what}; known: {}", known.join(", ")) });
            }
        }
    }

    fn unknown_keys_in(&mut self, t: Option<&Table>, section: &str, known: &[&str]) {
        if let Some(t) = t {
            self.unknown_keys(t, section, known);
        }
    }

    /// Variables that look like overrides (`FRESHET_<SECTION>_...`) but name no key.
    fn unknown_env(&mut self, names: &[String]) {
        for name in names {
            let Some(rest) = name.strip_prefix("FRESHET_") else { continue };
            let looks_like_override = ENV_SECTIONS.iter().any(|s| rest.starts_with(&format!("{}_", s.to_ascii_uppercase())));
            if looks_like_override && !self.used_env.contains(name) && (self.env)(name).is_some() {
                self.problems.push(Problem { location: Location::Env(name.clone()), message: "overrides no known key".into() });
            }
        }
    }
}

fn env_name(section: &str, key: &str) -> String {
    format!("FRESHET_{}_{}", section.to_ascii_uppercase(), key.to_ascii_uppercase())
}

/// 1-based line and column of a byte offset.
fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn type_name(raw: &Raw) -> &'static str {
    match raw {
        Raw::Str(_) => "a string",
        Raw::Int(_) => "an integer",
        Raw::Bool(_) => "a boolean",
        Raw::Other(t) => t,
    }
}

/// A TOML value's type, as error messages name it.
fn value_type(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "an inline table",
    }
}

fn string<'a>(raw: &Raw<'a>) -> Result<&'a str, String> {
    match raw {
        Raw::Str(s) => Ok(s),
        other => Err(format!("expected a string, found {}", type_name(other))),
    }
}

fn integer(raw: &Raw) -> Result<i64, String> {
    match raw {
        Raw::Int(i) => Ok(*i),
        Raw::Str(s) => s.trim().parse().map_err(|_| format!("{s:?} is not an integer")),
        other => Err(format!("expected an integer, found {}", type_name(other))),
    }
}

fn boolean(raw: &Raw) -> Result<bool, String> {
    match raw {
        Raw::Bool(b) => Ok(*b),
        Raw::Str("true") => Ok(true),
        Raw::Str("false") => Ok(false),
        Raw::Str(s) => Err(format!("{s:?} is not true or false")),
        other => Err(format!("expected true or false, found {}", type_name(other))),
    }
}

fn byte_size(raw: &Raw) -> Result<ByteSize, String> {
    match raw {
        Raw::Int(i) => u64::try_from(*i).map(ByteSize).map_err(|_| format!("{i} is negative")),
        Raw::Str(s) => s.parse(),
        other => Err(format!("expected a size like \"64MiB\", found {}", type_name(other))),
    }
}

/// A byte size within `min..=max` bytes (`range` says so in the error).
fn byte_size_in(raw: &Raw, min: u64, max: u64, range: &str) -> Result<ByteSize, String> {
    let size = byte_size(raw)?;
    if size.bytes() < min || size.bytes() > max { Err(format!("{size} is outside {range}")) } else { Ok(size) }
}

fn duration(raw: &Raw) -> Result<Duration, String> {
    parse_duration(string(raw).map_err(|_| "expected a duration like \"5s\"".to_string())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ByteSize, ListenTls, MaxPacket, TlsMode};
    use std::collections::HashMap;

    pub(super) fn load(src: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let names: Vec<String> = env.keys().cloned().collect();
        parse(src, Path::new("f.toml"), &|k| env.get(k).cloned(), &names)
    }

    pub(super) fn messages(err: ConfigError) -> Vec<String> {
        err.problems.into_iter().map(|p| format!("{}: {}", p.location, p.message)).collect()
    }

    #[test]
    fn minimal_config_gets_safe_defaults() {
        let c = load("[upstream]\nurl = \"mysql://u:p@127.0.0.1:3306/app\"\n", &[]).unwrap();
        assert_eq!(c.listen.mysql.to_string(), "127.0.0.1:3307");
        assert_eq!(c.listen.admin.to_string(), "127.0.0.1:9307");
        assert_eq!(c.upstream.tls, TlsMode::Preferred);
        assert_eq!(c.limits.max_packet, MaxPacket::Server);
        assert!(c.listen.offer_tls && !c.listen.trust_plain_clients && c.listen.tls.is_none());
        assert!(c.caches.is_empty());
    }

    #[test]
    fn environment_overrides_the_file() {
        let src = "[upstream]\nurl = \"mysql://u@a:1/x\"\n[listen]\nmysql = \"127.0.0.1:1\"\n";
        let c = load(
            src,
            &[("FRESHET_UPSTREAM_URL", "mysql://v@b:2/y"), ("FRESHET_LISTEN_MYSQL", "0.0.0.0:4000"), ("FRESHET_TEST_X", "ignored")],
        )
        .unwrap();
        assert_eq!(c.upstream.url.address(), "b:2");
        assert_eq!(c.listen.mysql.to_string(), "0.0.0.0:4000");
    }

    #[test]
    fn every_problem_is_reported_with_its_location() {
        let src = "\
[upstream]
url = \"http://nope\"
tls = \"sometimes\"
colour = 3
[listen]
mysql = 3307
[limits]
max_packet = \"12 parsecs\"
[[cache]]
name = \"a b\"
query = \"SELECT 1\"
[[cache]]
query = \"\"
[bogus]
";
        let got = messages(load(src, &[("FRESHET_LISTEN_ADMIN", "nowhere"), ("FRESHET_LIMITS_MAX_PAKCET", "1")]).unwrap_err());
        let expected = [
            "f.toml:2:7: url: must start with mysql://",
            "f.toml:3:7: tls: \"sometimes\" is not one of",
            "f.toml:4:1: unknown key \"colour\" in [upstream]",
            "f.toml:6:9: mysql: expected a string, found an integer",
            "environment variable FRESHET_LISTEN_ADMIN: \"nowhere\" is not an address",
            "f.toml:8:14: max_packet: unknown size unit",
            "f.toml:10:8: name: \"a b\" must be 1-64 letters",
            "f.toml:13:9: query: the query is empty",
            "f.toml:12:1: [[cache]] needs a name",
            "f.toml:14:2: unknown section or key \"bogus\"",
            "environment variable FRESHET_LIMITS_MAX_PAKCET: overrides no known key",
        ];
        for e in expected {
            assert!(got.iter().any(|g| g.starts_with(e)), "missing {e:?} in {got:#?}");
        }
        assert_eq!(got.len(), expected.len(), "{got:#?}");
    }

    #[test]
    fn missing_url_and_duplicate_cache_names() {
        let src = "[[cache]]\nname = \"a\"\nquery = \"SELECT 1\"\n[[cache]]\nname = \"a\"\nquery = \"SELECT 2\"\n";
        let got = messages(load(src, &[]).unwrap_err());
        assert!(got.iter().any(|g| g.starts_with("f.toml: [upstream] url: required")), "{got:#?}");
        assert!(got.iter().any(|g| g.starts_with("f.toml:5:8: a cache named \"a\"")), "{got:#?}");
    }

    #[test]
    fn syntax_error_has_a_location() {
        let got = messages(load("[upstream\nurl = 1", &[]).unwrap_err());
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("f.toml:1:"), "{got:?}");
    }

    #[test]
    fn max_packet_is_the_servers_or_an_explicit_size() {
        let c = load("[upstream]\nurl = \"mysql://u@h\"\n[limits]\nmax_packet = \"server\"\n", &[]).unwrap();
        assert_eq!(c.limits.max_packet, MaxPacket::Server);
        let c = load("[upstream]\nurl = \"mysql://u@h\"\n[limits]\nmax_packet = \"16MiB\"\n", &[]).unwrap();
        assert_eq!(c.limits.max_packet, MaxPacket::Fixed(ByteSize::mib(16)));
        let got = messages(load("[upstream]\nurl = \"mysql://u@h\"\n[limits]\nmax_packet = \"2GiB\"\n", &[]).unwrap_err());
        assert!(got[0].contains("outside 1KiB..1GiB"), "{got:?}");
    }

    #[test]
    fn listen_tls_can_be_switched_off_but_not_half_configured() {
        let c = load("[upstream]\nurl = \"mysql://u@h\"\n[listen]\ntls = false\ntrust_plain_clients = true\n", &[]).unwrap();
        assert!(!c.listen.offer_tls && c.listen.trust_plain_clients);
        let got = messages(
            load("[upstream]\nurl = \"mysql://u@h\"\n[listen]\ntls = false\ntls_cert = \"c\"\ntls_key = \"k\"\n", &[]).unwrap_err(),
        );
        assert!(got[0].contains("tls = false, but tls_cert"), "{got:?}");
    }

    #[test]
    fn listen_tls_needs_cert_and_key() {
        let got = messages(load("[upstream]\nurl = \"mysql://u@h\"\n[listen]\ntls_cert = \"c.pem\"\n", &[]).unwrap_err());
        assert_eq!(got, ["f.toml:4:12: tls_cert needs tls_key as well"]);
        let c = load("[upstream]\nurl = \"mysql://u@h\"\n[listen]\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n", &[]).unwrap();
        assert_eq!(c.listen.tls, Some(ListenTls { cert: "c.pem".into(), key: "k.pem".into() }));
    }

    #[test]
    fn verify_modes_need_a_ca() {
        let got = messages(load("[upstream]\nurl = \"mysql://u@h\"\ntls = \"verify_ca\"\n", &[]).unwrap_err());
        assert!(got[0].contains("need tls_ca"), "{got:?}");
    }
}
