//! What an EgressBenchmark run measures: its cases in order, each swept case expanded into one
//! run per combination of its sweep's values. The operator steps through these (the status'
//! `currentCase` and `cases[]`, the worker slots, the BenchmarkResult's measurements all index
//! this list), so the expansion is defined once, here.

use crate::egress::{EgressBenchmarkSpec, EgressCase, Protocol};

/// Most runs one EgressBenchmark may make: the measurements a BenchmarkResult holds.
pub const MAX_MEASURED: usize = 64;
pub use protocol::{DEFAULT_RR_SIZE, DEFAULT_STREAM_MESSAGE_SIZE, MIN_UDP_RR_SIZE};

/// The request and response size of `p` when the case sets none (the protocol's default
/// message size, [`DEFAULT_RR_SIZE`] for a protocol that is not request/response).
pub fn default_rr_size(p: Protocol) -> u32 {
    p.default_message_size()
        .filter(|_| p.is_request_response())
        .unwrap_or(DEFAULT_RR_SIZE)
}

/// One run of a case: the case with its sweep's values applied (and no sweep left).
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The case's name, or "case/messageSize=64,streams=4" for a swept run.
    pub name: String,
    /// The declared case's name.
    pub case: String,
    /// The values this run uses.
    pub spec: EgressCase,
}

impl EgressBenchmarkSpec {
    /// Every run in order: the cases as listed; a swept case's runs by message size, then
    /// stream count, each in the order given. At most [`MAX_MEASURED`] + 1: a spec with more
    /// (the schema cannot sum runs across cases; crate::bounds refuses it) costs no more to
    /// expand than one just over the limit.
    pub fn measured(&self) -> Vec<Measured> {
        self.cases
            .iter()
            .flat_map(EgressCase::measured)
            .take(MAX_MEASURED + 1)
            .collect()
    }

    /// How many runs [`Self::measured`] gives, without building them.
    pub fn measured_count(&self) -> usize {
        self.cases
            .iter()
            .map(EgressCase::runs)
            .fold(0, usize::saturating_add)
    }
}

impl EgressCase {
    /// Runs of this case: 1, or the product of its sweep's value counts.
    pub fn runs(&self) -> usize {
        match &self.sweep {
            None => 1,
            Some(s) => s
                .message_sizes
                .len()
                .max(1)
                .saturating_mul(s.streams.len().max(1)),
        }
    }

    /// This case's runs (see [`EgressBenchmarkSpec::measured`]).
    pub fn measured(&self) -> Vec<Measured> {
        let Some(sweep) = &self.sweep else {
            return vec![Measured {
                name: self.name.clone(),
                case: self.name.clone(),
                spec: self.clone(),
            }];
        };
        let sizes: Vec<Option<u32>> = if sweep.message_sizes.is_empty() {
            vec![None]
        } else {
            sweep.message_sizes.iter().copied().map(Some).collect()
        };
        let streams: Vec<Option<u32>> = if sweep.streams.is_empty() {
            vec![None]
        } else {
            sweep.streams.iter().copied().map(Some).collect()
        };
        let mut runs = Vec::with_capacity(self.runs().min(MAX_MEASURED + 1));
        for size in &sizes {
            for n in &streams {
                if runs.len() > MAX_MEASURED {
                    return runs;
                }
                let mut spec = self.clone();
                spec.sweep = None;
                let mut parts = Vec::new();
                if let Some(size) = *size {
                    parts.push(format!("messageSize={size}"));
                    if self.protocol.is_request_response() {
                        spec.request_size = Some(size);
                        spec.response_size = Some(size);
                    } else {
                        spec.message_size = Some(size);
                    }
                }
                if let Some(n) = *n {
                    parts.push(format!("streams={n}"));
                    spec.streams = n;
                }
                runs.push(Measured {
                    name: format!("{}/{}", self.name, parts.join(",")),
                    case: self.name.clone(),
                    spec,
                });
            }
        }
        runs
    }

    /// The message size this run uses, as the table shows it: tcp-stream's write size (its
    /// default when unset), udp-stream's datagram payload (None: the engine fits the path's
    /// MTU), the request size of request/response protocols.
    pub fn shown_message_size(&self) -> Option<u32> {
        let p = self.protocol;
        if p.is_request_response() {
            self.request_size.or(p.default_message_size())
        } else {
            self.message_size.or(p.default_message_size())
        }
    }

    /// How the client reaches the server: "external", "service", "hostNetwork" or "pod".
    pub fn path(&self) -> &'static str {
        if self.server.address.is_some() {
            "external"
        } else if self.server.service {
            "service"
        } else if self.server.host_network {
            "hostNetwork"
        } else {
            "pod"
        }
    }
}

/// `bitrate` ("500M", "1.5G", "0") in bits per second; None when it does not parse or exceeds
/// 100 Gbit/s (the schema's pattern lets through values up to 999999999999G).
pub fn bitrate_bits(text: &str) -> Option<f64> {
    let (digits, scale) = [('k', 1e3), ('M', 1e6), ('G', 1e9)]
        .into_iter()
        .find_map(|(suffix, scale)| Some((text.strip_suffix(suffix)?, scale)))
        .unwrap_or((text, 1.0));
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let bits = digits.parse::<f64>().ok()? * scale;
    (bits.is_finite() && (0.0..=100e9).contains(&bits)).then_some(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> EgressBenchmarkSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn an_unswept_case_is_one_run_under_its_own_name() {
        let s =
            spec("{cases: [{name: a, client: {}, server: {}}, {name: b, client: {}, server: {}}]}");
        let m = s.measured();
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].name.as_str(), m[0].case.as_str()), ("a", "a"));
        assert_eq!(m[1].spec, s.cases[1]);
        assert_eq!(s.measured_count(), 2);
    }

    #[test]
    fn a_sweep_expands_sizes_then_streams_in_the_order_given() {
        let s = spec(
            "{cases: [{name: rr, protocol: tcp-rr, client: {}, server: {}, sweep: {messageSizes: [64, 1024], streams: [1, 4]}},
                      {name: bulk, client: {}, server: {}, sweep: {streams: [8, 2]}}]}",
        );
        let names: Vec<_> = s.measured().into_iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            [
                "rr/messageSize=64,streams=1",
                "rr/messageSize=64,streams=4",
                "rr/messageSize=1024,streams=1",
                "rr/messageSize=1024,streams=4",
                "bulk/streams=8",
                "bulk/streams=2"
            ]
        );
        let m = s.measured();
        // Request/response: the size is the request's and the answer's.
        assert_eq!(
            (
                m[2].spec.request_size,
                m[2].spec.response_size,
                m[2].spec.message_size
            ),
            (Some(1024), Some(1024), None)
        );
        assert_eq!((m[3].spec.streams, m[3].spec.sweep.clone()), (4, None));
        assert_eq!(m[5].spec.streams, 2);
        assert_eq!(m[5].case, "bulk");
        assert_eq!(s.measured_count(), 6);
    }

    #[test]
    fn sizes_and_paths_as_the_table_shows_them() {
        let s = spec(
            "{cases: [{name: a, client: {}, server: {}},
                      {name: b, protocol: udp-stream, client: {}, server: {service: true}},
                      {name: c, protocol: tcp-crr, requestSize: 100, client: {}, server: {address: t}},
                      {name: d, client: {}, server: {hostNetwork: true}}]}",
        );
        let c = &s.cases;
        assert_eq!(c[0].shown_message_size(), Some(131072));
        assert_eq!(c[1].shown_message_size(), None);
        assert_eq!(c[2].shown_message_size(), Some(100));
        let paths: Vec<_> = c.iter().map(EgressCase::path).collect();
        assert_eq!(paths, ["pod", "service", "external", "hostNetwork"]);
    }

    #[test]
    fn bitrates() {
        assert_eq!(bitrate_bits("500M"), Some(500e6));
        assert_eq!(bitrate_bits("1.5G"), Some(1.5e9));
        assert_eq!(bitrate_bits("0"), Some(0.0));
        assert_eq!(bitrate_bits("100G"), Some(100e9));
        for bad in [
            "101G",
            "999999999999G",
            "",
            "G",
            "1.2.3M",
            "-1",
            "1T",
            "1e9",
        ] {
            assert_eq!(bitrate_bits(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_absurd_sweep_expands_no_further_than_just_past_the_limit() {
        let sizes: Vec<String> = (1..=5000).map(|i| i.to_string()).collect();
        let s = spec(&format!(
            "{{cases: [{{name: a, client: {{}}, server: {{}}, sweep: {{messageSizes: [{}], streams: [{}]}}}}]}}",
            sizes.join(","),
            sizes.join(",")
        ));
        assert_eq!(s.measured_count(), 25_000_000);
        assert_eq!(s.measured().len(), MAX_MEASURED + 1);
    }
}
