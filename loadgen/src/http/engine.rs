//! Runs a load: one OS thread per `-t`, each with a current-thread tokio runtime and its share
//! of the connections as local tasks; a second of progress at a time; one report at the end.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use protocol::report::answers::Answers;
use protocol::report::histogram::new_latency_histogram;
use protocol::report::{Counters, HttpReport, HttpRunConfig, ThreadSummary};
use rustls::pki_types::ServerName;

use super::answers::{Answer, Backend, ConnRuns, WallClock};
use super::config::{HttpConfig, Scheme};
use super::connect::{Connector, Plain, Tls};
use super::gate::StartGate;
use super::progress::{report_progress, DoneGuard, ProgressSink};
use super::request::{serialize_h1, serialize_h1_to};
use super::stats::{LiveCounters, ThreadStats};
use super::{h1, h2conn, tls};

/// Why a run could not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Tls(String),
    #[error("cannot start runtime: {0}")]
    Runtime(#[from] std::io::Error),
    #[error("a load thread failed: {0}")]
    Thread(String),
    #[error("cannot build report: {0}")]
    Report(String),
}

/// Everything a connection task needs, shared read-only by all threads.
pub(crate) struct Plan {
    pub request: Vec<u8>,
    pub head: bool,
    pub keepalive: bool,
    pub timeout: Duration,
    pub body: Vec<u8>,
    pub method: String,
    pub uri: String,
    pub h2_headers: Vec<(String, String)>,
    /// Record which answers were seen when (`--record-answers`).
    pub record_answers: bool,
    /// With `--host-count` N > 1: hostname i's request (HTTP/1.1) and URI (HTTP/2).
    pub hosts: Vec<HostRequest>,
    /// The backend whose 2xx dates a hostname (`--host-backend`); NONE: any named one.
    pub host_backend: Backend,
}

/// The request of one hostname of `--host-count`.
pub(crate) struct HostRequest {
    pub request: Vec<u8>,
    pub uri: String,
}

/// The run's timeline, fixed when all threads are ready.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// The run's start (warm-up included), on both clocks: the one wall-clock reading every
    /// recorded instant is converted through.
    pub start: WallClock,
    pub measure_start: Instant,
    pub end: Instant,
}

pub(crate) struct ConnCtx {
    pub plan: Arc<Plan>,
    pub clock: Clock,
    pub stats: Rc<RefCell<ThreadStats>>,
    /// Open loop: (first due time, interval) of this connection.
    pub schedule: Option<(Instant, Duration)>,
    /// The hostname this connection asks (`--host-count`), else None.
    pub host: Option<usize>,
}

impl ConnCtx {
    /// The serialized HTTP/1.1 request of this connection.
    pub(crate) fn request(&self) -> &[u8] {
        let host = self.host.and_then(|h| self.plan.hosts.get(h));
        host.map_or(&self.plan.request, |h| &h.request)
    }

    /// The HTTP/2 request URI of this connection.
    pub(crate) fn uri(&self) -> &str {
        let host = self.host.and_then(|h| self.plan.hosts.get(h));
        host.map_or(&self.plan.uri, |h| &h.uri)
    }

    /// A response of this connection task answered `answer` at `at` (recorded only with
    /// `--record-answers`; the thread's record is touched only when the answer changed).
    pub(crate) fn answered(&self, runs: &mut ConnRuns, answer: Answer, at: Instant) {
        if !self.plan.record_answers {
            return;
        }
        if let Some(host) = self.host {
            let expected = self.plan.host_backend;
            let named = if expected == Backend::NONE {
                answer.backend != Backend::NONE
            } else {
                answer.backend == expected
            };
            let ok = (200..300).contains(&answer.status) && named;
            if ok && !runs.ok_seen {
                runs.ok_seen = true;
                self.stats.borrow_mut().first_ok(host, at);
            }
        }
        if let Some(ended) = runs.seen(answer, at) {
            self.stats.borrow_mut().answers_run(ended);
        }
    }

    /// A request of this connection task failed (counted in its error class): a failure is not
    /// an answer, but it ends the run of answers in progress, so an answer seen before and
    /// again after a gap of failures (say, across a route change) is two sightings, not one
    /// seen without a break.
    pub(crate) fn failed(
        &self,
        runs: &mut ConnRuns,
        started: Instant,
        class: super::stats::ErrorClass,
    ) {
        self.stats.borrow_mut().error(started, class);
        self.connection_ended(runs);
    }

    /// The connection task is over: its run in progress goes to the thread's record.
    pub(crate) fn connection_ended(&self, runs: &mut ConnRuns) {
        if let Some(ended) = runs.finish() {
            self.stats.borrow_mut().answers_run(ended);
        }
    }
}

#[derive(Clone)]
pub(super) enum Transport {
    Plain(Plain),
    Tls(Tls),
}

struct ThreadResult {
    counters: Counters,
    hist: Histogram<u64>,
    connections: usize,
    answers: Option<Answers>,
}

/// Runs the load described by `cfg` and blocks until it is done (warm-up + duration + the
/// draining of requests in flight, bounded by the timeout). Call it when the load should start.
pub fn run(cfg: &HttpConfig, mut progress: Option<ProgressSink>) -> Result<HttpReport, HttpError> {
    let transport = transport(cfg)?;
    let plan = Arc::new(plan(cfg));
    let threads = cfg.threads;
    let gate = Arc::new(StartGate::default());
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut handles = Vec::with_capacity(threads);
    let mut live = Vec::with_capacity(threads);
    for t in 0..threads {
        let conns = split(cfg.connections, threads, t);
        let counters = Arc::new(LiveCounters::default());
        live.push(counters.clone());
        let (plan, transport, thread_gate, done) = (
            plan.clone(),
            transport.clone(),
            gate.clone(),
            done_tx.clone(),
        );
        let (http2, rate, total, record) =
            (cfg.http2, cfg.rate, cfg.connections, cfg.record_answers);
        let host_count = cfg.host_count;
        let spawned = std::thread::Builder::new()
            .name(format!("loadgen-{t}"))
            .spawn(move || {
                let _done = DoneGuard(done);
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let Some(clock) = thread_gate.arrive_and_wait() else {
                    return Err(std::io::Error::other("run aborted before the start"));
                };
                let rt = rt?;
                let start = clock.start.instant;
                let stats = Rc::new(RefCell::new(ThreadStats::new(
                    clock.start,
                    clock.measure_start,
                    counters,
                    record,
                )));
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async {
                    let mut tasks = Vec::with_capacity(conns.len());
                    for index in conns.clone() {
                        let schedule = rate.map(|r| {
                            let first = start + Duration::from_secs_f64(index as f64 / r);
                            (first, Duration::from_secs_f64(total as f64 / r))
                        });
                        let ctx = ConnCtx {
                            host: (host_count > 1).then(|| index % host_count),
                            plan: plan.clone(),
                            clock,
                            stats: stats.clone(),
                            schedule,
                        };
                        tasks.push(spawn_conn(&transport, http2, ctx));
                    }
                    for task in tasks {
                        let _ = task.await;
                    }
                });
                let stats = Rc::try_unwrap(stats)
                    .map_err(|_| std::io::Error::other("connection task outlived the run"))?
                    .into_inner();
                Ok::<_, std::io::Error>(ThreadResult {
                    counters: stats.counters,
                    hist: stats.hist,
                    connections: conns.len(),
                    answers: stats.answers.map(|a| a.answers),
                })
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                gate.open(None);
                for h in handles {
                    let _ = h.join();
                }
                return Err(HttpError::Thread(format!("cannot spawn thread: {e}")));
            }
        }
    }
    drop(done_tx);
    gate.wait_for_arrivals(threads);
    let run_start = WallClock::now();
    let start = run_start.instant;
    let measure_start = start + cfg.warmup;
    let clock = Clock {
        start: run_start,
        measure_start,
        end: measure_start + cfg.duration,
    };
    let wall_start = run_start.system + cfg.warmup;
    gate.open(Some(clock));

    report_progress(
        &done_rx,
        threads,
        start,
        measure_start,
        &live,
        progress.as_mut(),
    );
    let end_wall = SystemTime::now();

    let mut counters = Counters::default();
    let mut hist = new_latency_histogram();
    let mut per_thread = Vec::with_capacity(threads);
    let mut answers = cfg.record_answers.then(Answers::new);
    let secs = cfg.duration.as_secs_f64();
    for (t, h) in handles.into_iter().enumerate() {
        let result = h
            .join()
            .map_err(|_| HttpError::Thread(format!("thread {t} panicked")))??;
        counters = counters
            .checked_add(&result.counters)
            .ok_or_else(|| HttpError::Report("request counters overflow".into()))?;
        hist.add(&result.hist)
            .map_err(|e| HttpError::Report(format!("{e:?}")))?;
        per_thread.push(ThreadSummary {
            worker: 0,
            thread: t as u32,
            connections: result.connections as u64,
            requests: result.counters.requests,
            errors: result.counters.errors.total(),
            bytes_read: result.counters.bytes_read,
            rps: result.counters.requests as f64 / secs,
        });
        if let (Some(all), Some(thread)) = (&mut answers, &result.answers) {
            all.merge(thread);
        }
    }
    let mut report = HttpReport::from_run(
        run_config(cfg),
        unix_ms(wall_start),
        unix_ms(end_wall).max(unix_ms(wall_start)),
        secs,
        counters,
        &hist,
        per_thread,
    )
    .map_err(HttpError::Report)?;
    report.answers = answers;
    Ok(report)
}

fn spawn_conn(transport: &Transport, http2: bool, ctx: ConnCtx) -> tokio::task::JoinHandle<()> {
    fn spawn<C: Connector>(c: C, http2: bool, ctx: ConnCtx) -> tokio::task::JoinHandle<()> {
        if http2 {
            tokio::task::spawn_local(h2conn::run(c, ctx))
        } else {
            tokio::task::spawn_local(h1::run(c, ctx))
        }
    }
    match transport {
        Transport::Plain(p) => spawn(p.clone(), http2, ctx),
        Transport::Tls(t) => spawn(t.clone(), http2, ctx),
    }
}

/// Connections of thread `t`: an even split, the remainder to the first threads.
fn split(total: usize, threads: usize, t: usize) -> std::ops::Range<usize> {
    let base = total / threads;
    let extra = total % threads;
    let start = t * base + t.min(extra);
    start..start + base + usize::from(t < extra)
}

pub(super) fn transport(cfg: &HttpConfig) -> Result<Transport, HttpError> {
    let plain = Plain {
        addr: cfg.addr,
        nodelay: cfg.keepalive || cfg.http2,
    };
    if cfg.scheme == Scheme::Http {
        return Ok(Transport::Plain(plain));
    }
    let config = tls::client_config(cfg.http2, cfg.insecure).map_err(HttpError::Tls)?;
    let name = ServerName::try_from(cfg.tls_name())
        .map_err(|e| HttpError::Tls(format!("bad TLS server name '{}': {e}", cfg.tls_name())))?;
    Ok(Transport::Tls(Tls {
        plain,
        connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        name,
    }))
}

fn plan(cfg: &HttpConfig) -> Plan {
    let scheme = match cfg.scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    };
    let h2_headers = cfg
        .headers
        .iter()
        .filter(|(n, _)| {
            ![
                "host",
                "connection",
                "content-length",
                "keep-alive",
                "transfer-encoding",
            ]
            .iter()
            .any(|h| n.eq_ignore_ascii_case(h))
        })
        .cloned()
        .collect();
    let hosts = if cfg.host_count > 1 {
        (0..cfg.host_count)
            .map(|i| {
                let authority = cfg.authority_of(i);
                HostRequest {
                    request: serialize_h1_to(cfg, &authority),
                    uri: format!("{scheme}://{authority}{}", cfg.path),
                }
            })
            .collect()
    } else {
        vec![]
    };
    Plan {
        hosts,
        host_backend: cfg
            .host_backend
            .as_deref()
            .map_or(Backend::NONE, |b| Backend::from_value(b.as_bytes())),
        request: serialize_h1(cfg),
        head: cfg.method.eq_ignore_ascii_case("HEAD"),
        keepalive: cfg.keepalive,
        timeout: cfg.timeout,
        body: cfg.body.clone(),
        method: cfg.method.clone(),
        uri: format!("{scheme}://{}{}", cfg.authority(), cfg.path),
        h2_headers,
        record_answers: cfg.record_answers,
    }
}

fn run_config(cfg: &HttpConfig) -> HttpRunConfig {
    HttpRunConfig {
        url: cfg.url.clone(),
        method: cfg.method.clone(),
        connections: cfg.connections as u64,
        threads: cfg.threads as u64,
        duration_s: cfg.duration.as_secs_f64(),
        warmup_s: cfg.warmup.as_secs_f64(),
        rate: cfg.rate,
        keepalive: cfg.keepalive,
        http2: cfg.http2,
        timeout_s: cfg.timeout.as_secs_f64(),
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn splits_connections_evenly() {
        let parts: Vec<_> = (0..3).map(|t| split(10, 3, t)).collect();
        assert_eq!(parts, vec![0..4, 4..7, 7..10]);
        assert_eq!(split(5, 1, 0), 0..5);
    }
}
