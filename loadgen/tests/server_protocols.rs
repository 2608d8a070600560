//! The one server and the protocols it serves, spoken to over real loopback sockets with
//! hand-written control frames: a protocol this build does not serve and a client of another
//! control protocol version are refused with a message that says so, before any test runs, and
//! the server carries on. No root, no external programs: part of the fast tier.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use loadgen::tcp::server::TcpServer;
use loadgen::tcp::{TcpClientConfig, TcpError, TcpServerConfig, PROTOCOL_VERSION};

/// A library server on 127.0.0.1, port chosen by the kernel, stopped on Drop.
struct Served {
    addr: SocketAddr,
    shutdown: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<(), TcpError>>>,
}

impl Served {
    fn start() -> Self {
        let cfg = TcpServerConfig {
            bind_addr: Some("127.0.0.1".parse().unwrap()),
            port: 0,
            ..TcpServerConfig::default()
        };
        let server = TcpServer::bind(&cfg).expect("binding the server");
        let addr = server.local_addr().unwrap();
        let shutdown = Arc::new(AtomicBool::new(false));
        let flag = shutdown.clone();
        let handle = thread::spawn(move || server.serve(&flag));
        Served {
            addr,
            shutdown,
            handle: Some(handle),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let result = h.join().expect("server thread panicked");
            if !thread::panicking() {
                result.expect("server ended with an error");
            }
        }
    }
}

/// Sends one hello frame with `test` and returns the server's first answer.
fn hello(addr: SocketAddr, version: u32, test: serde_json::Value) -> serde_json::Value {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let body = serde_json::json!({
        "type": "hello", "magic": "netbench-tcp", "version": version, "cookie": "c", "test": test,
    })
    .to_string();
    conn.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
    conn.write_all(body.as_bytes()).unwrap();
    let mut len = [0u8; 4];
    conn.read_exact(&mut len).unwrap();
    let mut reply = vec![0u8; u32::from_be_bytes(len) as usize];
    conn.read_exact(&mut reply).unwrap();
    serde_json::from_slice(&reply).unwrap()
}

fn test_of(protocol: &str) -> serde_json::Value {
    serde_json::json!({
        "protocol": protocol, "streams": 1, "duration_ms": 500, "len": 1000, "direction": "send",
    })
}

#[test]
fn a_protocol_this_build_does_not_serve_is_refused() {
    let server = Served::start();
    // udp-stream is served (tests/udp_loopback.rs); tcp-rr is not, on this branch.
    let reply = hello(server.addr, PROTOCOL_VERSION, test_of("tcp-rr"));
    assert_eq!(reply["type"], "error", "{reply}");
    let msg = reply["message"].as_str().unwrap();
    assert!(
        msg.contains("tcp-rr") && msg.contains("not supported by this build"),
        "{msg}"
    );
    // An unknown protocol name is refused too (it does not parse), and the server carries on.
    let reply = hello(server.addr, PROTOCOL_VERSION, test_of("sctp-rr"));
    assert_eq!(reply["type"], "error", "{reply}");
    assert!(
        reply["message"].as_str().unwrap().contains("sctp-rr"),
        "{reply}"
    );
    let cfg = TcpClientConfig {
        port: server.addr.port(),
        duration: Duration::from_millis(200),
        ..TcpClientConfig::new("127.0.0.1")
    };
    let report = loadgen::tcp::client::run(&cfg, None).expect("a stream test afterwards");
    assert!(report.receiver.bytes > 0);
}

#[test]
fn a_client_of_the_previous_control_protocol_is_refused_by_name() {
    let server = Served::start();
    // Version 1 had no protocol field: its hello would otherwise read as a tcp-stream test.
    let mut v1 = test_of("tcp-stream");
    v1.as_object_mut().unwrap().remove("protocol");
    let reply = hello(server.addr, 1, v1);
    assert_eq!(reply["type"], "error", "{reply}");
    let msg = reply["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("server speaks version {PROTOCOL_VERSION}"))
            && msg.contains("client version 1"),
        "{msg}"
    );
}
