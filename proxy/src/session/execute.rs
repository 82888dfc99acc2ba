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
        if sent.is_some() || !route.server_has_types {
            self.types_before = Some(TypesBefore { id, types: route.types.clone(), server_has_types: route.server_has_types, sent });
        }
        match payload.get(at) {
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
        }
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
            }
        }
    }
}

/// ER_WRONG_ARGUMENTS: the server's answer to an execute with a type it does not know.
const WRONG_ARGUMENTS: u16 = 1210;
/// ER_MALFORMED_PACKET.
const MALFORMED_PACKET: u16 = 1835;
