//! The UDP report: versioned JSON (`"version": 1, "kind": "udp"`). Its totals are always
//! computed from its runs and streams by [`UdpReport::from_parts`], for one client's run and for
//! a [`merge`] of clients that ran at the same time alike.

use serde::{Deserialize, Serialize};

use super::stream::{loss, Rate, Received, Sent, UdpStream};
use crate::cpu::{node_cost, CpuCost, CpuReport};
use crate::report::{concat_runs, time_span};
use crate::tcp::{Direction, Flow};
use crate::ReportKind;

pub const REPORT_VERSION: u32 = 1;

/// The jitter of the streams of one direction, as iperf3's sum line gives it: the streams'
/// mean, each stream counting once however many datagrams it received, and the worst stream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowJitter {
    pub flow: Flow,
    /// Streams of this direction with a jitter (two or more datagrams received).
    pub streams: u32,
    pub mean_ms: f64,
    pub max_ms: f64,
}

/// Per direction (client to server first), the jitter of the streams that have one.
pub(crate) fn jitter_by_flow(streams: &[UdpStream]) -> Vec<FlowJitter> {
    [Flow::ClientToServer, Flow::ServerToClient]
        .into_iter()
        .filter_map(|flow| {
            let all: Vec<f64> = streams
                .iter()
                .filter(|s| s.flow == flow)
                .filter_map(|s| s.jitter_ms)
                .collect();
            let n = u32::try_from(all.len()).ok().filter(|n| *n > 0)?;
            Some(FlowJitter {
                flow,
                streams: n,
                mean_ms: all.iter().sum::<f64>() / f64::from(n),
                max_ms: all.iter().copied().fold(0.0, f64::max),
            })
        })
        .collect()
}

/// CPU time of both ends, in seconds (or seconds per GB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSeconds {
    pub client: f64,
    pub server: f64,
}

/// One client's test against one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpRun {
    /// The client's address of the control connection.
    pub client: String,
    pub server: String,
    pub streams: u32,
    pub duration_secs: f64,
    /// Bytes of UDP payload per datagram.
    pub len: usize,
    pub direction: Direction,
    /// The paced rate of each sending stream (iperf3 `-b` is per stream too); None: as fast as
    /// possible.
    pub target: Option<Rate>,
    pub started_at_unix_ms: u64,
    pub ended_at_unix_ms: u64,
    /// Percent of one CPU over the test, each end.
    pub cpu: CpuReport,
    pub cpu_seconds: CpuSeconds,
}

impl UdpRun {
    /// How many streams send (each at `target`): `streams`, twice that for both directions.
    pub fn sending_streams(&self) -> u32 {
        match self.direction {
            Direction::Both => self.streams.saturating_mul(2),
            Direction::Send | Direction::Receive => self.streams,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpReport {
    pub version: u32,
    pub kind: String,
    pub started_at_unix_ms: u64,
    pub ended_at_unix_ms: u64,
    /// The rate asked for: the runs' targets times their sending streams, summed; None when a
    /// run sent as fast as possible.
    pub offered: Option<Rate>,
    pub sent: Sent,
    /// The figure to quote (achieved rate), as with iperf3's receiver line.
    pub received: Received,
    pub lost: u64,
    pub loss_percent: f64,
    /// Mean of the streams' jitter, weighted by the datagrams each received, both directions
    /// together (kept for older readers; `jitter_by_flow` is the figure iperf3 users expect).
    pub jitter_ms: Option<f64>,
    /// Per direction: the streams' unweighted mean jitter and the worst stream's.
    #[serde(default)]
    pub jitter_by_flow: Vec<FlowJitter>,
    /// Summed over runs.
    pub cpu: CpuReport,
    pub cpu_seconds: CpuSeconds,
    /// CPU seconds of each end's worker process per 1e9 bytes received; None when nothing was
    /// received.
    pub cpu_seconds_per_gb: Option<CpuSeconds>,
    /// Busy CPU seconds of each end's whole node (/proc/stat: netperf's definition) per 1e9
    /// bytes received; only for one run whose two ends both read their node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_cpu_seconds_per_gb: Option<CpuCost>,
    /// One entry per client test; more than one after [`merge`].
    pub runs: Vec<UdpRun>,
    pub streams: Vec<UdpStream>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("cannot merge a report of version {0} (this build reads version {REPORT_VERSION})")]
    Version(u32),
    #[error("cannot merge a report of kind {0:?} into a udp report")]
    Kind(String),
    #[error(transparent)]
    Invalid(#[from] crate::report::InvalidReport),
    #[error("merging overflows the run index")]
    Overflow,
}

impl UdpReport {
    /// One client's run.
    pub fn single(run: UdpRun, streams: Vec<UdpStream>) -> UdpReport {
        UdpReport::from_parts(vec![run], streams)
    }

    /// The report of `runs` and their `streams` (each naming its run by index), every total
    /// computed from them: within a run, counts add up over the longest stream's time; across
    /// runs (concurrent clients), rates add up. Streams naming no run are left out of the
    /// totals (validation refuses them).
    pub fn from_parts(runs: Vec<UdpRun>, streams: Vec<UdpStream>) -> UdpReport {
        let mut per_run = vec![(Sent::default(), Received::default()); runs.len()];
        let (mut weighted_jitter, mut jitter_weight) = (0f64, 0u64);
        for s in &streams {
            let Some((sent, received)) =
                usize::try_from(s.run).ok().and_then(|i| per_run.get_mut(i))
            else {
                continue;
            };
            sent.add_counts(&s.sent);
            received.add_counts(&s.received);
            if let Some(j) = s.jitter_ms.filter(|_| s.received.packets > 0) {
                weighted_jitter += j * s.received.packets as f64;
                jitter_weight = jitter_weight.saturating_add(s.received.packets);
            }
        }
        let (mut sent, mut received) = (Sent::default(), Received::default());
        let (mut sent_rate, mut received_rate) = (Rate::default(), Rate::default());
        for (run_sent, run_received) in &per_run {
            sent.add_counts(run_sent);
            received.add_counts(run_received);
            sent_rate =
                sent_rate.plus(Rate::of(run_sent.packets, run_sent.bytes, run_sent.seconds));
            received_rate = received_rate.plus(Rate::of(
                run_received.packets,
                run_received.bytes,
                run_received.seconds,
            ));
        }
        sent.set_rate(sent_rate);
        received.set_rate(received_rate);
        let (lost, loss_percent) = loss(sent.packets, received.packets);
        let offered = runs.iter().try_fold(Rate::default(), |acc, run| {
            run.target.map(|t| acc.plus(t.times(run.sending_streams())))
        });
        let cpu = runs
            .iter()
            .fold(CpuReport::default(), |acc, run| acc.sum(&run.cpu));
        let cpu_seconds = runs
            .iter()
            .fold(CpuSeconds::default(), |acc, run| CpuSeconds {
                client: acc.client + run.cpu_seconds.client,
                server: acc.server + run.cpu_seconds.server,
            });
        let gb = received.bytes as f64 / 1e9;
        let run_cpus: Vec<&CpuReport> = runs.iter().map(|r| &r.cpu).collect();
        let node_cpu_seconds_per_gb = node_cost(&run_cpus, received.bytes as f64, 1e9);
        let (started_at_unix_ms, ended_at_unix_ms) = time_span(
            runs.iter()
                .map(|r| (r.started_at_unix_ms, r.ended_at_unix_ms)),
        );
        UdpReport {
            version: REPORT_VERSION,
            kind: ReportKind::Udp.as_str().into(),
            started_at_unix_ms,
            ended_at_unix_ms,
            offered: if runs.is_empty() { None } else { offered },
            sent,
            received,
            lost,
            loss_percent,
            jitter_ms: (jitter_weight > 0).then(|| weighted_jitter / jitter_weight as f64),
            jitter_by_flow: jitter_by_flow(&streams),
            cpu,
            cpu_seconds,
            cpu_seconds_per_gb: (received.bytes > 0).then(|| CpuSeconds {
                client: cpu_seconds.client / gb,
                server: cpu_seconds.server / gb,
            }),
            node_cpu_seconds_per_gb,
            runs,
            streams,
        }
    }

    /// Stream errors, one line each, for a human.
    pub fn stream_errors(&self) -> Vec<String> {
        self.streams
            .iter()
            .filter_map(|s| {
                s.error
                    .as_ref()
                    .map(|e| format!("stream {} (run {}): {e}", s.id, s.run))
            })
            .collect()
    }

    /// Percent of the paced senders' schedule that was never sent: intended send times skipped
    /// (the sender was too far behind) and sends that failed, over every intended send time.
    /// None for senders that were not paced (nothing was offered to compare with).
    pub fn missed_percent(&self) -> Option<f64> {
        self.offered?;
        Some(crate::report::missed_percent(
            self.sent.missed(),
            self.sent.packets,
        ))
    }

    /// The sent and received rates (for progress lines and summaries).
    pub fn rates(&self) -> (Rate, Rate) {
        (self.sent.rate(), self.received.rate())
    }
}

/// Combines reports of clients that ran AT THE SAME TIME into one: runs and streams are
/// concatenated (stream `run` indices renumbered) and every total is recomputed from them, so
/// counts add up exactly, rates of concurrent runs add up, and merging is associative.
pub fn merge(reports: &[UdpReport]) -> Result<UdpReport, MergeError> {
    if reports.is_empty() {
        return Err(MergeError::Empty);
    }
    for r in reports {
        if r.version != REPORT_VERSION {
            return Err(MergeError::Version(r.version));
        }
        if r.kind != ReportKind::Udp.as_str() {
            return Err(MergeError::Kind(r.kind.clone()));
        }
        super::validate::validate_udp(r)?;
    }
    let parts = reports.iter().map(|r| (&r.runs[..], &r.streams[..]));
    let (runs, streams) = concat_runs(parts, |s| &mut s.run).ok_or(MergeError::Overflow)?;
    Ok(UdpReport::from_parts(runs, streams))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A single-run report as the client builds it: `streams` streams sent at 1000 datagrams/s
    /// of 1000 bytes for 2 s, the server's view back with `lost` datagrams missing per stream.
    pub(crate) fn udp_report(start: u64, streams: u32, lost: u64) -> UdpReport {
        let len = 1000u64;
        let usage = crate::cpu::test_usage(10.0, 30.0, 40.0);
        let run = UdpRun {
            client: "198.18.0.1:40000".into(),
            server: "198.18.0.2:5201".into(),
            streams,
            duration_secs: 2.0,
            len: 1000,
            direction: Direction::Send,
            target: Some(Rate {
                bits_per_second: 8e6,
                packets_per_second: 1000.0,
            }),
            started_at_unix_ms: start,
            ended_at_unix_ms: start + 2100,
            cpu: CpuReport {
                client: usage,
                server: usage,
            },
            cpu_seconds: CpuSeconds {
                client: 0.84,
                server: 0.84,
            },
        };
        let stream = |id: u32| {
            let sent = Sent {
                late: 3,
                ..Sent::new(2000, 2000 * len, 1.999)
            };
            let got = 2000 - lost - u64::from(id);
            let received = Received {
                out_of_order: 5,
                duplicates: 1,
                invalid: 2,
                kernel_drops: Some(0),
                ..Received::new(got, got * len, 2.001)
            };
            UdpStream {
                jitter_ms: Some(0.01 * f64::from(id + 1)),
                rcvbuf_bytes: Some(4 << 20),
                ..UdpStream::new(id, Flow::ClientToServer, sent, received)
            }
        };
        UdpReport::single(run, (0..streams).map(stream).collect())
    }

    #[test]
    fn single_run_totals_add_streams_over_the_longest_time() {
        let r = udp_report(1000, 2, 10);
        assert_eq!(r.sent.packets, 4000);
        assert_eq!(r.received.packets, 1990 + 1989);
        assert_eq!(r.lost, 21);
        assert!((r.loss_percent - 21.0 / 4000.0 * 100.0).abs() < 1e-12);
        assert_eq!(r.received.bytes, 3979 * 1000);
        assert_eq!(r.received.seconds, 2.001);
        assert_eq!(r.received.bits_per_second, 3979.0 * 8000.0 / 2.001);
        assert_eq!(r.received.out_of_order, 10);
        assert_eq!(r.received.kernel_drops, Some(0));
        assert_eq!(r.sent.late, 6);
        let offered = r.offered.unwrap();
        assert_eq!(offered.bits_per_second, 16e6);
        assert_eq!(offered.packets_per_second, 2000.0);
        // Jitter: weighted by datagrams received (1990 at 0.01 ms, 1989 at 0.02 ms).
        let want = (0.01 * 1990.0 + 0.02 * 1989.0) / 3979.0;
        assert!((r.jitter_ms.unwrap() - want).abs() < 1e-15);
        let per_gb = r.cpu_seconds_per_gb.unwrap();
        assert!((per_gb.client - 0.84 / (3979.0 * 1000.0 / 1e9)).abs() < 1e-9);
    }

    #[test]
    fn merge_sums_concurrent_clients_and_is_associative() {
        let (a, b, c) = (
            udp_report(1000, 2, 10),
            udp_report(1500, 1, 0),
            udp_report(900, 3, 100),
        );
        let m = merge(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(
            m.received.bits_per_second,
            a.received.bits_per_second + b.received.bits_per_second
        );
        assert_eq!(m.sent.packets, a.sent.packets + b.sent.packets);
        assert_eq!(m.lost, a.lost + b.lost);
        assert_eq!(m.runs.len(), 2);
        assert_eq!(
            m.streams.iter().map(|s| s.run).collect::<Vec<_>>(),
            vec![0, 0, 1]
        );
        assert_eq!((m.started_at_unix_ms, m.ended_at_unix_ms), (1000, 3600));
        assert_eq!(m.cpu.client.total_percent, 80.0);
        assert_eq!(m.cpu_seconds.server, 1.68);
        let left = merge(&[merge(&[a.clone(), b.clone()]).unwrap(), c.clone()]).unwrap();
        let right = merge(&[a.clone(), merge(&[b, c]).unwrap()]).unwrap();
        assert_eq!(left, right);
        assert_eq!(merge(std::slice::from_ref(&a)).unwrap(), a);
    }

    #[test]
    fn jitter_per_direction_is_the_streams_unweighted_mean_and_their_worst() {
        // Three streams each way: one stream with few datagrams but a bad jitter is not
        // drowned by the others (a weighted mean would hide it).
        let mut r = udp_report(0, 3, 0);
        r.runs[0].direction = Direction::Both;
        let mut back = r.streams.clone();
        for (i, s) in back.iter_mut().enumerate() {
            s.id = 3 + i as u32;
            s.flow = Flow::ServerToClient;
            s.jitter_ms = Some(1.0 + i as f64);
        }
        let few = &r.streams[2];
        r.streams[2] = UdpStream {
            jitter_ms: Some(5.0),
            ..UdpStream::new(2, few.flow, few.sent, Received::new(10, 10_000, 2.0))
        };
        let mut streams = r.streams.clone();
        streams.extend(back);
        let r = UdpReport::from_parts(r.runs, streams);
        let [send, receive] = r.jitter_by_flow.as_slice() else {
            panic!("{:?}", r.jitter_by_flow)
        };
        assert_eq!((send.flow, send.streams), (Flow::ClientToServer, 3));
        assert!((send.mean_ms - (0.01 + 0.02 + 5.0) / 3.0).abs() < 1e-12);
        assert_eq!(send.max_ms, 5.0);
        assert_eq!((receive.flow, receive.streams), (Flow::ServerToClient, 3));
        assert!((receive.mean_ms - 2.0).abs() < 1e-12);
        assert_eq!(receive.max_ms, 3.0);
        // The weighted figure barely moves for the bad stream.
        assert!(r.jitter_ms.unwrap() < 2.0);
        crate::udp::validate_udp(&r).unwrap();
        let mut forged = r.clone();
        forged.jitter_by_flow[0].max_ms = 0.02;
        let e = crate::udp::validate_udp(&forged).unwrap_err().to_string();
        assert!(e.contains("jitter_by_flow[0].max_ms"), "{e}");
        let mut forged = r;
        forged.jitter_by_flow.pop();
        let e = crate::udp::validate_udp(&forged).unwrap_err().to_string();
        assert!(e.contains("jitter_by_flow"), "{e}");
    }

    #[test]
    fn the_missed_share_of_the_schedule_counts_skips_and_failed_sends() {
        let mut r = udp_report(0, 1, 0);
        assert_eq!(r.missed_percent(), Some(0.0));
        r.streams[0].sent.skipped = 1800;
        r.streams[0].sent.errors = 200;
        let r = UdpReport::from_parts(r.runs, r.streams);
        // 2000 sent, 2000 never sent: half the schedule.
        assert_eq!(r.missed_percent(), Some(50.0));
        let mut unpaced = udp_report(0, 1, 0);
        unpaced.offered = None;
        assert_eq!(unpaced.missed_percent(), None);
    }

    #[test]
    fn node_cpu_per_gigabyte_only_for_one_run_with_both_nodes_read() {
        use crate::cpu::NodeCpu;
        let node = NodeCpu {
            cpus: 2,
            busy_percent: 50.0,
            ..NodeCpu::default()
        };
        let mut r = udp_report(0, 1, 0);
        assert_eq!(r.node_cpu_seconds_per_gb, None);
        let cpu = &mut r.runs[0].cpu;
        for end in [&mut cpu.client, &mut cpu.server] {
            end.seconds = Some(2.0);
            end.node = Some(node);
        }
        let r = UdpReport::from_parts(r.runs, r.streams);
        let gb = r.received.bytes as f64 / 1e9;
        // 50 % of 2 CPUs over 2 s: 2 busy CPU seconds each end.
        let got = r.node_cpu_seconds_per_gb.unwrap();
        assert!((got.client - 2.0 / gb).abs() < 1e-9 && (got.server - 2.0 / gb).abs() < 1e-9);
        crate::udp::validate_udp(&r).unwrap();
        let mut forged = r.clone();
        forged.node_cpu_seconds_per_gb = None;
        assert!(crate::udp::validate_udp(&forged).is_err());
        let merged = merge(&[r.clone(), r]).unwrap();
        assert_eq!(
            merged.node_cpu_seconds_per_gb, None,
            "two runs may share a node"
        );
    }

    #[test]
    fn an_unpaced_run_leaves_the_offered_rate_open() {
        let mut runs = udp_report(0, 1, 0).runs;
        runs[0].target = None;
        let mut streams = udp_report(0, 1, 0).streams;
        streams[0].sent.late = 0;
        let r = UdpReport::from_parts(runs, streams);
        assert_eq!(r.offered, None);
        let merged = merge(&[udp_report(0, 1, 0), r]).unwrap();
        assert_eq!(merged.offered, None);
    }

    #[test]
    fn merge_refuses_foreign_reports() {
        assert_eq!(merge(&[]), Err(MergeError::Empty));
        let mut other = udp_report(0, 1, 0);
        other.version = 2;
        assert_eq!(
            merge(&[udp_report(0, 1, 0), other]),
            Err(MergeError::Version(2))
        );
        let mut tcp = udp_report(0, 1, 0);
        tcp.kind = "tcp".into();
        assert_eq!(merge(&[tcp]), Err(MergeError::Kind("tcp".into())));
    }

    #[test]
    fn json_is_versioned_and_round_trips() {
        let r = udp_report(1000, 2, 3);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["version"], 1);
        assert_eq!(json["kind"], "udp");
        assert_eq!(json["streams"][0]["flow"], "client_to_server");
        assert_eq!(json["streams"][0]["lost"], 3);
        let back: UdpReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
    }
}
