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

    #[test]
    fn busy_loop_shows_up_as_user_time() {
        let meter = CpuMeter::start();
        let until = Instant::now() + Duration::from_millis(200);
        let mut x = 0u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let usage = meter.stop();
        assert!(usage.total_percent > 30.0, "{usage:?}");
        assert!((usage.total_percent - usage.user_percent - usage.system_percent).abs() < 1e-9);
    }
}
