//! How many requests one stream keeps in flight: `1 + burst` (netperf `-b`), except for an
//! open-loop udp-rr stream, whose requests go out on schedule whatever is still unanswered (as
//! sockperf's under-load mode does: UDP has no head-of-line blocking). Its window is then at
//! least every request of two timeouts at its rate, so a lost datagram costs one lost
//! transaction, never a stall of the stream (with one request in flight, a loss would hold the
//! stream for a whole timeout and the open loop's latency would then count the backlog).
//!
//! The window is bounded by [`MAX_OPEN_LOOP_WINDOW`], half of the request fates a udp-rr client
//! remembers (so an answer up to one more timeout late is still told late, or duplicate, rather
//! than invalid). Beyond it (rate x timeout of 16 384 or more per stream), a stream whose whole
//! window waits for answers falls behind its schedule: the sends it never made are counted as
//! skipped and the report warns ([`window_shortfall`]). Both ends and every reader compute the
//! window with [`in_flight_window`], so a report's `max_in_flight` is checked exactly.

use super::report::RrSetup;
use crate::Protocol;

/// Most requests one open-loop udp-rr stream keeps in flight.
pub const MAX_OPEN_LOOP_WINDOW: u32 = 1 << 15;

/// Timeouts' worth of the schedule an open-loop udp-rr window holds: one for the requests
/// waiting for an answer (all of them, on a path that answers nothing), one more so that a
/// stream that fell up to a timeout behind (its thread waited for a CPU) catches up at once.
const TIMEOUTS_IN_FLIGHT: f64 = 2.0;

/// Requests in flight per stream at most, for `setup` (what the client uses and the report's
/// `max_in_flight` says).
pub fn in_flight_window(setup: &RrSetup) -> u32 {
    let closed = setup.burst.saturating_add(1);
    match per_timeout(setup) {
        // A burst above the bound (validation allows none) keeps its meaning.
        Some(n) => closed.max(saturate(wanted(n)).min(MAX_OPEN_LOOP_WINDOW)),
        None => closed,
    }
}

/// An open-loop udp-rr setup whose window was cut to [`MAX_OPEN_LOOP_WINDOW`]: `(requests of
/// one timeout at the rate, the window used)`, for the report's warning; `None` when the
/// window holds the two timeouts' worth it wants.
pub fn window_shortfall(setup: &RrSetup) -> Option<(f64, u32)> {
    let n = per_timeout(setup)?;
    let window = in_flight_window(setup);
    (wanted(n) > f64::from(window)).then_some((n, window))
}

/// Open-loop udp-rr: the requests of one timeout at the rate (may be infinite or NaN for a
/// setup that never passed validation); `None` for every other setup.
fn per_timeout(setup: &RrSetup) -> Option<f64> {
    let rate = setup
        .rate_per_stream
        .filter(|_| setup.mode == Protocol::UdpRr)?;
    Some(rate * setup.timeout_ms as f64 / 1000.0)
}

/// The window an open loop of `per_timeout` requests per timeout wants, unbounded:
/// `ceil(2 x per_timeout) + 1`.
fn wanted(per_timeout: f64) -> f64 {
    (per_timeout * TIMEOUTS_IN_FLIGHT).ceil() + 1.0
}

/// `wanted` as a u32, saturated (NaN or below 1: 1).
fn saturate(wanted: f64) -> u32 {
    if wanted.is_nan() || wanted < 1.0 {
        1
    } else if wanted >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        // In 1..u32::MAX: exact after the ceil.
        wanted as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(mode: Protocol, burst: u32, rate: Option<f64>, timeout_ms: u64) -> RrSetup {
        RrSetup {
            mode,
            request_size: 8,
            response_size: 8,
            burst,
            rate_per_stream: rate,
            timeout_ms,
            max_in_flight: None,
        }
    }

    #[test]
    fn closed_loops_and_tcp_keep_one_plus_burst() {
        for mode in [Protocol::TcpRr, Protocol::TcpCrr, Protocol::UdpRr] {
            assert_eq!(in_flight_window(&setup(mode, 0, None, 100)), 1);
            assert_eq!(in_flight_window(&setup(mode, 31, None, 100)), 32);
        }
        // TCP answers in order: an open loop keeps its burst (a loss is retransmitted).
        let tcp = setup(Protocol::TcpRr, 3, Some(2000.0), 50);
        assert_eq!(in_flight_window(&tcp), 4);
        assert_eq!(window_shortfall(&tcp), None);
    }

    #[test]
    fn an_open_loop_udp_window_holds_two_timeouts_of_the_schedule() {
        // 2000/s x 50 ms = 100 per timeout: 201 in flight at most.
        let s = setup(Protocol::UdpRr, 0, Some(2000.0), 50);
        assert_eq!(in_flight_window(&s), 201);
        assert_eq!(window_shortfall(&s), None);
        // A burst larger than that keeps its meaning.
        assert_eq!(
            in_flight_window(&setup(Protocol::UdpRr, 500, Some(2000.0), 50)),
            501
        );
        // A slow schedule still has a request of its own in flight, and one more.
        assert_eq!(
            in_flight_window(&setup(Protocol::UdpRr, 0, Some(0.001), 1)),
            2
        );
    }

    #[test]
    fn absurd_rate_times_timeout_saturates_at_the_bound_and_warns() {
        let bound = MAX_OPEN_LOOP_WINDOW;
        for (rate, timeout_ms) in [
            (10_000_000.0, 60_000),
            (f64::MAX, u64::MAX),
            (f64::INFINITY, 1),
            (1e300, 60_000),
        ] {
            let s = setup(Protocol::UdpRr, 0, Some(rate), timeout_ms);
            assert_eq!(in_flight_window(&s), bound, "{rate} x {timeout_ms}");
            let (per_timeout, window) = window_shortfall(&s).expect("does not fit");
            assert_eq!(window, bound);
            assert!(per_timeout > f64::from(bound));
        }
        // 2 x 16 383 + 1 = 32 767 fits; 2 x 16 384 + 1 does not.
        let edge = setup(Protocol::UdpRr, 0, Some(16_383.0), 1000);
        assert_eq!(in_flight_window(&edge), 32_767);
        assert_eq!(window_shortfall(&edge), None);
        let over = setup(Protocol::UdpRr, 0, Some(16_384.0), 1000);
        assert_eq!(in_flight_window(&over), bound);
        assert_eq!(window_shortfall(&over), Some((16_384.0, bound)));
        // NaN (never validated) cannot turn into a huge or zero window.
        let nan = setup(Protocol::UdpRr, 0, Some(f64::NAN), 100);
        assert_eq!(in_flight_window(&nan), 1);
        assert_eq!(window_shortfall(&nan), None);
        let max_burst = setup(Protocol::UdpRr, u32::MAX, Some(1.0), 1);
        assert_eq!(in_flight_window(&max_burst), u32::MAX);
    }
}
