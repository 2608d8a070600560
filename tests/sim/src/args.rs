//! What a worker pod was asked to do, read from its `netbench-loadgen` arguments (the ones the
//! operator's plans write: `http ...`, `tcp-client --protocol P ...`, `server -p PORT ...`).

use protocol::tcp::Direction;

use crate::report::{HttpShape, TcpShape};

/// The work of one simulated worker.
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// An HTTP client (IngressBenchmark): report kind "http".
    Http(HttpShape),
    /// A TCP stream client (EgressBenchmark tcp-stream): report kind "tcp".
    Tcp(TcpShape),
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

/// A duration as loadgen takes it: "1500ms", "2s", "2.5" (seconds).
pub fn seconds(text: &str) -> Option<f64> {
    let t = text.trim();
    let v = if let Some(ms) = t.strip_suffix("ms") {
        ms.parse::<f64>().ok()? / 1000.0
    } else if let Some(s) = t.strip_suffix('s') {
        s.parse::<f64>().ok()?
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
        Some("tcp-client") => match value(args, "--protocol").unwrap_or("tcp-stream") {
            "tcp-stream" => tcp(args).map(Work::Tcp),
            other => Ok(Work::Unsupported(format!(
                "protocol {other} is not simulated yet (tcp-stream and http are)"
            ))),
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

fn tcp(args: &[String]) -> Result<TcpShape, String> {
    let direction = match value(args, "--direction").unwrap_or("send") {
        "send" => Direction::Send,
        "receive" => Direction::Receive,
        "both" => Direction::Both,
        other => return Err(format!("--direction {other:?}")),
    };
    Ok(TcpShape {
        streams: number(args, "-P", 1)?,
        duration_s: duration(args, "-t", 10.0)?,
        len: number(args, "-l", 131_072)?,
        direction,
    })
}

impl Work {
    /// How long the worker measures after the common start (warm-up included).
    pub fn run_seconds(&self) -> f64 {
        match self {
            Work::Http(h) => h.warmup_s + h.duration_s,
            Work::Tcp(t) => t.duration_s,
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
            work_of(&words("tcp-client --protocol udp-rr -t 1")),
            Work::Unsupported(_)
        ));
        assert!(
            matches!(work_of(&words("http -c x http://a/")), Work::Unsupported(m) if m.contains("-c"))
        );
    }
}
