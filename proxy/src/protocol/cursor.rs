//! Reading the protocol's encodings from a byte slice without panicking.
//!
//! Every read checks the remaining length and returns [`Truncated`] instead of indexing past
//! the end: packets come from untrusted clients.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated;

pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        let end = self.pos.checked_add(n).ok_or(Truncated)?;
        let out = self.buf.get(self.pos..end).ok_or(Truncated)?;
        self.pos = end;
        Ok(out)
    }

    pub fn skip(&mut self, n: usize) -> Result<(), Truncated> {
        self.bytes(n).map(|_| ())
    }

    pub fn u8(&mut self) -> Result<u8, Truncated> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, Truncated> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<u32, Truncated> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, Truncated> {
        let b = self.bytes(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    /// A length-encoded integer. 0xfb (NULL) and 0xff (not an integer) are errors here.
    pub fn lenenc(&mut self) -> Result<u64, Truncated> {
        let first = self.u8()?;
        let width = match first {
            0..=0xfa => return Ok(u64::from(first)),
            0xfc => 2,
            0xfd => 3,
            0xfe => 8,
            _ => return Err(Truncated),
        };
        let b = self.bytes(width)?;
        let mut v = [0u8; 8];
        v[..width].copy_from_slice(b);
        Ok(u64::from_le_bytes(v))
    }

    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8], Truncated> {
        let n = usize::try_from(self.lenenc()?).map_err(|_| Truncated)?;
        self.bytes(n)
    }

    /// Bytes up to a NUL, which is consumed and not returned.
    pub fn nul_terminated(&mut self) -> Result<&'a [u8], Truncated> {
        let rest = self.remaining();
        let n = rest.iter().position(|&b| b == 0).ok_or(Truncated)?;
        self.pos += n + 1;
        Ok(&rest[..n])
    }
}

pub fn put_lenenc(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=0xfa => out.push(v as u8),
        0xfb..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(v as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(v as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_round_trips() {
        for v in [0u64, 250, 251, 0xffff, 0x1_0000, 0xff_ffff, 0x100_0000, u64::MAX] {
            let mut out = Vec::new();
            put_lenenc(&mut out, v);
            assert_eq!(Cursor::new(&out).lenenc(), Ok(v));
        }
    }

    #[test]
    fn truncated_input_is_an_error() {
        assert_eq!(Cursor::new(&[0xfc, 1]).lenenc(), Err(Truncated));
        assert_eq!(Cursor::new(&[0xfb]).lenenc(), Err(Truncated));
        assert_eq!(Cursor::new(b"abc").nul_terminated(), Err(Truncated));
        assert_eq!(Cursor::new(&[5, 1, 2]).lenenc_bytes(), Err(Truncated));
        assert_eq!(Cursor::new(&[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).lenenc_bytes(), Err(Truncated));
    }
}
