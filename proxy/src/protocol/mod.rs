//! The MySQL client/server protocol as far as a relay needs it.
//!
//! Layered like mini-redis: [`io::PacketIo`] owns a connection's buffers and frames packets
//! (cancel-safe), [`cursor::Cursor`] reads the protocol's integer and string encodings, and one
//! module per message kind ([`handshake`], [`response`]) parses and encodes its packets. The
//! same code serves both sides: freshet is a server to applications and a client to upstream.
//!
//! References for the formats: the MySQL internals manual ("Client/Server Protocol") and
//! MariaDB's protocol documentation; MariaDB's extended capabilities live in the handshake's
//! filler bytes.

pub mod consts;
pub mod cursor;
pub mod handshake;
pub mod io;
pub mod response;

pub use consts::{Capabilities, Command, StatusFlags};
pub use io::{Frame, PacketIo};
