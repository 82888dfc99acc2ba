//! `freshet --config PATH` (or `FRESHET_CONFIG=PATH freshet`): loads the config, sets up
//! logging, and runs the server until SIGINT or SIGTERM. Exit status 64 for a bad config or
//! bad arguments, 1 for a failure at run time.

use std::path::PathBuf;
use std::process::ExitCode;

use freshet_config::{Config, ConfigError};

const USAGE: &str = "usage: freshet --config PATH   (or FRESHET_CONFIG=PATH freshet)
Runs the freshet MySQL caching proxy. See examples/freshet.toml for every config key.";

fn main() -> ExitCode {
    let path = match config_path(std::env::args().skip(1)) {
        Ok(Some(path)) => path,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("freshet: {message}\n{USAGE}");
            return ExitCode::from(ConfigError::EXIT_CODE as u8);
        }
    };
    let config = match Config::load(&path) {
        Ok(config) => config,
        Err(e) => {
            eprint!("freshet: {e}");
            return ExitCode::from(ConfigError::EXIT_CODE as u8);
        }
    };
    let filter = match tracing_subscriber::EnvFilter::try_new(&config.log.level) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("freshet: invalid configuration: [log] level = {:?}: {e}", config.log.level);
            return ExitCode::from(ConfigError::EXIT_CODE as u8);
        }
    };
    tracing_subscriber::fmt().with_env_filter(filter).with_target(false).init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("freshet: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
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

/// The config path from `--config PATH`, `--config=PATH` or FRESHET_CONFIG; None for --help.
fn config_path(mut args: impl Iterator<Item = String>) -> Result<Option<PathBuf>, String> {
    let mut path = std::env::var_os("FRESHET_CONFIG").map(PathBuf::from);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "-V" | "--version" => {
                println!("freshet {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            "-c" | "--config" => path = Some(args.next().ok_or("--config needs a path")?.into()),
            other => match other.strip_prefix("--config=") {
                Some(p) => path = Some(p.into()),
                None => return Err(format!("unknown argument {other:?}")),
            },
        }
    }
    path.map(Some).ok_or_else(|| "no config: pass --config PATH or set FRESHET_CONFIG".into())
}
