//! The upstream's address and credentials, written as `mysql://user:password@host:port/database`.
//!
//! The relay does not use the credentials (every client authenticates against the upstream
//! itself); they serve freshet's own connections: health checks, and later fills and the binlog.
//! The password is never printed: `Debug` and `Display` mask it, and no parse error quotes
//! any part of the url's user information or path (a bad escape names the part, not its text).

use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamUrl {
    pub user: String,
    pub password: Option<String>,
    pub host: String,
    pub port: u16,
    pub database: Option<String>,
}

impl UpstreamUrl {
    /// `host:port`, as a socket address string for connecting.
    pub fn address(&self) -> String {
        if self.host.contains(':') { format!("[{}]:{}", self.host, self.port) } else { format!("{}:{}", self.host, self.port) }
    }
}

impl std::str::FromStr for UpstreamUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let rest = s
            .strip_prefix("mysql://")
            .or_else(|| s.strip_prefix("mariadb://"))
            .ok_or_else(|| "must start with mysql:// (mysql://user:password@host:port/database)".to_string())?;
        if rest.contains('?') {
            return Err("query parameters are not supported in the url; use the [upstream] keys".into());
        }
        let (authority, database) = match rest.split_once('/') {
            Some((a, d)) => (a, (!d.is_empty()).then(|| percent_decode(d, "database")).transpose()?),
            None => (rest, None),
        };
        let (userinfo, hostport) =
            authority.rsplit_once('@').ok_or_else(|| "needs a user: mysql://user:password@host:port/database".to_string())?;
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (percent_decode(u, "user")?, Some(percent_decode(p, "password")?)),
            None => (percent_decode(userinfo, "user")?, None),
        };
        if user.is_empty() {
            return Err("the user name is empty".into());
        }
        let (host, port) = split_host_port(hostport)?;
        Ok(UpstreamUrl { user, password, host, port, database })
    }
}

fn split_host_port(s: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("unclosed [ in the host")?;
        (host, after.strip_prefix(':'))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return Err("the host is empty".into());
    }
    let port = match port {
        Some(p) => p.parse::<u16>().map_err(|_| format!("port {p:?} is not a number from 1 to 65535"))?,
        None => 3306,
    };
    if port == 0 {
        return Err("port 0 is not a valid port".into());
    }
    Ok((host.to_string(), port))
}

/// Decodes `%XX` escapes of the url's `part`. Errors name the part, never its text: the part
/// may be the password, or a password with an unescaped `/` read as the database.
fn percent_decode(s: &str, part: &str) -> Result<String, String> {
    let bad = || format!("a bad percent escape in the {part} (write %XX with two hex digits; % itself is %25)");
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit())).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("the percent escapes in the {part} are not UTF-8"))
}

impl fmt::Display for UpstreamUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let password = if self.password.is_some() { ":***" } else { "" };
        write!(f, "mysql://{}{}@{}/{}", self.user, password, self.address(), self.database.as_deref().unwrap_or(""))
    }
}

impl fmt::Debug for UpstreamUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_url() {
        let url: UpstreamUrl = "mysql://app:p%40ss@db.internal:3307/shop".parse().unwrap();
        assert_eq!(url.user, "app");
        assert_eq!(url.password.as_deref(), Some("p@ss"));
        assert_eq!(url.address(), "db.internal:3307");
        assert_eq!(url.database.as_deref(), Some("shop"));
        assert_eq!(url.to_string(), "mysql://app:***@db.internal:3307/shop");
    }

    #[test]
    fn defaults_and_ipv6() {
        let url: UpstreamUrl = "mysql://root@[::1]".parse().unwrap();
        assert_eq!(url.address(), "[::1]:3306");
        assert_eq!(url.password, None);
        assert_eq!(url.database, None);
    }

    #[test]
    fn errors_never_show_the_password() {
        for bad in [
            "mysql://app:s3cr%zzet@h/db",
            "mysql://app:s3cr%e9et@h/db",
            "mysql://app:s3cret%4@h",
            "mysql://a%zz:s3cret@h",
            "mysql://app:s3cret@h/d%zz",
            "mysql://app:s3cret@h:99x",
            "mysql://app:s3cret@h?x=1",
            "mysql://app:s3cret@:1",
            "http://app:s3cret@h",
            "mysql://app:s3/cret@h",
        ] {
            let e = bad.parse::<UpstreamUrl>().unwrap_err();
            assert!(!e.contains("s3") && !e.contains("cret"), "{bad}: {e}");
        }
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in ["http://x@y", "mysql://host:3306/db", "mysql://u@h:99999", "mysql://u@h?ssl=1", "mysql://u@:1", "mysql://u%zz@h"] {
            assert!(bad.parse::<UpstreamUrl>().is_err(), "{bad} should be rejected");
        }
    }
}
