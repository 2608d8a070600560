//! Load options (as a user or the worker layer gives them) and their validation into an
//! [`HttpConfig`] the engine runs. Every rejection is a one-line message.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use super::duration::parse_duration;

/// Unvalidated options; flag names follow wrk/wrk2 where they overlap.
#[derive(Debug, Clone, clap::Args)]
pub struct HttpOptions {
    /// Target URL (http:// or https://).
    pub url: String,
    /// Connections to keep open (closed loop: concurrent requests).
    #[arg(short = 'c', long, default_value_t = 10)]
    pub connections: u64,
    /// OS threads, each with its own single-threaded runtime.
    #[arg(short = 't', long, default_value_t = 2)]
    pub threads: u64,
    /// Measured duration (e.g. 10s, 2m, 500ms; bare number = seconds).
    #[arg(short = 'd', long, default_value = "10s")]
    pub duration: String,
    /// Warm-up before measuring; its requests are not recorded.
    #[arg(long, default_value = "0s")]
    pub warmup: String,
    /// Open loop: constant total arrival rate in requests/s (like wrk2); omit for closed loop.
    #[arg(short = 'R', long, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Extra request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Per-request timeout.
    #[arg(long, default_value = "2s")]
    pub timeout: String,
    /// A new TCP connection per request; sends `Connection: close` so the server closes first.
    #[arg(long)]
    pub no_keepalive: bool,
    /// HTTP/2 (ALPN h2 over TLS, prior knowledge over cleartext).
    #[arg(long)]
    pub http2: bool,
    /// Request method.
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// Request body from a file.
    #[arg(long, conflicts_with = "body")]
    pub body_file: Option<PathBuf>,
    /// Request body given inline.
    #[arg(long)]
    pub body: Option<String>,
    /// Host header override (also used as TLS SNI name).
    #[arg(long)]
    pub host: Option<String>,
    /// Skip TLS certificate verification (explicit opt-in).
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Record which answers (status, and the backend named in the X-Netbench-Backend header)
    /// were seen when, from the start (warm-up included), into the report's `answers`.
    #[arg(long)]
    pub record_answers: bool,
    /// Spread the connections over N hostnames, `r0.HOST` ... `r<N-1>.HOST` (HOST from
    /// --host): connection c always asks `r<c mod N>.HOST`. With --record-answers the report
    /// says when each hostname first answered a 2xx naming a backend (a route scale). At most
    /// 1000, and at most the connections.
    #[arg(long, default_value_t = 1)]
    pub host_count: u64,
    /// With --host-count: only a 2xx naming this backend (X-Netbench-Backend) dates a
    /// hostname; another backend answering (a wildcard route, another route) does not.
    #[arg(long)]
    pub host_backend: Option<String>,
}

impl HttpOptions {
    /// Options with wrk's defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        HttpOptions {
            url: url.into(),
            connections: 10,
            threads: 2,
            duration: "10s".into(),
            warmup: "0s".into(),
            rate: None,
            headers: Vec::new(),
            timeout: "2s".into(),
            no_keepalive: false,
            http2: false,
            method: "GET".into(),
            body_file: None,
            body: None,
            host: None,
            insecure: false,
            record_answers: false,
            host_count: 1,
            host_backend: None,
        }
    }
}

/// Scheme of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// A validated run configuration.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub url: String,
    pub scheme: Scheme,
    /// Host from the URL (used for Host and SNI unless overridden).
    pub host: String,
    pub port: u16,
    pub addr: SocketAddr,
    pub path: String,
    pub method: String,
    /// Extra headers in order; a `Host` header here replaces the default one.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub host_header: Option<String>,
    pub connections: usize,
    pub threads: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub rate: Option<f64>,
    pub timeout: Duration,
    pub keepalive: bool,
    pub http2: bool,
    pub insecure: bool,
    /// Record the answers seen (report's `answers`).
    pub record_answers: bool,
    /// Hostnames the connections spread over (`--host-count`; 1: the Host header as given).
    pub host_count: usize,
    /// The backend whose 2xx dates a hostname (`--host-backend`); any named one without it.
    pub host_backend: Option<String>,
}

/// A rejected option, with a one-line reason.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

impl HttpConfig {
    /// Validates options, reads the body file and resolves the host.
    pub fn from_options(o: &HttpOptions) -> Result<HttpConfig, ConfigError> {
        let url = url::Url::parse(&o.url)
            .map_err(|e| ConfigError(format!("bad URL '{}': {e}", o.url)))?;
        let scheme = match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => {
                return err(format!(
                    "bad URL '{}': scheme '{other}' is not http or https",
                    o.url
                ))
            }
        };
        let host = match url.host_str() {
            Some(h) if !h.is_empty() => h.trim_start_matches('[').trim_end_matches(']').to_string(),
            _ => return err(format!("bad URL '{}': no host", o.url)),
        };
        let port = url.port_or_known_default().unwrap_or(80);
        let mut path = url.path().to_string();
        if let Some(q) = url.query() {
            path.push('?');
            path.push_str(q);
        }
        if o.connections == 0 {
            return err("connections (-c) must be at least 1");
        }
        if o.threads == 0 {
            return err("threads (-t) must be at least 1");
        }
        if o.threads > o.connections {
            return err(format!(
                "threads (-t {}) must not exceed connections (-c {})",
                o.threads, o.connections
            ));
        }
        if o.connections > 1_000_000 {
            return err("connections (-c) must be at most 1000000");
        }
        let duration = parse_duration(&o.duration).map_err(ConfigError)?;
        if duration.is_zero() {
            return err("duration (-d) must be greater than zero");
        }
        let warmup = parse_duration(&o.warmup).map_err(ConfigError)?;
        let timeout = parse_duration(&o.timeout).map_err(ConfigError)?;
        if timeout.is_zero() {
            return err("timeout must be greater than zero");
        }
        if let Some(r) = o.rate {
            if !(r.is_finite() && r > 0.0) {
                return err(format!(
                    "rate (-R {r}) must be a positive number of requests per second"
                ));
            }
        }
        if o.method.is_empty() || !o.method.bytes().all(is_token_byte) {
            return err(format!("bad method '{}'", o.method));
        }
        let mut headers = Vec::with_capacity(o.headers.len());
        for h in &o.headers {
            let (name, value) = h
                .split_once(':')
                .ok_or_else(|| ConfigError(format!("bad header '{h}' (expected 'Name: value')")))?;
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() || !name.bytes().all(is_token_byte) {
                return err(format!("bad header name in '{h}'"));
            }
            if value.bytes().any(|b| b == b'\r' || b == b'\n') {
                return err(format!("bad header value in '{h}'"));
            }
            headers.push((name.to_string(), value.to_string()));
        }
        let body = match (&o.body_file, &o.body) {
            (Some(f), _) => std::fs::read(f).map_err(|e| {
                ConfigError(format!("cannot read body file '{}': {e}", f.display()))
            })?,
            (None, Some(b)) => b.clone().into_bytes(),
            (None, None) => Vec::new(),
        };
        let host_count = o.host_count;
        if host_count == 0 || host_count > protocol::report::answers::MAX_HOSTS as u64 {
            return err(format!(
                "host count (--host-count {host_count}) must be between 1 and {}",
                protocol::report::answers::MAX_HOSTS
            ));
        }
        if host_count > 1 && o.host.is_none() {
            return err("--host-count needs --host (the hostnames are r<i>.HOST)");
        }
        if let Some(b) = &o.host_backend {
            if protocol::report::answers::backend_name(b.as_bytes()).as_deref() != Some(b.as_str())
            {
                return err(format!(
                    "--host-backend '{b}' is not a backend name (1 to 63 letters, digits, '-', '.' or '_')"
                ));
            }
        }
        if host_count > o.connections {
            return err(format!(
                "--host-count {host_count} needs at least as many connections (-c {}): each connection asks one hostname",
                o.connections
            ));
        }
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| ConfigError(format!("cannot resolve host '{host}': {e}")))?
            .next()
            .ok_or_else(|| ConfigError(format!("cannot resolve host '{host}': no address")))?;
        Ok(HttpConfig {
            url: o.url.clone(),
            scheme,
            host,
            port,
            addr,
            path,
            method: o.method.clone(),
            headers,
            body,
            host_header: o.host.clone(),
            connections: o.connections as usize,
            threads: o.threads as usize,
            duration,
            warmup,
            rate: o.rate,
            timeout,
            keepalive: !o.no_keepalive,
            http2: o.http2,
            insecure: o.insecure,
            record_answers: o.record_answers,
            host_count: host_count as usize,
            host_backend: o.host_backend.clone(),
        })
    }

    /// The Host header value: override, else a `-H Host:` header, else the URL's authority.
    pub fn authority(&self) -> String {
        if let Some(h) = &self.host_header {
            return h.clone();
        }
        if let Some((_, v)) = self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        {
            return v.clone();
        }
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default_port = match self.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        if self.port == default_port {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The Host header of hostname `i` of `--host-count` (`r<i>.` before the authority).
    pub fn authority_of(&self, i: usize) -> String {
        format!("r{i}.{}", self.authority())
    }

    /// Name used for TLS SNI and certificate checks: the Host override if given, else the URL host.
    pub fn tls_name(&self) -> String {
        match &self.host_header {
            Some(h) => h.split(':').next().unwrap_or(h).to_string(),
            None => self.host.clone(),
        }
    }
}

/// RFC 9110 token characters (method and header names).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(o: HttpOptions) -> String {
        HttpConfig::from_options(&o).unwrap_err().to_string()
    }

    #[test]
    fn rejects_bad_input_with_one_line_messages() {
        let mut o = HttpOptions::new("not a url");
        assert!(check(o.clone()).starts_with("bad URL"));
        o.url = "ftp://127.0.0.1/".into();
        assert!(check(o.clone()).contains("scheme"));
        o.url = "http://127.0.0.1:8080/".into();
        o.connections = 0;
        assert!(check(o.clone()).contains("connections"));
        o.connections = 1;
        o.threads = 2;
        assert!(check(o.clone()).contains("must not exceed"));
        o.threads = 1;
        o.rate = Some(-1.0);
        assert!(check(o.clone()).contains("rate"));
        o.rate = Some(0.0);
        assert!(check(o.clone()).contains("rate"));
        o.rate = None;
        o.headers = vec!["NoColon".into()];
        assert!(check(o.clone()).contains("bad header"));
        o.headers.clear();
        o.duration = "0s".into();
        assert!(check(o.clone()).contains("duration"));
        o.duration = "1s".into();
        o.url = "http://no-such-host.invalid/".into();
        assert!(check(o).contains("cannot resolve host"));
    }

    /// The flag as the operator passes it to a worker (`http ... --record-answers URL`, parsed
    /// into these options by the command line in both modes) reaches the configuration.
    #[test]
    fn record_answers_is_a_command_line_flag() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            options: HttpOptions,
        }
        let parse = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).unwrap();
            HttpConfig::from_options(&cli.options)
                .unwrap()
                .record_answers
        };
        assert!(parse(&[
            "http",
            "--record-answers",
            "http://127.0.0.1:8080/"
        ]));
        assert!(!parse(&["http", "http://127.0.0.1:8080/"]));
        assert!(!HttpOptions::new("http://127.0.0.1:8080/").record_answers);
    }

    #[test]
    fn builds_a_config() {
        let mut o = HttpOptions::new("http://127.0.0.1:8080/a?b=c");
        o.headers = vec!["X-Test: 1".into()];
        o.rate = Some(100.0);
        let c = HttpConfig::from_options(&o).unwrap();
        assert_eq!(c.path, "/a?b=c");
        assert_eq!(c.authority(), "127.0.0.1:8080");
        assert_eq!(c.headers, vec![("X-Test".to_string(), "1".to_string())]);
        assert!(c.keepalive);
        o.host = Some("example.test".into());
        assert_eq!(
            HttpConfig::from_options(&o).unwrap().authority(),
            "example.test"
        );
    }
}
