//! freshet run in the test's own process, on the ports a config names (`127.0.0.1:0` for
//! ephemeral ones), stopped when the handle is dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use freshet_config::Config;
use freshet_proxy::Server;
use freshet_proxy::metrics::ProxyMetrics;
use freshet_proxy::session::EngineCell;

/// The config `toml` parsed as freshet would read it (no environment overrides); panics with
/// the problems and the text when it is invalid.
pub fn config(toml: &str) -> Config {
    Config::parse(toml, Path::new("test.toml"), &|_| None, &[]).unwrap_or_else(|e| panic!("the test's config is invalid: {e}\n{toml}"))
}

/// freshet bound to its listeners with this config text, not yet serving.
pub async fn bind(toml: &str) -> Server {
    Server::bind(config(toml)).await.expect("freshet binds")
}

/// freshet serving in this process; stops serving when dropped.
pub struct Running {
    pub mysql: SocketAddr,
    pub admin: SocketAddr,
    pub metrics: Arc<ProxyMetrics>,
    /// The cache engine, once started.
    pub engine: EngineCell,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Serves `server` on a task of the current runtime until the returned handle is dropped.
pub fn spawn(server: Server) -> Running {
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let running = Running {
        mysql: server.mysql_addr(),
        admin: server.admin_addr(),
        metrics: server.metrics(),
        engine: server.engine(),
        stop: Some(stop),
    };
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    running
}

/// [`bind`] then [`spawn`].
pub async fn start(toml: &str) -> Running {
    spawn(bind(toml).await)
}
