//! Exact merge of HTTP reports from workers that ran at the same time. Every input is
//! validated first ([`super::validate_http`]) and every sum is checked, so no report, however
//! hostile, makes the merge panic or wrap around.

use hdrhistogram::Histogram;

use super::answers::Answers;
use super::envelope::{ReportError, REPORT_VERSION};
use super::histogram::{self, new_latency_histogram, MAX_TOTAL_COUNT};
use super::http::{tool_name, Counters, HttpReport, LatencySummary, RateSummary, ThreadSummary};
use super::validate::validate_http;

/// Merges reports of concurrently running workers: counters and histograms are summed,
/// percentiles recomputed from the merged histogram, rates summed, start = min, end = max.
pub fn merge_http(reports: &[HttpReport]) -> Result<HttpReport, ReportError> {
    let first = reports.first().ok_or(ReportError::Empty)?;
    let mut acc = Merged::new(first);
    for r in reports {
        let h = validate_http(r)?;
        acc.add(r, &h)?;
    }
    acc.finish()
}

/// The running sums of a merge.
struct Merged {
    base: HttpReport,
    hist: Histogram<u64>,
    counters: Counters,
    connections: u64,
    threads: u64,
    requested: Option<f64>,
    rate: Option<RateSummary>,
    rps: f64,
    bytes_per_sec: f64,
    duration_s: f64,
    start: u64,
    end: u64,
    per_thread: Vec<ThreadSummary>,
    workers: u32,
    answers: Option<Answers>,
}

fn overflow(what: &'static str) -> ReportError {
    ReportError::Overflow(what)
}

impl Merged {
    fn new(first: &HttpReport) -> Self {
        Merged {
            base: first.clone(),
            hist: new_latency_histogram(),
            counters: Counters::default(),
            connections: 0,
            threads: 0,
            requested: None,
            rate: None,
            rps: 0.0,
            bytes_per_sec: 0.0,
            duration_s: 0.0,
            start: u64::MAX,
            end: 0,
            per_thread: Vec::new(),
            workers: 0,
            answers: None,
        }
    }

    fn add(&mut self, r: &HttpReport, h: &Histogram<u64>) -> Result<(), ReportError> {
        let total = self.hist.len().checked_add(h.len());
        if total.is_none_or(|t| t > MAX_TOTAL_COUNT) {
            return Err(overflow("latency histogram"));
        }
        self.hist
            .add(h)
            .map_err(|e| ReportError::Histogram(format!("{e:?}")))?;
        self.counters = self
            .counters
            .checked_add(&r.counters)
            .ok_or(overflow("counters"))?;
        self.connections = self
            .connections
            .checked_add(r.config.connections)
            .ok_or(overflow("config.connections"))?;
        self.threads = self
            .threads
            .checked_add(r.config.threads)
            .ok_or(overflow("config.threads"))?;
        if let Some(req) = r.config.rate {
            self.requested = Some(self.requested.unwrap_or(0.0) + req);
        }
        if let Some(rs) = r.rate {
            let acc = self.rate.get_or_insert(RateSummary {
                requested_rps: 0.0,
                achieved_rps: 0.0,
            });
            acc.requested_rps += rs.requested_rps;
            acc.achieved_rps += rs.achieved_rps;
        }
        self.rps += r.rps;
        self.bytes_per_sec += r.bytes_per_sec;
        self.duration_s = self.duration_s.max(r.duration_s);
        self.start = self.start.min(r.start_unix_ms);
        self.end = self.end.max(r.end_unix_ms);
        if let Some(a) = &r.answers {
            self.answers.get_or_insert_with(Answers::new).merge(a);
        }
        self.add_threads(r)
    }

    /// Appends the report's threads, renumbering their worker after the ones merged so far.
    fn add_threads(&mut self, r: &HttpReport) -> Result<(), ReportError> {
        for t in &r.per_thread {
            let worker = t
                .worker
                .checked_add(self.workers)
                .ok_or(overflow("workers"))?;
            self.per_thread.push(ThreadSummary {
                worker,
                ..t.clone()
            });
        }
        self.workers = self
            .workers
            .checked_add(r.workers)
            .ok_or(overflow("workers"))?;
        Ok(())
    }

    fn finish(self) -> Result<HttpReport, ReportError> {
        let mut config = self.base.config;
        config.connections = self.connections;
        config.threads = self.threads;
        config.rate = self.requested;
        Ok(HttpReport {
            version: REPORT_VERSION,
            tool: tool_name(),
            workers: self.workers,
            config,
            start_unix_ms: self.start,
            end_unix_ms: self.end,
            duration_s: self.duration_s,
            counters: self.counters,
            rps: self.rps,
            bytes_per_sec: self.bytes_per_sec,
            rate: self.rate,
            latency: LatencySummary::from_histogram(&self.hist),
            histogram: histogram::encode(&self.hist).map_err(ReportError::Histogram)?,
            per_thread: self.per_thread,
            answers: self.answers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::http::{HttpRunConfig, ThreadSummary};
    use crate::report::Report;
    use hdrhistogram::Histogram;

    /// Deterministic pseudo-random latencies with a heavy tail (xorshift).
    fn samples(seed: u64, n: usize) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let base = 50 + x % 2_000;
                if x.is_multiple_of(97) {
                    base * 1_000
                } else {
                    base
                }
            })
            .collect()
    }

    fn report(values: &[u64], start: u64, rate: Option<f64>) -> HttpReport {
        let mut h = new_latency_histogram();
        for &v in values {
            h.record(v).unwrap();
        }
        let counters = Counters {
            requests: values.len() as u64,
            bytes_read: values.len() as u64 * 100,
            status: crate::report::StatusCounts {
                s2xx: values.len() as u64,
                ..Default::default()
            },
            ..Counters::default()
        };
        let config = HttpRunConfig {
            url: "http://127.0.0.1/".into(),
            method: "GET".into(),
            connections: 10,
            threads: 1,
            duration_s: 10.0,
            warmup_s: 0.0,
            rate,
            keepalive: true,
            http2: false,
            timeout_s: 2.0,
        };
        let thread = ThreadSummary {
            worker: 0,
            thread: 0,
            connections: 10,
            requests: values.len() as u64,
            errors: 0,
            bytes_read: 0,
            rps: values.len() as f64 / 10.0,
        };
        HttpReport::from_run(
            config,
            start,
            start + 10_000,
            10.0,
            counters,
            &h,
            vec![thread],
        )
        .unwrap()
    }

    /// The percentile of exact sorted samples (nearest rank), for comparing with HDR.
    fn exact_quantile(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    #[test]
    fn merged_percentiles_equal_those_of_the_combined_samples() {
        let parts = [samples(1, 10_000), samples(2, 3_000), samples(3, 25_000)];
        let reports: Vec<HttpReport> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| report(p, 1_000 + i as u64, None))
            .collect();
        // Through JSON, as another process would receive them.
        let reports: Vec<HttpReport> = reports
            .iter()
            .map(|r| match Report::from_json(&r.to_json()).unwrap() {
                Report::Http(h) => h,
            })
            .collect();
        let merged = merge_http(&reports).unwrap();

        let all: Vec<u64> = parts.concat();
        let mut combined: Histogram<u64> = new_latency_histogram();
        for &v in &all {
            combined.record(v).unwrap();
        }
        // Exactly the histogram of all samples, hence exactly its percentiles.
        assert_eq!(merged.histogram().unwrap(), combined);
        assert_eq!(merged.latency, LatencySummary::from_histogram(&combined));
        assert_eq!(merged.latency.count, all.len() as u64);
        // And those agree with the raw samples within the histogram's 3 significant digits.
        let mut sorted = all.clone();
        sorted.sort_unstable();
        for (q, got) in [
            (0.5, merged.latency.p50_us),
            (0.9, merged.latency.p90_us),
            (0.99, merged.latency.p99_us),
            (0.999, merged.latency.p999_us),
            (1.0, merged.latency.max_us),
        ] {
            let want = exact_quantile(&sorted, q);
            let tolerance = want / 1000 + 1;
            assert!(
                got.abs_diff(want) <= tolerance,
                "q={q}: hdr {got} vs exact {want}"
            );
        }
        assert_eq!(merged.counters.requests, all.len() as u64);
        assert_eq!(merged.workers, 3);
        assert_eq!(merged.start_unix_ms, 1_000);
        assert_eq!(merged.end_unix_ms, 11_002);
        assert_eq!(merged.config.connections, 30);
        assert!((merged.rps - all.len() as f64 / 10.0).abs() < 1e-6);
        let workers: Vec<u32> = merged.per_thread.iter().map(|t| t.worker).collect();
        assert_eq!(workers, vec![0, 1, 2]);
    }

    #[test]
    fn merge_is_associative() {
        let (a, b, c) = (
            report(&samples(4, 500), 0, Some(10.0)),
            report(&samples(5, 700), 0, Some(20.0)),
            report(&samples(6, 900), 0, Some(30.0)),
        );
        let ab_c = merge_http(&[merge_http(&[a.clone(), b.clone()]).unwrap(), c.clone()]).unwrap();
        let abc = merge_http(&[a, b, c]).unwrap();
        assert_eq!(ab_c.latency, abc.latency);
        assert_eq!(ab_c.counters, abc.counters);
        assert_eq!(ab_c.workers, 3);
        let rate = abc.rate.unwrap();
        assert_eq!(rate.requested_rps, 60.0);
        assert_eq!(abc.config.rate, Some(60.0));
        let workers: Vec<u32> = ab_c.per_thread.iter().map(|t| t.worker).collect();
        assert_eq!(workers, vec![0, 1, 2]);
    }

    #[test]
    fn rejects_other_versions_and_empty_input() {
        let mut json: serde_json::Value =
            serde_json::from_str(&report(&[10], 0, None).to_json()).unwrap();
        assert_eq!(json["kind"], "http");
        assert_eq!(json["version"], 1);
        json["version"] = 2.into();
        assert!(matches!(
            Report::from_json(&json.to_string()),
            Err(ReportError::Version(2))
        ));
        assert!(matches!(merge_http(&[]), Err(ReportError::Empty)));
    }
}
