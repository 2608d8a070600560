//! Which answers the clients saw, and when: the record that route-change propagation is read
//! from (`ingress` `routeChanges`). An answer is its status and the backend that named itself
//! in the `X-Netbench-Backend` header (netbench-loadgen http-server `--name`). Every connection
//! sees a sequence of runs of equal answers; a [`Sighting`] is such a run's first and last
//! instant, and sightings of one answer that overlap (on other connections, threads, workers)
//! are joined, so the record stays as small as the number of changes, not of requests.
//!
//! The record is hostile until [`Answers::validate`] accepted it: bounded in size, sorted,
//! statuses and names in range, no sighting ending before it starts.

use serde::{Deserialize, Serialize};

use super::validate::{invalid, InvalidReport};

/// The response header a backend names itself in.
pub const BACKEND_HEADER: &str = "x-netbench-backend";
/// Longest backend name kept (a DNS label; a longer value is cut to this).
pub const MAX_BACKEND_BYTES: usize = 63;
/// Most sightings one record keeps; past it the record says it is incomplete. A full record
/// with the longest names is about 300 KB of JSON, within a worker report's 512 KiB.
pub const MAX_SIGHTINGS: usize = 2048;
/// Most hostnames one load spreads over (`http --host-count`): about 20 KB of JSON at most.
pub const MAX_HOSTS: usize = 1000;

/// One answer, seen from `from_unix_us` to `to_unix_us` (wall clock, microseconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sighting {
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    pub from_unix_us: u64,
    pub to_unix_us: u64,
}

impl Sighting {
    fn same_answer(&self, o: &Sighting) -> bool {
        self.status == o.status && self.backend == o.backend
    }
}

/// The record's order: by answer (status, backend), then by start.
fn order(a: &Sighting, b: &Sighting) -> std::cmp::Ordering {
    (a.status, a.backend.as_deref(), a.from_unix_us).cmp(&(
        b.status,
        b.backend.as_deref(),
        b.from_unix_us,
    ))
}

/// The answers of one connection, thread, worker or merge of workers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answers {
    /// Sorted by answer (status, backend), then by start; sightings of one answer are disjoint.
    pub sightings: Vec<Sighting>,
    /// False once a sighting was dropped because the record was full.
    pub complete: bool,
    /// Per hostname (index i: `r<i>.<host>`), the first instant (Unix µs) a 2xx answer naming
    /// a backend came through it; None while none did. Empty without `--host-count`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_ok_by_host: Vec<Option<u64>>,
}

impl Answers {
    pub fn new() -> Answers {
        Answers {
            sightings: vec![],
            complete: true,
            first_ok_by_host: vec![],
        }
    }

    /// A 2xx answer naming a backend came through hostname `host` at `at_us`: kept if it is
    /// the first. A host past [`MAX_HOSTS`] is not kept.
    pub fn first_ok(&mut self, host: usize, at_us: u64) {
        if host >= MAX_HOSTS {
            return;
        }
        if self.first_ok_by_host.len() <= host {
            self.first_ok_by_host.resize(host + 1, None);
        }
        if let Some(slot) = self.first_ok_by_host.get_mut(host) {
            *slot = Some(slot.map_or(at_us, |t| t.min(at_us)));
        }
    }

    /// Adds a sighting, joining it with those of the same answer it overlaps.
    pub fn add(&mut self, mut s: Sighting) {
        if s.to_unix_us < s.from_unix_us {
            std::mem::swap(&mut s.from_unix_us, &mut s.to_unix_us);
        }
        // Joins with the neighbours of the same answer that overlap or touch it.
        let mut at = self.sightings.partition_point(|x| order(x, &s).is_lt());
        while at > 0 {
            let before = &self.sightings[at - 1];
            if !before.same_answer(&s) || before.to_unix_us < s.from_unix_us {
                break;
            }
            s.from_unix_us = s.from_unix_us.min(before.from_unix_us);
            s.to_unix_us = s.to_unix_us.max(before.to_unix_us);
            self.sightings.remove(at - 1);
            at -= 1;
        }
        while let Some(after) = self.sightings.get(at) {
            if !after.same_answer(&s) || after.from_unix_us > s.to_unix_us {
                break;
            }
            s.to_unix_us = s.to_unix_us.max(after.to_unix_us);
            self.sightings.remove(at);
        }
        if self.sightings.len() >= MAX_SIGHTINGS {
            self.complete = false;
            return;
        }
        self.sightings.insert(at, s);
    }

    /// Both records in one (exact: the union of the sightings of each answer). One sort and
    /// one sweep, whatever the records hold (they come from workers: each is bounded, their
    /// number is not).
    pub fn merge(&mut self, other: &Answers) {
        self.complete &= other.complete;
        for (host, at) in other.first_ok_by_host.iter().enumerate() {
            if let Some(at) = at {
                self.first_ok(host, *at);
            }
        }
        let mut all = std::mem::take(&mut self.sightings);
        all.extend(other.sightings.iter().cloned());
        for s in &mut all {
            if s.to_unix_us < s.from_unix_us {
                std::mem::swap(&mut s.from_unix_us, &mut s.to_unix_us);
            }
        }
        all.sort_unstable_by(order);
        let mut joined: Vec<Sighting> = Vec::with_capacity(all.len().min(MAX_SIGHTINGS));
        for s in all {
            if let Some(last) = joined.last_mut() {
                if last.same_answer(&s) && s.from_unix_us <= last.to_unix_us {
                    last.to_unix_us = last.to_unix_us.max(s.to_unix_us);
                    continue;
                }
            }
            if joined.len() >= MAX_SIGHTINGS {
                self.complete = false;
                continue;
            }
            joined.push(s);
        }
        self.sightings = joined;
    }

    /// The first instant at or after `at_us` at which answers `wanted` began to be seen: the
    /// start of a sighting. An answer seen without a break since before `at_us` did not begin
    /// after it (a change to the backend already answering shows nothing).
    pub fn first_begun_at_or_after(
        &self,
        at_us: u64,
        wanted: impl Fn(&Sighting) -> bool,
    ) -> Option<u64> {
        self.sightings
            .iter()
            .filter(|s| s.from_unix_us >= at_us && wanted(s))
            .map(|s| s.from_unix_us)
            .min()
    }

    /// Checks a record from outside: size, order, statuses, names and instants.
    pub fn validate(&self, field: &str) -> Result<(), InvalidReport> {
        if self.first_ok_by_host.len() > MAX_HOSTS {
            return Err(invalid(
                format!("{field}.first_ok_by_host"),
                format!(
                    "{} hostnames (at most {MAX_HOSTS})",
                    self.first_ok_by_host.len()
                ),
            ));
        }
        if self.sightings.len() > MAX_SIGHTINGS {
            return Err(invalid(
                field,
                format!(
                    "{} sightings (at most {MAX_SIGHTINGS})",
                    self.sightings.len()
                ),
            ));
        }
        let mut previous: Option<&Sighting> = None;
        for (i, s) in self.sightings.iter().enumerate() {
            let at = || format!("{field}.sightings[{i}]");
            if !(100..=599).contains(&s.status) {
                return Err(invalid(
                    at(),
                    format!("status {} is not 100..=599", s.status),
                ));
            }
            if let Some(b) = &s.backend {
                let ok = !b.is_empty()
                    && b.len() <= MAX_BACKEND_BYTES
                    && b.as_bytes().iter().all(name_byte);
                if !ok {
                    return Err(invalid(
                        at(),
                        "backend is not 1 to 63 letters, digits, '-', '.' or '_'",
                    ));
                }
            }
            if s.to_unix_us < s.from_unix_us {
                return Err(invalid(at(), "ends before it starts"));
            }
            if let Some(p) = previous {
                let order = (p.status, &p.backend).cmp(&(s.status, &s.backend));
                let sorted = order.is_lt() || (order.is_eq() && p.to_unix_us < s.from_unix_us);
                if !sorted {
                    return Err(invalid(at(), "out of order or overlapping the one before"));
                }
            }
            previous = Some(s);
        }
        Ok(())
    }
}

/// A byte of a backend name: letters, digits, '-', '.' or '_'.
fn name_byte(c: &u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_')
}

/// The backend name in a header value, without allocating: surrounding whitespace trimmed, cut
/// to [`MAX_BACKEND_BYTES`], kept only if it is a plain name (see [`name_byte`]). A value of
/// any length or content is looked at only up to the cut.
pub fn backend_bytes(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    let cut = value.get(..MAX_BACKEND_BYTES).unwrap_or(value);
    (!cut.is_empty() && cut.iter().all(name_byte)).then_some(cut)
}

/// The backend name from a header value ([`backend_bytes`]); `None` for anything else (the
/// answer then has no backend).
pub fn backend_name(value: &[u8]) -> Option<String> {
    backend_bytes(value).map(|b| String::from_utf8_lossy(b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_first_ok_of_each_host_is_the_earliest_over_threads_and_workers() {
        let mut a = Answers::new();
        a.first_ok(0, 500);
        a.first_ok(0, 300);
        a.first_ok(2, 900);
        let mut b = Answers::new();
        b.first_ok(1, 700);
        b.first_ok(2, 800);
        a.merge(&b);
        assert_eq!(a.first_ok_by_host, vec![Some(300), Some(700), Some(800)]);
        a.validate("answers").unwrap();
        // Not kept past the bound; a record claiming more hosts is refused.
        a.first_ok(MAX_HOSTS, 1);
        assert_eq!(a.first_ok_by_host.len(), 3);
        let mut hostile = Answers::new();
        hostile.first_ok_by_host = vec![None; MAX_HOSTS + 1];
        let e = hostile.validate("answers").unwrap_err();
        assert!(e.to_string().contains("at most 1000"), "{e}");
        // Without hosts nothing is written: old reports read the same.
        let json = serde_json::to_value(Answers::new()).unwrap();
        assert!(json.get("first_ok_by_host").is_none(), "{json}");
    }

    fn seen(status: u16, backend: &str, from: u64, to: u64) -> Sighting {
        Sighting {
            status,
            backend: (!backend.is_empty()).then(|| backend.to_string()),
            from_unix_us: from,
            to_unix_us: to,
        }
    }

    #[test]
    fn overlapping_sightings_of_one_answer_join_and_others_stay_apart() {
        let mut a = Answers::new();
        a.add(seen(200, "web-a", 0, 100));
        a.add(seen(200, "web-b", 101, 200));
        a.add(seen(200, "web-a", 50, 120)); // another connection, slower to switch
        a.add(seen(200, "web-a", 300, 400)); // swapped back
        a.add(seen(404, "", 500, 600));
        assert_eq!(
            a.sightings,
            vec![
                seen(200, "web-a", 0, 120),
                seen(200, "web-a", 300, 400),
                seen(200, "web-b", 101, 200),
                seen(404, "", 500, 600),
            ]
        );
        a.validate("answers").unwrap();
        // Swapped to web-b at 90: began at 101. Back to web-a at 250: at 300.
        let b = |s: &Sighting| s.backend.as_deref() == Some("web-b");
        assert_eq!(a.first_begun_at_or_after(90, b), Some(101));
        let first_a = a.first_begun_at_or_after(250, |s| s.backend.as_deref() == Some("web-a"));
        assert_eq!(first_a, Some(300));
        // Answering without a break since before the change: it did not begin after it.
        assert_eq!(a.first_begun_at_or_after(150, b), None);
        assert_eq!(a.first_begun_at_or_after(201, b), None);
    }

    #[test]
    fn a_full_record_says_it_is_incomplete() {
        let mut a = Answers::new();
        for i in 0..(MAX_SIGHTINGS as u64 + 10) {
            a.add(seen(200, "x", i * 10, i * 10 + 1));
        }
        assert_eq!(a.sightings.len(), MAX_SIGHTINGS);
        assert!(!a.complete);
        let mut b = Answers::new();
        b.merge(&a);
        assert!(!b.complete);
    }

    #[test]
    fn a_full_record_of_the_longest_names_fits_in_a_worker_report() {
        let name = "a".repeat(MAX_BACKEND_BYTES);
        let mut a = Answers::new();
        for i in 0..MAX_SIGHTINGS as u64 {
            let t = u64::MAX / 2 + i * 10;
            a.add(seen(599, &name, t, t + 1));
        }
        let json = serde_json::to_string(&a).unwrap();
        assert!(json.len() < 350 * 1024, "{} bytes", json.len());
    }

    #[test]
    fn hostile_records_are_refused_with_the_field() {
        let cases = [
            vec![seen(99, "a", 0, 1)],
            vec![seen(200, "a b", 0, 1)],
            vec![seen(200, &"a".repeat(64), 0, 1)],
            vec![seen(200, "a", 5, 1)],
            vec![seen(200, "a", 0, 10), seen(200, "a", 5, 20)],
            vec![seen(404, "", 0, 10), seen(200, "a", 20, 30)],
        ];
        for sightings in cases {
            let a = Answers {
                sightings: sightings.clone(),
                ..Answers::new()
            };
            let e = a.validate("answers").unwrap_err();
            assert!(
                e.field.starts_with("answers.sightings["),
                "{e} {sightings:?}"
            );
        }
        let big = Answers {
            sightings: vec![seen(200, "a", 0, 0); MAX_SIGHTINGS + 1],
            ..Answers::new()
        };
        assert_eq!(big.validate("answers").unwrap_err().field, "answers");
    }

    #[test]
    fn backend_names_are_plain_and_short() {
        assert_eq!(backend_name(b" web-a "), Some("web-a".into()));
        assert_eq!(backend_name(&[b'a'; 100]), Some("a".repeat(63)));
        assert_eq!(backend_name(b"a b"), None);
        assert_eq!(backend_name(b""), None);
        assert_eq!(backend_name("é".as_bytes()), None);
    }

    proptest! {
        /// However sightings arrive and are merged, the record is valid and says when each
        /// answer began to be seen exactly like the union of the raw sightings.
        #[test]
        fn merging_in_any_order_keeps_when_answers_began(
            raw in prop::collection::vec((0u8..3, 0u64..1000, 0u64..50), 0..60),
            split in 0usize..60,
            at in 0u64..1100,
        ) {
            let all: Vec<Sighting> = raw
                .iter()
                .map(|(b, from, len)| seen(200, ["a", "b", "c"][*b as usize], *from, from + len))
                .collect();
            let (left, right) = all.split_at(split.min(all.len()));
            let mut x = Answers::new();
            left.iter().for_each(|s| x.add(s.clone()));
            let mut y = Answers::new();
            right.iter().rev().for_each(|s| y.add(s.clone()));
            x.merge(&y);
            x.validate("answers").unwrap();
            for name in ["a", "b", "c"] {
                // The union of the raw spans, by sorting and joining overlaps.
                let mut spans: Vec<(u64, u64)> = all
                    .iter()
                    .filter(|s| s.backend.as_deref() == Some(name))
                    .map(|s| (s.from_unix_us, s.to_unix_us))
                    .collect();
                spans.sort();
                let mut union: Vec<(u64, u64)> = vec![];
                for (from, to) in spans {
                    match union.last_mut() {
                        Some(last) if from <= last.1 => last.1 = last.1.max(to),
                        _ => union.push((from, to)),
                    }
                }
                let expect = union.iter().map(|u| u.0).filter(|f| *f >= at).min();
                let wanted = |s: &Sighting| s.backend.as_deref() == Some(name);
                prop_assert_eq!(x.first_begun_at_or_after(at, wanted), expect);
            }
        }
    }
}
