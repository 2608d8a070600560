//! The one place a [`Protocol`] is matched to what the loadgen does for it (`entry`), and a
//! [`ReportKind`] to its merge ([`merge`]): the client's runner (standalone or as a worker),
//! the server's check of a test request and its side of the test. `main.rs` and
//! [`crate::tcp::server`] go through here; both matches are exhaustive, so a new variant is a
//! compile error here and nowhere else in the crate.
//!
//! A client protocol is a [`ClientTest`] (its engine's config, preflight, run, progress and
//! finish, a `CLIENT` constant in the engine's `cli`), which `client` runs standalone
//! ([`standalone`]) or as a worker ([`crate::worker::tcp::run_client_worker`]).

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use anyhow::anyhow;
use protocol::report::Report;
use protocol::rr::RrReport;
use protocol::tcp::TcpReport;
use protocol::udp::UdpReport;
use protocol::worker::ProgressUpdate;
use protocol::{Protocol, ReportKind};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::report::http_summary;
use crate::tcp::cli::ClientArgs;
use crate::tcp::protocol::TestParams;
use crate::tcp::server::TcpServer;
use crate::tcp::TcpError;
use crate::worker::{WorkerClient, WorkerEnv};

/// What the loadgen does for one protocol.
pub(crate) struct Entry {
    /// Runs the client's test: standalone, or as a worker (NETBENCH_OPERATOR_URL set).
    pub client: fn(&ClientArgs) -> anyhow::Result<()>,
    /// Whether the server can run a test request of this protocol (before accepting it).
    pub check: fn(&TestParams) -> Result<(), TcpError>,
    /// The server's side of an accepted test (checked by `check`), results sent.
    pub serve: fn(Accepted<'_>) -> Result<(), TcpError>,
}

/// The protocol's [`Entry`]: the one `match` on [`Protocol`] in the loadgen.
pub(crate) fn entry(protocol: Protocol) -> Entry {
    match protocol {
        Protocol::TcpStream => Entry {
            client: |args| client(args, &crate::tcp::cli::CLIENT),
            check: |_| Ok(()),
            serve: crate::tcp::stream_server::run_test,
        },
        Protocol::UdpStream => Entry {
            client: |args| client(args, &crate::udp::cli::CLIENT),
            check: crate::udp::server::supported,
            serve: crate::udp::server::run_test,
        },
        Protocol::TcpRr | Protocol::TcpCrr | Protocol::UdpRr => Entry {
            client: |args| client(args, &crate::rr::cli::CLIENT),
            check: crate::rr::serve::check,
            serve: crate::rr::serve::run_test,
        },
    }
}

/// `client`: runs the test of the protocol asked for (`-u` is `--protocol udp-stream`).
pub fn run_client(args: &ClientArgs) -> anyhow::Result<()> {
    (entry(args.udp.protocol(args.protocol)).client)(args)
}

/// A test the server accepted from its listener, as the protocol's side of it gets it.
pub(crate) struct Accepted<'a> {
    pub server: &'a TcpServer,
    pub control: TcpStream,
    pub cookie: &'a str,
    pub test: &'a TestParams,
    pub shutdown: &'a AtomicBool,
}

/// Where a running client test hands its snapshot every second.
pub type ProgressSink<'a, P> = &'a mut dyn FnMut(&P);

/// A client test of one protocol (config `C`, progress snapshot `P`, report `R`): what its
/// engine does, as the command line runs it standalone or as a worker.
pub struct ClientTest<C, P, R> {
    /// The command a standalone run names when `-c HOST` is missing.
    pub command: &'static str,
    /// The test the command line asks for, against `host:port`.
    pub config: fn(&ClientArgs, &str, u16) -> C,
    /// Checks that the server can be reached (a worker does, before the barrier).
    pub preflight: fn(&C) -> Result<(), TcpError>,
    /// Runs the test, handing a snapshot to the sink every second.
    pub run: fn(&C, Option<ProgressSink<'_, P>>) -> Result<R, TcpError>,
    /// The line a standalone run prints every second (text output).
    pub progress_line: fn(&P) -> String,
    /// The worker's blank update filled with a snapshot's figures.
    pub progress_update: fn(&P, ProgressUpdate) -> ProgressUpdate,
    /// Prints the report (text or JSON as asked); fails if the test did (after printing).
    pub finish: fn(&ClientArgs, &R) -> anyhow::Result<()>,
}

/// Standalone, or under the operator: connect to the server named at the barrier, push
/// progress, deliver the report, then print it (and fail if the test did). Flags that do not
/// apply to the protocol are refused first.
fn client<C, P, R: Serialize>(args: &ClientArgs, test: &ClientTest<C, P, R>) -> anyhow::Result<()> {
    args.check_applicable()?;
    match WorkerEnv::from_env()? {
        Some(env) => {
            let worker = WorkerClient::new(env);
            let report = crate::worker::tcp::run_client_worker(args, &worker, test)?;
            (test.finish)(args, &report)
        }
        None => standalone(args, test),
    }
}

/// Standalone: runs the test against `-c HOST`, printing a line per second on stdout unless
/// the output is JSON (best effort: a closed stdout must not abort the test), then the report.
pub fn standalone<C, P, R>(args: &ClientArgs, test: &ClientTest<C, P, R>) -> anyhow::Result<()> {
    let host = args.server(test.command)?;
    let cfg = (test.config)(args, host, args.port);
    let mut print_interval = |p: &P| {
        let _ = writeln!(std::io::stdout(), "{}", (test.progress_line)(p));
    };
    let sink = (!args.json()).then_some(&mut print_interval as ProgressSink<'_, P>);
    let report = (test.run)(&cfg, sink)?;
    (test.finish)(args, &report)
}

/// `merge`: the exact merge of reports of one kind (the first one's), as pretty JSON or as
/// text, ready to print.
pub fn merge(texts: &[(&Path, String)], json: bool) -> anyhow::Result<String> {
    let first = texts.first().map(|(_, text)| text.as_str()).unwrap_or("");
    match report_kind(first) {
        Some(ReportKind::Tcp) => TCP_REPORTS.merge(texts, json),
        Some(ReportKind::Rr) => RR_REPORTS.merge(texts, json),
        Some(ReportKind::Udp) => UDP_REPORTS.merge(texts, json),
        // Every other kind goes through `Report`.
        Some(ReportKind::Http) | None => merge_envelope(texts, json),
    }
}

fn report_kind(text: &str) -> Option<ReportKind> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get("kind")?.as_str()?.parse().ok()
}

/// A report type of its own (`R`): what a text that is not one is called, its exact merge,
/// and its text form.
struct Reports<R, E> {
    what: &'static str,
    merge: fn(&[R]) -> Result<R, E>,
    text: fn(&R) -> String,
}

const TCP_REPORTS: Reports<TcpReport, protocol::tcp::MergeError> = Reports {
    what: "a tcp report",
    merge: protocol::tcp::merge,
    text: crate::tcp::render_text,
};
const RR_REPORTS: Reports<RrReport, protocol::rr::RrMergeError> = Reports {
    what: "an rr report",
    merge: protocol::rr::merge,
    text: crate::rr::render_text,
};
const UDP_REPORTS: Reports<UdpReport, protocol::udp::MergeError> = Reports {
    what: "a udp report",
    merge: protocol::udp::merge,
    text: crate::udp::render_text,
};

impl<R, E> Reports<R, E>
where
    R: Serialize + DeserializeOwned,
    E: std::error::Error + Send + Sync + 'static,
{
    /// Reads every text as one, merges them, and shows the result as pretty JSON or as text.
    fn merge(&self, texts: &[(&Path, String)], json: bool) -> anyhow::Result<String> {
        let mut reports = Vec::with_capacity(texts.len());
        for (f, t) in texts {
            let report: R = serde_json::from_str(t)
                .map_err(|e| anyhow!("'{}': not {}: {e}", f.display(), self.what))?;
            reports.push(report);
        }
        let merged = (self.merge)(&reports)?;
        Ok(if json {
            serde_json::to_string_pretty(&merged)? + "\n"
        } else {
            (self.text)(&merged)
        })
    }
}

/// The reports `Report` reads (HTTP's), merged.
fn merge_envelope(texts: &[(&Path, String)], json: bool) -> anyhow::Result<String> {
    let mut reports = Vec::with_capacity(texts.len());
    for (f, text) in texts {
        let report = Report::from_json(text).map_err(|e| anyhow!("'{}': {e}", f.display()))?;
        reports.push(report);
    }
    let merged = Report::merge(&reports)?;
    Ok(match (json, &merged) {
        (true, _) => merged.to_json() + "\n",
        (false, Report::Http(h)) => http_summary(h, true),
    })
}
