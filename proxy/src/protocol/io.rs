//! Packet framing over one connection: a 3-byte little-endian length, a sequence id, the payload.
//! On a connection that agreed on compression, the packets travel inside compressed frames,
//! which [`super::compress`] unwraps as they are read and wraps at each flush.
//!
//! [`PacketIo`] owns the connection's read and write buffers. Reading is cancel-safe: bytes
//! only move from the socket into the read buffer, and a frame leaves the buffer only when it
//! is complete, so a `select!` that drops a read loses nothing. Writes are queued and sent by
//! [`PacketIo::flush`], which lets the relay forward many small packets in one syscall.
//!
//! A logical packet longer than 2^24-1 bytes is split into frames of exactly 0xffffff bytes
//! followed by a shorter (possibly empty) one. The relay forwards frames as they come and
//! never needs the whole packet; commands from clients are joined into one [`Packet`] and
//! bounded by a limit that is checked against the frame headers before their payloads are
//! buffered.

use std::io;

use bytes::{Buf, Bytes, BytesMut};

use super::compress::Compressed;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest frame payload; a frame of this size is continued by the next one.
pub const MAX_FRAME: usize = 0xff_ffff;
const HEADER: usize = 4;

/// Appends a logical packet to `out`, split into frames of at most [`MAX_FRAME`] bytes, the
/// first with sequence id `seq`; returns the next sequence id.
pub fn frame_packet(out: &mut BytesMut, mut seq: u8, payload: &[u8]) -> u8 {
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_FRAME);
        // The frame's header (three bytes of length, the sequence id) in one copy.
        let header = (n as u32 | u32::from(seq) << 24).to_le_bytes();
        out.reserve(4 + n);
        out.extend_from_slice(&header);
        out.extend_from_slice(&rest[..n]);
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_FRAME {
            return seq;
        }
    }
}

/// One frame as it came off the wire, header included.
#[derive(Clone, Debug)]
pub struct Frame {
    raw: Bytes,
}

impl Frame {
    pub fn seq(&self) -> u8 {
        self.raw[3]
    }

    pub fn payload(&self) -> &[u8] {
        &self.raw[HEADER..]
    }

    /// True when the logical packet goes on in the next frame.
    pub fn is_continued(&self) -> bool {
        self.payload().len() == MAX_FRAME
    }

    fn payload_bytes(&self) -> Bytes {
        self.raw.slice(HEADER..)
    }
}

/// A logical packet, joined from its frames.
#[derive(Clone, Debug)]
pub struct Packet {
    /// Sequence id of the first frame.
    pub seq: u8,
    /// Sequence id of the last frame; the reply continues from `last_seq + 1`.
    pub last_seq: u8,
    pub payload: Bytes,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("connection closed")]
    Closed,
    #[error(transparent)]
    Io(#[from] io::Error),
    /// `seq` is the sequence id of the frame whose header showed the packet too large (the
    /// server's refusal takes the next one).
    #[error("packet of at least {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge { size: u64, limit: u64, seq: u8 },
    /// A frame's sequence id is not `expected` (the server's refusal takes it).
    #[error("packets out of order: a frame not numbered {expected}")]
    OutOfOrder { expected: u8 },
}

pub struct PacketIo<S> {
    stream: S,
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// Bytes read from and written to the socket since the last [`PacketIo::take_counts`].
    read_count: u64,
    write_count: u64,
    /// Set once the connection uses the compressed protocol ([`PacketIo::start_compression`]).
    compressed: Option<Box<Compressed>>,
    /// A buffer grew past [`KEEP`] for one long packet ([`PacketIo::give_back`]).
    grown: bool,
}

/// What a connection's buffers keep between commands; one grown past it for a long packet is
/// given back when the session is idle (a frame split off the read buffer shares its
/// allocation, so the buffer's own capacity does not show what it holds).
const KEEP: usize = 64 * 1024;

impl<S: AsyncRead + AsyncWrite + Unpin> PacketIo<S> {
    pub fn new(stream: S) -> Self {
        Self::with_buffer(stream, BytesMut::with_capacity(16 * 1024))
    }

    /// Wraps a stream whose first bytes are already in `rbuf`.
    pub fn with_buffer(stream: S, rbuf: BytesMut) -> Self {
        PacketIo { stream, rbuf, wbuf: BytesMut::with_capacity(16 * 1024), read_count: 0, write_count: 0, compressed: None, grown: false }
    }

    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The stream itself, for writing bytes that are not packets (tests of broken peers).
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Gives the stream back, for a TLS upgrade, with the bytes already read from it: a peer
    /// may send its TLS hello right behind the SSL request, in the same segment. Fails if
    /// writes are still queued.
    pub fn into_parts(self) -> io::Result<(S, BytesMut)> {
        if self.wbuf.is_empty() {
            Ok((self.stream, self.rbuf))
        } else {
            Err(io::Error::new(io::ErrorKind::InvalidData, "unsent data before the TLS handshake"))
        }
    }

    /// Whether bytes the peer sent are buffered (read from the socket, not taken yet).
    pub fn has_buffered(&self) -> bool {
        !self.rbuf.is_empty()
    }

    /// The sequence id of the next frame, once its header is buffered (read in if need be),
    /// without waiting for its payload. Cancel-safe.
    pub async fn next_seq(&mut self) -> Result<u8, ReadError> {
        while self.rbuf.len() < HEADER {
            self.rbuf.reserve(HEADER);
            self.fill().await?;
        }
        Ok(self.rbuf[3])
    }

    /// How many bytes the peer sent are buffered (read from the socket, not taken yet).
    pub fn buffered(&self) -> usize {
        self.rbuf.len()
    }

    /// Whether bytes the peer sent wait here, in the packet buffer or (compressed) in a
    /// compressed frame not inflated yet.
    pub fn holds_unread(&self) -> bool {
        !self.rbuf.is_empty() || self.compressed.as_ref().is_some_and(|c| !c.raw.is_empty())
    }

    /// A complete frame if one is buffered, without any I/O.
    pub fn try_frame(&mut self) -> Option<Frame> {
        let len = frame_len(&self.rbuf)?;
        if self.rbuf.len() < HEADER + len {
            return None;
        }
        Some(Frame { raw: self.rbuf.split_to(HEADER + len).freeze() })
    }

    /// The next frame. `Err(Closed)` when the peer closed the connection (between frames or
    /// not). `limit` bounds the payload; the check uses the header, before buffering.
    pub async fn read_frame_limited(&mut self, limit: usize) -> Result<Frame, ReadError> {
        loop {
            if let Some(len) = frame_len(&self.rbuf) {
                if len > limit {
                    return Err(ReadError::TooLarge { size: len as u64, limit: limit as u64, seq: self.rbuf[3] });
                }
                if let Some(frame) = self.try_frame() {
                    return Ok(frame);
                }
                self.grown |= len > KEEP;
                self.rbuf.reserve(HEADER + len - self.rbuf.len());
            } else {
                self.rbuf.reserve(HEADER);
            }
            self.fill().await?;
        }
    }

    /// Reads more from the socket into the read buffer: bytes as they come, or on a compressed
    /// connection the content of the next whole compressed frame. Cancel-safe (bytes only
    /// move from the socket into a buffer; a frame is inflated only once it is whole).
    async fn fill(&mut self) -> Result<(), ReadError> {
        let Some(c) = &mut self.compressed else {
            let n = self.stream.read_buf(&mut self.rbuf).await?;
            if n == 0 {
                return Err(ReadError::Closed);
            }
            self.read_count += n as u64;
            return Ok(());
        };
        loop {
            let before = self.rbuf.len();
            if c.decode_one(&mut self.rbuf)? {
                if self.rbuf.len() > before {
                    return Ok(());
                }
                continue;
            }
            c.raw.reserve(4096);
            let n = self.stream.read_buf(&mut c.raw).await?;
            if n == 0 {
                return Err(ReadError::Closed);
            }
            self.read_count += n as u64;
        }
    }

    /// Switches to the compressed protocol (after the OK that ends authentication, when
    /// CLIENT_COMPRESS was agreed): from now on both directions are compressed frames.
    pub fn start_compression(&mut self) {
        let unread = self.rbuf.split();
        self.compressed = Some(Box::new(Compressed::new(unread)));
    }

    pub fn is_compressed(&self) -> bool {
        self.compressed.is_some()
    }

    /// Waits until at least one byte is buffered. Cancel-safe, unlike [`Self::read_packet`]
    /// (which may hold the first frames of a long packet): `select!` on this, then read.
    pub async fn readable(&mut self) -> Result<(), ReadError> {
        if self.rbuf.is_empty() {
            self.rbuf.reserve(HEADER);
            self.fill().await?;
        }
        Ok(())
    }

    pub async fn read_frame(&mut self) -> Result<Frame, ReadError> {
        self.read_frame_limited(MAX_FRAME).await
    }

    /// A whole logical packet of at most `limit` payload bytes.
    pub async fn read_packet(&mut self, limit: usize) -> Result<Packet, ReadError> {
        let first = self.read_frame_limited(limit.min(MAX_FRAME)).await?;
        self.read_rest(first, limit).await
    }

    /// The logical packet that `first` (already read) starts, its continuation frames joined.
    pub async fn read_rest(&mut self, first: Frame, limit: usize) -> Result<Packet, ReadError> {
        let (seq, mut last_seq) = (first.seq(), first.seq());
        if !first.is_continued() {
            return Ok(Packet { seq, last_seq, payload: first.payload_bytes() });
        }
        let mut payload = BytesMut::from(first.payload());
        loop {
            // Checked at the header, as the server checks it (not on a compressed connection,
            // where the compressed frames carry the ids the server checks).
            let expected = last_seq.wrapping_add(1);
            if self.compressed.is_none() && self.next_seq().await? != expected {
                return Err(ReadError::OutOfOrder { expected });
            }
            let room = limit.saturating_sub(payload.len());
            let frame = self.read_frame_limited(room.min(MAX_FRAME)).await.map_err(|e| match e {
                ReadError::TooLarge { size, limit: _, seq } => {
                    ReadError::TooLarge { size: payload.len() as u64 + size, limit: limit as u64, seq }
                }
                other => other,
            })?;
            last_seq = frame.seq();
            payload.extend_from_slice(frame.payload());
            if !frame.is_continued() {
                return Ok(Packet { seq, last_seq, payload: payload.freeze() });
            }
        }
    }

    /// Queues a frame exactly as it was received (same sequence id).
    pub fn queue_frame(&mut self, frame: &Frame) {
        self.wbuf.extend_from_slice(&frame.raw);
    }

    /// Queues a frame with a new sequence id.
    pub fn queue_frame_with_seq(&mut self, frame: &Frame, seq: u8) {
        let start = self.wbuf.len();
        self.wbuf.extend_from_slice(&frame.raw);
        self.wbuf[start + 3] = seq;
    }

    /// Queues a logical packet, split into frames as needed; returns the next sequence id.
    pub fn queue_packet(&mut self, seq: u8, payload: &[u8]) -> u8 {
        frame_packet(&mut self.wbuf, seq, payload)
    }

    /// Queues packets framed beforehand ([`frame_packet`]), as they are.
    pub fn queue_framed(&mut self, frames: &[u8]) {
        self.wbuf.extend_from_slice(frames);
    }

    /// On a compressed connection, wraps what is queued into compressed frames of its own now,
    /// so that what is queued next starts a new frame (nothing on an uncompressed one). MariaDB
    /// answers only the first command of a compressed frame that holds several: a packet
    /// freshet sends ahead of a client's command (a replayed read, a held close) must not share
    /// the command's frame.
    pub fn end_frame(&mut self) {
        if let Some(c) = &mut self.compressed
            && !self.wbuf.is_empty()
        {
            c.encode(&self.wbuf);
            self.wbuf.clear();
        }
    }

    pub fn pending_write(&self) -> usize {
        self.wbuf.len()
    }

    pub async fn flush(&mut self) -> io::Result<()> {
        self.end_frame();
        let out = match &mut self.compressed {
            None => &mut self.wbuf,
            Some(c) => &mut c.out,
        };
        self.grown |= out.len() > KEEP;
        while out.has_remaining() {
            let n = self.stream.write(out).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.write_count += n as u64;
            out.advance(n);
        }
        self.stream.flush().await
    }

    /// Between commands: buffers that grew past [`KEEP`] for a long packet, and hold nothing
    /// now, are replaced by small ones (an idle session after a 16 MiB statement held it
    /// twice, read and written, for as long as it stayed open). Buffers that hold bytes (a
    /// pipelined command) are kept until a later call.
    pub fn give_back(&mut self) {
        if !self.grown {
            return;
        }
        let fresh = || BytesMut::with_capacity(16 * 1024);
        let mut held = false;
        for buf in [&mut self.rbuf, &mut self.wbuf] {
            if buf.is_empty() {
                *buf = fresh();
            } else {
                held = true;
            }
        }
        if let Some(c) = &mut self.compressed {
            for buf in [&mut c.raw, &mut c.out] {
                if buf.is_empty() {
                    *buf = BytesMut::new();
                } else {
                    held = true;
                }
            }
        }
        self.grown = held;
    }

    /// Shuts the write side down (sends FIN / TLS close_notify).
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.stream.shutdown().await
    }

    /// Bytes (read, written) on the socket since the previous call.
    pub fn take_counts(&mut self) -> (u64, u64) {
        (std::mem::take(&mut self.read_count), std::mem::take(&mut self.write_count))
    }
}

fn frame_len(buf: &[u8]) -> Option<usize> {
    (buf.len() >= HEADER).then(|| usize::from(buf[0]) | usize::from(buf[1]) << 8 | usize::from(buf[2]) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pair() -> (PacketIo<tokio::io::DuplexStream>, PacketIo<tokio::io::DuplexStream>) {
        let (a, b) = tokio::io::duplex(1 << 20);
        (PacketIo::new(a), PacketIo::new(b))
    }

    #[tokio::test]
    async fn large_packets_are_split_and_joined() {
        let (mut a, mut b) = pair().await;
        let payload: Vec<u8> = (0..MAX_FRAME * 2 + 10).map(|i| i as u8).collect();
        let writer = tokio::spawn(async move {
            assert_eq!(a.queue_packet(7, &payload), 10);
            a.flush().await.unwrap();
            payload
        });
        let packet = b.read_packet(64 << 20).await.unwrap();
        let payload = writer.await.unwrap();
        assert_eq!((packet.seq, packet.last_seq), (7, 9));
        assert_eq!(&packet.payload[..], &payload[..]);
    }

    #[tokio::test]
    async fn exact_multiple_of_frame_size_ends_with_empty_frame() {
        let (mut a, mut b) = pair().await;
        let writer = tokio::spawn(async move {
            a.queue_packet(0, &vec![1u8; MAX_FRAME]);
            a.flush().await.unwrap();
        });
        let first = b.read_frame().await.unwrap();
        assert!(first.is_continued());
        let last = b.read_frame().await.unwrap();
        assert_eq!(last.payload().len(), 0);
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn limit_is_checked_before_buffering() {
        let (mut a, mut b) = pair().await;
        // Only the header of a 10 MB frame is ever sent: the reader must refuse on the header.
        a.stream.write_all(&[0x80, 0x96, 0x98, 0]).await.unwrap();
        match b.read_packet(1 << 20).await {
            Err(ReadError::TooLarge { size, seq, .. }) => assert_eq!((size, seq), (10_000_000, 0)),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn eof_is_closed() {
        let (a, mut b) = pair().await;
        drop(a);
        assert!(matches!(b.read_frame().await, Err(ReadError::Closed)));
    }
}
