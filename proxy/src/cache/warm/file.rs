//! The file of hot keys (`<[warm] dir>/warm-keys`): what one run remembers for the next.
//!
//! Layout (little-endian): the magic `FRESHET-WARM` and a format version (u32), an FNV-1a
//! 64-bit checksum of everything after it, then the body: the database (a u32-length string),
//! the number of caches (u32) and per cache its name and query text (strings), the number of
//! keys (u32) and each key as a u32 length and a stored row (`freshet_replica::rowcode`, which
//! keeps every value's type and collation), most recently read first.
//!
//! Invariants: reading never trusts the file: a wrong magic, version, checksum or length, a
//! key that does not decode, or a file over [`MAX_FILE`] is an error (the caller warns and
//! starts cold), never a panic or an allocation larger than the file; a write is atomic
//! (a temporary file beside it, synced, then renamed over it), so a crash mid-write leaves
//! the previous file whole.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use freshet_dataflow::Key;
use freshet_replica::rowcode::{decode_row, encode_row};

const MAGIC: &[u8; 12] = b"FRESHET-WARM";
const VERSION: u32 = 1;
/// The header: magic, version, checksum.
const HEADER: usize = MAGIC.len() + 4 + 8;
/// A file larger than this is not read (at the defaults a file is a few MiB).
pub const MAX_FILE: u64 = 512 << 20;
/// The file's name in the state directory.
pub const FILE_NAME: &str = "warm-keys";

/// The remembered keys of one cache, most recently read first.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheKeys {
    pub name: String,
    /// The cache's query text: keys are only used for a cache of the same name and query.
    pub sql: String,
    pub keys: Vec<Key>,
}

/// What a file holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Saved {
    /// The database the caches read: a file written for another is foreign.
    pub database: String,
    pub caches: Vec<CacheKeys>,
}

/// Why a file was not used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("reading {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is {size} bytes, more than the {MAX_FILE} a file of hot keys may be")]
    TooLarge { path: PathBuf, size: u64 },
    #[error("{0}")]
    Malformed(&'static str),
}

/// The file's path in `dir`.
pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// Reads `path`; Ok(None) when there is no file (a first start).
pub fn read(path: &Path) -> Result<Option<Saved>, FileError> {
    let io = |source| FileError::Io { path: path.to_path_buf(), source };
    let size = match fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    if size > MAX_FILE {
        return Err(FileError::TooLarge { path: path.to_path_buf(), size });
    }
    let bytes = fs::read(path).map_err(io)?;
    decode(&bytes).map(Some)
}

/// Writes `saved` to `path` atomically.
pub fn write(path: &Path, saved: &Saved) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp)?;
    f.write_all(&encode(saved))?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = fs::File::open(dir)
    {
        // The rename itself durable; not every filesystem allows syncing a directory.
        let _ = d.sync_all();
    }
    Ok(())
}

pub fn encode(saved: &Saved) -> Vec<u8> {
    let mut body = Vec::new();
    put_str(&mut body, &saved.database);
    put_u32(&mut body, saved.caches.len());
    for c in &saved.caches {
        put_str(&mut body, &c.name);
        put_str(&mut body, &c.sql);
        put_u32(&mut body, c.keys.len());
        for k in &c.keys {
            let row = encode_row(k);
            put_u32(&mut body, row.len());
            body.extend_from_slice(&row);
        }
    }
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&fnv1a(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

pub fn decode(bytes: &[u8]) -> Result<Saved, FileError> {
    let bad = FileError::Malformed;
    if bytes.len() < HEADER || &bytes[..MAGIC.len()] != MAGIC {
        return Err(bad("not a file of hot keys (no FRESHET-WARM header)"));
    }
    let mut c = Cursor { b: &bytes[MAGIC.len()..] };
    if c.u32()? != VERSION {
        return Err(bad("written by another version of freshet"));
    }
    let sum = u64::from_le_bytes(c.take(8)?.try_into().map_err(|_| bad("short header"))?);
    if fnv1a(c.b) != sum {
        return Err(bad("checksum mismatch (truncated or damaged)"));
    }
    let database = c.string()?;
    let n = c.u32()?;
    let mut caches = Vec::new();
    for _ in 0..n {
        let name = c.string()?;
        let sql = c.string()?;
        let n_keys = c.u32()?;
        // Each key takes at least its 4-byte length: a count the rest cannot hold is a lie.
        if n_keys as usize > c.b.len() / 4 {
            return Err(bad("more keys than the file holds"));
        }
        let mut keys = Vec::with_capacity(n_keys as usize);
        for _ in 0..n_keys {
            let len = c.u32()? as usize;
            let row = decode_row(c.take(len)?).map_err(|_| bad("a key does not decode"))?;
            keys.push(row);
        }
        caches.push(CacheKeys { name, sql, keys });
    }
    if !c.b.is_empty() {
        return Err(bad("bytes after the last cache"));
    }
    Ok(Saved { database, caches })
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    // Lengths are bounded far below 4 GiB (keys per cache, query texts); saturate regardless.
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FileError> {
        if n > self.b.len() {
            return Err(FileError::Malformed("truncated"));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, FileError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self) -> Result<String, FileError> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| FileError::Malformed("a name that is not UTF-8"))
    }
}

fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use freshet_dataflow::{Collation, Value};

    fn sample() -> Saved {
        let k = |v: Vec<Value>| -> Key { v.into_boxed_slice() };
        Saved {
            database: "app".into(),
            caches: vec![
                CacheKeys {
                    name: "by_author".into(),
                    sql: "SELECT id FROM stories WHERE author = ?".into(),
                    keys: vec![k(vec![Value::Int(7)]), k(vec![Value::text("é", Collation::Utf8mb4GeneralCi)])],
                },
                CacheKeys { name: "empty".into(), sql: "SELECT 1".into(), keys: vec![] },
            ],
        }
    }

    #[test]
    fn round_trips() {
        let s = sample();
        assert_eq!(decode(&encode(&s)).unwrap(), s);
    }

    #[test]
    fn damaged_files_are_errors_not_panics() {
        let good = encode(&sample());
        // Every truncation, and every single-byte change, is refused.
        for n in 0..good.len() {
            assert!(decode(&good[..n]).is_err(), "truncated to {n}");
        }
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x41;
            assert!(decode(&b).is_err(), "byte {i} changed");
        }
        assert!(decode(b"").is_err());
        assert!(decode(b"garbage garbage garbage garbage").is_err());
        // A consistent checksum over a lying count: still refused, without a huge allocation.
        let mut body = Vec::new();
        put_str(&mut body, "app");
        put_u32(&mut body, 1);
        put_str(&mut body, "c");
        put_str(&mut body, "q");
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        let mut f = MAGIC.to_vec();
        f.extend_from_slice(&VERSION.to_le_bytes());
        f.extend_from_slice(&fnv1a(&body).to_le_bytes());
        f.extend_from_slice(&body);
        assert!(matches!(decode(&f), Err(FileError::Malformed("more keys than the file holds"))));
    }

    #[test]
    fn writes_atomically_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("freshet-warm-file-{}", std::process::id()));
        let path = path_in(&dir);
        assert!(read(&path).unwrap().is_none(), "no file: a first start");
        write(&path, &sample()).unwrap();
        assert_eq!(read(&path).unwrap().unwrap(), sample());
        assert!(!path.with_extension("tmp").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
