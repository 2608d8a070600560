//! The UDP stream engine's report (kind `"udp"`, iperf3 `-u` style): per stream, the sender's
//! count of datagrams and the receiver's (unique datagrams, out of order, duplicates, invalid
//! ones, RFC 3550 interarrival jitter, drops the receiving socket counted), loss from sequence
//! numbers, offered vs achieved rate, late and skipped sends of the paced sender, CPU use of
//! both ends and CPU seconds per GB received.
//!
//! Invariants (what [`validate_udp`] checks): every datagram is `len` bytes, so bytes are
//! packets x len; a receiver counts each sequence number once (`received <= sent`), so
//! `lost = sent - received` and `loss_percent = lost / sent x 100`; rates are counts over
//! seconds; the totals are recomputed from the streams ([`UdpReport::from_parts`]), which also
//! makes [`merge`] associative.

pub(crate) mod report;
mod stream;
mod validate;

pub use report::{merge, CpuSeconds, FlowJitter, MergeError, UdpReport, UdpRun, REPORT_VERSION};
pub use stream::{Rate, Received, Sent, UdpStream};
pub use validate::{validate_udp, MAX_JITTER_MS, MAX_PACKETS_PER_SECOND};

/// Bytes of the header every netbench datagram starts with (magic, version, kind, stream, test
/// tag, sequence number, send time): the shortest datagram a test may use.
pub const MIN_LEN: usize = 32;
/// Largest UDP payload over IPv4 (65535 - 20 - 8).
pub const MAX_LEN: usize = 65_507;
/// Most parallel streams one test may open (each way), as for TCP.
pub const MAX_STREAMS: u32 = crate::tcp::MAX_STREAMS;
