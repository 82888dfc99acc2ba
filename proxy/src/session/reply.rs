//! Relaying a reply: the upstream's packets forwarded to the client frame by frame as they
//! arrive, parsed only enough to find where the reply ends (the table in [`super::command`]),
//! and the watch on the client while a slow answer is awaited: a client that went away has
//! its statement end on the server as it would directly.

use bytes::Bytes;

use crate::metrics::UpstreamFailure;
use crate::protocol::cursor::Cursor;
use crate::protocol::io::Frame;
use crate::protocol::response::{self, ERR, LOCAL_INFILE, OK};
use crate::protocol::{Capabilities, StatusFlags};

use super::command::now;
use super::{PreparedStatement, Session, SessionError};

/// Flush to the client once this much is queued, even if more rows are buffered.
pub(super) const FLUSH_AT: usize = 256 * 1024;

impl Session {
    pub(super) async fn forward_command(&mut self, payload: &[u8]) -> Result<(), SessionError> {
        self.upstream.queue_packet(0, payload);
        self.upstream_idle = false;
        self.upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))
    }

    /// Relays result sets until one ends without MORE_RESULTS_EXISTS.
    pub(super) async fn relay_results(&mut self) -> Result<(), SessionError> {
        let mut results = 0;
        loop {
            let first = self.relay_packet().await?;
            self.learn_from(first.payload());
            results += 1;
            let status = match first.payload().first() {
                Some(&OK) => Some(self.ok_status(&first)?),
                Some(&ERR) => {
                    self.errored = true;
                    self.shared.metrics.server_errors.inc();
                    if results == 1 {
                        self.execute_refused(first.payload());
                    }
                    if crate::cache::access::refused_before_running(first.payload()) {
                        self.refused_at = Some(results);
                    }
                    self.privileges_changed_in_part |= crate::cache::access::changed_privileges_in_part(first.payload());
                    None
                }
                Some(&LOCAL_INFILE) => {
                    self.relay_local_infile().await?;
                    continue;
                }
                Some(_) => self.relay_result_set(&first).await?,
                None => return Err(upstream_protocol("empty packet where a result was expected")),
            };
            match status {
                Some(s) if s.has(StatusFlags::MORE_RESULTS_EXISTS) => {
                    // Not a single result set: nothing to capture.
                    self.capture = None;
                    continue;
                }
                Some(s) => {
                    if let Some(capture) = self.capture.as_mut() {
                        capture.status = s.0;
                    }
                    return Ok(());
                }
                None => return Ok(()),
            }
        }
    }

    /// Column definitions and rows after a column count; the terminator's status, or None if
    /// the result set ended with an ERR (e.g. the query was killed).
    pub(super) async fn relay_result_set(&mut self, first: &Frame) -> Result<Option<StatusFlags>, SessionError> {
        let columns = Cursor::new(first.payload()).lenenc().map_err(|_| upstream_protocol("bad column count"))?;
        let mut defs = self.capture.is_some().then(Vec::new);
        for _ in 0..columns {
            let def = self.relay_packet().await?;
            if let Some(defs) = defs.as_mut() {
                defs.push(Bytes::copy_from_slice(def.payload()));
            }
        }
        if let (Some(defs), Some(capture)) = (defs, self.capture.as_mut()) {
            capture.defs = defs;
        }
        if !self.caps.has(Capabilities::DEPRECATE_EOF) {
            let eof = self.relay_packet().await?;
            let status = self.terminator_status(&eof)?;
            // An opened cursor: the rows come later, through COM_STMT_FETCH.
            if status.has(StatusFlags::CURSOR_EXISTS) {
                return Ok(Some(status));
            }
        }
        self.relay_rows().await
    }

    /// Rows up to the terminator (its status) or an ERR (None).
    pub(super) async fn relay_rows(&mut self) -> Result<Option<StatusFlags>, SessionError> {
        loop {
            let packet = self.relay_packet().await?;
            if response::is_terminator(packet.payload(), self.caps) {
                return Ok(Some(self.terminator_status(&packet)?));
            }
            if packet.payload().first() == Some(&ERR) {
                self.shared.metrics.server_errors.inc();
                return Ok(None);
            }
        }
    }

    /// COM_FIELD_LIST: column definitions up to a terminator, or ERR.
    pub(super) async fn relay_until_terminator(&mut self) -> Result<(), SessionError> {
        self.relay_rows().await.map(|_| ())
    }

    /// The file a LOAD DATA LOCAL INFILE asked for: client packets up to an empty one. Then
    /// the server's OK or ERR follows, which the caller reads as the next result.
    pub(super) async fn relay_local_infile(&mut self) -> Result<(), SessionError> {
        self.flush_client().await?;
        let mut continued = false;
        loop {
            let frame = self.client.read_frame().await.map_err(SessionError::from_client)?;
            self.upstream.queue_frame(&frame);
            let last = frame.payload().is_empty() && !continued;
            continued = frame.is_continued();
            if last || self.upstream.pending_write() >= FLUSH_AT {
                self.upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
            }
            if last {
                return Ok(());
            }
        }
    }

    pub(super) async fn relay_prepare(&mut self, command: Bytes) -> Result<(), SessionError> {
        let first = self.relay_packet().await?;
        if first.payload().first() != Some(&OK) {
            self.shared.metrics.server_errors.inc();
            self.statements.refused();
            return Ok(());
        }
        let mut c = Cursor::new(&first.payload()[1..]);
        let (id, columns, params) = match (c.u32(), c.u16(), c.u16()) {
            (Ok(id), Ok(columns), Ok(params)) => (id, columns, params),
            _ => return Err(upstream_protocol("short COM_STMT_PREPARE reply")),
        };
        let eof = !self.caps.has(Capabilities::DEPRECATE_EOF);
        for count in [params, columns] {
            for _ in 0..count {
                self.relay_packet().await?;
            }
            if count > 0 && eof {
                self.relay_packet().await?;
            }
        }
        let route = self.route_prepare(&command[1..]);
        let runs_statements = super::statements::runs_statements(&command[1..]);
        // A copy: a slice would keep the whole read buffer the prepare arrived in (grown by the
        // longest command before it) for as long as the statement lives.
        let sql = Bytes::copy_from_slice(&command[1..]);
        self.statements.insert(id, PreparedStatement { sql, params, columns, route, runs_statements });
        Ok(())
    }

    pub(super) async fn relay_single(&mut self) -> Result<(), SessionError> {
        let packet = self.relay_packet().await?;
        match packet.payload().first() {
            Some(&OK) => {
                self.ok_status(&packet)?;
            }
            Some(&ERR) => {
                self.errored = true;
                self.shared.metrics.server_errors.inc();
                if crate::cache::access::refused_before_running(packet.payload()) {
                    self.refused_at = Some(1);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Forwards one logical packet from the upstream to the client; returns its first frame.
    pub(super) async fn relay_packet(&mut self) -> Result<Frame, SessionError> {
        let first = self.upstream_frame().await?;
        self.client.queue_frame(&first);
        let mut continued = first.is_continued();
        while continued {
            let next = self.upstream_frame().await?;
            self.client.queue_frame(&next);
            continued = next.is_continued();
        }
        Ok(first)
    }

    /// The next upstream frame. Before waiting on the socket, whatever is queued for the
    /// client is sent, so the client never waits for rows that freshet already has.
    pub(super) async fn upstream_frame(&mut self) -> Result<Frame, SessionError> {
        if self.client.pending_write() < FLUSH_AT
            && let Some(frame) = self.upstream.try_frame()
        {
            return Ok(frame);
        }
        self.flush_client().await?;
        if self.client_stopped_sending {
            // The server was told (below); whatever it does now follows from the client's end.
            return self.upstream.read_frame().await.map_err(|_| SessionError::ClientGone);
        }
        // The server aborts a query whose client went away, where a long wait of the query
        // looks; it sees only freshet's connection, so a client whose answer is slow to come
        // is watched. Not before: looking costs a syscall, and a quick answer needs none.
        let watched = {
            let read = self.upstream.read_frame();
            tokio::pin!(read);
            tokio::select! {
                biased;
                frame = &mut read => Some(frame),
                () = client_watched(self.client.get_ref().tcp()) => None,
            }
        };
        let mut byte = [0u8; 1];
        match watched {
            Some(frame) => frame.map_err(SessionError::from_upstream),
            // Bytes the client sent before its end (a pipelined command, a TLS client's
            // closing alert), read here (compressed or not) or still in the socket, would
            // still wait in the server's socket directly: the server goes on, and the session
            // with it.
            None if self.client.holds_unread()
                || matches!(now(self.client.get_ref().tcp().peek(&mut byte)).await, Some(Ok(n)) if n > 0) =>
            {
                self.upstream.read_frame().await.map_err(SessionError::from_upstream)
            }
            // A client that only stopped sending (`shutdown(SHUT_WR)`) still reads, and one
            // that left looks the same from here. Directly, the server would see that end
            // itself: it answers, and aborts only where a long wait looks at its client
            // (`SLEEP`, metadata lock waits). So freshet ends its own sending side, the
            // server sees what it would see directly, and its answer is relayed; the session
            // ends at the client's next read, or when a write to it fails.
            None => {
                self.client_stopped_sending = true;
                self.upstream.shutdown().await.map_err(|_| SessionError::ClientGone)?;
                self.upstream.read_frame().await.map_err(|_| SessionError::ClientGone)
            }
        }
    }

    pub(super) async fn flush_client(&mut self) -> Result<(), SessionError> {
        self.client.flush().await.map_err(SessionError::ClientIo)
    }

    pub(super) fn ok_status(&mut self, packet: &Frame) -> Result<StatusFlags, SessionError> {
        let status = response::ok_status(packet.payload(), self.caps).map_err(|_| upstream_protocol("short OK packet"))?;
        self.status = status;
        Ok(status)
    }

    pub(super) fn terminator_status(&mut self, packet: &Frame) -> Result<StatusFlags, SessionError> {
        if !response::is_terminator(packet.payload(), self.caps) {
            return Err(upstream_protocol("expected an EOF packet"));
        }
        let status = response::terminator_status(packet.payload(), self.caps).map_err(|_| upstream_protocol("short EOF packet"))?;
        self.status = status;
        Ok(status)
    }
}

/// How long an upstream answer is awaited before the client is watched too ([`client_gone`]).
const WATCH_CLIENT_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// Resolves once the client's end of `tcp` is closed, looked at from [`WATCH_CLIENT_AFTER`] on:
/// what a wait for the server races, so that a quick answer costs no syscall.
pub(super) async fn client_watched(tcp: &tokio::net::TcpStream) {
    tokio::time::sleep(WATCH_CLIENT_AFTER).await;
    client_gone(tcp).await;
}

/// Resolves once the client's end of `tcp` is closed (a read would find the end) or broken.
/// Bytes waiting on it (a pipelined command, a TLS client's closing alert) cannot be looked
/// past without taking them, so then the kernel's word is asked every
/// [`WATCH_CLIENT_AFTER`]: the socket's read side closed behind them (EPOLLRDHUP).
async fn client_gone(tcp: &tokio::net::TcpStream) {
    let mut byte = [0u8; 1];
    match tcp.peek(&mut byte).await {
        Ok(0) | Err(_) => return,
        Ok(_) => {}
    }
    loop {
        match tcp.ready(tokio::io::Interest::READABLE).await {
            Ok(ready) if !ready.is_read_closed() => tokio::time::sleep(WATCH_CLIENT_AFTER).await,
            _ => return,
        }
    }
}

pub(super) fn upstream_protocol(what: &str) -> SessionError {
    SessionError::Upstream(format!("upstream protocol error: {what}"), UpstreamFailure::Protocol)
}
