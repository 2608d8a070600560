//! CPU use of this process over a test, as iperf3 reports it: percent of one CPU.

use std::time::{Duration, Instant};

use ::protocol::tcp::CpuUsage;

use super::sys::{process_cpu_times, CpuTimes};

pub(crate) struct CpuMeter {
    wall: Instant,
    times: CpuTimes,
}

impl CpuMeter {
    pub fn start() -> Self {
        CpuMeter {
            wall: Instant::now(),
            // getrusage(RUSAGE_SELF) cannot fail with valid arguments; zero keeps the figure honest
            // (an over-estimate) if it ever did.
            times: process_cpu_times().unwrap_or_default(),
        }
    }

    pub fn stop(&self) -> CpuUsage {
        let wall = self.wall.elapsed().as_secs_f64();
        let now = process_cpu_times().unwrap_or(self.times);
        let percent = |end: Duration, start: Duration| {
            if wall > 0.0 {
                end.saturating_sub(start).as_secs_f64() / wall * 100.0
            } else {
                0.0
            }
        };
        let user_percent = percent(now.user, self.times.user);
        let system_percent = percent(now.system, self.times.system);
        CpuUsage {
            user_percent,
            system_percent,
            total_percent: user_percent + system_percent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU time (user + system) of the calling thread.
    fn thread_cpu_time() -> Duration {
        let t = crate::tcp::sys::thread_cpu_times().unwrap();
        t.user + t.system
    }

    #[test]
    fn busy_loop_shows_up_as_user_time() {
        // Burn 100 ms of this thread's CPU, however long a loaded machine takes to give it:
        // the process used at least that much over the meter's window (other tests' threads
        // only add to it), most of it in user mode.
        const BURN: Duration = Duration::from_millis(100);
        let meter = CpuMeter::start();
        let from = thread_cpu_time();
        let mut x = 0u64;
        while thread_cpu_time().saturating_sub(from) < BURN {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        let usage = meter.stop();
        // The meter's window ended before this instant, so percent x this wall time is at
        // least the CPU seconds the meter measured.
        let wall = meter.wall.elapsed().as_secs_f64();
        let cpu_seconds = usage.total_percent / 100.0 * wall;
        assert!(
            cpu_seconds >= BURN.as_secs_f64() - 1e-6,
            "{cpu_seconds} s of CPU over {wall} s: {usage:?}"
        );
        assert!(usage.user_percent > 0.0, "{usage:?}");
        assert!((usage.total_percent - usage.user_percent - usage.system_percent).abs() < 1e-9);
    }
}
