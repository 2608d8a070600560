//! The control protocol: length-prefixed JSON frames (u32 big-endian length, then the body).
//!
//! Every connection starts with one frame from the client carrying `magic` and `version`: a
//! `hello` on the control connection, a `data` on each stream connection. The version is checked
//! before the rest of the frame is interpreted, so a mismatch yields a clear error on both ends
//! instead of a parse failure. `error` frames only ever carry a message and stay readable by every
//! version.

use std::io::{Read, Write};
use std::time::Duration;

use ::protocol::tcp::{CpuUsage, Direction, TcpInfoSnapshot};
use ::protocol::Protocol;
use serde::{Deserialize, Serialize};

use super::TcpError;

/// Version of the control protocol; both ends must speak the same one.
pub const PROTOCOL_VERSION: u32 = 2;
pub(crate) const MAGIC: &str = "netbench-tcp";
/// Generous: a results frame for 256 streams is ~60 KiB.
const MAX_FRAME: u32 = 1 << 20;

/// What the client asks the server to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestParams {
    /// Which test; absent means `tcp-stream`.
    #[serde(default)]
    pub protocol: Protocol,
    pub streams: u32,
    pub duration_ms: u64,
    /// tcp-stream: bytes per write/read call.
    pub len: usize,
    /// tcp-stream: which way the bytes flow.
    pub direction: Direction,
    /// tcp-rr, tcp-crr, udp-rr: the sizes of a request and of its response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrParams>,
    /// tcp-stream: a request/response latency probe on one more data connection (stream id =
    /// the number of flows), answered like a tcp-rr stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<RrParams>,
    /// udp-stream: the paced rate of each sending stream (`len` is the datagram size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<crate::udp::UdpParams>,
}

/// The messages of a request/response exchange, as the server must answer them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RrParams {
    pub request_size: u32,
    pub response_size: u32,
    /// The client's per-request timeout: it may wait this long (twice, at the end) for answers
    /// in flight, so the server's deadline for the whole test allows for it.
    #[serde(default)]
    pub timeout_ms: u64,
}

impl TestParams {
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }
}

/// One stream as the server saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PeerStream {
    pub id: u32,
    pub bytes: u64,
    pub seconds: f64,
    pub tcp: Option<TcpInfoSnapshot>,
    pub error: Option<String>,
    /// Request/response tests: requests the server answered on this stream.
    #[serde(default)]
    pub transactions: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Message {
    Hello {
        magic: String,
        version: u32,
        cookie: String,
        test: TestParams,
    },
    Data {
        magic: String,
        version: u32,
        cookie: String,
        stream: u32,
    },
    Accept {
        version: u32,
    },
    Error {
        message: String,
    },
    Start,
    /// Client -> server after a request/response test: every stream has ended, send results.
    Done,
    Results {
        streams: Vec<PeerStream>,
        cpu: CpuUsage,
    },
    /// udp-stream: the server's view of every stream, its CPU use and CPU seconds.
    UdpResults {
        streams: Vec<crate::udp::StreamSide>,
        cpu: CpuUsage,
        cpu_seconds: f64,
    },
}

impl Message {
    pub fn hello(cookie: &str, test: TestParams) -> Self {
        Message::Hello {
            magic: MAGIC.into(),
            version: PROTOCOL_VERSION,
            cookie: cookie.into(),
            test,
        }
    }

    pub fn data(cookie: &str, stream: u32) -> Self {
        Message::Data {
            magic: MAGIC.into(),
            version: PROTOCOL_VERSION,
            cookie: cookie.into(),
            stream,
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Message::Error {
            message: message.into(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Data { .. } => "data",
            Message::Accept { .. } => "accept",
            Message::Error { .. } => "error",
            Message::Start => "start",
            Message::Done => "done",
            Message::Results { .. } => "results",
            Message::UdpResults { .. } => "udp_results",
        }
    }
}

pub(crate) fn write_message(mut w: impl Write, msg: &Message) -> Result<(), TcpError> {
    let body = serde_json::to_vec(msg).map_err(|e| TcpError::Protocol(format!("encode: {e}")))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame)
        .map_err(|e| TcpError::io(format!("sending {} message", msg.kind()), e))
}

/// Reads one message from `conn`, all of it before `deadline` (a peer that trickles a frame a
/// byte at a time cannot hold the reader past it, whatever the per-read timeout).
pub(crate) fn read_message_by(
    conn: &std::net::TcpStream,
    deadline: std::time::Instant,
) -> Result<Message, TcpError> {
    read_message(ByDeadline { conn, deadline })
}

/// A reader whose every read times out at a fixed instant, never before it, always with the
/// same error ("did not arrive in time"). The socket's own timeout (SO_RCVTIMEO) counts in
/// scheduler ticks and may expire up to one tick before the deadline; the read then waits
/// again for what is left.
struct ByDeadline<'a> {
    conn: &'a std::net::TcpStream,
    deadline: std::time::Instant,
}

impl Read for ByDeadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let left = self
                .deadline
                .saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the message did not arrive in time",
                ));
            }
            self.conn.set_read_timeout(Some(left))?;
            let mut conn = self.conn;
            match conn.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                other => return other,
            }
        }
    }
}

pub(crate) fn read_message(mut r: impl Read) -> Result<Message, TcpError> {
    let mut len = [0u8; 4];
    // Frames are below 16 MiB, so a netbench peer's first byte is always 0: anything else (e.g.
    // the state byte an iperf3 server sends) is recognised at once instead of after a timeout.
    r.read_exact(&mut len[..1])
        .map_err(|e| TcpError::io("reading control message", e))?;
    if len[0] != 0 {
        return Err(TcpError::NotNetbench(format!(
            "it sent byte {:#04x} where a netbench frame starts with 0",
            len[0]
        )));
    }
    r.read_exact(&mut len[1..])
        .map_err(|e| TcpError::io("reading control message", e))?;
    let len = u32::from_be_bytes(len);
    if len > MAX_FRAME {
        return Err(TcpError::NotNetbench(format!(
            "control frame of {len} bytes announced (limit {MAX_FRAME})"
        )));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)
        .map_err(|e| TcpError::io("reading control message", e))?;
    decode(&body)
}

/// Checks magic and version first, then interprets the frame.
pub(crate) fn decode(body: &[u8]) -> Result<Message, TcpError> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| TcpError::NotNetbench(format!("control frame is not JSON: {e}")))?;
    if let Some(magic) = value.get("magic") {
        if magic != MAGIC {
            return Err(TcpError::NotNetbench(format!("unexpected magic {magic}")));
        }
    }
    if let Some(version) = value.get("version") {
        let theirs = version
            .as_u64()
            .ok_or_else(|| TcpError::Protocol(format!("version {version} is not a number")))?;
        if theirs != u64::from(PROTOCOL_VERSION) {
            return Err(TcpError::VersionMismatch {
                ours: PROTOCOL_VERSION,
                theirs: theirs.min(u64::from(u32::MAX)) as u32,
            });
        }
    }
    serde_json::from_value(value)
        .map_err(|e| TcpError::Protocol(format!("bad control message: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> TestParams {
        TestParams {
            protocol: Protocol::TcpStream,
            streams: 2,
            duration_ms: 1500,
            len: 1000,
            direction: Direction::Both,
            rr: None,
            probe: None,
            udp: None,
        }
    }

    #[test]
    fn frames_round_trip() {
        let msg = Message::hello("abc", params());
        let mut buf = Vec::new();
        write_message(&mut buf, &msg).unwrap();
        assert_eq!(
            u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize,
            buf.len() - 4
        );
        assert_eq!(read_message(&buf[..]).unwrap(), msg);
    }

    #[test]
    fn version_mismatch_is_reported_before_parsing_the_rest() {
        let body = br#"{"type":"hello","magic":"netbench-tcp","version":7,"something":"new"}"#;
        match decode(body) {
            Err(TcpError::VersionMismatch { ours: 2, theirs: 7 }) => {}
            other => panic!("expected a version mismatch, got {other:?}"),
        }
        let text = decode(body).unwrap_err().to_string();
        assert!(
            text.contains("version 2") && text.contains("version 7"),
            "{text}"
        );
    }

    #[test]
    fn a_version_1_hello_is_refused_not_run_as_a_stream_test() {
        // What a release before the protocol field sends: no protocol, version 1.
        let old = br#"{"type":"hello","magic":"netbench-tcp","version":1,"cookie":"c","test":{"streams":1,"duration_ms":1000,"len":1,"direction":"send"}}"#;
        assert!(matches!(
            decode(old),
            Err(TcpError::VersionMismatch { ours: 2, theirs: 1 })
        ));
    }

    #[test]
    fn the_protocol_defaults_to_tcp_stream_and_travels_kebab_case() {
        let body = br#"{"type":"hello","magic":"netbench-tcp","version":2,"cookie":"c","test":{"streams":1,"duration_ms":1000,"len":1,"direction":"send"}}"#;
        let Ok(Message::Hello { test, .. }) = decode(body) else {
            panic!("a version 2 hello without a protocol reads");
        };
        assert_eq!(
            (test.protocol, test.rr, test.probe),
            (Protocol::TcpStream, None, None)
        );
        let rr = TestParams {
            protocol: Protocol::TcpCrr,
            rr: Some(RrParams {
                request_size: 1,
                response_size: 64,
                timeout_ms: 100,
            }),
            ..params()
        };
        let json = serde_json::to_string(&Message::hello("c", rr.clone())).unwrap();
        assert!(json.contains(r#""protocol":"tcp-crr""#), "{json}");
        assert!(!json.contains("probe"), "{json}");
        let Ok(Message::Hello { test, .. }) = decode(json.as_bytes()) else {
            panic!("{json}");
        };
        assert_eq!(test, rr);
    }

    #[test]
    fn foreign_peers_are_named() {
        assert!(matches!(decode(b"\x01\x02"), Err(TcpError::NotNetbench(_))));
        let other = br#"{"type":"hello","magic":"iperf","version":1}"#;
        assert!(matches!(decode(other), Err(TcpError::NotNetbench(_))));
        // A frame length that no netbench peer would send (e.g. iperf3's cookie bytes).
        let huge = [0x00, 0xff, 0xff, 0xff, b'{'];
        assert!(matches!(
            read_message(&huge[..]),
            Err(TcpError::NotNetbench(_))
        ));
        // iperf3's PARAM_EXCHANGE state byte, recognised without waiting for more.
        assert!(matches!(
            read_message(&[9u8][..]),
            Err(TcpError::NotNetbench(_))
        ));
    }

    #[test]
    fn error_frames_carry_no_version() {
        let mut buf = Vec::new();
        write_message(&mut buf, &Message::error("busy")).unwrap();
        assert_eq!(&buf[4..], br#"{"type":"error","message":"busy"}"#);
    }
}

/// Property tests: whatever a peer sends, reading it never panics nor reads past a frame's
/// bound, and every message we write reads back unchanged.
#[cfg(test)]
mod props {
    use super::*;
    use proptest::collection::vec;
    use proptest::option::of;
    use proptest::prelude::*;

    /// Floats with a short exact decimal form, so JSON carries them unchanged.
    fn float() -> impl Strategy<Value = f64> {
        (0u32..1_000_000_000).prop_map(|x| f64::from(x) / 8.0)
    }

    fn text() -> impl Strategy<Value = String> {
        "\\PC{0,40}"
    }

    fn direction() -> impl Strategy<Value = Direction> {
        prop_oneof![
            Just(Direction::Send),
            Just(Direction::Receive),
            Just(Direction::Both)
        ]
    }

    fn peer_stream() -> impl Strategy<Value = PeerStream> {
        let tcp = any::<(u64, u32, u32, u64, u32)>().prop_map(|t| TcpInfoSnapshot {
            retransmits: t.0,
            rtt_us: t.1,
            rttvar_us: t.2,
            snd_cwnd_bytes: t.3,
            pmtu: t.4,
        });
        (
            any::<u32>(),
            any::<u64>(),
            float(),
            of(tcp),
            of(text()),
            any::<u64>(),
        )
            .prop_map(
                |(id, bytes, seconds, tcp, error, transactions)| PeerStream {
                    id,
                    bytes,
                    seconds,
                    tcp,
                    error,
                    transactions,
                },
            )
    }

    fn rr() -> impl Strategy<Value = RrParams> {
        any::<(u32, u32, u64)>().prop_map(|(request_size, response_size, timeout_ms)| RrParams {
            request_size,
            response_size,
            timeout_ms,
        })
    }

    fn message() -> impl Strategy<Value = Message> {
        let test = (
            proptest::sample::select(Protocol::ALL.to_vec()),
            any::<u32>(),
            any::<u64>(),
            any::<usize>(),
            direction(),
            of(rr()),
            of(rr()),
        )
            .prop_map(
                |(protocol, streams, duration_ms, len, direction, rr, probe)| TestParams {
                    protocol,
                    streams,
                    duration_ms,
                    len,
                    direction,
                    rr,
                    probe,
                    udp: (protocol == Protocol::UdpStream).then_some(crate::udp::UdpParams {
                        // A short exact decimal form, so JSON carries it unchanged.
                        packets_per_second: (duration_ms % 2 == 0)
                            .then_some((len % 1_000_000) as f64 / 8.0),
                        rcvbuf: (streams % 2 == 0).then_some(len),
                    }),
                },
            );
        let cpu = (float(), float(), float()).prop_map(|(u, s, t)| CpuUsage {
            user_percent: u,
            system_percent: s,
            total_percent: t,
            ..CpuUsage::default()
        });
        prop_oneof![
            (text(), test).prop_map(|(c, t)| Message::hello(&c, t)),
            (text(), any::<u32>()).prop_map(|(c, n)| Message::data(&c, n)),
            Just(Message::Accept {
                version: PROTOCOL_VERSION
            }),
            text().prop_map(Message::error),
            Just(Message::Start),
            Just(Message::Done),
            (vec(peer_stream(), 0..8), cpu)
                .prop_map(|(streams, cpu)| Message::Results { streams, cpu }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..2048)) {
            let _ = read_message(&bytes[..]);
            let _ = decode(&bytes);
            // With a plausible length prefix, the body is what gets parsed.
            let mut framed = (bytes.len() as u32).to_be_bytes().to_vec();
            framed.extend_from_slice(&bytes);
            let _ = read_message(&framed[..]);
        }

        #[test]
        fn messages_read_back_unchanged(msg in message()) {
            let mut buf = Vec::new();
            write_message(&mut buf, &msg).unwrap();
            prop_assert_eq!(read_message(&buf[..]).unwrap(), msg);
            // A frame cut short is an error, never a hang or a panic.
            for cut in [0, 1, 4, buf.len() / 2, buf.len() - 1] {
                prop_assert!(read_message(&buf[..cut]).is_err());
            }
        }

        #[test]
        fn corrupted_frames_are_refused_or_read(
            msg in message(),
            flips in vec((any::<usize>(), 1u8..=255), 1..4),
        ) {
            let mut buf = Vec::new();
            write_message(&mut buf, &msg).unwrap();
            for (at, bits) in flips {
                let at = at % buf.len();
                buf[at] ^= bits;
            }
            let _ = read_message(&buf[..]);
        }
    }

    #[test]
    fn a_trickled_frame_ends_at_the_deadline() {
        use std::io::Write as _;
        use std::time::{Duration, Instant};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let writer = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            // A frame of 1000 bytes announced, then one byte every 20 ms until told to stop.
            c.write_all(&1000u32.to_be_bytes()).unwrap();
            while stop_rx.recv_timeout(Duration::from_millis(20)).is_err() {
                if c.write_all(b" ").is_err() {
                    break;
                }
            }
        });
        let (conn, _) = listener.accept().unwrap();
        let started = Instant::now();
        let deadline = started + Duration::from_millis(300);
        let err = read_message_by(&conn, deadline).unwrap_err();
        // Every read returned data before its own timeout: only the overall deadline ends it.
        assert!(Instant::now() >= deadline, "{err}");
        assert!(err.to_string().contains("in time"), "{err}");
        stop_tx.send(()).unwrap();
        writer.join().unwrap();
    }

    #[test]
    fn a_frame_that_stops_arriving_ends_at_the_deadline_not_before() {
        use std::io::Write as _;
        use std::time::{Duration, Instant};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // A frame of 1000 bytes announced, 10 of them sent, then silence (the connection stays
        // open): the socket's own timeout ends the last read, which must not end the frame
        // before its deadline or with another error than the deadline's.
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(&1000u32.to_be_bytes()).unwrap();
        c.write_all(&[b' '; 10]).unwrap();
        let (conn, _) = listener.accept().unwrap();
        for wait_ms in [1, 7, 50] {
            let deadline = Instant::now() + Duration::from_millis(wait_ms);
            let err = read_message_by(&conn, deadline).unwrap_err();
            assert!(Instant::now() >= deadline, "ended early: {err}");
            assert!(err.to_string().contains("in time"), "{err}");
        }
    }
}
