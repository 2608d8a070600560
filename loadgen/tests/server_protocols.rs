//! The one server and the protocols it serves, spoken to over real loopback sockets with
//! hand-written control frames: a protocol this build does not know and a client of another
//! control protocol version are refused with a message that says so, before any test runs, and
//! the server carries on. No root, no external programs: part of the fast tier.

mod support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use loadgen::tcp::{TcpClientConfig, PROTOCOL_VERSION};

use support::LoopbackServer as Served;

/// Sends one hello frame with `test` and returns the server's first answer.
fn hello(addr: SocketAddr, version: u32, test: serde_json::Value) -> serde_json::Value {
    let mut conn = support::connect_reading_for(addr, 10);
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
fn an_unknown_protocol_is_refused_and_the_server_carries_on() {
    let server = Served::start();
    // Every protocol::Protocol is served (tests/udp_loopback.rs, rr_loopback.rs); a name this
    // build does not know does not parse.
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
