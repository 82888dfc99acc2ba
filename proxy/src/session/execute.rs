//! What the server knows of a routed prepared statement's parameter types. A client sends an
//! execute's types only when they change (the new-params-bound flag); the server takes an
//! execute without them as "the types of the last execute I saw". Executes answered from a
//! view never reach the server, so an execute relayed after them (in a transaction, on a
//! miss) may leave out types the server never saw: it answered error 1210. Such an execute is
//! sent with the types freshet remembers for the statement ([`super::cached::PreparedRoute`]).
//!
//! Owns: `Session::execute_for_server`, [`with_types`].

use bytes::Bytes;

use super::Session;
use crate::cache::params::{RefusedTypes, refused_types};
use crate::protocol::column::types as ty;

/// Where an execute's new-params-bound flag is for a statement of `params` parameters:
/// `[0x17][id u32][flags u8][iterations u32][null bitmap][flag u8][types][values]`.
fn bound_flag_at(params: usize) -> usize {
    10 + params.div_ceil(8)
}

/// `payload` (an execute of a statement of `params` parameters that left its types out) with
/// `types` bound; None if the payload is too short or the types do not fit.
pub(super) fn with_types(payload: &[u8], params: usize, types: &[(u8, u8)]) -> Option<Bytes> {
    let at = bound_flag_at(params);
    if types.len() != params || payload.get(at) != Some(&0) {
        return None;
    }
    let mut out = Vec::with_capacity(payload.len() + 2 * params);
    out.extend_from_slice(&payload[..at]);
    out.push(1);
    out.extend(types.iter().flat_map(|&(t, f)| [t, f]));
    out.extend_from_slice(&payload[at + 1..]);
    Some(out.into())
}

/// A routed statement's remembered types before an execute that sent types (or was sent with
/// them) was relayed.
pub(super) struct TypesBefore {
    id: u32,
    types: Vec<(u8, u8)>,
    server_has_types: bool,
    /// The types the execute sent of its own (not freshet's), if it did.
    sent: Option<Vec<(u8, u8)>>,
    /// `PreparedRoute::last_params` and `params_in_sync`.
    last_params: Option<Vec<Option<(u8, u8)>>>,
    params_in_sync: bool,
}

impl Session {
    /// An execute about to be relayed, as the server needs it: with its types where it left
    /// them out and the server has not seen any for the statement. Notes what the server
    /// sees: types sent, the statement's remembered types follow them.
    pub(super) fn execute_for_server(&mut self, payload: Bytes) -> Bytes {
        self.types_before = None;
        let Some(id) = payload.get(1..5).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) else { return payload };
        let Some(stmt) = self.statements.get_mut(&id) else { return payload };
        let params = usize::from(stmt.params);
        let Some(route) = stmt.route.as_mut() else { return payload };
        if params == 0 {
            return payload;
        }
        let at = bound_flag_at(params);
        let sent = match payload.get(at) {
            Some(1) => payload.get(at + 1..at + 1 + 2 * params).map(|t| t.chunks_exact(2).map(|tf| (tf[0], tf[1])).collect()),
            _ => None,
        };
        self.types_before = Some(TypesBefore {
            id,
            types: route.types.clone(),
            server_has_types: route.server_has_types,
            sent,
            last_params: route.last_params.clone(),
            params_in_sync: route.params_in_sync,
        });
        let payload = match payload.get(at) {
            Some(1) => {
                if let Some(sent) = payload.get(at + 1..at + 1 + 2 * params) {
                    route.types.clear();
                    route.types.extend(sent.chunks_exact(2).map(|tf| (tf[0], tf[1])));
                }
                route.server_has_types = true;
                route.types_unsure = false;
                payload
            }
            // Not through the id of the statement prepared last: the server refuses an execute
            // without types there (1835), whatever it knows. Nor when the server may hold types
            // other than the route's (`types_unsure`): it reads the execute with those.
            Some(0) if !route.server_has_types && !route.types_unsure && id != u32::MAX => match with_types(&payload, params, &route.types)
            {
                Some(typed) => {
                    route.server_has_types = true;
                    typed
                }
                None => payload,
            },
            _ => payload,
        };
        // The server reads this execute as a direct session's would be read: it leaves long
        // data read as a direct session's.
        route.params_in_sync = true;
        route.last_params = (!route.types_unsure).then(|| {
            let nulls = payload.get(10..10 + params.div_ceil(8)).unwrap_or_default();
            let null = |i: usize| nulls.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
            route.types.iter().enumerate().map(|(i, &t)| (!null(i)).then_some(t)).collect()
        });
        payload
    }

    /// The server refused the execute just relayed before running it. For a malformed packet
    /// (1835) or a type it does not know (1210) it keeps the types it had, and so does the
    /// route. A value shorter than its type is refused with the same 1210 after the types
    /// were taken: then the sent ones are the server's. Which it was is told by the types
    /// ([`refused_types`]); when that is not certain, the route does not say what the server
    /// holds (`types_unsure`).
    pub(super) fn execute_refused(&mut self, err: &[u8]) {
        let code = err.get(1..3).map(|c| u16::from_le_bytes([c[0], c[1]]));
        let Some(before) = self.types_before.take() else { return };
        if !matches!(code, Some(WRONG_ARGUMENTS | MALFORMED_PACKET)) {
            return;
        }
        let Some(route) = self.statements.get_mut(&before.id).and_then(|s| s.route.as_mut()) else { return };
        match before.sent.filter(|_| code == Some(WRONG_ARGUMENTS)).map(|sent| (refused_types(&sent), sent)) {
            Some((RefusedTypes::Taken, sent)) => {
                route.types = sent;
                route.server_has_types = true;
            }
            taken => {
                route.types = before.types;
                route.server_has_types = before.server_has_types;
                route.types_unsure = matches!(taken, Some((RefusedTypes::Unsure, _)));
                // Refused before it read a value: the server is where it was.
                route.last_params = before.last_params;
                route.params_in_sync = before.params_in_sync;
            }
        }
    }
}

impl Session {
    /// At long data (`payload`) for a routed statement whose executes answered here left the
    /// server reading long data otherwise than the client's last execute left a direct
    /// session (`PreparedRoute::params_in_sync`): an execute of the statement, to be sent
    /// ahead of the long data, that gives each parameter the client's last type, NULL where
    /// its last value was NULL and a zero value of the type elsewhere. Its reply is dropped.
    /// None when nothing needs sending, or the client's last state is not known.
    pub(super) fn long_data_types(&mut self, payload: &[u8]) -> Option<Vec<u8>> {
        let id = payload.get(1..5).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))?;
        let id = self.statements.id(id)?;
        let route = self.statements.get_mut(&id)?.route.as_mut()?;
        if route.params_in_sync {
            return None;
        }
        let last = route.last_params.clone()?;
        // The execute sends the client's types: the server holds them after it.
        route.params_in_sync = true;
        route.server_has_types = true;
        let mut nulls = vec![0u8; last.len().div_ceil(8)];
        let (mut types, mut values) = (Vec::with_capacity(2 * last.len()), Vec::new());
        for (i, (state, &(t, flags))) in last.iter().zip(&route.types).enumerate() {
            types.extend([t, flags]);
            match state {
                None => nulls[i / 8] |= 1 << (i % 8),
                Some(_) => values.extend_from_slice(zero_value(t)),
            }
        }
        Some([&[0x17][..], &id.to_le_bytes(), &[0], &1u32.to_le_bytes(), &nulls, &[1], &types, &values].concat())
    }
}

/// A value of type `t` in an execute: zero, the empty string, the zero date.
fn zero_value(t: u8) -> &'static [u8] {
    match t {
        ty::TINY => &[0],
        ty::SHORT | ty::YEAR => &[0; 2],
        ty::LONG | ty::INT24 | ty::FLOAT => &[0; 4],
        ty::LONGLONG | ty::DOUBLE => &[0; 8],
        ty::DECIMAL | ty::NEWDECIMAL => &[1, b'0'],
        // A length of zero: the zero date or time, the empty string.
        _ => &[0],
    }
}

/// ER_WRONG_ARGUMENTS: the server's answer to an execute with a type it does not know.
const WRONG_ARGUMENTS: u16 = 1210;
/// ER_MALFORMED_PACKET.
const MALFORMED_PACKET: u16 = 1835;
