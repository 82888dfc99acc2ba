//! Units that config values are written in: byte sizes ("256MiB") and durations ("1s").
//!
//! Both parse from human-written strings and print back in the same form, so that error
//! messages and `SHOW FRESHET STATUS` show what the user wrote rather than a raw integer.

use std::fmt;
use std::time::Duration;

/// A number of bytes. Written as an integer or with a unit: B, KiB, MiB, GiB, TiB (powers of
/// 1024) or KB, MB, GB, TB (powers of 1000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const fn kib(n: u64) -> Self {
        ByteSize(n << 10)
    }

    pub const fn mib(n: u64) -> Self {
        ByteSize(n * 1024 * 1024)
    }

    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (number, unit) = split_number(s)?;
        let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            "tib" => 1 << 40,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            "tb" => 1_000_000_000_000,
            other => {
                return Err(format!("unknown size unit {other:?} in {s:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"));
            }
        };
        number.checked_mul(multiplier).map(ByteSize).ok_or_else(|| format!("size {s:?} is too large"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        for (unit, size) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        write!(f, "{}B", self.0)
    }
}

/// Parses a duration: an integer followed by a unit, one of us, ms, s, m, h.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (number, unit) = split_number(s)?;
    let duration = match unit {
        "us" => Duration::from_micros(number),
        "ms" => Duration::from_millis(number),
        "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.saturating_mul(60)),
        "h" => Duration::from_secs(number.saturating_mul(3600)),
        "" => return Err(format!("duration {s:?} needs a unit (us, ms, s, m or h), e.g. \"1s\"")),
        other => return Err(format!("unknown duration unit {other:?} in {s:?} (use us, ms, s, m or h)")),
    };
    Ok(duration)
}

/// Formats a duration the way `parse_duration` reads it, in the largest exact unit.
pub fn format_duration(d: Duration) -> String {
    let micros = d.as_micros();
    for (unit, size) in [("h", 3_600_000_000u128), ("m", 60_000_000), ("s", 1_000_000), ("ms", 1_000)] {
        if micros >= size && micros.is_multiple_of(size) {
            return format!("{}{unit}", micros / size);
        }
    }
    format!("{micros}us")
}

fn split_number(s: &str) -> Result<(u64, &str), String> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if digits == 0 {
        return Err(format!("{s:?} does not start with a number"));
    }
    let number = s[..digits].parse::<u64>().map_err(|_| format!("number in {s:?} is too large"))?;
    Ok((number, s[digits..].trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!("256MiB".parse::<ByteSize>(), Ok(ByteSize(256 << 20)));
        assert_eq!("1 GiB".parse::<ByteSize>(), Ok(ByteSize(1 << 30)));
        assert_eq!("4096".parse::<ByteSize>(), Ok(ByteSize(4096)));
        assert_eq!("2MB".parse::<ByteSize>(), Ok(ByteSize(2_000_000)));
        assert!("12 parsecs".parse::<ByteSize>().is_err());
        assert!("MiB".parse::<ByteSize>().is_err());
        assert!("99999999999999999999".parse::<ByteSize>().is_err());
        assert!("20000000TiB".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(256 << 20).to_string(), "256MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5 fortnights").is_err());
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
    }
}
