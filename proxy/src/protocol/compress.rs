//! The compressed protocol's framing (CLIENT_COMPRESS, zlib), under the packet framing of
//! [`super::io`].
//!
//! After authentication, a compressed connection carries compressed frames: a 7-byte header
//! (3-byte length of the frame's payload, a compressed sequence id, 3-byte length before
//! compression, 0 when the payload is stored as is) around bytes that, once inflated, are
//! ordinary packet frames — possibly several, or part of one. [`Compressed`] turns the bytes
//! read from the socket back into that packet stream and wraps what is written, so the codec
//! above, the relay and the hit path work on plain packet frames and do not know.
//!
//! Sequence ids: each compressed frame has its own, counting from 0 at each command as the
//! packet sequence does; a reply's frames continue from the last one read. Whoever starts a
//! command (its first packet has sequence id 0) starts again from 0.
//!
//! Bounds: a compressed frame declares at most 2^24-1 bytes both ways; inflating to anything
//! but what it declared is an error, and a declared size that deflate cannot reach from the
//! frame's length (past ~1032:1) is refused before it is allocated.

use std::io;

use bytes::{Buf, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The compressed frame header: compressed length, sequence id, uncompressed length.
const HEADER: usize = 7;
/// Payloads shorter than this are sent stored (as MySQL and MariaDB do): zlib would only add.
const MIN_COMPRESS: usize = 50;
/// The most one compressed frame may carry.
const MAX_PAYLOAD: usize = 0xff_ffff;

/// The compression state of one connection.
pub struct Compressed {
    /// Bytes read from the socket that do not yet make a whole compressed frame.
    pub raw: BytesMut,
    /// Sequence id of the next compressed frame written.
    seq: u8,
    /// Wrapped bytes waiting to be written.
    pub out: BytesMut,
}

impl Compressed {
    /// Starts compression; `unread` are bytes already read from the socket after the last
    /// uncompressed packet (they are compressed frames).
    pub fn new(unread: BytesMut) -> Self {
        Compressed { raw: unread, seq: 0, out: BytesMut::new() }
    }

    /// Inflates the next whole compressed frame in `raw` onto `packets`. Ok(false) when more
    /// bytes are needed.
    pub fn decode_one(&mut self, packets: &mut BytesMut) -> io::Result<bool> {
        if self.raw.len() < HEADER {
            return Ok(false);
        }
        let len = u24(&self.raw[0..3]);
        if self.raw.len() < HEADER + len {
            return Ok(false);
        }
        let seq = self.raw[3];
        let inflated_len = u24(&self.raw[4..7]);
        self.raw.advance(HEADER);
        let payload = self.raw.split_to(len);
        if inflated_len == 0 {
            packets.extend_from_slice(&payload);
        } else {
            inflate(&payload, inflated_len, packets)?;
        }
        self.seq = seq.wrapping_add(1);
        Ok(true)
    }

    /// Wraps `packets` (whole packet frames) into compressed frames in `out`.
    pub fn encode(&mut self, packets: &[u8]) {
        if packets.get(3) == Some(&0) {
            // A new command: its compressed frames count from 0 as well.
            self.seq = 0;
        }
        for chunk in packets.chunks(MAX_PAYLOAD) {
            let start = self.out.len();
            self.out.extend_from_slice(&[0; HEADER]);
            let stored = chunk.len() < MIN_COMPRESS || !deflate(chunk, &mut self.out);
            if stored {
                self.out.truncate(start + HEADER);
                self.out.extend_from_slice(chunk);
            }
            let len = self.out.len() - start - HEADER;
            self.out[start..start + 3].copy_from_slice(&(len as u32).to_le_bytes()[..3]);
            self.out[start + 3] = self.seq;
            let inflated = if stored { 0 } else { chunk.len() as u32 };
            self.out[start + 4..start + 7].copy_from_slice(&inflated.to_le_bytes()[..3]);
            self.seq = self.seq.wrapping_add(1);
        }
    }
}

fn u24(b: &[u8]) -> usize {
    usize::from(b[0]) | usize::from(b[1]) << 8 | usize::from(b[2]) << 16
}

fn bad(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

/// Inflates exactly `expected` bytes from `input` onto `out`; more or fewer is an error.
fn inflate(input: &[u8], expected: usize, out: &mut BytesMut) -> io::Result<()> {
    // Deflate cannot expand more than ~1032:1; a frame that claims more is lying, and is
    // refused before its claim is allocated.
    if expected > input.len().saturating_mul(1032).saturating_add(64) {
        return Err(bad("compressed packet declares more than it can hold"));
    }
    let start = out.len();
    out.resize(start + expected, 0);
    let mut z = Decompress::new(true);
    let status = z.decompress(input, &mut out[start..], FlushDecompress::Finish).map_err(|_| bad("corrupt compressed packet"))?;
    if status != Status::StreamEnd || z.total_out() as usize != expected {
        out.truncate(start);
        return Err(bad("compressed packet inflates to a different length than declared"));
    }
    Ok(())
}

/// Deflates `input` onto `out`; false (and `out` to be truncated by the caller) when the
/// result would not be smaller, or zlib failed (the frame is then stored as it is).
fn deflate(input: &[u8], out: &mut BytesMut) -> bool {
    let start = out.len();
    let mut z = Compress::new(Compression::default(), true);
    out.resize(start + input.len(), 0);
    if !matches!(z.compress(input, &mut out[start..], FlushCompress::Finish), Ok(Status::StreamEnd)) {
        return false;
    }
    out.truncate(start + z.total_out() as usize);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(payloads: &[(u8, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (seq, p) in payloads {
            out.extend_from_slice(&(p.len() as u32).to_le_bytes()[..3]);
            out.push(*seq);
            out.extend_from_slice(p);
        }
        out
    }

    #[test]
    fn round_trip_small_stored_and_large_deflated() {
        let big = vec![b'x'; 100_000];
        let packets = frames(&[(0, b"\x03SELECT 1"), (1, &big)]);
        let mut writer = Compressed::new(BytesMut::new());
        writer.encode(&packets[..13]);
        writer.encode(&packets[13..]);
        assert_eq!(u24(&writer.out[4..7]), 0, "13 bytes are stored");
        let mut reader = Compressed::new(writer.out.clone());
        let mut back = BytesMut::new();
        while reader.decode_one(&mut back).unwrap() {}
        assert_eq!(&back[..], &packets[..]);
        assert!(writer.out.len() < 2_000, "100 KB of x deflate well: {}", writer.out.len());
        assert_eq!(reader.seq, 2, "replies continue after the last frame read");
    }

    #[test]
    fn a_new_command_counts_from_zero() {
        let mut c = Compressed::new(BytesMut::new());
        c.seq = 5;
        c.encode(&frames(&[(0, b"\x0e")]));
        assert_eq!(c.out[3], 0);
        c.encode(&frames(&[(1, b"\x00\x00\x00\x02\x00\x00\x00")]));
        assert_eq!(c.out[HEADER + 5 + 3], 1);
    }

    #[test]
    fn lies_about_the_length_are_errors_not_allocations() {
        let mut c = Compressed::new(BytesMut::new());
        c.encode(&frames(&[(1, &[7u8; 1000])]));
        let mut raw = c.out.clone();
        raw[4..7].copy_from_slice(&[10, 0, 0]); // declares 10 bytes, inflates to 1004
        let mut reader = Compressed::new(raw);
        assert!(reader.decode_one(&mut BytesMut::new()).is_err());
        let mut truncated = Compressed::new(BytesMut::from(&c.out[..10]));
        assert!(!truncated.decode_one(&mut BytesMut::new()).unwrap(), "waits for the rest");
    }

    mod fuzz {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            // A zlib stream costs ~300 KB of state to set up, unoptimised: fewer cases than the
            // other parsers' fuzzing.
            #![proptest_config(ProptestConfig::with_cases(300))]

            /// Arbitrary bytes from a peer: an error or a wait, never a panic, and never more
            /// inflated than the frames declared.
            #[test]
            fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
                let mut c = Compressed::new(BytesMut::from(&bytes[..]));
                let mut out = BytesMut::new();
                while let Ok(true) = c.decode_one(&mut out) {}
                prop_assert!(out.len() <= bytes.len() * 1032 + 64);
            }

            #[test]
            fn whatever_is_encoded_decodes_to_itself(packets in proptest::collection::vec(any::<u8>(), 0..5000), zeros in 0usize..3000) {
                let mut data = packets.clone();
                data.extend(std::iter::repeat_n(0u8, zeros));
                let mut w = Compressed::new(BytesMut::new());
                w.encode(&data);
                let mut r = Compressed::new(w.out.clone());
                let mut out = BytesMut::new();
                while r.decode_one(&mut out).unwrap() {}
                prop_assert_eq!(&out[..], &data[..]);
            }
        }
    }
}
