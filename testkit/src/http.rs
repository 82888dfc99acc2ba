//! A minimal HTTP client for freshet's admin listener: one request per connection, the
//! listener closes it after its answer, so the whole response is what the socket yields.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `request` verbatim and returns the status code and the body. Panics when the
/// listener does not answer with a status line.
pub async fn request(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap_or_else(|e| panic!("connect to the admin listener {addr}: {e}"));
    s.write_all(request.as_bytes()).await.expect("send the request");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read the response");
    split(&out).unwrap_or_else(|| panic!("not an HTTP response: {out:?}"))
}

/// `GET path`: the status code and the body.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    request(addr, &format!("GET {path} HTTP/1.1\r\nHost: freshet\r\n\r\n")).await
}

/// The status code of `GET path`, or 0 when no status line arrives within `within` (for tests
/// that sample the listener while the machine is overloaded or the upstream is away).
pub async fn status_within(addr: SocketAddr, path: &str, within: Duration) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap_or_else(|e| panic!("connect to the admin listener {addr}: {e}"));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: freshet\r\n\r\n").as_bytes()).await.expect("send the request");
    let mut head = Vec::new();
    let _ = tokio::time::timeout(within, s.read_to_end(&mut head)).await;
    let text = String::from_utf8_lossy(&head);
    text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// (status, body) of a whole response.
fn split(response: &str) -> Option<(u16, String)> {
    let status = response.strip_prefix("HTTP/1.")?.get(2..5)?.parse().ok()?;
    Some((status, response.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn split_reads_status_and_body() {
        assert_eq!(super::split("HTTP/1.1 503 Service Unavailable\r\nA: b\r\n\r\nnot ready\n"), Some((503, "not ready\n".into())));
        assert_eq!(super::split("HTTP/1.0 200 OK\r\n\r\n"), Some((200, String::new())));
        assert_eq!(super::split("garbage"), None);
    }
}
