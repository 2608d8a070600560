//! `netbench-loadgen http-server`: a small, fast HTTP/1.1 responder to benchmark through an
//! ingress controller or Gateway when the cluster has no target of its own. Every request, any
//! method and path, gets the same answer: a status, a body of a set size (a repeated "hello\n",
//! so the default answer is "hello\n"), after an optional delay. Keep-alive as the client asks.
//! With `--name NAME` every answer names its backend in `X-Netbench-Backend: NAME`, so a client
//! recording answers (`http --record-answers`) sees which backend a route led to, and when.
//! With `--count-port PORT` it says on that port how many answers it gave (`answered N`), so a
//! test can hold a client's counts against what the backend served.
//! Built on hyper (the operator's worker API uses it too).

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::HeaderValue;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use protocol::report::answers::{BACKEND_HEADER, MAX_BACKEND_BYTES};
use tokio::net::TcpListener;

use crate::http::parse_duration;

/// Largest body: a target answers requests, it is not a download server.
pub const MAX_BODY: usize = 16 << 20;
/// Longest delay before an answer.
pub const MAX_DELAY: Duration = Duration::from_secs(60);
/// How long a connection may take to send a request's head once it started one.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Most connections served at once (more wait in the listen backlog): a client that opens many
/// slow connections cannot make the responder buffer without bound.
pub const MAX_CONNECTIONS: usize = 10_000;
/// Most bytes buffered per connection (a request head larger than this is refused).
const MAX_BUFFER: usize = 64 << 10;

/// What the responder answers, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
    pub delay: Duration,
    /// The `X-Netbench-Backend` value of every answer (`--name`).
    pub backend: Option<HeaderValue>,
}

/// `http-server` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Port to listen on.
    #[arg(short, long, default_value_t = 8080)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    pub bind: IpAddr,
    /// Response body size in bytes (a repeated "hello\n"), at most 16 MiB.
    #[arg(long, default_value_t = 6)]
    pub body_size: usize,
    /// Delay before each answer ("5ms", "1s"), at most 60s.
    #[arg(long, default_value = "0s")]
    pub delay: String,
    /// Status code of every answer (200-599).
    #[arg(long, default_value_t = 200)]
    pub status: u16,
    /// Threads serving connections (default: the CPUs this process may use).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Name this backend in every answer's X-Netbench-Backend header (1 to 63 lowercase
    /// letters, digits, '-' or '.'), so clients recording answers see which backend answered.
    #[arg(long)]
    pub name: Option<String>,
    /// Also listen on this port and answer every request there with the number of answers
    /// given so far (`answered N`).
    #[arg(long)]
    pub count_port: Option<u16>,
}

impl ServerArgs {
    /// The answer these arguments ask for; Err names the argument out of bounds.
    pub fn answer(&self) -> Result<Answer, String> {
        if self.body_size > MAX_BODY {
            return Err(format!(
                "--body-size {} is more than {MAX_BODY} bytes",
                self.body_size
            ));
        }
        let delay = parse_duration(&self.delay)?;
        if delay > MAX_DELAY {
            return Err(format!("--delay {} is more than 60s", self.delay));
        }
        let status = StatusCode::from_u16(self.status)
            .ok()
            .filter(|s| (200..=599).contains(&s.as_u16()))
            .ok_or_else(|| format!("--status {} is not a status from 200 to 599", self.status))?;
        let body: Vec<u8> = b"hello\n"
            .iter()
            .copied()
            .cycle()
            .take(self.body_size)
            .collect();
        Ok(Answer {
            status,
            body: Bytes::from(body),
            delay,
            backend: self.name.as_deref().map(backend_value).transpose()?,
        })
    }
}

/// The header value of `--name`: a name like a DNS label or a part of a subdomain.
fn backend_value(name: &str) -> Result<HeaderValue, String> {
    let plain = (1..=MAX_BACKEND_BYTES).contains(&name.len())
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'.'));
    let value = plain.then(|| HeaderValue::from_str(name).ok()).flatten();
    value.ok_or_else(|| {
        format!(
            "--name {name:?} is not 1 to {MAX_BACKEND_BYTES} lowercase letters, digits, '-' or '.'"
        )
    })
}

fn respond(answer: &Answer) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(answer.body.clone()));
    *r.status_mut() = answer.status;
    if let Some(name) = &answer.backend {
        r.headers_mut().insert(BACKEND_HEADER, name.clone());
    }
    r
}

/// Serves `answer` on `listener` until the process ends (a failed connection ends only itself).
pub async fn serve(listener: TcpListener, answer: Answer) -> std::io::Result<()> {
    serve_counted(listener, answer, Arc::default()).await
}

/// [`serve`], adding one to `answered` for every answer given.
pub async fn serve_counted(
    listener: TcpListener,
    answer: Answer,
    answered: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return Ok(());
        };
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors or a connection reset before accept: the next one may do.
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (answer, answered) = (answer.clone(), answered.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                let (answer, answered) = (answer.clone(), answered.clone());
                async move {
                    if !answer.delay.is_zero() {
                        tokio::time::sleep(answer.delay).await;
                    }
                    answered.fetch_add(1, Ordering::Relaxed);
                    Ok::<_, Infallible>(respond(&answer))
                }
            });
            serve_connection(stream, service).await;
        });
    }
}

/// Serves one connection with the responder's bounds (head timeout, buffer); its end or
/// failure ends only it.
async fn serve_connection<S>(stream: tokio::net::TcpStream, service: S)
where
    S: hyper::service::Service<Request<hyper::body::Incoming>, Response = Response<Full<Bytes>>>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_BUFFER);
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Answers every request on `listener` with `answered N`, the answers given so far (a few
/// connections at a time: it is read by tests, not loaded).
pub async fn serve_count(listener: TcpListener, answered: Arc<AtomicU64>) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(16));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return Ok(());
        };
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let answered = answered.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                let n = answered.load(Ordering::Relaxed);
                async move {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!(
                        "answered {n}\n"
                    )))))
                }
            });
            serve_connection(stream, service).await;
        });
    }
}

/// Runs the responder as the CLI asks: checks the arguments, binds, serves.
pub fn run(args: &ServerArgs) -> anyhow::Result<()> {
    let answer = args.answer().map_err(anyhow::Error::msg)?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 256);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = TcpListener::bind(SocketAddr::new(args.bind, args.port)).await?;
        eprintln!(
            "netbench-loadgen http-server on {}: {} with {} bytes{}{}",
            listener.local_addr()?,
            answer.status,
            answer.body.len(),
            if answer.delay.is_zero() {
                String::new()
            } else {
                format!(" after {:?}", answer.delay)
            },
            match &args.name {
                Some(name) => format!(", as backend {name}"),
                None => String::new(),
            }
        );
        let answered = Arc::<AtomicU64>::default();
        if let Some(port) = args.count_port {
            let counts = TcpListener::bind(SocketAddr::new(args.bind, port)).await?;
            eprintln!("answers counted on {}", counts.local_addr()?);
            tokio::spawn(serve_count(counts, answered.clone()));
        }
        serve_counted(listener, answer, answered).await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(body: usize, delay: &str, status: u16) -> ServerArgs {
        ServerArgs {
            port: 0,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            body_size: body,
            delay: delay.into(),
            status,
            threads: None,
            name: None,
            count_port: None,
        }
    }

    #[test]
    fn the_default_answer_is_hello() {
        let a = args(6, "0s", 200).answer().unwrap();
        assert_eq!(
            (&a.body[..], a.status, a.delay),
            (&b"hello\n"[..], StatusCode::OK, Duration::ZERO)
        );
        assert_eq!(&args(8, "0s", 200).answer().unwrap().body[..], b"hello\nhe");
        assert!(args(0, "0s", 204).answer().unwrap().body.is_empty());
    }

    #[test]
    fn the_name_is_a_plain_lowercase_name() {
        let named = |name: &str| {
            let mut a = args(6, "0s", 200);
            a.name = Some(name.into());
            a.answer()
        };
        for good in ["web-a", "a", "backend.v2", "0", &"x".repeat(63)] {
            let value = named(good).unwrap().backend.unwrap();
            assert_eq!(value.as_bytes(), good.as_bytes());
        }
        for bad in [
            "",
            "Web-A",
            "web a",
            "web_a",
            "wéb",
            "a\r\nX: y",
            &"x".repeat(64),
        ] {
            let e = named(bad).unwrap_err();
            assert!(
                e.starts_with("--name ") && e.contains("1 to 63 lowercase letters"),
                "{bad:?}: {e}"
            );
        }
        assert_eq!(args(6, "0s", 200).answer().unwrap().backend, None);
        let named = respond(&named("web-a").unwrap());
        assert_eq!(named.headers()["x-netbench-backend"], "web-a");
        assert!(respond(&args(6, "0s", 200).answer().unwrap())
            .headers()
            .get(BACKEND_HEADER)
            .is_none());
    }

    #[test]
    fn out_of_bounds_arguments_are_named() {
        let e = args(MAX_BODY + 1, "0s", 200).answer().unwrap_err();
        assert!(e.contains("--body-size"), "{e}");
        let e = args(6, "61s", 200).answer().unwrap_err();
        assert!(e.contains("--delay 61s is more than 60s"), "{e}");
        assert!(args(6, "soon", 200).answer().is_err());
        for status in [0, 99, 101, 199, 600, 65535] {
            let e = args(6, "0s", status).answer().unwrap_err();
            assert!(e.contains("--status"), "{status}: {e}");
        }
    }
}
