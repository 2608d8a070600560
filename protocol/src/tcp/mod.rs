//! The TCP stream engine's report (kind `"tcp"`): both ends' view of every stream, TCP_INFO of
//! the sending sockets, the CPU use of both ends; [`merge`] combines clients that ran at the
//! same time, [`validate_tcp`] checks every invariant the engine guarantees. A report may carry
//! the CPU each end spent per gigabyte and a latency probe ([`crate::rr::LatencyProbe`]).

mod report;
pub(crate) mod validate;

use serde::{Deserialize, Serialize};

pub use crate::cpu::{CpuCost, CpuReport, CpuUsage, MAX_CPU_PERCENT};
pub use report::{
    merge, MergeError, RunSummary, StreamReport, TcpInfoSnapshot, TcpReport, Throughput,
    REPORT_VERSION,
};
pub use validate::{validate_tcp, MAX_BITS_PER_SECOND};

/// Most parallel streams one test may open (each way).
pub const MAX_STREAMS: u32 = 128;
/// Largest message (buffer) size of one write or read call.
pub const MAX_LEN: usize = 16 * 1024 * 1024;

/// Which way the bytes flow, seen from the client (iperf3: default, `-R`, `--bidir`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client sends, server receives.
    #[default]
    Send,
    /// Server sends, client receives (iperf3 `-R`).
    Receive,
    /// Both at once: `streams` connections each way (iperf3 `--bidir`).
    Both,
}

impl Direction {
    /// The flows of all data connections of a test, in stream-id order.
    pub fn flows(self, streams: u32) -> Vec<Flow> {
        let n = streams as usize;
        match self {
            Direction::Send => vec![Flow::ClientToServer; n],
            Direction::Receive => vec![Flow::ServerToClient; n],
            Direction::Both => {
                [vec![Flow::ClientToServer; n], vec![Flow::ServerToClient; n]].concat()
            }
        }
    }
}

/// The direction of one data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    ClientToServer,
    ServerToClient,
}
