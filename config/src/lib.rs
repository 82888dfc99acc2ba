//! freshet-config (work in progress).
