//! CPU figures of both ends of a test, in the two senses a network engineer meets, each over
//! the window its meter ran (the same window in which the work it is divided by was counted):
//!
//! - the worker PROCESS's own CPU (getrusage), in percent of one CPU, as iperf3 prints it
//!   ([`CpuUsage`]'s percents);
//! - the NODE's, system-wide from /proc/stat over the same window ([`NodeCpu`]): every CPU's
//!   user, nice, system, irq and softirq time, steal apart, as netperf's `-c`/`-C` measure it.
//!   Network cost lives largely in softirq and kernel threads outside the worker process, so
//!   this is the figure that compares with netperf's service demand.
//!
//! Costs per unit of work ([`CpuCost`]): CPU seconds over the meter's window divided by the work
//! counted in it; netperf's service demand is `utilisation x CPUs x seconds / transactions`,
//! which is [`NodeCpu::busy_seconds`] per transaction.

use serde::{Deserialize, Serialize};

use crate::report::{check_close, check_number, invalid, InvalidReport, MAX_DURATION_S};

/// Most CPU percent one process may claim (4096 busy CPUs).
pub const MAX_CPU_PERCENT: f64 = 409_600.0;
/// Most CPUs a node may claim.
pub const MAX_NODE_CPUS: u32 = 4096;
/// Longest meter window: the longest test plus as long again for its drain and hand-over.
pub const MAX_METER_SECONDS: f64 = 2.0 * MAX_DURATION_S;

/// CPU time spent during a test divided by its wall time, in percent of one CPU (so two busy
/// threads make 200).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    pub user_percent: f64,
    pub system_percent: f64,
    pub total_percent: f64,
    /// The meter's window in seconds: the percents are over it. Absent in reports of older
    /// builds and in sums over runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The whole node over the same window. Absent where /proc/stat could not be read, in
    /// reports of older builds, and in sums over runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeCpu>,
}

impl CpuUsage {
    /// The percents of both (concurrent runs add up); the window and the node are left out: runs
    /// on different nodes and windows do not add up into one of either.
    pub fn sum(self, other: CpuUsage) -> CpuUsage {
        CpuUsage {
            user_percent: self.user_percent + other.user_percent,
            system_percent: self.system_percent + other.system_percent,
            total_percent: self.total_percent + other.total_percent,
            seconds: None,
            node: None,
        }
    }

    /// The process's CPU seconds over its meter's window (`fallback` seconds in a report of an
    /// older build that did not say its window).
    pub fn cpu_seconds(&self, fallback: f64) -> f64 {
        self.total_percent / 100.0 * self.seconds.unwrap_or(fallback)
    }

    /// The node's busy CPU seconds over the meter's window, where both are known.
    pub fn node_seconds(&self) -> Option<f64> {
        Some(self.node?.busy_seconds(self.seconds?))
    }
}

/// The node's CPUs over a window, from /proc/stat: percent of ALL its CPUs (100 = every CPU
/// busy the whole window).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeCpu {
    /// CPUs the node had (cpuN lines).
    pub cpus: u32,
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy_percent: f64,
    /// Parts of `busy_percent`: hard and soft interrupts.
    pub irq_percent: f64,
    pub softirq_percent: f64,
    /// Time the hypervisor gave to others: not busy, not idle; reported apart.
    pub steal_percent: f64,
}

impl NodeCpu {
    /// Busy CPU seconds over `seconds` of wall time: netperf's `util x CPUs x elapsed`.
    pub fn busy_seconds(&self, seconds: f64) -> f64 {
        self.busy_percent / 100.0 * f64::from(self.cpus) * seconds
    }
}

/// CPU use of both ends, in percent of one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuReport {
    pub client: CpuUsage,
    pub server: CpuUsage,
}

impl CpuReport {
    /// Both ends summed with another run's (see [`CpuUsage::sum`]).
    pub fn sum(self, other: &CpuReport) -> CpuReport {
        CpuReport {
            client: self.client.sum(other.client),
            server: self.server.sum(other.server),
        }
    }
}

/// CPU time each end spent per unit of work (a transaction, a gigabyte); the unit is in the
/// field's name (`cpu_us_per_transaction`, `cpu_seconds_per_gb`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuCost {
    pub client: f64,
    pub server: f64,
}

/// The processes' CPU seconds of all runs (each over its meter's window, or `fallback(run)`
/// seconds for an older report) divided by `units` and multiplied by `scale`; `None` with no
/// unit of work.
pub fn process_cost<'a>(
    runs: impl Iterator<Item = (&'a CpuReport, f64)>,
    units: f64,
    scale: f64,
) -> Option<CpuCost> {
    if units <= 0.0 {
        return None;
    }
    let (client, server) = runs.fold((0.0, 0.0), |(c, s), (cpu, fallback)| {
        (
            c + cpu.client.cpu_seconds(fallback),
            s + cpu.server.cpu_seconds(fallback),
        )
    });
    Some(CpuCost {
        client: client * scale / units,
        server: server * scale / units,
    })
}

/// The nodes' busy CPU seconds per unit of work (times `scale`), for a report of ONE run whose
/// two ends both measured their node; `None` otherwise (runs of a merge may share a node, so
/// their node seconds do not add up).
pub fn node_cost(runs: &[&CpuReport], units: f64, scale: f64) -> Option<CpuCost> {
    let [cpu] = runs else {
        return None;
    };
    if units <= 0.0 {
        return None;
    }
    Some(CpuCost {
        client: cpu.client.node_seconds()? * scale / units,
        server: cpu.server.node_seconds()? * scale / units,
    })
}

/// One end's CPU figures within bounds: percents of one CPU in `0..=max`, the window, the node's
/// percents of all CPUs in `0..=100` with interrupts inside busy and busy plus steal at most
/// every CPU.
pub fn check_usage(field: &str, c: &CpuUsage, max: f64) -> Result<(), InvalidReport> {
    for (name, v) in [
        ("user_percent", c.user_percent),
        ("system_percent", c.system_percent),
        ("total_percent", c.total_percent),
    ] {
        check_number(&format!("{field}.{name}"), v, 0.0, max)?;
    }
    if let Some(s) = c.seconds {
        check_number(&format!("{field}.seconds"), s, 0.0, MAX_METER_SECONDS)?;
    }
    let Some(n) = &c.node else {
        return Ok(());
    };
    let node = |name: &str| format!("{field}.node.{name}");
    if !(1..=MAX_NODE_CPUS).contains(&n.cpus) {
        return Err(invalid(
            node("cpus"),
            format!("{} is outside 1..={MAX_NODE_CPUS}", n.cpus),
        ));
    }
    for (name, v) in [
        ("busy_percent", n.busy_percent),
        ("irq_percent", n.irq_percent),
        ("softirq_percent", n.softirq_percent),
        ("steal_percent", n.steal_percent),
    ] {
        check_number(&node(name), v, 0.0, 100.0)?;
    }
    const SLACK: f64 = 1e-6;
    if n.irq_percent + n.softirq_percent > n.busy_percent + SLACK {
        return Err(invalid(
            node("busy_percent"),
            "less than its own interrupt parts",
        ));
    }
    if n.busy_percent + n.steal_percent > 100.0 + SLACK {
        return Err(invalid(
            node("steal_percent"),
            "busy and stolen together exceed every CPU",
        ));
    }
    Ok(())
}

/// A report's CPU totals are the sums of its runs' percents (each end within bounds).
pub fn check_sum<'a>(
    total: &CpuReport,
    runs: impl Iterator<Item = &'a CpuReport>,
) -> Result<(), InvalidReport> {
    let sum = runs.fold(CpuReport::default(), |acc, run| acc.sum(run));
    for (field, got, want) in [
        ("cpu.client", &total.client, &sum.client),
        ("cpu.server", &total.server, &sum.server),
    ] {
        check_usage(field, got, f64::MAX)?;
        for (name, g, w) in [
            ("user_percent", got.user_percent, want.user_percent),
            ("system_percent", got.system_percent, want.system_percent),
            ("total_percent", got.total_percent, want.total_percent),
        ] {
            check_close(&format!("{field}.{name}"), g, w)?;
        }
    }
    Ok(())
}

/// A cost as reported against the one its runs give: equal when both exist; a cost the runs
/// cannot give is refused; one missing is refused only when `required` (figures newer than
/// some reports are optional).
pub fn check_derived(
    field: &str,
    got: Option<&CpuCost>,
    want: Option<CpuCost>,
    required: bool,
) -> Result<(), InvalidReport> {
    match (got, want) {
        (None, None) => Ok(()),
        (None, Some(_)) if !required => Ok(()),
        (Some(got), Some(want)) => check_cost(field, got, &want),
        (None, Some(_)) => Err(invalid(field, "absent, but the runs give it")),
        (Some(_), None) => Err(invalid(field, "present, but the runs do not give it")),
    }
}

/// Each end's cost a finite number, and the one `want` gives.
pub fn check_cost(field: &str, got: &CpuCost, want: &CpuCost) -> Result<(), InvalidReport> {
    for (name, g, w) in [
        ("client", got.client, want.client),
        ("server", got.server, want.server),
    ] {
        let f = format!("{field}.{name}");
        check_number(&f, g, 0.0, f64::MAX)?;
        check_close(&f, g, w)?;
    }
    Ok(())
}

/// One end's CPU use of `user`, `system` and `total` percent, as the test reports give it.
#[cfg(test)]
pub(crate) fn test_usage(user: f64, system: f64, total: f64) -> CpuUsage {
    CpuUsage {
        user_percent: user,
        system_percent: system,
        total_percent: total,
        ..CpuUsage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(total: f64, seconds: Option<f64>, node: Option<NodeCpu>) -> CpuUsage {
        CpuUsage {
            user_percent: total / 2.0,
            system_percent: total / 2.0,
            total_percent: total,
            seconds,
            node,
        }
    }

    const NODE: NodeCpu = NodeCpu {
        cpus: 4,
        busy_percent: 25.0,
        irq_percent: 1.0,
        softirq_percent: 9.0,
        steal_percent: 0.5,
    };

    #[test]
    fn costs_divide_the_seconds_of_each_meters_own_window() {
        // 50 % of one CPU over a 12 s window (10 s test, 2 s drain) is 6 s, not 5 s.
        let cpu = CpuReport {
            client: usage(50.0, Some(12.0), Some(NODE)),
            server: usage(20.0, None, None),
        };
        let cost = process_cost([(&cpu, 10.0)].into_iter(), 1000.0, 1e6).unwrap();
        assert!((cost.client - 6.0 / 1000.0 * 1e6).abs() < 1e-9);
        // The server's older report names no window: the test's 10 s stand in.
        assert!((cost.server - 2.0 / 1000.0 * 1e6).abs() < 1e-9);
        assert_eq!(process_cost([(&cpu, 10.0)].into_iter(), 0.0, 1e6), None);
        // Node: 25 % of 4 CPUs over 12 s = 12 busy CPU seconds; the server has no node figure.
        assert_eq!(node_cost(&[&cpu], 1000.0, 1e6), None);
        let both = CpuReport {
            server: usage(20.0, Some(10.0), Some(NODE)),
            ..cpu
        };
        let n = node_cost(&[&both], 1000.0, 1e6).unwrap();
        assert!((n.client - 12.0 / 1000.0 * 1e6).abs() < 1e-9);
        assert!((n.server - 10.0 / 1000.0 * 1e6).abs() < 1e-9);
        assert_eq!(node_cost(&[&both, &both], 1000.0, 1e6), None, "two runs");
    }

    #[test]
    fn sums_keep_percents_and_drop_windows_and_nodes() {
        let a = usage(50.0, Some(12.0), Some(NODE));
        let s = a.sum(a);
        assert_eq!(s.total_percent, 100.0);
        assert_eq!((s.seconds, s.node), (None, None));
    }

    #[test]
    fn impossible_node_figures_are_refused() {
        let ok = usage(50.0, Some(1.0), Some(NODE));
        check_usage("cpu.client", &ok, MAX_CPU_PERCENT).unwrap();
        let bad = |n: NodeCpu, want: &str| {
            let e = check_usage("cpu.client", &usage(1.0, Some(1.0), Some(n)), 100.0)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        };
        bad(NodeCpu { cpus: 0, ..NODE }, "cpus");
        bad(
            NodeCpu {
                busy_percent: f64::NAN,
                ..NODE
            },
            "not a finite number",
        );
        bad(
            NodeCpu {
                busy_percent: 101.0,
                ..NODE
            },
            "outside",
        );
        bad(
            NodeCpu {
                softirq_percent: 30.0,
                ..NODE
            },
            "interrupt parts",
        );
        bad(
            NodeCpu {
                busy_percent: 99.0,
                steal_percent: 2.0,
                ..NODE
            },
            "exceed every CPU",
        );
        let e = check_usage("c", &usage(1.0, Some(-1.0), None), 100.0).unwrap_err();
        assert!(e.to_string().contains("c.seconds"), "{e}");
    }

    #[test]
    fn older_reports_without_window_or_node_still_read() {
        let old: CpuUsage = serde_json::from_str(
            r#"{"user_percent":1.0,"system_percent":2.0,"total_percent":3.0}"#,
        )
        .unwrap();
        assert_eq!((old.seconds, old.node), (None, None));
        assert_eq!(old.cpu_seconds(10.0), 0.3);
        let json = serde_json::to_value(old).unwrap();
        assert!(json.get("node").is_none() && json.get("seconds").is_none());
    }
}
