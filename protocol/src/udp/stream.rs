//! One UDP stream's figures, seen from both ends: what its sender did and what its receiver
//! counted (packets and bytes over seconds, at a rate), and the loss between the two.

use serde::{Deserialize, Serialize};

use crate::tcp::Flow;

/// A rate of UDP payload: bits and datagrams per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub bits_per_second: f64,
    pub packets_per_second: f64,
}

impl Rate {
    /// Counts over `seconds`; zero when no time passed.
    pub fn of(packets: u64, bytes: u64, seconds: f64) -> Rate {
        if seconds > 0.0 {
            Rate {
                bits_per_second: bytes as f64 * 8.0 / seconds,
                packets_per_second: packets as f64 / seconds,
            }
        } else {
            Rate::default()
        }
    }

    pub(super) fn plus(self, other: Rate) -> Rate {
        Rate {
            bits_per_second: self.bits_per_second + other.bits_per_second,
            packets_per_second: self.packets_per_second + other.packets_per_second,
        }
    }

    pub(super) fn times(self, n: u32) -> Rate {
        Rate {
            bits_per_second: self.bits_per_second * f64::from(n),
            packets_per_second: self.packets_per_second * f64::from(n),
        }
    }
}

/// What a sender did. `seconds` is the window it sent in: the test's duration, or until the
/// stream stopped early; rates are counts over seconds (in a merged total: the sum of the runs'
/// rates).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    pub packets: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub bits_per_second: f64,
    pub packets_per_second: f64,
    /// Datagrams sent more than the engine's lateness bound after their intended send time
    /// (paced streams only).
    pub late: u64,
    /// Intended send times given up because the sender was further behind its schedule than
    /// it may catch up in one burst (paced streams only): it could not keep the target rate.
    pub skipped: u64,
    /// Send calls that failed (those datagrams were not sent and are not counted).
    pub errors: u64,
    /// When the last datagram went out, seconds after the start (absent in older reports and in
    /// totals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_send_seconds: Option<f64>,
}

/// What [`Sent`] and [`Received`] alike hold: packets and bytes over seconds, at a rate.
macro_rules! counted {
    ($t:ident) => {
        impl $t {
            /// `packets` and `bytes` over `seconds`, at their rate; every other figure 0.
            pub fn new(packets: u64, bytes: u64, seconds: f64) -> $t {
                let rate = Rate::of(packets, bytes, seconds);
                $t {
                    packets,
                    bytes,
                    seconds,
                    bits_per_second: rate.bits_per_second,
                    packets_per_second: rate.packets_per_second,
                    ..$t::default()
                }
            }

            pub(crate) fn rate(&self) -> Rate {
                Rate {
                    bits_per_second: self.bits_per_second,
                    packets_per_second: self.packets_per_second,
                }
            }

            pub(super) fn set_rate(&mut self, r: Rate) {
                self.bits_per_second = r.bits_per_second;
                self.packets_per_second = r.packets_per_second;
            }
        }
    };
}

counted!(Sent);
counted!(Received);

impl Sent {
    /// Adds the counts of `other` (seconds: the longer); rates are left to the caller.
    pub(super) fn add_counts(&mut self, other: &Sent) {
        self.packets = self.packets.saturating_add(other.packets);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.seconds = self.seconds.max(other.seconds);
        self.late = self.late.saturating_add(other.late);
        self.skipped = self.skipped.saturating_add(other.skipped);
        self.errors = self.errors.saturating_add(other.errors);
        self.last_send_seconds = None;
    }

    /// Intended sends never made: skipped, or failed.
    pub fn missed(&self) -> u64 {
        self.skipped.saturating_add(self.errors)
    }
}

/// What a receiver counted. `packets` are unique datagrams of the stream (each sequence number
/// once; duplicates are counted apart); `seconds` is the window the datagrams were sent in
/// (the sender's), so received over sent rate is exactly the share that arrived.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Received {
    pub packets: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub bits_per_second: f64,
    pub packets_per_second: f64,
    /// Datagrams that arrived after one with a higher sequence number (and were not duplicates).
    pub out_of_order: u64,
    /// Datagrams whose sequence number had already arrived.
    pub duplicates: u64,
    /// Datagrams ignored: not netbench's, another test's or stream's, of the wrong length, or
    /// older than the reordering window.
    pub invalid: u64,
    /// Datagrams the receiving socket dropped (buffer full), as the kernel counts them
    /// (SO_MEMINFO); they are part of `lost`. None where the kernel does not tell.
    pub kernel_drops: Option<u64>,
}

impl Received {
    pub(super) fn add_counts(&mut self, other: &Received) {
        self.packets = self.packets.saturating_add(other.packets);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.seconds = self.seconds.max(other.seconds);
        self.out_of_order = self.out_of_order.saturating_add(other.out_of_order);
        self.duplicates = self.duplicates.saturating_add(other.duplicates);
        self.invalid = self.invalid.saturating_add(other.invalid);
        self.kernel_drops = match (self.kernel_drops, other.kernel_drops) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
    }
}

/// Loss of `sent` datagrams of which `received` arrived: (lost, percent of sent).
pub(crate) fn loss(sent: u64, received: u64) -> (u64, f64) {
    let lost = sent.saturating_sub(received);
    let percent = if sent > 0 {
        lost as f64 / sent as f64 * 100.0
    } else {
        0.0
    };
    (lost, percent)
}

/// One stream (one socket each end), seen from both ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpStream {
    /// Index into [`UdpReport::runs`].
    pub run: u32,
    pub id: u32,
    pub flow: Flow,
    pub sent: Sent,
    pub received: Received,
    /// `sent.packets - received.packets`: sequence numbers that never arrived.
    pub lost: u64,
    pub loss_percent: f64,
    /// RFC 3550 interarrival jitter at the end of the stream (J += (|D| - J) / 16 over transit
    /// time differences); None with fewer than two datagrams received.
    pub jitter_ms: Option<f64>,
    /// The receive buffer the kernel granted the receiving socket (SO_RCVBUF as read back).
    pub rcvbuf_bytes: Option<u64>,
    /// Why the stream ended early, if it did (either end).
    pub error: Option<String>,
}

impl UdpStream {
    /// A stream of run 0 with its loss computed; jitter, buffer and error left empty.
    pub fn new(id: u32, flow: Flow, sent: Sent, received: Received) -> UdpStream {
        let (lost, loss_percent) = loss(sent.packets, received.packets);
        UdpStream {
            run: 0,
            id,
            flow,
            sent,
            received,
            lost,
            loss_percent,
            jitter_ms: None,
            rcvbuf_bytes: None,
            error: None,
        }
    }
}
