//! Egress cases by protocol and by declared case. A measurement's protocol is
//! `parameters["protocol"]` (tcp-stream when absent: results from before the protocols); the
//! operator expands a case with a sweep into measurements sharing `parameters["case"]` and
//! differing in `parameters["messageSize"]` and/or `parameters["streams"]`. This module groups
//! them back, says which parameters were swept and orders the rows by the swept values.
//! Invariants: every measurement is in exactly one group; nothing trusts a parameter (a value
//! that does not parse as a positive count of at most [`MAX_SWEPT`] is kept as text, ordered
//! after the numbers and never drawn); names that come from a result never choose a file name
//! ([`file_tag`] is one of a fixed set). Pure.

use crds::result::Measurement;
use protocol::Protocol;

use crate::text;

pub const PROTOCOL: &str = "protocol";
pub const CASE: &str = "case";
pub const MESSAGE_SIZE: &str = "messageSize";
pub const STREAMS: &str = "streams";
/// The protocol of a measurement that names none.
pub const TCP_STREAM: &str = "tcp-stream";
/// Largest swept value drawn (bytes or streams); larger ones are shown as text only.
pub const MAX_SWEPT: u64 = 1 << 40;

/// The protocol a measurement ran.
pub fn protocol(m: &Measurement) -> &str {
    m.parameters
        .get(PROTOCOL)
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .unwrap_or(TCP_STREAM)
}

/// Said for a measurement whose node pair is not in its parameters.
pub const NOT_RECORDED: &str = "nodes not recorded";

/// Where a case measured, "client node->server node" (an external server by its address),
/// from its parameters; None when a node is not recorded. Text from a result: shown only
/// through the report's escaping.
pub fn measured_on(m: &Measurement) -> Option<String> {
    let param = |k: &str| {
        m.parameters
            .get(k)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    };
    let client = param("clientNode")?;
    let server = match param("path") {
        Some("external") => format!("external {}", param("serverAddress").unwrap_or("server")),
        _ => param("serverNode")?.to_string(),
    };
    Some(format!("{client}->{server}"))
}

/// Why two measurements cannot be set side by side: they ran on different node pairs or
/// paths, or one's nodes are not known ("not comparable: nb-node1->nb-node1 vs
/// nb-node2->nb-node0"). None when both measured the same known pair.
pub fn not_comparable(m: &Measurement, other: &Measurement) -> Option<String> {
    let shown = |x: Option<String>| x.unwrap_or_else(|| NOT_RECORDED.into());
    match (measured_on(m), measured_on(other)) {
        (Some(a), Some(b)) if a == b => None,
        (a, b) => Some(format!("not comparable: {} vs {}", shown(a), shown(b))),
    }
}

/// A protocol this CLI knows (`protocol::Protocol`, by its exact wire name).
fn known(protocol: &str) -> Option<Protocol> {
    protocol.parse().ok()
}

/// The main figures of a protocol, headline first ([`Protocol::main_figures`]); none for a
/// protocol this CLI does not know.
pub fn main_figures(protocol: &str) -> &'static [&'static str] {
    known(protocol).map_or(&[], Protocol::main_figures)
}

/// A known protocol's name, fit for a file name; None for any other text.
pub fn file_tag(protocol: &str) -> Option<&'static str> {
    known(protocol).map(Protocol::as_str)
}

/// The measurements of one declared case (several when it was swept), in index order.
#[derive(Clone, Debug)]
pub struct Group<'a> {
    /// The declared case (`parameters["case"]`), else the measurement's name.
    pub case: &'a str,
    pub protocol: &'a str,
    pub members: Vec<&'a Measurement>,
}

/// The case groups of some measurements (given in index order), in order of first appearance.
/// Measurements without `parameters["case"]` are a group each.
pub fn groups<'a>(measurements: &[&'a Measurement]) -> Vec<Group<'a>> {
    let mut out: Vec<Group<'a>> = vec![];
    for &m in measurements {
        let declared = m.parameters.get(CASE).map(String::as_str);
        let proto = protocol(m);
        let same = |g: &&mut Group<'a>| {
            declared.is_some_and(|c| g.case == c)
                && g.protocol == proto
                && g.members
                    .first()
                    .is_some_and(|f| f.parameters.contains_key(CASE))
        };
        match out.iter_mut().find(same) {
            Some(g) => g.members.push(m),
            None => out.push(Group {
                case: declared.unwrap_or(&m.name),
                protocol: proto,
                members: vec![m],
            }),
        }
    }
    out
}

/// A parameter a sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swept {
    MessageSize,
    Streams,
}

impl Swept {
    pub fn key(self) -> &'static str {
        match self {
            Swept::MessageSize => MESSAGE_SIZE,
            Swept::Streams => STREAMS,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Swept::MessageSize => "message size",
            Swept::Streams => "streams",
        }
    }

    /// A value as people read it: "64 B", "1 KiB", "1500 B"; streams as the number.
    pub fn show(self, v: u64) -> String {
        match self {
            Swept::MessageSize => text::bytes(v),
            Swept::Streams => v.to_string(),
        }
    }

    /// Sizes are drawn on a log2 axis; streams too when they span a factor of 8 or more.
    pub fn log2(self, values: impl Iterator<Item = u64>) -> bool {
        match self {
            Swept::MessageSize => true,
            Swept::Streams => {
                let (min, max) = values.fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
                min > 0 && max / min >= 8
            }
        }
    }
}

/// A swept value: a decimal count with an optional k/M/G or Ki/Mi/Gi suffix, 1 ..= MAX_SWEPT.
pub fn parse_count(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, factor) = [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("k", 1000),
        ("K", 1000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ]
    .iter()
    .find_map(|(s, f)| t.strip_suffix(s).map(|d| (d, *f)))
    .unwrap_or((t, 1));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v = digits.parse::<u64>().ok()?.checked_mul(factor)?;
    (1..=MAX_SWEPT).contains(&v).then_some(v)
}

/// One measurement of a sweep with its swept values (one per axis; None: did not parse).
#[derive(Clone, Debug)]
pub struct Row<'a> {
    pub m: &'a Measurement,
    pub values: Vec<Option<u64>>,
}

impl Row<'_> {
    /// The raw text of an axis' parameter ("-" when absent).
    pub fn raw(&self, axis: Swept) -> &str {
        self.m
            .parameters
            .get(axis.key())
            .map_or("-", String::as_str)
    }
}

/// A case group of two or more measurements: what it varies, and its rows ordered by the
/// swept values (message size first, then streams; values that do not parse last).
#[derive(Clone, Debug)]
pub struct Sweep<'a> {
    /// The parameters that differ between its measurements (possibly none).
    pub axes: Vec<Swept>,
    pub rows: Vec<Row<'a>>,
}

/// The sweep of a group; None when it has a single measurement.
pub fn sweep<'a>(group: &Group<'a>) -> Option<Sweep<'a>> {
    if group.members.len() < 2 {
        return None;
    }
    let axes: Vec<Swept> = [Swept::MessageSize, Swept::Streams]
        .into_iter()
        .filter(|a| {
            let raw = |m: &Measurement| m.parameters.get(a.key()).map(|v| v.trim().to_string());
            let first = group.members.first().map(|m| raw(m));
            group.members.iter().any(|m| Some(raw(m)) != first)
        })
        .collect();
    let mut rows: Vec<Row<'a>> = group
        .members
        .iter()
        .map(|m| Row {
            m,
            values: axes
                .iter()
                .map(|a| m.parameters.get(a.key()).and_then(|v| parse_count(v)))
                .collect(),
        })
        .collect();
    // None after every number, then index order (the sort is stable).
    rows.sort_by(|a, b| {
        let key = |r: &Row<'_>| {
            r.values
                .iter()
                .map(|v| v.map_or((1u8, 0u64), |v| (0, v)))
                .collect::<Vec<_>>()
        };
        key(a).cmp(&key(b))
    });
    Some(Sweep { axes, rows })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::figures::{LOSS, P99, RECEIVER, TPS};

    /// A measurement "m{index}" with these parameters and no figure.
    pub(crate) fn m(index: u32, params: &[(&str, &str)]) -> Measurement {
        Measurement {
            index,
            name: format!("m{index}"),
            parameters: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn protocols_default_to_tcp_stream_and_unknown_ones_have_no_main_figure() {
        assert_eq!(protocol(&m(0, &[])), "tcp-stream");
        assert_eq!(protocol(&m(0, &[("protocol", " tcp-rr ")])), "tcp-rr");
        assert_eq!(main_figures("tcp-rr"), [TPS, P99]);
        assert_eq!(main_figures("udp-stream"), [RECEIVER, LOSS]);
        assert!(main_figures("sctp<x>").is_empty());
        assert_eq!(file_tag("udp-rr"), Some("udp-rr"));
        assert_eq!(file_tag("../etc"), None);
    }

    #[test]
    fn a_sweep_is_grouped_back_and_ordered_by_its_values() {
        let ms = [
            m(0, &[]),
            m(
                1,
                &[
                    ("case", "rr"),
                    ("protocol", "tcp-rr"),
                    ("messageSize", "1Ki"),
                ],
            ),
            m(
                2,
                &[
                    ("case", "rr"),
                    ("protocol", "tcp-rr"),
                    ("messageSize", "64"),
                ],
            ),
            m(
                3,
                &[
                    ("case", "rr"),
                    ("protocol", "tcp-rr"),
                    ("messageSize", "NaN"),
                ],
            ),
            m(
                4,
                &[
                    ("case", "rr"),
                    ("protocol", "tcp-rr"),
                    ("messageSize", "256"),
                ],
            ),
            m(5, &[("case", "m0")]),
        ];
        let refs: Vec<&Measurement> = ms.iter().collect();
        let g = groups(&refs);
        assert_eq!(
            g.len(),
            3,
            "a case named like another measurement is its own group"
        );
        assert_eq!(g[1].case, "rr");
        assert!(sweep(&g[0]).is_none());
        let s = sweep(&g[1]).unwrap();
        assert_eq!(s.axes, [Swept::MessageSize]);
        let order: Vec<u32> = s.rows.iter().map(|r| r.m.index).collect();
        assert_eq!(order, [2, 4, 1, 3]);
        assert_eq!(s.rows[2].values, [Some(1024)]);
        assert_eq!(s.rows[3].values, [None]);
        assert_eq!(s.rows[3].raw(Swept::MessageSize), "NaN");
    }

    #[test]
    fn counts_parse_within_bounds_only() {
        assert_eq!(parse_count("64"), Some(64));
        assert_eq!(parse_count(" 64Ki "), Some(65536));
        assert_eq!(parse_count("2k"), Some(2000));
        for bad in [
            "0",
            "-1",
            "1e3",
            "NaN",
            "",
            "Ki",
            "18446744073709551616",
            "99999999Gi",
        ] {
            assert_eq!(parse_count(bad), None, "{bad}");
        }
        assert_eq!(parse_count(&MAX_SWEPT.to_string()), Some(MAX_SWEPT));
        assert_eq!(parse_count(&(MAX_SWEPT + 1).to_string()), None);
        assert_eq!(Swept::MessageSize.show(65536), "64 KiB");
        assert_eq!(Swept::Streams.show(4), "4");
        assert!(Swept::MessageSize.log2([64, 128].into_iter()));
        assert!(!Swept::Streams.log2([1, 2, 4].into_iter()));
        assert!(Swept::Streams.log2([1, 8].into_iter()));
    }
}
