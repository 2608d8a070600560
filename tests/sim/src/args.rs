//! What a worker pod was asked to do, read from its `netbench-loadgen` arguments (the ones the
//! operator's plans write: `http ...`, `tcp-client --protocol P ...`, `server -p PORT ...`),
//! with the loadgen's defaults for what they leave out (loadgen/src/tcp/cli.rs,
//! loadgen/src/rr/config.rs, loadgen/src/udp/config.rs) and its limits: arguments the real
//! loadgen would refuse are not played.

use protocol::rr::{MAX_BURST, MAX_STREAM_RATE, MAX_TIMEOUT_MS};
use protocol::tcp::{Direction, MAX_STREAMS};
use protocol::{Protocol, ReportKind};

use crate::report::{HttpShape, RrShape, TcpShape, UdpShape};

/// udp-rr's default timeout and TCP's (loadgen/src/rr/config.rs), in milliseconds.
const DEFAULT_UDP_TIMEOUT_MS: u64 = 100;
const DEFAULT_TCP_TIMEOUT_MS: u64 = 10_000;
/// udp-stream's default datagram (what fits a 1500-byte MTU over IPv4; the real loadgen lowers
/// it to the path's MTU) and bitrate per stream (iperf3's 1 Mbit/s).
pub const DEFAULT_UDP_LEN: usize = 1472;
const DEFAULT_BITRATE: f64 = 1e6;
/// The loadgen's bounds on a udp-stream pace, datagrams per second per stream.
const MIN_PACKETS_PER_SECOND: f64 = 1e-3;
const MAX_PACKETS_PER_SECOND: f64 = 1e9;
/// The loadgen's longest test (loadgen/src/tcp: MAX_DURATION), seconds.
const MAX_DURATION_S: f64 = 86_400.0;

/// The work of one simulated worker.
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// An HTTP client (IngressBenchmark): report kind "http".
    Http(HttpShape),
    /// A TCP stream client (EgressBenchmark tcp-stream): report kind "tcp".
    Tcp(TcpShape),
    /// A request/response client (tcp-rr, tcp-crr, udp-rr): report kind "rr".
    Rr(RrShape),
    /// A UDP stream client (udp-stream): report kind "udp".
    Udp(UdpShape),
    /// A server: registers `podIP:port`, waits at the barrier, sends no report.
    Server { port: u16 },
    /// Something the simulator does not play (yet): the reason.
    Unsupported(String),
}

/// The value after `flag`, if any.
fn value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).map(String::as_str)
}

fn has(args: &[String], flag: &str) -> bool {
    args.iter().any(|a| a == flag)
}

/// A duration as loadgen takes it: "1500ms", "2s", "2.5" (seconds), "2m", "1h".
pub fn seconds(text: &str) -> Option<f64> {
    let t = text.trim();
    let v = if let Some(ms) = t.strip_suffix("ms") {
        ms.parse::<f64>().ok()? / 1000.0
    } else if let Some(s) = t.strip_suffix('s') {
        s.parse::<f64>().ok()?
    } else if let Some(m) = t.strip_suffix('m') {
        m.parse::<f64>().ok()? * 60.0
    } else if let Some(h) = t.strip_suffix('h') {
        h.parse::<f64>().ok()? * 3600.0
    } else {
        t.parse::<f64>().ok()?
    };
    (v.is_finite() && v >= 0.0).then_some(v)
}

fn number<T: std::str::FromStr>(args: &[String], flag: &str, default: T) -> Result<T, String> {
    match value(args, flag) {
        None => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| format!("{flag} {v:?} is not a number")),
    }
}

fn duration(args: &[String], flag: &str, default: f64) -> Result<f64, String> {
    match value(args, flag) {
        None => Ok(default),
        Some(v) => seconds(v).ok_or_else(|| format!("{flag} {v:?} is not a duration")),
    }
}

/// The work the arguments describe.
pub fn work_of(args: &[String]) -> Work {
    let parsed = match args.first().map(String::as_str) {
        Some("http") => http(args).map(Work::Http),
        // By the report the test makes: a protocol sharing a kind is played as that kind.
        Some("tcp-client" | "client") => match client_protocol(args) {
            Ok(p) => match p.report_kind() {
                ReportKind::Tcp => tcp(args).map(Work::Tcp),
                ReportKind::Udp => udp(args).map(Work::Udp),
                ReportKind::Rr => rr(args, p).map(Work::Rr),
                ReportKind::Http => Ok(Work::Unsupported(format!("{p}: a client of http reports"))),
            },
            Err(e) => Err(e),
        },
        Some("server" | "tcp-server") => {
            number(args, "-p", 5201u16).map(|port| Work::Server { port })
        }
        Some(other) => Ok(Work::Unsupported(format!("subcommand {other:?}"))),
        None => Ok(Work::Unsupported("no arguments".into())),
    };
    parsed.unwrap_or_else(Work::Unsupported)
}

fn http(args: &[String]) -> Result<HttpShape, String> {
    let url = args
        .last()
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .ok_or("the last argument is not the target URL")?;
    let rate = match value(args, "-R") {
        None => None,
        Some(r) => Some(
            r.parse::<f64>()
                .map_err(|_| format!("-R {r:?} is not a rate"))?,
        ),
    };
    Ok(HttpShape {
        url: url.clone(),
        method: value(args, "--method").unwrap_or("GET").to_string(),
        connections: number(args, "-c", 10)?,
        threads: number(args, "-t", 2)?,
        duration_s: duration(args, "-d", 10.0)?,
        warmup_s: duration(args, "--warmup", 0.0)?,
        timeout_s: duration(args, "--timeout", 2.0)?,
        rate,
        keepalive: !has(args, "--no-keepalive"),
        http2: has(args, "--http2"),
    })
}

/// The client's test: `--protocol P` (default tcp-stream), or udp-stream with `-u`.
fn client_protocol(args: &[String]) -> Result<Protocol, String> {
    if has(args, "-u") || has(args, "--udp") {
        return Ok(Protocol::UdpStream);
    }
    value(args, "--protocol")
        .unwrap_or("tcp-stream")
        .parse::<Protocol>()
        .map_err(|e| e.to_string())
}

/// `--direction`, or `-R` (receive) and `--bidir` (both) as the loadgen also takes them.
fn direction(args: &[String]) -> Result<Direction, String> {
    if has(args, "-R") || has(args, "--reverse") {
        return Ok(Direction::Receive);
    }
    if has(args, "--bidir") {
        return Ok(Direction::Both);
    }
    match value(args, "--direction").unwrap_or("send") {
        "send" => Ok(Direction::Send),
        "receive" => Ok(Direction::Receive),
        "both" => Ok(Direction::Both),
        other => Err(format!("--direction {other:?}")),
    }
}

/// Streams (`-P`) and the measured time (`-t`) within the loadgen's limits.
fn streams_and_time(args: &[String]) -> Result<(u32, f64), String> {
    let streams = number(args, "-P", 1u32)?;
    if !(1..=MAX_STREAMS).contains(&streams) {
        return Err(format!("-P {streams} (allowed 1..={MAX_STREAMS})"));
    }
    let duration_s = duration(args, "-t", 10.0)?;
    if !(duration_s > 0.0 && duration_s <= MAX_DURATION_S) {
        return Err(format!(
            "-t {duration_s} s (allowed more than 0, at most 1 day)"
        ));
    }
    Ok((streams, duration_s))
}

/// A length as the loadgen takes it: a number with an optional K or M suffix (1024-based).
fn length(text: &str) -> Option<usize> {
    let (digits, factor) = match text.char_indices().last() {
        Some((i, 'k' | 'K')) => (&text[..i], 1024),
        Some((i, 'm' | 'M')) => (&text[..i], 1024 * 1024),
        _ => (text, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(factor)
}

fn length_flag(args: &[String], flag: &str) -> Result<Option<usize>, String> {
    value(args, flag)
        .map(|v| length(v).ok_or_else(|| format!("{flag} {v:?} is not a length")))
        .transpose()
}

fn tcp(args: &[String]) -> Result<TcpShape, String> {
    Ok(TcpShape {
        streams: number(args, "-P", 1)?,
        duration_s: duration(args, "-t", 10.0)?,
        len: length_flag(args, "-l")?.unwrap_or(131_072),
        direction: direction(args)?,
    })
}

/// `tcp-client --protocol tcp-rr|tcp-crr|udp-rr ...`: netperf's defaults (1-byte messages,
/// 8 for udp-rr; the response as big as the request; no burst; closed loop), the loadgen's
/// timeouts, and its limits on each.
fn rr(args: &[String], mode: Protocol) -> Result<RrShape, String> {
    let (streams, duration_s) = streams_and_time(args)?;
    let udp = mode.is_udp();
    let (min, max) = mode
        .rr_message_sizes()
        .ok_or_else(|| format!("{mode} is not a request/response test"))?;
    let size = |flag: &str, default: u32| -> Result<u32, String> {
        let v = match length_flag(args, flag)? {
            None => default,
            Some(n) => u32::try_from(n).map_err(|_| format!("{flag} {n} is too large"))?,
        };
        if (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{flag} {v} (allowed {min}..={max} for {mode})"))
        }
    };
    let request_size = size("--request-size", min)?;
    let response_size = size("--response-size", request_size)?;
    let burst = number(args, "--burst", 0u32)?;
    if burst > MAX_BURST || (!mode.takes_burst() && burst > 0) {
        // The request/response protocols that take no burst (tcp-crr).
        let none: Vec<_> = Protocol::ALL
            .into_iter()
            .filter(|p| p.is_request_response() && !p.takes_burst())
            .map(Protocol::as_str)
            .collect();
        return Err(format!(
            "--burst {burst} (allowed 0..={MAX_BURST}, and 0 for {})",
            none.join(", ")
        ));
    }
    let rate = match value(args, "--rate") {
        None => None,
        Some(r) => Some(
            r.parse::<f64>()
                .ok()
                .filter(|v| *v > 0.0 && *v <= MAX_STREAM_RATE)
                .ok_or_else(|| {
                    format!("--rate {r:?} (a rate above 0, at most {MAX_STREAM_RATE})")
                })?,
        ),
    };
    let default_timeout = if udp {
        DEFAULT_UDP_TIMEOUT_MS
    } else {
        DEFAULT_TCP_TIMEOUT_MS
    };
    // The loadgen reports whole milliseconds of its timeout (as_millis: rounded down).
    let timeout_ms = match value(args, "--timeout") {
        None => default_timeout,
        Some(t) => {
            let s = seconds(t).ok_or_else(|| format!("--timeout {t:?} is not a duration"))?;
            (s * 1000.0 + 1e-9).floor() as u64
        }
    };
    if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
        return Err(format!(
            "--timeout {timeout_ms} ms (allowed 1..={MAX_TIMEOUT_MS})"
        ));
    }
    Ok(RrShape {
        mode,
        streams,
        duration_s,
        request_size,
        response_size,
        burst,
        rate,
        timeout_ms,
    })
}

/// Bits per second as the loadgen's `-b` takes it: a number with an optional K, M, G or T
/// suffix (1000-based); 0 is as fast as possible.
fn bitrate(text: &str) -> Option<f64> {
    let (digits, factor) = match text.char_indices().last() {
        Some((i, 'k' | 'K')) => (&text[..i], 1e3),
        Some((i, 'm' | 'M')) => (&text[..i], 1e6),
        Some((i, 'g' | 'G')) => (&text[..i], 1e9),
        Some((i, 't' | 'T')) => (&text[..i], 1e12),
        _ => (text, 1.0),
    };
    let v = digits.parse::<f64>().ok()? * factor;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// `tcp-client --protocol udp-stream ...`: `-l` (default 1472), `--direction`, and the pace of
/// each sending stream: `--pps N`, or `-b RATE` (default 1M; 0: as fast as possible).
fn udp(args: &[String]) -> Result<UdpShape, String> {
    let (streams, duration_s) = streams_and_time(args)?;
    let len = length_flag(args, "-l")?.unwrap_or(DEFAULT_UDP_LEN);
    if !(protocol::udp::MIN_LEN..=protocol::udp::MAX_LEN).contains(&len) {
        return Err(format!(
            "-l {len} (allowed {}..={} for udp-stream)",
            protocol::udp::MIN_LEN,
            protocol::udp::MAX_LEN
        ));
    }
    let b = value(args, "-b").or_else(|| value(args, "--bitrate"));
    let packets_per_second = match (value(args, "--pps"), b) {
        (Some(_), Some(_)) => return Err("--pps and -b together".into()),
        (Some(p), None) => Some(
            p.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| format!("--pps {p:?} is not a datagram rate"))?,
        ),
        (None, Some(b)) => {
            let bps = bitrate(b).ok_or_else(|| format!("-b {b:?} is not a bitrate"))?;
            (bps > 0.0).then(|| bps / (len as f64 * 8.0))
        }
        (None, None) => Some(DEFAULT_BITRATE / (len as f64 * 8.0)),
    };
    if let Some(pps) = packets_per_second {
        if !(MIN_PACKETS_PER_SECOND..=MAX_PACKETS_PER_SECOND).contains(&pps) {
            return Err(format!(
                "{pps} datagrams/s per stream (allowed {MIN_PACKETS_PER_SECOND}..={MAX_PACKETS_PER_SECOND})"
            ));
        }
    }
    Ok(UdpShape {
        streams,
        duration_s,
        len,
        direction: direction(args)?,
        packets_per_second,
    })
}

impl Work {
    /// How long the worker measures after the common start (warm-up included).
    pub fn run_seconds(&self) -> f64 {
        match self {
            Work::Http(h) => h.warmup_s + h.duration_s,
            Work::Tcp(t) => t.duration_s,
            Work::Rr(r) => r.duration_s,
            Work::Udp(u) => u.duration_s,
            Work::Server { .. } | Work::Unsupported(_) => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn the_operators_http_arguments_are_read() {
        let w = work_of(&words(
            "http -c 20 -t 2 -d 2000ms --warmup 500ms --timeout 2000ms --method GET --output json -R 500 --no-keepalive http://t.ns.svc/",
        ));
        let Work::Http(h) = w else { panic!("{w:?}") };
        assert_eq!((h.connections, h.threads), (20, 2));
        assert_eq!((h.duration_s, h.warmup_s, h.timeout_s), (2.0, 0.5, 2.0));
        assert_eq!(h.rate, Some(500.0));
        assert!(!h.keepalive && !h.http2);
        assert_eq!(h.url, "http://t.ns.svc/");
    }

    #[test]
    fn tcp_clients_and_servers_are_read() {
        let w = work_of(&words(
            "tcp-client --protocol tcp-stream -t 2.5 -P 2 -l 131072 --direction receive --output json",
        ));
        assert_eq!(
            w,
            Work::Tcp(TcpShape {
                streams: 2,
                duration_s: 2.5,
                len: 131072,
                direction: Direction::Receive
            })
        );
        assert_eq!(
            work_of(&words("server -p 5301")),
            Work::Server { port: 5301 }
        );
        assert!(matches!(
            work_of(&words("tcp-client --protocol sctp-rr -t 1")),
            Work::Unsupported(m) if m.contains("unknown protocol")
        ));
        assert!(
            matches!(work_of(&words("http -c x http://a/")), Work::Unsupported(m) if m.contains("-c"))
        );
    }

    /// The strings of operator/src/egress/plan.rs's test `each_protocol_gets_its_flags_and_a_sweep_its_runs`
    /// (tests/protocols.rs also reads the plan's own output).
    #[test]
    fn the_operators_request_response_arguments_are_read() {
        let w = work_of(&words(
            "tcp-client --protocol tcp-rr -t 10 -P 1 --request-size 64 --response-size 64 --burst 4 --rate 1000 --output json",
        ));
        assert_eq!(
            w,
            Work::Rr(RrShape {
                mode: Protocol::TcpRr,
                streams: 1,
                duration_s: 10.0,
                request_size: 64,
                response_size: 64,
                burst: 4,
                rate: Some(1000.0),
                timeout_ms: 10_000,
            })
        );
        let w = work_of(&words(
            "tcp-client --protocol tcp-crr -t 10 -P 1 --request-size 1 --response-size 1 --output json",
        ));
        let Work::Rr(crr) = w else { panic!("{w:?}") };
        assert_eq!(crr.mode, Protocol::TcpCrr);
        assert_eq!((crr.request_size, crr.response_size, crr.burst), (1, 1, 0));
        assert_eq!((crr.rate, crr.timeout_ms), (None, 10_000));
        // udp-rr with the operator's whole milliseconds (1500us goes as 2ms), an external
        // server and a bound device.
        let w = work_of(&words(
            "tcp-client --protocol udp-rr -t 2.5 -P 4 --request-size 8 --response-size 8 --timeout 50ms --output json -c 198.18.20.2 -p 5201 --bind-dev vx0",
        ));
        let Work::Rr(urr) = &w else { panic!("{w:?}") };
        assert_eq!(urr.mode, Protocol::UdpRr);
        assert_eq!((urr.streams, urr.duration_s, urr.timeout_ms), (4, 2.5, 50));
        assert_eq!(w_timeout("--timeout 2ms"), Some(2));
        assert_eq!(w_timeout("--timeout 2500ms"), Some(2500));
        // The loadgen's defaults: udp-rr 8 bytes and 100 ms; the response as big as the
        // request.
        let Work::Rr(d) = work_of(&words("tcp-client --protocol udp-rr --request-size 100")) else {
            panic!()
        };
        assert_eq!(
            (d.request_size, d.response_size, d.timeout_ms),
            (100, 100, 100)
        );
        assert_eq!((d.streams, d.duration_s), (1, 10.0));
        assert_eq!(w.run_seconds(), 2.5);
    }

    fn w_timeout(flag: &str) -> Option<u64> {
        match work_of(&words(&format!("tcp-client --protocol udp-rr {flag}"))) {
            Work::Rr(r) => Some(r.timeout_ms),
            _ => None,
        }
    }

    #[test]
    fn the_operators_udp_stream_arguments_are_read() {
        let w = work_of(&words(
            "tcp-client --protocol udp-stream -t 10 -P 1 -l 1400 --direction send -b 500M --output json",
        ));
        assert_eq!(
            w,
            Work::Udp(UdpShape {
                streams: 1,
                duration_s: 10.0,
                len: 1400,
                direction: Direction::Send,
                packets_per_second: Some(500e6 / (1400.0 * 8.0)),
            })
        );
        let w = work_of(&words(
            "tcp-client --protocol udp-stream -t 2 -P 3 --direction both --pps 20000 --output json",
        ));
        let Work::Udp(u) = w else { panic!("{w:?}") };
        assert_eq!(
            (u.streams, u.len, u.direction),
            (3, DEFAULT_UDP_LEN, Direction::Both)
        );
        assert_eq!(u.packets_per_second, Some(20000.0));
        // iperf3's default 1 Mbit/s per stream; -b 0 as fast as possible; -u and -R.
        let Work::Udp(u) = work_of(&words("tcp-client --protocol udp-stream")) else {
            panic!()
        };
        assert_eq!(u.packets_per_second, Some(1e6 / (1472.0 * 8.0)));
        let Work::Udp(u) = work_of(&words("client -u -b 0 -R -l 1K")) else {
            panic!()
        };
        assert_eq!((u.packets_per_second, u.len), (None, 1024));
        assert_eq!(u.direction, Direction::Receive);
    }

    #[test]
    fn arguments_the_loadgen_refuses_are_not_played() {
        for (args, why) in [
            (
                "tcp-client --protocol udp-rr --request-size 4",
                "--request-size 4",
            ),
            (
                "tcp-client --protocol tcp-rr --response-size 2M",
                "--response-size 2097152",
            ),
            ("tcp-client --protocol tcp-crr --burst 2", "--burst 2"),
            ("tcp-client --protocol tcp-rr --burst 1025", "--burst 1025"),
            ("tcp-client --protocol tcp-rr --rate 0", "--rate"),
            ("tcp-client --protocol udp-rr --timeout 0ms", "--timeout 0"),
            (
                "tcp-client --protocol udp-rr --timeout 61s",
                "--timeout 61000",
            ),
            ("tcp-client --protocol tcp-rr -P 129", "-P 129"),
            ("tcp-client --protocol tcp-rr -t 0", "-t 0"),
            ("tcp-client --protocol udp-stream -l 31", "-l 31"),
            ("tcp-client --protocol udp-stream -b fast", "-b \"fast\""),
            ("tcp-client --protocol udp-stream -b 1M --pps 5", "together"),
            (
                "tcp-client --protocol udp-stream --direction up",
                "--direction",
            ),
        ] {
            match work_of(&words(args)) {
                Work::Unsupported(m) => assert!(m.contains(why), "{args}: {m}"),
                other => panic!("{args}: played as {other:?}"),
            }
        }
    }
}
