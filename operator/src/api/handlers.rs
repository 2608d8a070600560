//! Worker API handlers. The caller is already authenticated (see `auth`); each handler checks,
//! in one registry lookup, that the caller may speak for the worker its request names and that
//! this worker belongs to the run's current step.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use protocol::worker::ReportRefusal;
use protocol::worker::*;
use protocol::ReportKind;
use serde::Deserialize;
use std::time::Duration;

use super::identity::Authenticated;
use super::metrics::LiveMetrics;
use super::refusal::{refuse, registry_refusal, Refusal};
use super::state::ApiState;
use crate::context::Wake;
use crate::store::registry::BarrierState;

/// What every worker handler starts from: the API's state and the caller `auth` admitted.
pub struct Worker {
    s: ApiState,
    who: Authenticated,
}

impl FromRequestParts<ApiState> for Worker {
    type Rejection = <Extension<Authenticated> as FromRequestParts<ApiState>>::Rejection;

    async fn from_request_parts(parts: &mut Parts, s: &ApiState) -> Result<Self, Self::Rejection> {
        let Extension(who) = Extension::<Authenticated>::from_request_parts(parts, s).await?;
        Ok(Worker { s: s.clone(), who })
    }
}

/// A JSON body as a handler takes it (refused by [`worker_body`] when malformed).
type Body<T> = Result<Json<T>, JsonRejection>;
/// A handler's answer.
type Answer = Result<Response, Refusal>;

/// Unwraps a JSON body, turning a malformed or oversized one into a counted 4xx.
fn body<T>(s: &ApiState, body: Result<Json<T>, JsonRejection>) -> Result<T, Refusal> {
    match body {
        Ok(Json(v)) => Ok(v),
        Err(JsonRejection::BytesRejection(e)) => {
            let reason = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                "too_large"
            } else {
                "malformed"
            };
            Err(refuse(&s.metrics, e.status(), reason, e.body_text()))
        }
        Err(e) => Err(refuse(
            &s.metrics,
            StatusCode::UNPROCESSABLE_ENTITY,
            "malformed",
            e.body_text(),
        )),
    }
}

/// The preamble of a handler taking a JSON body: the body unwrapped (see [`body`]), then its
/// protocol version (`version` reads it) checked.
fn worker_body<T>(s: &ApiState, json: Body<T>, version: impl Fn(&T) -> u32) -> Result<T, Refusal> {
    let v = body(s, json)?;
    check_version(s, version(&v))?;
    Ok(v)
}

fn check_version(s: &ApiState, version: u32) -> Result<(), Refusal> {
    if version == PROTOCOL_VERSION {
        Ok(())
    } else {
        Err(refuse(
            &s.metrics,
            StatusCode::UNPROCESSABLE_ENTITY,
            "version",
            format!("protocol version {version} is not supported (this operator speaks {PROTOCOL_VERSION})"),
        ))
    }
}

fn barrier_body(b: BarrierState) -> BarrierResponse {
    BarrierResponse {
        version: PROTOCOL_VERSION,
        start_at_unix_ms: b.start_at_unix_ms,
        registered: b.registered,
        expected: b.expected,
        servers: b.servers,
    }
}

/// A worker API handler: every line it logs carries the run, the benchmark and the worker (its
/// span, named after the handler), from the caller `who` of its [`Worker`].
#[rustfmt::skip]
macro_rules! worker_handler {
    ($who:ident, $handler:item) => {
        #[tracing::instrument(
            skip_all,
            fields(
                run = %$who.run,
                kind = %$who.kind,
                namespace = %$who.caller.namespace,
                benchmark = %$who.benchmark,
                worker = %$who.caller.worker,
            )
        )]
        $handler
    };
}

worker_handler!(
    who,
    pub async fn register(Worker { s, who }: Worker, req: Body<RegisterRequest>) -> Answer {
        let req = worker_body(&s, req, |r| r.version)?;
        let role = req.role;
        let preflight_error = req.preflight_error.clone();
        let registered =
            s.runs
                .register(&who.run, &who.caller, req, protocol::worker::now_unix_ms());
        let b = match registered {
            Ok(b) => b,
            Err(e) => {
                if let Some(why) = e.speaks_beyond_itself() {
                    tracing::warn!(?role, "worker refused, its run ends: {why}");
                    wake(&s, &who.run);
                }
                return Err(registry_refusal(&s.metrics, e));
            }
        };
        if let Some(error) = preflight_error {
            tracing::warn!(?role, "worker cannot start: {error}");
            // The run ends now, not at the next poll.
            wake(&s, &who.run);
        } else if b.start_at_unix_ms.is_some() {
            // The barrier is open: what waits for the load's start (a route scale's routes,
            // the workloads' usage) looks at its instant now, not at its next poll.
            wake(&s, &who.run);
        }
        tracing::info!(
            ?role,
            registered = b.registered,
            expected = b.expected,
            "worker registered"
        );
        let resp = RegisterResponse {
            version: PROTOCOL_VERSION,
            registered: b.registered,
            expected: b.expected,
        };
        Ok(Json(resp).into_response())
    }
);

#[derive(Deserialize)]
pub struct BarrierQuery {
    worker: String,
    step: u32,
    /// How long a closed barrier may hold its answer, in ms (at most `ApiState::barrier_wait`).
    #[serde(rename = "waitMs", default)]
    wait_ms: u64,
}

worker_handler!(
    who,
    pub async fn barrier(
        Worker { s, who }: Worker,
        q: Result<Query<BarrierQuery>, QueryRejection>,
    ) -> Answer {
        let Query(q) = q.map_err(|e| {
            refuse(
                &s.metrics,
                StatusCode::BAD_REQUEST,
                "malformed",
                e.body_text(),
            )
        })?;
        let refused = |e| registry_refusal(&s.metrics, e);
        let (mut b, mut opened) = s
            .runs
            .barrier_and_opening(&who.run, &who.caller, &q.worker, q.step)
            .map_err(refused)?;
        let wait = Duration::from_millis(q.wait_ms).min(s.barrier_wait);
        if b.start_at_unix_ms.is_none() && !wait.is_zero() {
            // Opened, this step's state gone, or the wait over: the answer is what the
            // registry says now (a new step's refusal, a forgotten run's, included).
            let _ = tokio::time::timeout(wait, opened.wait_for(|open| *open)).await;
            b = s
                .runs
                .barrier(&who.run, &who.caller, &q.worker, q.step)
                .map_err(refused)?;
        }
        let code = if b.start_at_unix_ms.is_some() {
            StatusCode::OK
        } else {
            StatusCode::ACCEPTED
        };
        Ok((code, Json(barrier_body(b))).into_response())
    }
);

worker_handler!(
    who,
    pub async fn progress(Worker { s, who }: Worker, update: Body<ProgressUpdate>) -> Answer {
        let update = worker_body(&s, update, |u| u.version)?;
        let spec = s
            .runs
            .progress(&who.run, &who.caller, &update)
            .map_err(|e| registry_refusal(&s.metrics, e))?;
        s.metrics
            .family::<LiveMetrics>()
            .set(&spec.namespace, &spec.benchmark, &update);
        Ok(StatusCode::NO_CONTENT.into_response())
    }
);

worker_handler!(
    who,
    pub async fn report(Worker { s, who }: Worker, report: Body<FinalReport>) -> Answer {
        let mut report = worker_body(&s, report, |r| r.version)?;
        let run = who.run;
        let spec = s
            .runs
            .authorize(&run, &who.caller, &report.worker, report.step)
            .map_err(|e| registry_refusal(&s.metrics, e))?;
        // The report is stored with the node of the worker's pod, never a node it claims.
        report.node = match who.caller.own_node(report.node.as_deref()) {
            Ok(node) => node,
            Err(e) => {
                if let Some(why) = e.speaks_beyond_itself() {
                    tracing::warn!("report refused, its run ends: {why}");
                    s.runs.refused(&run, &report.worker, why);
                    wake(&s, &run);
                }
                return Err(registry_refusal(&s.metrics, e));
            }
        };
        if let Err(e) = check_report(spec.report_kind, &report) {
            return Err(report_refusal(&s, e));
        }
        if let Err(e) = s.sink.store(&run, &spec, &report).await {
            tracing::warn!("storing the report failed: {e}");
            let body = ApiError {
                error: format!("could not store the report yet: {e}"),
            };
            return Ok((StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response());
        }
        tracing::info!(step = report.step, "report stored");
        s.metrics
            .family::<LiveMetrics>()
            .forget(&spec.namespace, &spec.benchmark, &report.worker);
        let _ = s.wake.send(Wake {
            kind: spec.kind.clone(),
            namespace: spec.namespace.clone(),
            name: spec.benchmark.clone(),
        });
        Ok(StatusCode::NO_CONTENT.into_response())
    }
);

/// Wakes `run`'s reconcile now (a worker cannot start, or was refused: the run ends).
fn wake(s: &ApiState, run: &str) {
    if let Some(spec) = s.runs.spec(run) {
        let _ = s.wake.send(Wake {
            kind: spec.kind.clone(),
            namespace: spec.namespace.clone(),
            name: spec.benchmark.clone(),
        });
    }
}

/// A report must be of the kind the step's clients deliver (an IngressBenchmark's http, an
/// EgressBenchmark case's tcp, rr or udp, per its protocol) and pass validation (histogram
/// decoded with bounds, counters consistent) before it is stored.
fn check_report(kind: ReportKind, report: &FinalReport) -> Result<(), ReportRefusal> {
    let checked = protocol::worker::validate_final(report, kind)?;
    if checked.kind() != kind {
        return Err(ReportRefusal::Malformed(format!(
            "expected a {kind} report, got a {} report",
            checked.kind()
        )));
    }
    Ok(())
}

/// Unparseable or foreign reports are 422 `malformed`; parsed reports that break an invariant
/// are 400 `invalid_report`, with the field named.
fn report_refusal(s: &ApiState, e: ReportRefusal) -> Refusal {
    match e {
        ReportRefusal::Malformed(m) => refuse(
            &s.metrics,
            StatusCode::UNPROCESSABLE_ENTITY,
            "malformed",
            format!("report: {m}"),
        ),
        ReportRefusal::Invalid(e) => refuse(
            &s.metrics,
            StatusCode::BAD_REQUEST,
            "invalid_report",
            e.to_string(),
        ),
    }
}

#[cfg(test)]
mod report_kind_tests {
    use super::{check_report, FinalReport, ReportKind, ReportRefusal};
    use serde_json::json;

    /// A client's report of one run with one stream.
    fn tcp_report() -> serde_json::Value {
        let t = json!({"bytes": 10, "seconds": 1.0, "bits_per_second": 80.0});
        let cpu = json!({"user_percent": 1.0, "system_percent": 2.0, "total_percent": 3.0});
        let run = json!({"client": "a", "server": "b", "streams": 1, "duration_secs": 1.0,
               "len": 1000, "direction": "send", "started_at_unix_ms": 1, "ended_at_unix_ms": 2,
               "cpu": {"client": cpu, "server": cpu}});
        let stream = json!({"run": 0, "id": 0, "flow": "client_to_server", "sender": t,
               "receiver": t, "tcp": null, "error": null});
        json!({"version": 1, "kind": "tcp", "started_at_unix_ms": 1, "ended_at_unix_ms": 2,
               "sender": t, "receiver": t, "retransmits": 0, "mean_rtt_us": null,
               "cpu": {"client": cpu, "server": cpu}, "runs": [run], "streams": [stream]})
    }

    fn check(kind: ReportKind, report: serde_json::Value) -> Result<(), ReportRefusal> {
        check_report(kind, &FinalReport::new("w0", None, 0, 1, report))
    }

    #[test]
    fn hostile_host_facts_refuse_the_report() {
        let mut r = FinalReport {
            host: Some(protocol::worker::host::HostFacts {
                cpu_model: Some("x\u{7}\nInjected: yes".into()),
                interfaces: vec![],
            }),
            ..FinalReport::new("w0", None, 0, 1, tcp_report())
        };
        let err = check_report(ReportKind::Tcp, &r).unwrap_err();
        assert!(err.to_string().contains("host.cpuModel"), "{err}");
        r.host = Some(protocol::worker::host::HostFacts::read_local());
        assert_eq!(check_report(ReportKind::Tcp, &r), Ok(()));
    }

    /// Every kind refuses a report that names any other kind, and only Tcp takes the tcp one.
    #[test]
    fn each_kind_refuses_reports_of_every_other_kind() {
        for kind in ReportKind::ALL {
            for other in ReportKind::ALL.into_iter().filter(|o| *o != kind) {
                let foreign = json!({"version": 1, "kind": other.as_str()});
                assert_eq!(
                    check(kind, foreign),
                    Err(ReportRefusal::Malformed(format!(
                        "expected a {kind} report, got \"{other}\""
                    )))
                );
            }
            assert_eq!(check(kind, tcp_report()).is_ok(), kind == ReportKind::Tcp);
        }
    }

    #[test]
    fn a_step_takes_reports_of_its_kind_only() {
        assert_eq!(check(ReportKind::Tcp, tcp_report()), Ok(()));
        // An http step (ingress) or a request/response case refuses a tcp report.
        let err = check(ReportKind::Http, tcp_report()).unwrap_err();
        assert!(err.to_string().contains("expected a http report"), "{err}");
        let err = check(ReportKind::Rr, tcp_report()).unwrap_err();
        assert!(err.to_string().contains("expected a rr report"), "{err}");
        let err = check(ReportKind::Udp, tcp_report()).unwrap_err();
        assert!(err.to_string().contains("expected a udp report"), "{err}");
        let mut broken = tcp_report();
        broken["sender"] = json!("fast");
        assert!(matches!(
            check(ReportKind::Tcp, broken),
            Err(ReportRefusal::Malformed(_))
        ));
        let mut future = tcp_report();
        future["version"] = json!(2);
        assert!(check(ReportKind::Tcp, future).is_err());
        let mut forged = tcp_report();
        forged["receiver"]["bits_per_second"] = json!(8e12);
        let err = check(ReportKind::Tcp, forged).unwrap_err();
        assert!(
            err.to_string().contains("report.receiver.bits_per_second"),
            "{err}"
        );
    }
}
