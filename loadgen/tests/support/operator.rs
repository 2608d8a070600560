//! A stand-in for the operator's worker API, for the tests of worker mode: a listener on
//! 127.0.0.1, one HTTP/1.1 request read from each connection, one JSON answer written back
//! (then the connection is closed). Each test decides what it answers and records.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// What the register endpoint answers: one worker of one expected.
pub const REGISTERED: &str = r#"{"version":1,"registered":1,"expected":1}"#;

/// A listener on a free port of 127.0.0.1 and its base URL.
pub fn listen() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

/// The next connection to `listener` and the path and body of the request it carries.
pub fn accept_request(listener: &TcpListener) -> (TcpStream, String, Vec<u8>) {
    let (conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let path = request_line.split_whitespace().nth(1).unwrap().to_string();
    (conn, path, body)
}

/// The answer of a whole run's worker API to a request for `path`: registered, a barrier open
/// now that names `server`, or 204 for the rest (progress, report).
pub fn run_answer(path: &str, server: &str) -> (&'static str, String) {
    if path.ends_with("/register") {
        ("200 OK", REGISTERED.to_string())
    } else if path.contains("/barrier") {
        let now = protocol::worker::now_unix_ms();
        let servers = serde_json::json!([server]);
        (
            "200 OK",
            format!(
                r#"{{"version":1,"startAtUnixMs":{now},"registered":2,"expected":2,"servers":{servers}}}"#
            ),
        )
    } else {
        ("204 No Content", String::new())
    }
}

/// Writes the answer `status` with the JSON body `answer` to `conn`.
pub fn respond(mut conn: TcpStream, status: &str, answer: &str) -> io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    )
}
