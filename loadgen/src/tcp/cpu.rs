//! CPU use over a test, both ways ([`protocol::cpu`]): this process's, as iperf3 reports it
//! (percent of one CPU), and the whole node's from /proc/stat over the same window, as netperf's
//! `-c`/`-C` measure it (percent of all CPUs).

use std::time::{Duration, Instant};

use ::protocol::cpu::{CpuUsage, NodeCpu};

use super::sys::{process_cpu_times, CpuTimes};

pub(crate) struct CpuMeter {
    wall: Instant,
    times: CpuTimes,
    /// None where /proc/stat cannot be read (the node's figure is then absent, never zero).
    node: Option<NodeTicks>,
}

impl CpuMeter {
    pub fn start() -> Self {
        CpuMeter {
            wall: Instant::now(),
            // getrusage(RUSAGE_SELF) cannot fail with valid arguments; zero keeps the figure honest
            // (an over-estimate) if it ever did.
            times: process_cpu_times().unwrap_or_default(),
            node: NodeTicks::read(),
        }
    }

    pub fn stop(&self) -> CpuUsage {
        let node = self
            .node
            .zip(NodeTicks::read())
            .and_then(|(a, b)| b.since(&a));
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
            seconds: Some(wall),
            node,
        }
    }
}

/// The node's cumulative CPU time in ticks, all CPUs together (the first line of /proc/stat),
/// and how many CPUs it has (its `cpuN` lines). /proc/stat is not namespaced: in a pod it is
/// the node's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct NodeTicks {
    cpus: u32,
    user: u64,
    nice: u64,
    system: u64,
    idle: u64,
    iowait: u64,
    irq: u64,
    softirq: u64,
    steal: u64,
}

impl NodeTicks {
    fn read() -> Option<NodeTicks> {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| NodeTicks::parse(&text))
    }

    /// `cpu  user nice system idle iowait irq softirq steal guest guest_nice` (guest time is
    /// already inside user, so it is not added again); None for anything else.
    pub(crate) fn parse(text: &str) -> Option<NodeTicks> {
        let mut lines = text.lines();
        let mut fields = lines.next()?.split_ascii_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let mut next = || fields.next().and_then(|v| v.parse::<u64>().ok());
        let (user, nice, system, idle) = (next()?, next()?, next()?, next()?);
        // Fields a very old kernel lacks count as zero.
        let (iowait, irq, softirq, steal) = (
            next().unwrap_or(0),
            next().unwrap_or(0),
            next().unwrap_or(0),
            next().unwrap_or(0),
        );
        let cpus = lines
            .filter(|l| {
                l.strip_prefix("cpu")
                    .and_then(|rest| rest.split_ascii_whitespace().next())
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .count();
        Some(NodeTicks {
            cpus: u32::try_from(cpus).ok().filter(|n| *n > 0)?,
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
        })
    }

    /// What the node's CPUs did from `start` to this reading, in percent of all of them; None
    /// when no tick passed or a counter went back (a CPU went offline: the figure would lie).
    pub(crate) fn since(&self, start: &NodeTicks) -> Option<NodeCpu> {
        let d = |now: u64, then: u64| now.checked_sub(then);
        let (user, nice, system) = (
            d(self.user, start.user)?,
            d(self.nice, start.nice)?,
            d(self.system, start.system)?,
        );
        let (idle, iowait) = (d(self.idle, start.idle)?, d(self.iowait, start.iowait)?);
        let (irq, softirq, steal) = (
            d(self.irq, start.irq)?,
            d(self.softirq, start.softirq)?,
            d(self.steal, start.steal)?,
        );
        let busy = [user, nice, system, irq, softirq]
            .iter()
            .try_fold(0u64, |a, v| a.checked_add(*v))?;
        let total = [busy, idle, iowait, steal]
            .iter()
            .try_fold(0u64, |a, v| a.checked_add(*v))?;
        if total == 0 || self.cpus != start.cpus {
            return None;
        }
        let percent = |v: u64| v as f64 * 100.0 / total as f64;
        Some(NodeCpu {
            cpus: self.cpus,
            busy_percent: percent(busy),
            irq_percent: percent(irq),
            softirq_percent: percent(softirq),
            steal_percent: percent(steal),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 10 50 800 20 5 15 0 7 0
cpu0 50 5 25 400 10 3 7 0 7 0
cpu1 50 5 25 400 10 2 8 0 0 0
intr 12345
ctxt 999
cpuidle 3
";

    #[test]
    fn proc_stat_is_read_as_netperf_reads_it() {
        let a = NodeTicks::parse(STAT).unwrap();
        assert_eq!(a.cpus, 2, "cpu0 and cpu1, not cpuidle");
        assert_eq!((a.user, a.softirq, a.steal), (100, 15, 0));
        let b = NodeTicks {
            user: 200,
            system: 100,
            idle: 1100,
            softirq: 65,
            irq: 5,
            steal: 30,
            ..a
        };
        // Deltas: user 100, system 50, softirq 50, idle 300, steal 30: total 530.
        let n = b.since(&a).unwrap();
        assert_eq!(n.cpus, 2);
        assert!(
            (n.busy_percent - 200.0 * 100.0 / 530.0).abs() < 1e-9,
            "{n:?}"
        );
        assert!((n.softirq_percent - 50.0 * 100.0 / 530.0).abs() < 1e-9);
        assert!((n.steal_percent - 30.0 * 100.0 / 530.0).abs() < 1e-9);
        assert_eq!(n.irq_percent, 0.0);
        // No tick, a counter that went back, CPUs that changed: no figure rather than a lie.
        assert_eq!(a.since(&a), None);
        assert_eq!(a.since(&b), None);
        assert_eq!(NodeTicks { cpus: 3, ..b }.since(&a), None);
        for bad in [
            "",
            "intr 1\n",
            "cpu  1 2 x 4\n",
            "cpu  1 2 3\ncpu0 1 2 3 4\n",
            "cpu  1 2 3 4\n",
        ] {
            assert_eq!(NodeTicks::parse(bad), None, "{bad:?}");
        }
        let huge = format!("cpu  {} 0 0 0\ncpu0 1 1 1 1\n", u64::MAX);
        let top = NodeTicks::parse(&huge).unwrap();
        let start = NodeTicks { user: 0, ..top };
        assert_eq!(
            NodeTicks { idle: 1, ..top }.since(&start),
            None,
            "overflowing sums give no figure"
        );
    }

    #[test]
    fn the_node_figure_matches_an_outside_reading_of_the_same_window() {
        // Keep one CPU busy for a while; the meter and a reading taken around it by hand must
        // agree on the node's busy share (they differ only by the instants between them).
        let Some(outside_start) = NodeTicks::read() else {
            eprintln!("no /proc/stat here: the node figure is absent, as the meter says");
            assert_eq!(CpuMeter::start().stop().node, None);
            return;
        };
        let meter = CpuMeter::start();
        let from = Instant::now();
        let mut x = 0u64;
        while from.elapsed() < Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let usage = meter.stop();
        let outside = NodeTicks::read().unwrap().since(&outside_start).unwrap();
        let node = usage.node.expect("the meter read /proc/stat");
        assert_eq!(node.cpus, outside.cpus);
        assert!(node.busy_percent > 0.0, "{node:?}");
        assert!(
            (node.busy_percent - outside.busy_percent).abs() < 15.0,
            "meter {node:?} against outside {outside:?}"
        );
        // This process alone kept one CPU busy: the node was at least that busy, up to the
        // ticks' resolution.
        let process_cpus = usage.total_percent / 100.0;
        let node_cpus = node.busy_percent / 100.0 * f64::from(node.cpus);
        assert!(node_cpus >= process_cpus * 0.8, "{usage:?}");
        assert_eq!(usage.seconds.map(|s| s >= 0.3), Some(true));
    }

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
