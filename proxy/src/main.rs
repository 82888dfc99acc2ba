//! The `freshet` binary:
//!
//! - `freshet --config PATH` (or `FRESHET_CONFIG=PATH freshet`): loads the config, sets up
//!   logging, and runs the server until SIGINT or SIGTERM, then shuts down as `[shutdown]`
//!   says and exits 0.
//! - `freshet check --config PATH`: validates the config and the upstream (reachability,
//!   binlog settings, grants, the caches) as [`freshet_proxy::check`] does, prints what it
//!   found, and exits: 0 when freshet would start, 1 when it would not.
//! - `freshet --version`, `freshet --help`.
//!
//! Exit status 64 for a bad config or bad arguments, 1 for a failure at run time.

use std::path::PathBuf;
use std::process::ExitCode;

use freshet_config::{Config, ConfigError};

const USAGE: &str = "usage: freshet [check] --config PATH   (or FRESHET_CONFIG=PATH freshet [check])
       freshet --version
Runs the freshet MySQL caching proxy; `check` validates the config and the upstream, then exits.
See examples/freshet.toml for every config key.";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Invocation {
    Run(PathBuf),
    Check(PathBuf),
    Help,
    Version,
}

fn main() -> ExitCode {
    let usage_error = ExitCode::from(ConfigError::EXIT_CODE as u8);
    let (path, check) = match parse_args(std::env::args().skip(1), std::env::var_os("FRESHET_CONFIG").map(PathBuf::from)) {
        Ok(Invocation::Run(path)) => (path, false),
        Ok(Invocation::Check(path)) => (path, true),
        Ok(Invocation::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Version) => {
            println!("freshet {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("freshet: {message}\n{USAGE}");
            return usage_error;
        }
    };
    let config = match Config::load(&path) {
        Ok(config) => config,
        Err(e) => {
            eprint!("freshet: {e}");
            return usage_error;
        }
    };
    let filter = match tracing_subscriber::EnvFilter::try_new(log_directives(&config.log.level)) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("freshet: invalid configuration: [log] level = {:?}: {e}", config.log.level);
            return usage_error;
        }
    };
    tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_writer(std::io::stderr).init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("freshet: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if check {
        let report = runtime.block_on(freshet_proxy::check::check(&config));
        for line in &report.lines {
            println!("{line}");
        }
        return if report.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> anyhow::Result<()> {
    let server = freshet_proxy::Server::bind(config).await?;
    server.run(shutdown_signal()).await
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// `[check] [--config PATH | --config=PATH]`, `--help`, `--version`; the config path
/// defaults to `env_config` (FRESHET_CONFIG).
fn parse_args(mut args: impl Iterator<Item = String>, env_config: Option<PathBuf>) -> Result<Invocation, String> {
    let mut path = env_config;
    let mut check = false;
    let mut first = true;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Invocation::Help),
            "-V" | "--version" => return Ok(Invocation::Version),
            "check" if first => check = true,
            "-c" | "--config" => path = Some(args.next().ok_or("--config needs a path")?.into()),
            other => match other.strip_prefix("--config=") {
                Some(p) => path = Some(p.into()),
                None => return Err(format!("unknown argument {other:?}")),
            },
        }
        first = false;
    }
    let path = path.ok_or("no config: pass --config PATH or set FRESHET_CONFIG")?;
    Ok(if check { Invocation::Check(path) } else { Invocation::Run(path) })
}

/// The log filter of `[log] level`: the SQL parser logs, at debug, the whole text of what it
/// parses (a client's literals, a password given to `PASSWORD()`), so it is held at warnings
/// unless the level names it.
fn log_directives(level: &str) -> String {
    if level.contains("sqlparser") { level.to_string() } else { format!("{level},sqlparser=warn") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str], env: Option<&str>) -> Result<Invocation, String> {
        parse_args(args.iter().map(|a| a.to_string()), env.map(PathBuf::from))
    }

    #[test]
    fn arguments() {
        assert_eq!(parse(&["--config", "a.toml"], None), Ok(Invocation::Run("a.toml".into())));
        assert_eq!(parse(&["check", "--config=a.toml"], None), Ok(Invocation::Check("a.toml".into())));
        assert_eq!(parse(&["check"], Some("e.toml")), Ok(Invocation::Check("e.toml".into())));
        assert_eq!(parse(&["--version", "--config"], None), Ok(Invocation::Version));
        assert_eq!(parse(&["-h"], None), Ok(Invocation::Help));
        assert!(parse(&["--config", "a.toml", "check"], None).unwrap_err().contains("unknown argument \"check\""));
        assert!(parse(&[], None).unwrap_err().contains("no config"));
        assert!(parse(&["--config"], None).unwrap_err().contains("needs a path"));
    }
}
