//! A MariaDB of a test's own, started and stopped through `scripts/mariadb.sh` (its own datadir
//! and port), for tests that stop the server or need another configuration than the shared
//! test server's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A private server; stopped when dropped.
pub struct PrivateServer {
    dir: PathBuf,
    port: u16,
    options: String,
    /// Environment the server runs with (e.g. `TZ`, its system time zone).
    env: Vec<(String, String)>,
    /// The URL of a user with all privileges, database `freshet_test`.
    pub url: String,
}

impl PrivateServer {
    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/mariadb.sh")
    }

    fn run_script(&self, arg: &str) -> String {
        let out = Command::new("bash")
            .arg(Self::script())
            .arg(arg)
            .env("FRESHET_MARIADB_DIR", &self.dir)
            .env("FRESHET_MARIADB_PORT", self.port.to_string())
            .env("FRESHET_MARIADB_OPTS", &self.options)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("scripts/mariadb.sh runs");
        assert!(out.status.success(), "scripts/mariadb.sh {arg} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts a server in `dir` (a datadir of an earlier run is kept, and a server an
    /// interrupted run left behind is killed first) on a free port, with `options` added to
    /// the script's (space-separated server options, e.g. `--lower-case-table-names=1`).
    pub fn start(dir: &Path, options: &str) -> PrivateServer {
        PrivateServer::start_with_env(dir, options, &[])
    }

    /// [`PrivateServer::start`] with environment variables for the server (`TZ` sets the
    /// host's time zone it reads at start-up).
    pub fn start_with_env(dir: &Path, options: &str, env: &[(&str, &str)]) -> PrivateServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if let Ok(pid) = std::fs::read_to_string(dir.join("mariadb.pid")) {
            let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
            wait_gone(pid.trim());
        }
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut server = PrivateServer { dir: dir.to_path_buf(), port, options: options.to_string(), env, url: String::new() };
        let printed = server.run_script("start");
        server.url = printed
            .lines()
            .find_map(|l| l.strip_prefix("export FRESHET_TEST_MYSQL_URL="))
            .expect("scripts/mariadb.sh prints the URL")
            .to_string();
        server
    }

    /// The server's unix socket (root, no password).
    pub fn socket(&self) -> PathBuf {
        self.dir.join("mariadb.sock")
    }

    /// Sends `signal` to the server and waits until the process is gone.
    pub fn stop_by(&self, signal: &str) {
        let pid = std::fs::read_to_string(self.dir.join("mariadb.pid")).expect("the server's pid file");
        let status = Command::new("kill").args([&format!("-{signal}"), pid.trim()]).status().unwrap();
        assert!(status.success(), "kill -{signal} {pid}");
        wait_gone(pid.trim());
    }

    /// Starts the server again after [`PrivateServer::stop_by`], on the same port.
    pub fn start_again(&self) {
        self.run_script("start");
    }

    /// [`PrivateServer::start_again`] with `options` in place of the ones it had (an operator
    /// who restarts the server with another configuration).
    pub fn start_again_with(&mut self, options: &str) {
        self.options = options.to_string();
        self.run_script("start");
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Self::script())
            .arg("stop")
            .env("FRESHET_MARIADB_DIR", &self.dir)
            .env("FRESHET_MARIADB_PORT", self.port.to_string())
            .status();
    }
}

fn wait_gone(pid: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "mariadbd {pid} did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}
