//! The freshet binary run as a child process, for the tests that need a real process (a
//! restart, SIGKILL, peak RSS): one way to start it, find where it listens, read its log and
//! stop it.
//!
//! Why it listens on port 0 and the test reads the ports from the log: a port picked by the
//! test (bind, read, close, hand over) can be taken by anything else before freshet binds it,
//! and freshet then exits at once while the test waits a minute for a listener that never
//! comes. Here the kernel picks while freshet binds, and the test learns the ports from the
//! "freshet is listening" line. The log goes to a file, never to a pipe nobody drains (a full
//! pipe blocks the process mid-log), and every failure to start panics with the log's tail and
//! the exit status, so a red CI run says why.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a start may take before the test fails: generous, for a loaded CI machine.
const START_LIMIT: Duration = Duration::from_secs(180);
/// How long [`Freshet::wait_for_log`] waits for a line.
const LOG_LIMIT: Duration = Duration::from_secs(180);

/// A running freshet binary; killed when dropped.
pub struct Freshet {
    child: Child,
    log: PathBuf,
    /// The byte offset of the log up to which [`Freshet::wait_for_log`] has read.
    cursor: usize,
    /// The MySQL listener's address, from the log.
    pub mysql: SocketAddr,
    /// The admin listener's address, from the log.
    pub admin: SocketAddr,
}

impl Freshet {
    /// Starts `binary --config config` with both listeners on 127.0.0.1 port 0 (the config's
    /// `[listen]` is overridden through the environment) and its log in `log`, and waits
    /// until it listens. The config must log at `info` or finer: the listening line is how
    /// the ports are learnt. Panics with the log's tail if the process exits or does not
    /// listen in time.
    pub async fn start(binary: &Path, config: &Path, log: &Path) -> Freshet {
        Freshet::start_with_env(binary, config, log, &[]).await
    }

    /// [`Freshet::start`] with environment variables for the process (e.g. glibc's
    /// `MALLOC_MMAP_THRESHOLD_`, so that a test of what freshet holds is not a test of what the
    /// allocator keeps of what it freed).
    pub async fn start_with_env(binary: &Path, config: &Path, log: &Path, env: &[(&str, &str)]) -> Freshet {
        let file = std::fs::File::create(log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let child = Command::new(binary)
            .envs(env.iter().copied())
            .env_remove("FRESHET_CONFIG")
            .env("FRESHET_LISTEN_MYSQL", "127.0.0.1:0")
            .env("FRESHET_LISTEN_ADMIN", "127.0.0.1:0")
            .env("NO_COLOR", "1")
            .arg("--config")
            .arg(config)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let mut freshet = Freshet { child, log: log.to_owned(), cursor: 0, mysql: unspecified(), admin: unspecified() };
        let line = freshet.wait_for_log_within("freshet is listening", START_LIMIT).await;
        // What was logged while starting (a copy beginning, a warning) stays for wait_for_log.
        freshet.cursor = 0;
        let (mysql, admin) = (field(&line, "mysql"), field(&line, "admin"));
        match (mysql, admin) {
            (Some(mysql), Some(admin)) => {
                freshet.mysql = mysql;
                freshet.admin = admin;
                freshet
            }
            _ => panic!("no addresses in the listening line: {line}"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The whole log so far, without colour codes.
    pub fn log(&self) -> String {
        plain(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }

    /// Waits for the next log line (after the last one this returned; from the start of the
    /// log at first) that contains
    /// `needle`, and returns it. Panics with the log's tail if the process exits first or
    /// the line does not come in time.
    pub async fn wait_for_log(&mut self, needle: &str) -> String {
        self.wait_for_log_within(needle, LOG_LIMIT).await
    }

    async fn wait_for_log_within(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let log = self.log();
            // Only whole lines: a line being written has no newline yet.
            let unread = log.get(self.cursor..).unwrap_or("");
            let mut offset = self.cursor;
            for line in unread.split_inclusive('\n').take_while(|l| l.ends_with('\n')) {
                offset += line.len();
                if line.contains(needle) {
                    self.cursor = offset;
                    return line.trim_end().to_owned();
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("freshet exited ({status}) before logging {needle:?}; its log ends with:\n{}", tail(&log));
            }
            if Instant::now() > deadline {
                panic!("freshet did not log {needle:?} within {limit:?}; its log ends with:\n{}", tail(&log));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, and a successful exit within 60 s.
    pub async fn stop(mut self) {
        self.signal("TERM");
        let status = self.exit_within(Duration::from_secs(60)).await;
        assert!(status.success(), "freshet exited with {status} after SIGTERM; its log ends with:\n{}", tail(&self.log()));
    }

    /// SIGKILL, and the exit.
    pub async fn kill(mut self) {
        self.signal("KILL");
        self.exit_within(Duration::from_secs(60)).await;
    }

    fn signal(&self, name: &str) {
        let sent = Command::new("kill").arg(format!("-{name}")).arg(self.pid().to_string()).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{name} {}", self.pid());
    }

    async fn exit_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for freshet") {
                return status;
            }
            assert!(Instant::now() < deadline, "freshet did not exit within {limit:?}; its log ends with:\n{}", tail(&self.log()));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Freshet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unspecified() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// `name=VALUE` of a log line, as an address.
fn field(line: &str, name: &str) -> Option<SocketAddr> {
    line.split_whitespace().find_map(|token| token.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

/// `text` without ANSI escape sequences (tracing colours its fields unless told not to).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The last 40 lines of a log.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_come_from_the_listening_line() {
        let line = "2026-11-25T09:00:00Z  INFO freshet is listening mysql=127.0.0.1:41234 admin=127.0.0.1:41235 upstream=mysql://u@h:1/d";
        assert_eq!(field(line, "mysql"), Some("127.0.0.1:41234".parse().unwrap()));
        assert_eq!(field(line, "admin"), Some("127.0.0.1:41235".parse().unwrap()));
        assert_eq!(field(line, "other"), None);
    }

    #[test]
    fn colour_codes_are_dropped() {
        assert_eq!(plain("\u{1b}[3mmysql\u{1b}[0m\u{1b}[2m=\u{1b}[0m127.0.0.1:1"), "mysql=127.0.0.1:1");
    }

    #[test]
    fn the_tail_is_the_last_lines() {
        let log: String = (0..100).map(|i| format!("{i}\n")).collect();
        assert!(tail(&log).starts_with("60\n") && tail(&log).ends_with("99"));
    }
}
