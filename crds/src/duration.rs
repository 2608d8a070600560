//! Kubernetes-style duration strings ("30s", "2m", "1m30s": Go's time.ParseDuration syntax, like
//! metav1.Duration) that can never panic the operator.
//!
//! kube's own `Duration` multiplies with `Duration::mul_f64` and adds with `+=`, both of which
//! panic on overflow: one stored object with "99999999999999999999h" aborted the operator on
//! every start. This parser uses checked integer arithmetic and saturates at [`Duration::CEILING`],
//! far above anything the schema or the operator accept, so sums of a few such values cannot
//! overflow either, and validation refuses them with a message instead.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The regex every duration field's schema carries, so the API server rejects "30" or "3 s".
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";

/// A non-negative duration parsed from a Go-style string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(std::time::Duration);

/// Why a string is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("empty duration")]
    Empty,
    #[error("duration {0:?}: expected a number followed by a unit: ns, us, ms, s, m or h (e.g. 30s, 1m30s)")]
    Syntax(String),
}

const NANOS_PER_SEC: u128 = 1_000_000_000;

impl Duration {
    /// Values above this (one year) are held as exactly this: absurd, refused by validation, and
    /// small enough that adding a handful of them never overflows.
    pub const CEILING: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

    pub const fn from_secs(secs: u64) -> Duration {
        Duration(std::time::Duration::from_secs(secs))
    }

    pub fn as_std(self) -> std::time::Duration {
        self.0
    }

    /// True when the written value was at or above [`Duration::CEILING`].
    pub fn is_saturated(self) -> bool {
        self.0 >= Self::CEILING
    }
}

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{00b5}s" | "\u{03bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3600 * NANOS_PER_SEC,
        _ => return None,
    })
}

/// Digits as a number, saturating (a 40-digit count is as absurd as a 20-digit one).
fn digits_value(digits: &str) -> u128 {
    digits.bytes().fold(0u128, |acc, b| {
        acc.saturating_mul(10)
            .saturating_add(u128::from(b.wrapping_sub(b'0')))
    })
}

/// Nanoseconds of one "<number><unit>" term, saturating.
fn term_nanos(int: &str, frac: &str, unit: u128) -> u128 {
    let whole = digits_value(int).saturating_mul(unit);
    // Beyond 18 fraction digits nothing is left at nanosecond precision even for hours.
    let frac = frac.get(..frac.len().min(18)).unwrap_or("");
    let scale = 10u128.saturating_pow(u32::try_from(frac.len()).unwrap_or(18));
    let part = digits_value(frac).saturating_mul(unit) / scale.max(1);
    whole.saturating_add(part)
}

impl FromStr for Duration {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() {
            return Err(ParseError::Empty);
        }
        let syntax = || ParseError::Syntax(text.chars().take(40).collect());
        let mut rest = text;
        let mut total: u128 = 0;
        while !rest.is_empty() {
            let int_end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let (int, after) = rest.split_at(int_end);
            if int.is_empty() {
                return Err(syntax());
            }
            let (frac, after) = match after.strip_prefix('.') {
                Some(f) => {
                    let end = f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len());
                    if end == 0 {
                        return Err(syntax());
                    }
                    f.split_at(end)
                }
                None => ("", after),
            };
            let unit_end = after
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(after.len());
            let (unit, after) = after.split_at(unit_end);
            let unit = unit_nanos(unit).ok_or_else(syntax)?;
            total = total.saturating_add(term_nanos(int, frac, unit));
            rest = after;
        }
        let ceiling = Self::CEILING.as_nanos();
        let nanos = total.min(ceiling);
        let secs = u64::try_from(nanos / NANOS_PER_SEC).unwrap_or(u64::MAX);
        let sub = u32::try_from(nanos % NANOS_PER_SEC).unwrap_or(0);
        Ok(Duration(std::time::Duration::new(secs, sub)))
    }
}

impl fmt::Display for Duration {
    /// Go's `time.Duration.String()` form: "1h2m3.5s", "250ms", "0s".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let secs = d.as_secs();
        let nanos = d.subsec_nanos();
        if secs == 0 {
            return match nanos {
                0 => write!(f, "0s"),
                n if n < 1_000 => write!(f, "{n}ns"),
                n if n < 1_000_000 => write!(f, "{}us", trim(n, 1_000)),
                n => write!(f, "{}ms", trim(n, 1_000_000)),
            };
        }
        let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if h > 0 || m > 0 {
            write!(f, "{m}m")?;
        }
        if nanos == 0 {
            write!(f, "{s}s")
        } else {
            let frac = format!("{nanos:09}");
            write!(f, "{s}.{}s", frac.trim_end_matches('0'))
        }
    }
}

/// `n / unit` with its fraction and no trailing zeros ("1.5", "250").
fn trim(n: u32, unit: u32) -> String {
    let whole = n / unit;
    let frac = n % unit;
    if frac == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let frac = format!("{frac:0width$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(d.min(Self::CEILING))
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        d.0
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // Not `format: duration`: that means ISO 8601, and the API server warns about it.
        schemars::json_schema!({ "type": "string" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> u128 {
        text.parse::<Duration>().unwrap().as_std().as_millis()
    }

    #[test]
    fn parses_like_go() {
        assert_eq!(ms("30s"), 30_000);
        assert_eq!(ms("1m30s"), 90_000);
        assert_eq!(ms("1.5h"), 5_400_000);
        assert_eq!(ms("250ms"), 250);
        assert_eq!(ms("0s"), 0);
        assert_eq!(
            "1500us".parse::<Duration>().unwrap().as_std().as_micros(),
            1500
        );
        assert_eq!("7ns".parse::<Duration>().unwrap().as_std().as_nanos(), 7);
        assert_eq!("1µs".parse::<Duration>().unwrap().as_std().as_nanos(), 1000);
    }

    #[test]
    fn absurd_values_saturate_instead_of_panicking() {
        for text in [
            "99999999999999999999h",
            "9999999999999999999999999999999999999999999h",
            "106751991167300h1ns",
            "8760h1s",
            "1.99999999999999999999999999h99999999999h",
        ] {
            let d: Duration = text.parse().unwrap();
            assert!(d.is_saturated(), "{text}");
            assert_eq!(d.as_std(), Duration::CEILING);
        }
        // A few saturated values still add up without overflow.
        let max = Duration::CEILING;
        assert!(max.checked_mul(64).is_some());
    }

    #[test]
    fn refuses_bad_syntax() {
        for text in [
            "", "30", "3 s", "-5s", "+5s", ".5s", "5.s", "1d", "s", "1ss", "1h-1s",
        ] {
            assert!(text.parse::<Duration>().is_err(), "{text:?} accepted");
        }
    }

    #[test]
    fn displays_and_round_trips() {
        for (text, shown) in [
            ("30s", "30s"),
            ("90s", "1m30s"),
            ("1h", "1h0m0s"),
            ("250ms", "250ms"),
            ("1.5s", "1.5s"),
            ("0s", "0s"),
            ("1500us", "1.5ms"),
            ("7ns", "7ns"),
        ] {
            let d: Duration = text.parse().unwrap();
            assert_eq!(d.to_string(), shown);
            assert_eq!(shown.parse::<Duration>().unwrap(), d);
        }
    }

    #[test]
    fn serde_is_a_string() {
        let d: Duration = serde_json::from_str("\"2m\"").unwrap();
        assert_eq!(d.as_std().as_secs(), 120);
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"2m0s\"");
        assert!(serde_json::from_str::<Duration>("\"2x\"").is_err());
        assert!(serde_json::from_str::<Duration>("5").is_err());
    }
}
