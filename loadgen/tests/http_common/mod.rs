//! Test fixtures for the HTTP engine: a real Debian nginx per test (test_support::nginx) and a
//! tiny scriptable HTTP server for behaviours nginx cannot produce (stalls, garbage, silence,
//! chunked bodies).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen::http::{run, HttpConfig, HttpOptions};
use protocol::report::HttpReport;

/// Runs the engine with `opts` and returns its report.
pub fn load(opts: &HttpOptions) -> HttpReport {
    let cfg = HttpConfig::from_options(opts).expect("valid options");
    let report = run(&cfg, None).expect("run completes");
    // What the operator checks of every report holds for the engine's real ones (any status,
    // errors, warm-up, open or closed loop).
    protocol::report::validate_http(&report).expect("the engine's report passes validation");
    report
}

/// How the tiny server answers each request.
#[derive(Clone, Copy)]
pub enum Behaviour {
    /// 200 with a 2-byte body, except that every response due inside the window
    /// (offsets from server start) is held back until the window ends.
    Stall { from: Duration, until: Duration },
    /// Chunked 200 response with the given chunk count.
    Chunked(usize),
    /// Reads the request and never answers.
    Silent,
    /// Answers with bytes that are not HTTP.
    Garbage,
    /// Sends half of the announced body, then closes.
    Truncated,
}

/// A tiny threaded HTTP/1.1 server on 127.0.0.1 (thread per connection). Its threads end
/// with the test process.
pub struct TinyServer {
    pub addr: SocketAddr,
}

impl TinyServer {
    pub fn start(behaviour: Behaviour) -> TinyServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let t0 = Arc::new(Instant::now());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let t0 = t0.clone();
                std::thread::spawn(move || serve(conn, behaviour, *t0));
            }
        });
        TinyServer { addr }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

fn serve(mut conn: TcpStream, behaviour: Behaviour, t0: Instant) {
    let _ = conn.set_nodelay(true);
    let mut buf = [0u8; 4096];
    let mut pending = Vec::new();
    loop {
        while !contains(&pending, b"\r\n\r\n") {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
            }
        }
        let end = find(&pending, b"\r\n\r\n").unwrap() + 4;
        pending.drain(..end);
        let reply: Vec<u8> = match behaviour {
            Behaviour::Stall { from, until } => {
                let now = t0.elapsed();
                if now >= from && now < until {
                    std::thread::sleep(until - now);
                }
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()
            }
            Behaviour::Chunked(n) => {
                let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                for i in 0..n {
                    let chunk = format!("chunk-{i}-").repeat(100);
                    r.extend_from_slice(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes());
                }
                r.extend_from_slice(b"0\r\n\r\n");
                r
            }
            Behaviour::Silent => {
                std::thread::sleep(Duration::from_secs(30));
                return;
            }
            Behaviour::Garbage => b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec(),
            Behaviour::Truncated => {
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
                return;
            }
        };
        if conn.write_all(&reply).is_err() {
            return;
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}
