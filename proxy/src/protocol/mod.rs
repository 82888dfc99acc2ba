//! The MySQL client/server protocol as far as a relay needs it.
//!
//! Layered like mini-redis: [`io::PacketIo`] owns a connection's buffers and frames packets
//! (cancel-safe), [`cursor::Cursor`] reads the protocol's integer and string encodings, and one
//! module per message kind ([`handshake`], [`response`], [`column`](mod@column)) parses and
//! encodes its packets. The same code serves both sides: freshet is a server to applications
//! and a client to upstream.
//!
//! References for the formats: the MySQL internals manual ("Client/Server Protocol") and
//! MariaDB's protocol documentation; MariaDB's extended capabilities live in the handshake's
//! filler bytes.

pub mod column;
pub mod compress;
pub mod consts;
pub mod cursor;
pub mod handshake;
pub mod io;
pub mod response;
pub mod synth;

pub use consts::{Capabilities, Command, StatusFlags};
pub use io::{Frame, PacketIo};

#[cfg(test)]
mod fuzz {
    //! Every parser of bytes from a peer, fed arbitrary bytes: errors are fine, panics are not.

    use proptest::prelude::*;

    use super::consts::Capabilities;
    use super::handshake::{ClientHandshake, ServerHandshake};
    use super::response;

    fn caps() -> impl Strategy<Value = Capabilities> {
        any::<u64>().prop_map(Capabilities)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn handshake_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), caps in caps()) {
            if let Ok(hs) = ServerHandshake::parse(&bytes) {
                let again = ServerHandshake::parse(&hs.with_capabilities(caps)).expect("rewritten handshake parses");
                let expected = if hs.is_mariadb() && again.capabilities.0 & Capabilities::MYSQL == 0 { caps.0 } else { caps.0 & 0xffff_ffff };
                prop_assert_eq!(again.capabilities.0 & 0xffff_ffff, expected & 0xffff_ffff);
            }
            if let Ok(hs) = ClientHandshake::parse(&bytes) {
                let _ = hs.with_capabilities(caps);
                let _ = hs.ssl_request(caps);
            }
            let _ = ClientHandshake::is_ssl_request(&bytes);
        }

        #[test]
        fn response_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), caps in caps()) {
            let _ = response::ok_status(&bytes, caps);
            let _ = response::terminator_status(&bytes, caps);
            let _ = response::is_terminator(&bytes, caps);
            if let Ok(err) = response::ErrPacket::parse(&bytes) {
                let _ = err.encode();
            }
        }
    }
}
