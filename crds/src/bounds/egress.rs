//! An EgressBenchmark's bounds: its cases, which fields go with which protocol, the message
//! sizes each protocol carries, a case's sweep and server, and the runs the cases make.

use super::topology::topology;
use super::{at_most, len, within, DAY, MS, SEC};
use crate::cases::MAX_MEASURED;
use crate::egress::{Direction, EgressBenchmarkSpec, EgressCase, Protocol};

pub fn egress(spec: &EgressBenchmarkSpec) -> Result<(), String> {
    if spec.cases.is_empty() {
        return Err("cases must list at least one case".into());
    }
    at_most("cases", len(spec.cases.len()), 16)?;
    for case in &spec.cases {
        egress_case(case).map_err(|e| format!("case {}: {e}", case.name))?;
    }
    super::gates::gates(&spec.gates, false)?;
    // Across cases, which no CEL rule can sum up.
    let runs = spec.measured_count();
    if runs > MAX_MEASURED {
        return Err(format!(
            "the cases and their sweeps make {runs} runs; at most {MAX_MEASURED} (the measurements one BenchmarkResult holds)"
        ));
    }
    Ok(())
}

/// One case: the schema's bounds and its CEL rules on which fields go with which protocol.
fn egress_case(case: &EgressCase) -> Result<(), String> {
    let p = case.protocol;
    at_most("streams", case.streams.into(), 128)?;
    within(
        case.duration,
        SEC,
        DAY,
        "case duration must be between 1s and 24h",
    )?;
    let rr_only = [&case.request_size, &case.response_size, &case.rate];
    if !p.is_request_response() && rr_only.iter().any(|f| f.is_some()) {
        return Err(
            "requestSize, responseSize and rate apply to protocols tcp-rr, tcp-crr and udp-rr only"
                .into(),
        );
    }
    if !p.takes_burst() && case.burst.is_some() {
        let taking: Vec<_> = Protocol::ALL
            .into_iter()
            .filter(|p| p.takes_burst())
            .map(Protocol::as_str)
            .collect();
        return Err(format!(
            "burst applies to protocols {} only",
            taking.join(" and ")
        ));
    }
    if p != Protocol::UdpRr && case.timeout.is_some() {
        return Err("timeout applies to protocol udp-rr only".into());
    }
    if p != Protocol::UdpStream && (case.bitrate.is_some() || case.packets_per_second.is_some()) {
        return Err("bitrate and packetsPerSecond apply to protocol udp-stream only".into());
    }
    if case.bitrate.is_some() && case.packets_per_second.is_some() {
        return Err("set bitrate or packetsPerSecond, not both".into());
    }
    if p != Protocol::TcpStream && case.latency_probe.is_some() {
        return Err("latencyProbe applies to protocol tcp-stream only".into());
    }
    if p.is_request_response() && case.message_size.is_some() {
        return Err("messageSize applies to tcp-stream and udp-stream; request/response protocols take requestSize and responseSize".into());
    }
    if p.is_request_response() && case.direction != Direction::Send {
        return Err("direction applies to tcp-stream and udp-stream only".into());
    }
    // The message sizes the sweep runs, besides the case's own.
    let swept = || {
        case.sweep
            .iter()
            .flat_map(|s| s.message_sizes.iter().copied())
    };
    let sizes = [case.message_size, case.request_size, case.response_size];
    let max_size = sizes.into_iter().flatten().chain(swept()).max();
    let rr_sizes = [case.request_size, case.response_size];
    let udp_rr_min = rr_sizes.into_iter().flatten().chain(swept()).min();
    if p == Protocol::UdpRr && udp_rr_min.is_some_and(|m| m < 8) {
        return Err("udp-rr carries an 8-byte sequence number in every datagram: requestSize, responseSize and sweep.messageSizes must be at least 8".into());
    }
    let limit = if p.is_udp() { 65_507 } else { 16_777_216 };
    if max_size.is_some_and(|m| m > limit) {
        return Err(if p.is_udp() {
            "a UDP datagram carries at most 65507 bytes: messageSize, requestSize, responseSize and sweep.messageSizes of udp protocols must be at most 65507".into()
        } else {
            format!("message sizes must be at most {limit}")
        });
    }
    if p == Protocol::UdpStream && case.message_size.into_iter().chain(swept()).any(|m| m < 32) {
        return Err("udp-stream datagrams carry a 32-byte header: messageSize and sweep.messageSizes must be at least 32".into());
    }
    if p.is_request_response() && max_size.is_some_and(|m| m > 1_048_576) {
        return Err("request/response messages are at most 1048576 bytes (1 MiB): sweep.messageSizes of tcp-rr, tcp-crr and udp-rr must be at most 1048576".into());
    }
    let burst = u64::from(case.burst.unwrap_or(0));
    if p == Protocol::TcpRr
        && burst > 0
        && max_size.is_some_and(|m| (burst + 1).saturating_mul(u64::from(m)) > 65_536)
    {
        return Err("tcp-rr with burst keeps (burst + 1) requests in flight each way: (burst + 1) times requestSize, responseSize and every sweep.messageSizes must be at most 65536 bytes, or both ends could block on full socket buffers".into());
    }
    // The schema's lower bounds, again (a spec that did not come through the API server).
    let positive = [
        ("streams", Some(case.streams)),
        ("messageSize", case.message_size),
        ("requestSize", case.request_size),
        ("responseSize", case.response_size),
        ("rate", case.rate),
        ("packetsPerSecond", case.packets_per_second),
        ("latencyProbe", case.latency_probe),
        ("server.port", Some(u32::from(case.server.port))),
    ];
    if let Some((field, _)) = positive.iter().find(|(_, v)| *v == Some(0)) {
        return Err(format!("{field} must be at least 1"));
    }
    at_most("burst", case.burst.unwrap_or(0).into(), 256)?;
    at_most("rate", case.rate.unwrap_or(0).into(), 1_000_000)?;
    at_most(
        "packetsPerSecond",
        case.packets_per_second.unwrap_or(0).into(),
        10_000_000,
    )?;
    at_most("latencyProbe", case.latency_probe.unwrap_or(0).into(), 1000)?;
    if let Some(t) = case.timeout {
        within(t, MS, 10 * SEC, "timeout must be between 1ms and 10s")?;
    }
    if let Some(b) = &case.bitrate {
        if !crate::cases::bitrate_bits(b).is_some_and(|bits| bits == 0.0 || bits >= 1000.0) {
            return Err(format!(
                "bitrate must be bits per second with an optional k, M or G suffix, 0 or at least 1k, at most 100G (got {b:.32})"
            ));
        }
    }
    if let Some(s) = &case.sweep {
        if s.message_sizes.is_empty() && s.streams.is_empty() {
            return Err("sweep must list messageSizes or streams".into());
        }
        at_most(
            "sweep.streams",
            s.streams.iter().copied().max().unwrap_or(1).into(),
            128,
        )?;
        if case.runs() > 16 {
            return Err("a sweep runs a case at most 16 times: the number of messageSizes times the number of streams must be at most 16".into());
        }
        for (field, values) in [("messageSizes", &s.message_sizes), ("streams", &s.streams)] {
            let mut sorted = values.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != values.len() {
                return Err(format!("sweep.{field} must not repeat a value"));
            }
            if values.contains(&0) {
                return Err(format!("sweep.{field} must be at least 1"));
            }
        }
    }
    let server = &case.server;
    if server.service
        && (server.address.is_some()
            || server.host_network
            || server.bind_interface.is_some()
            || server.bind_address.is_some())
    {
        return Err("server.service reaches a server pod the operator runs on its pod address: it cannot be combined with server.address, hostNetwork, bindInterface or bindAddress".into());
    }
    if let Some(t) = &case.topology {
        if case.client.node_name.is_some() || server.node_name.is_some() {
            return Err("a case with a topology places its workers with topology.clientNodes and topology.serverNodes, not client.nodeName or server.nodeName".into());
        }
        if server.address.is_some() || server.service {
            return Err("a topology runs a server pod per pair on its pod or host address: server.address and server.service do not go with it".into());
        }
        if case.sweep.is_some() {
            return Err(
                "a case with a topology cannot also have a sweep: make one case per value".into(),
            );
        }
        topology(t)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_durations_name_the_case() {
        let spec: EgressBenchmarkSpec =
            serde_yaml::from_str("{cases: [{name: a, client: {}, server: {}, duration: 100000h}]}")
                .unwrap();
        let err = egress(&spec).unwrap_err();
        assert!(
            err.starts_with("case a: case duration must be between 1s and 24h"),
            "{err}"
        );
    }
}
