//! A real Debian nginx for one test: its own temp dir and port (checked to be its own), an
//! access log the tests read as the referee, `stub_status` on a unix socket, killed on drop.
//! Used by loadgen's HTTP engine tests and the operator's HTTP worker test.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports;

/// One line of the fixture's access log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub connection: u64,
    pub connection_requests: u64,
    pub status: u16,
    pub method: String,
    pub uri: String,
    pub host: String,
    pub x_test: String,
    pub content_length: String,
    pub protocol: String,
}

/// A Debian nginx started for one test: 200 on `/`, 500 on `/fail`, 404 on `/missing`; killed
/// (and its directory removed) on drop.
pub struct Nginx {
    child: Child,
    dir: PathBuf,
    pub port: u16,
    pub tls: bool,
}

impl Nginx {
    /// Plain HTTP/1.1 nginx with the standard test locations.
    pub fn start() -> Nginx {
        Nginx::start_with("", false)
    }

    /// `listen_extra` is appended to the listen directive (e.g. "http2");
    /// `tls` generates a self-signed certificate and listens with ssl.
    pub fn start_with(listen_extra: &str, tls: bool) -> Nginx {
        let nginx = which("nginx").unwrap_or_else(|| {
            panic!("nginx is not installed: apt-get install -y nginx-light (see tests/apt-packages.txt)")
        });
        let (nginx, _port) = ports::start_on_free_port("nginx", |port| {
            let dir = temp_dir("nginx");
            let ssl = if tls {
                make_cert(&dir);
                format!(
                    "ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem;",
                    d = dir.display()
                )
            } else {
                String::new()
            };
            let conf = format!(
                r#"
# One process, no master: killing the child on drop leaves no orphaned worker behind.
master_process off;
worker_processes 1;
user root;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    log_format nb '$connection $connection_requests $status $request_method $uri $host "$http_x_test" $http_content_length $server_protocol';
    access_log {d}/access.log nb;
    client_body_temp_path {d}/body;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port} {tls} {listen_extra};
        {ssl}
        location = /fail {{ return 500 "fail\n"; }}
        location = /missing {{ return 404; }}
        location / {{ return 200 "hello\n"; }}
    }}
    # The fixture's own window on nginx (connections still open), off the port under test.
    server {{
        listen unix:{d}/status.sock;
        access_log off;
        location / {{ stub_status; }}
    }}
}}
"#,
                d = dir.display(),
                tls = if tls { "ssl" } else { "" },
            );
            std::fs::write(dir.join("nginx.conf"), conf).unwrap();
            let child = Command::new(&nginx)
                .args(["-c", &format!("{}/nginx.conf", dir.display())])
                .args(["-p", &dir.display().to_string()])
                .args(["-g", "daemon off;"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn nginx");
            let mut n = Nginx {
                child,
                dir,
                port,
                tls,
            };
            // Port taken between the probe and nginx's bind: None, and another port is tried.
            n.wait_ready().then_some(n)
        });
        nginx
    }

    /// True once nginx has bound its ports: it writes its pid file only after opening every
    /// listener of its configuration, so the port is nginx's own (not someone else's who took
    /// it meanwhile) and answers. False if it exits first (the port was taken: another is
    /// tried); a panic with its error log if it neither answers nor exits within 10 s.
    fn wait_ready(&mut self) -> bool {
        let pid = self.child.id().to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            let written = std::fs::read_to_string(self.dir.join("nginx.pid")).unwrap_or_default();
            if written.trim() == pid {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "nginx wrote no pid file in 10 s; its error log: {}",
            std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
        );
    }

    /// nginx's open connections, this query's own included (stub_status "Active connections").
    fn active_connections(&self) -> Option<u64> {
        let mut conn = UnixStream::connect(self.dir.join("status.sock")).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        conn.write_all(b"GET / HTTP/1.0\r\nHost: status\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        conn.read_to_string(&mut text).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("Active connections:"))
            .and_then(|n| n.trim().parse().ok())
    }

    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// Every access log line, once nginx has closed every connection to the port under test:
    /// it logs a request before closing its connection, so then no line can still be due
    /// (and "more lines than requests" is caught as surely as "fewer").
    pub fn log_lines(&self) -> Vec<LogLine> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let active = self.active_connections();
            if active == Some(1) {
                return self.read_log();
            }
            assert!(
                Instant::now() < deadline,
                "nginx still has connections open after 10 s (stub_status: {active:?})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn read_log(&self) -> Vec<LogLine> {
        let text = std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                LogLine {
                    connection: f[0].parse().unwrap(),
                    connection_requests: f[1].parse().unwrap(),
                    status: f[2].parse().unwrap(),
                    method: f[3].to_string(),
                    uri: f[4].to_string(),
                    host: f[5].to_string(),
                    x_test: f[6].trim_matches('"').to_string(),
                    content_length: f[7].to_string(),
                    protocol: f[8].to_string(),
                }
            })
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn which(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("netbench-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn make_cert(dir: &std::path::Path) {
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=netbench.test"])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl is needed for the TLS test: apt-get install -y openssl");
    assert!(
        status.success(),
        "openssl could not make a test certificate"
    );
}
