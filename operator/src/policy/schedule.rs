//! Scheduled runs: `spec.schedule` (cron syntax, UTC), `spec.suspend` and
//! `spec.concurrencyPolicy`, with `status.schedule` {round, lastScheduleTime, nextScheduleTime,
//! specHash}.
//!
//! A scheduled benchmark's run id is `{uid8}-g{generation}-r{round}`. Round 0 means no scheduled
//! time has come yet: no run exists, the status is Pending and says when the first one is due.
//! When a scheduled time has passed (only the most recent one counts: no burst of catch-up runs
//! after an outage), the round grows by one and the new run id makes the driver start the run,
//! stopping one under way (Replace) or skipping the time while one is under way (Forbid).
//!
//! A new generation restarts the current round's run only when the spec it measures changed
//! (`specHash`, the fingerprint of the spec without the three schedule fields): suspending,
//! resuming or editing the schedule itself starts nothing.
//!
//! [`decide`] is pure (spec fields, status, now) and unit-tested; the `Run` methods below apply
//! its decision. Status is hostile input here: a forged round saturates, times later than now
//! count as now (and are stored so), and nothing panics. It only decides when a run starts,
//! which a spec edit can do too.

use std::time::Duration;

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::events::EventType;
use serde::Serialize;

use crds::history::{ConcurrencyPolicy, ScheduleStatus};
use crds::{Phase, RunStatus};

use crate::base::events::PendingEvent;
use crate::base::labels;
use crate::base::text::clip;

/// The longest the controller sleeps before it looks at a schedule again (it recomputes then).
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// What [`decide`] looks at.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub schedule: Option<&'a str>,
    pub suspend: bool,
    pub policy: ConcurrencyPolicy,
    pub uid: &'a str,
    pub generation: i64,
    /// See [`spec_hash`].
    pub spec_hash: &'a str,
    pub status: &'a RunStatus,
}

/// What the schedule says about a benchmark now.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// No schedule: one run per generation, as ever.
    Unscheduled,
    /// A schedule the operator refuses: the generation's run fails with `message`.
    Invalid {
        message: String,
        status: ScheduleStatus,
    },
    Scheduled(Scheduled),
}

/// A valid schedule's decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheduled {
    /// The run the benchmark should have now; None before its first scheduled time.
    pub run: Option<String>,
    /// `status.schedule` from now on.
    pub status: ScheduleStatus,
    pub fired: Fired,
    /// Until the next scheduled time, at least a second and at most [`MAX_WAIT`]; None while
    /// suspended (only a change of the object matters then).
    pub wait: Option<Duration>,
    /// The status's run is kept for the current generation (its measured spec did not change).
    pub kept: bool,
}

/// What happened to a scheduled time that came due.
#[derive(Clone, Debug, PartialEq)]
pub enum Fired {
    /// None came due.
    Nothing,
    /// Round `round` starts; `replaces` is the run under way it stops (Replace).
    Started {
        round: u64,
        due: Timestamp,
        replaces: Option<String>,
    },
    /// Skipped: `running` has not finished (Forbid).
    Skipped { due: Timestamp, running: String },
    /// The round counter is at its maximum (a forged status): no new run id, so no new run.
    Saturated { due: Timestamp },
}

/// Parses a schedule: five fields (minute hour day-of-month month day-of-week) or a macro
/// (@hourly, @daily, @weekly, @monthly, @yearly/@annually); a seconds or years field is refused.
pub fn parse(expr: &str) -> std::result::Result<Cron, String> {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| e.to_string())
}

/// The fingerprint of what a run measures (see `policy::spec::spec_hash`: the spec without its
/// schedule, suspend, concurrency policy, history, baseline and cleanup fields).
pub fn spec_hash<K: Serialize>(obj: &K) -> String {
    super::spec::spec_hash(&super::spec::spec_of(obj))
}

/// The decision for `input` at `now`.
pub fn decide(input: &Input<'_>, now: Timestamp) -> Decision {
    let Some(expr) = input.schedule else {
        return Decision::Unscheduled;
    };
    let prev = input.status.schedule.clone().unwrap_or_default();
    let refuse = |why: String| Decision::Invalid {
        message: format!(
            "spec.schedule {:?} is refused: {}. A schedule is five fields (minute hour \
             day-of-month month day-of-week, in UTC) or one of @hourly, @daily, @weekly, \
             @monthly, @yearly.",
            clip(expr, 128),
            why.trim_end_matches('.')
        ),
        status: ScheduleStatus {
            next_schedule_time: None,
            ..prev.clone()
        },
    };
    let cron = match parse(expr) {
        Ok(cron) => cron,
        Err(e) => return refuse(e),
    };
    let next = match cron.find_next_occurrence(&utc(now), false) {
        Ok(t) => t.timestamp(),
        Err(e) => return refuse(format!("it never comes due ({e})")),
    };
    // Times from status later than now count as now (and are stored so: see `last` below).
    let last = prev.last_schedule_time.as_ref().map(|t| t.0.min(now));
    // A time is due once the next time the operator announced has passed: nothing is due
    // before the first announcement (at creation), nor for the times missed while suspended.
    let armed = prev.next_schedule_time.as_ref().map(|t| t.0.min(now));
    let due = armed.filter(|_| !input.suspend).and_then(|armed| {
        let latest = cron.find_previous_occurrence(&utc(now), true).ok()?;
        let t = latest.timestamp();
        (t >= armed && last.is_none_or(|l| t > l)).then_some(t)
    });
    let phase = input.status.phase;
    let under_way = input
        .status
        .run_id
        .clone()
        .filter(|_| !phase.is_some_and(Phase::is_finished));

    let mut round = prev.round;
    let fired = match due {
        None => Fired::Nothing,
        Some(due) => match (&under_way, input.policy) {
            (Some(running), ConcurrencyPolicy::Forbid) => Fired::Skipped {
                due,
                running: running.clone(),
            },
            _ if round == u64::MAX => Fired::Saturated { due },
            _ => {
                round = round.saturating_add(1);
                Fired::Started {
                    round,
                    due,
                    replaces: under_way.clone(),
                }
            }
        },
    };
    let last = match fired {
        Fired::Nothing => last,
        Fired::Started { due, .. } | Fired::Skipped { due, .. } | Fired::Saturated { due } => {
            Some(due)
        }
    };

    // The round's run: kept while what it measures is unchanged (or, suspended, once it is
    // finished: the new spec applies from the next round), else (re)started.
    let mut spec_hash = prev.spec_hash.clone();
    let mut kept = false;
    let run = if round == 0 {
        None
    } else {
        let current = input
            .status
            .run_id
            .as_deref()
            .filter(|id| is_round_run(id, input.uid, round))
            .filter(|_| !matches!(fired, Fired::Started { .. }));
        let same_spec = prev.spec_hash.as_deref() == Some(input.spec_hash);
        let finished = phase.is_some_and(Phase::is_finished);
        match current {
            Some(id) if same_spec || (input.suspend && finished) => {
                kept = true;
                spec_hash = Some(input.spec_hash.to_string());
                Some(id.to_string())
            }
            _ => {
                spec_hash = Some(input.spec_hash.to_string());
                Some(labels::scheduled_run_id(input.uid, input.generation, round))
            }
        }
    };
    let next = (!input.suspend).then_some(next);
    Decision::Scheduled(Scheduled {
        run,
        status: ScheduleStatus {
            round,
            last_schedule_time: last.map(Time),
            next_schedule_time: next.map(Time),
            spec_hash,
        },
        fired,
        wait: next.map(|n| wait_until(n, now)),
        kept,
    })
}

/// Whether `id` is a run of `round` of the object with `uid` (any generation).
fn is_round_run(id: &str, uid: &str, round: u64) -> bool {
    round_of(id, uid) == Some(round)
}

/// The round of `id` when it is a scheduled run id of the object with `uid`: exactly the id
/// the operator writes for that generation and round (a forged "+1" or "007" is not one).
pub fn round_of(id: &str, uid: &str) -> Option<u64> {
    let rest = id.strip_prefix(&format!("{}-g", labels::short_uid(uid)))?;
    let (generation, round) = rest.rsplit_once("-r")?;
    let (generation, round) = (generation.parse::<i64>().ok()?, round.parse::<u64>().ok()?);
    (labels::scheduled_run_id(uid, generation, round) == id).then_some(round)
}

fn utc(t: Timestamp) -> Zoned {
    t.to_zoned(TimeZone::UTC)
}

/// From `now` until `next`, within [1 s, MAX_WAIT].
fn wait_until(next: Timestamp, now: Timestamp) -> Duration {
    let d = Duration::try_from(next.duration_since(now)).unwrap_or_default();
    d.clamp(Duration::from_secs(1), MAX_WAIT)
}

impl Scheduled {
    /// What the status says while no run exists yet.
    pub fn idle_message(&self) -> String {
        match &self.status.next_schedule_time {
            Some(next) => format!("scheduled: next run at {}", next.0),
            None => "suspended: no scheduled run starts while spec.suspend is true".into(),
        }
    }

    /// The Events of a scheduled time that came due.
    pub fn events(&self) -> Vec<PendingEvent> {
        let run = self.run.as_deref().unwrap_or("-");
        match &self.fired {
            Fired::Nothing => vec![],
            Fired::Started {
                round,
                due,
                replaces,
            } => {
                let mut events = vec![(
                    EventType::Normal,
                    "ScheduledRun".to_string(),
                    format!("round {round} was due at {due}: run {run} starts"),
                )];
                if let Some(old) = replaces {
                    events.push((
                        EventType::Warning,
                        "RunReplaced".to_string(),
                        format!(
                            "run {old} had not finished when the scheduled run {run} came due; \
                             it was stopped and replaced (concurrencyPolicy Replace)"
                        ),
                    ));
                }
                events
            }
            Fired::Skipped { due, running } => vec![(
                EventType::Normal,
                "ScheduleSkipped".to_string(),
                format!(
                    "the run due at {due} was skipped: run {running} has not finished \
                     (concurrencyPolicy Forbid)"
                ),
            )],
            Fired::Saturated { due } => vec![(
                EventType::Warning,
                "ScheduleSaturated".to_string(),
                format!(
                    "the run due at {due} cannot start: status.schedule.round is at its maximum \
                     (the status was changed outside the operator)"
                ),
            )],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "3f2a9c1d-aaaa-bbbb-cccc-123456789012";
    const HASH: &str = "00000000000000aa";

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn input<'a>(schedule: Option<&'a str>, status: &'a RunStatus) -> Input<'a> {
        Input {
            schedule,
            suspend: false,
            policy: ConcurrencyPolicy::Forbid,
            uid: UID,
            generation: 1,
            spec_hash: HASH,
            status,
        }
    }

    fn scheduled(d: Decision) -> Scheduled {
        match d {
            Decision::Scheduled(s) => s,
            other => panic!("not scheduled: {other:?}"),
        }
    }

    fn with_schedule(s: ScheduleStatus) -> RunStatus {
        RunStatus {
            schedule: Some(s),
            ..Default::default()
        }
    }

    /// A status after round `round`'s run reached `phase`, announced next at `next`.
    fn after_round(round: u64, phase: Phase, last: &str, next: &str) -> RunStatus {
        RunStatus {
            run_id: Some(format!("3f2a9c1d-g1-r{round}")),
            phase: Some(phase),
            schedule: Some(ScheduleStatus {
                round,
                last_schedule_time: Some(Time(at(last))),
                next_schedule_time: Some(Time(at(next))),
                spec_hash: Some(HASH.into()),
            }),
            ..Default::default()
        }
    }

    /// Round 2's run reached `phase`; it was due at 18:05 and 18:10 is announced next.
    fn round_two(phase: Phase) -> RunStatus {
        after_round(2, phase, "2026-12-01T18:05:00Z", "2026-12-01T18:10:00Z")
    }

    /// What a schedule of every five minutes decides at `now` over `status`.
    fn every_five(status: &RunStatus, now: Timestamp) -> Scheduled {
        scheduled(decide(&input(Some("*/5 * * * *"), status), now))
    }

    #[test]
    fn no_schedule_keeps_the_plain_run_id() {
        let status = RunStatus::default();
        let d = decide(&input(None, &status), at("2026-12-01T18:00:00Z"));
        assert_eq!(d, Decision::Unscheduled);
        assert_eq!(labels::run_id(UID, 7), "3f2a9c1d-g7");
    }

    #[test]
    fn round_zero_runs_nothing_and_announces_the_first_time() {
        let status = RunStatus::default();
        let now = at("2026-12-01T18:04:10Z");
        let s = every_five(&status, now);
        assert_eq!(s.run, None);
        assert_eq!(s.fired, Fired::Nothing);
        assert_eq!(s.status.round, 0);
        assert_eq!(s.status.last_schedule_time, None);
        let next = s.status.next_schedule_time.clone().unwrap().0;
        assert_eq!(next, at("2026-12-01T18:05:00Z"));
        assert_eq!(s.wait, Some(Duration::from_secs(50)));
        assert_eq!(
            s.idle_message(),
            "scheduled: next run at 2026-12-01T18:05:00Z"
        );
        // Still before it: the same.
        let status = with_schedule(s.status.clone());
        let again = every_five(&status, now);
        assert_eq!(again.run, None);
        assert_eq!(again.status, s.status);
    }

    #[test]
    fn the_wait_is_capped() {
        let status = RunStatus::default();
        let s = scheduled(decide(
            &input(Some("@daily"), &status),
            at("2026-12-01T18:04:10Z"),
        ));
        assert_eq!(s.wait, Some(MAX_WAIT));
        let next = s.status.next_schedule_time.unwrap().0;
        assert_eq!(next, at("2026-12-02T00:00:00Z"));
    }

    #[test]
    fn a_time_that_passed_starts_round_one() {
        let status = with_schedule(ScheduleStatus {
            next_schedule_time: Some(Time(at("2026-12-01T18:05:00Z"))),
            ..Default::default()
        });
        let now = at("2026-12-01T18:05:00.2Z");
        let s = every_five(&status, now);
        assert_eq!(s.run.as_deref(), Some("3f2a9c1d-g1-r1"));
        assert_eq!(
            s.fired,
            Fired::Started {
                round: 1,
                due: at("2026-12-01T18:05:00Z"),
                replaces: None
            }
        );
        assert_eq!(s.status.round, 1);
        assert_eq!(
            s.status.last_schedule_time,
            Some(Time(at("2026-12-01T18:05:00Z")))
        );
        assert_eq!(
            s.status.next_schedule_time,
            Some(Time(at("2026-12-01T18:10:00Z")))
        );
        assert_eq!(s.status.spec_hash.as_deref(), Some(HASH));
        let events = s.events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].1, "ScheduledRun");
        assert!(
            events[0].2.contains("run 3f2a9c1d-g1-r1 starts"),
            "{events:?}"
        );
        // The next reconcile (status written): the same run, nothing new fires.
        let mut written = status.clone();
        written.run_id = s.run.clone();
        written.phase = Some(Phase::Running);
        written.schedule = Some(s.status.clone());
        let later = at("2026-12-01T18:06:00Z");
        let again = every_five(&written, later);
        assert_eq!(again.run, s.run);
        assert_eq!(again.fired, Fired::Nothing);
        assert!(again.kept);
    }

    #[test]
    fn a_finished_round_waits_for_the_next_time() {
        let status = round_two(Phase::Succeeded);
        let s = every_five(&status, at("2026-12-01T18:07:00Z"));
        assert_eq!(s.run.as_deref(), Some("3f2a9c1d-g1-r2"));
        assert_eq!(s.fired, Fired::Nothing);
        assert_eq!(s.wait, Some(Duration::from_secs(180)));
        let s = every_five(&status, at("2026-12-01T18:10:01Z"));
        assert_eq!(s.run.as_deref(), Some("3f2a9c1d-g1-r3"));
    }

    #[test]
    fn suspended_nothing_starts_and_no_next_time_is_shown() {
        let status = round_two(Phase::Succeeded);
        let mut i = input(Some("*/5 * * * *"), &status);
        i.suspend = true;
        let s = scheduled(decide(&i, at("2026-12-01T18:20:00Z")));
        assert_eq!(s.fired, Fired::Nothing);
        assert_eq!(s.run.as_deref(), Some("3f2a9c1d-g1-r2"));
        assert_eq!(s.status.round, 2);
        assert_eq!(s.status.next_schedule_time, None);
        assert_eq!(s.wait, None);
        assert!(s.idle_message().contains("suspended"));
        // Resumed: the times missed while suspended do not fire; the next one does.
        let resumed = with_schedule(s.status.clone());
        let r = every_five(&resumed, at("2026-12-01T18:21:00Z"));
        assert_eq!(r.fired, Fired::Nothing);
        assert_eq!(
            r.status.next_schedule_time,
            Some(Time(at("2026-12-01T18:25:00Z")))
        );
    }

    #[test]
    fn suspended_at_round_zero_says_so() {
        let status = RunStatus::default();
        let mut i = input(Some("@hourly"), &status);
        i.suspend = true;
        let s = scheduled(decide(&i, at("2026-12-01T18:20:00Z")));
        assert_eq!(
            (s.run.clone(), s.status.next_schedule_time.clone()),
            (None, None)
        );
        assert_eq!(
            s.idle_message(),
            "suspended: no scheduled run starts while spec.suspend is true"
        );
    }

    #[test]
    fn forbid_skips_a_time_while_the_previous_run_is_under_way() {
        let status = round_two(Phase::Running);
        let now = at("2026-12-01T18:10:00Z");
        let s = every_five(&status, now);
        assert_eq!(
            s.fired,
            Fired::Skipped {
                due: at("2026-12-01T18:10:00Z"),
                running: "3f2a9c1d-g1-r2".into()
            }
        );
        assert_eq!(s.run.as_deref(), Some("3f2a9c1d-g1-r2"), "the run goes on");
        assert_eq!(s.status.round, 2);
        assert_eq!(s.status.last_schedule_time, Some(Time(now)));
        let events = s.events();
        assert_eq!(events[0].1, "ScheduleSkipped");
        assert!(events[0].2.contains("3f2a9c1d-g1-r2"), "{events:?}");
        // Not retried: once stored, the skipped time is past.
        let mut written = status.clone();
        written.schedule = Some(s.status);
        let again = every_five(&written, at("2026-12-01T18:11:00Z"));
        assert_eq!(again.fired, Fired::Nothing);
    }

    #[test]
    fn replace_starts_a_new_round_and_names_the_run_it_stops() {
        let status = round_two(Phase::Running);
        let mut i = input(Some("*/5 * * * *"), &status);
        i.policy = ConcurrencyPolicy::Replace;
        let s = scheduled(decide(&i, at("2026-12-01T18:10:03Z")));
        assert_eq!(s.run.as_deref(), Some("3f2a9c1d-g1-r3"));
        assert_eq!(
            s.fired,
            Fired::Started {
                round: 3,
                due: at("2026-12-01T18:10:00Z"),
                replaces: Some("3f2a9c1d-g1-r2".into())
            }
        );
        let reasons: Vec<String> = s.events().into_iter().map(|e| e.1).collect();
        assert_eq!(reasons, ["ScheduledRun", "RunReplaced"]);
    }

    #[test]
    fn several_missed_times_give_one_run_for_the_latest() {
        // The operator was down from 18:07 to 19:42.
        let status = round_two(Phase::Succeeded);
        let s = every_five(&status, at("2026-12-01T19:42:00Z"));
        assert_eq!(s.status.round, 3);
        assert_eq!(
            s.status.last_schedule_time,
            Some(Time(at("2026-12-01T19:40:00Z")))
        );
        let mut written = status.clone();
        written.run_id = s.run.clone();
        written.schedule = Some(s.status.clone());
        let again = every_five(&written, at("2026-12-01T19:42:05Z"));
        assert_eq!((again.status.round, again.fired), (3, Fired::Nothing));
    }

    #[test]
    fn a_forged_future_last_time_counts_as_now_and_is_stored_so() {
        let mut status = after_round(
            2,
            Phase::Succeeded,
            "2999-01-01T00:00:00Z",
            "2999-01-01T00:05:00Z",
        );
        let now = at("2026-12-01T18:07:00Z");
        let s = every_five(&status, now);
        assert_eq!(s.fired, Fired::Nothing);
        assert_eq!(s.status.last_schedule_time, Some(Time(now)));
        assert_eq!(
            s.status.next_schedule_time,
            Some(Time(at("2026-12-01T18:10:00Z")))
        );
        status.schedule = Some(s.status);
        let later = every_five(&status, at("2026-12-01T18:10:01Z"));
        assert_eq!(later.status.round, 3, "scheduling goes on");
    }

    #[test]
    fn a_saturated_round_stays_and_panics_nowhere() {
        let mut status = round_two(Phase::Succeeded);
        let forged = status.schedule.as_mut().unwrap();
        forged.round = u64::MAX;
        status.run_id = Some(labels::scheduled_run_id(UID, 1, u64::MAX));
        let s = every_five(&status, at("2026-12-01T18:10:00Z"));
        assert_eq!(s.status.round, u64::MAX);
        assert_eq!(
            s.fired,
            Fired::Saturated {
                due: at("2026-12-01T18:10:00Z")
            }
        );
        assert_eq!(s.run, status.run_id);
        assert_eq!(s.events()[0].1, "ScheduleSaturated");
    }

    #[test]
    fn hostile_statuses_never_panic() {
        let times = [
            None,
            Some(Timestamp::MIN),
            Some(Timestamp::MAX),
            Some(at("2026-12-01T18:05:00Z")),
        ];
        for last in times {
            for next in times {
                for round in [0, 1, u64::MAX] {
                    for run_id in [
                        None,
                        Some("x"),
                        Some("3f2a9c1d-g-r1"),
                        Some("3f2a9c1d-g1-r1"),
                    ] {
                        let status = RunStatus {
                            run_id: run_id.map(str::to_string),
                            schedule: Some(ScheduleStatus {
                                round,
                                last_schedule_time: last.map(Time),
                                next_schedule_time: next.map(Time),
                                spec_hash: Some("?".into()),
                            }),
                            ..Default::default()
                        };
                        for now in [Timestamp::MIN, Timestamp::MAX, at("2026-12-01T18:07:00Z")] {
                            let _ = decide(&input(Some("* * * * *"), &status), now);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn an_invalid_cron_is_refused_with_the_parse_error() {
        let status = with_schedule(ScheduleStatus {
            round: 4,
            next_schedule_time: Some(Time(at("2026-12-01T18:10:00Z"))),
            ..Default::default()
        });
        for bad in ["61 * * * *", "* * *", "@fortnightly", "0 0 30 2 *"] {
            match decide(&input(Some(bad), &status), at("2026-12-01T18:07:00Z")) {
                Decision::Invalid { message, status } => {
                    assert!(message.contains(bad), "{message}");
                    assert!(message.contains("refused:"), "{message}");
                    assert_eq!(status.round, 4, "the round is kept");
                    assert_eq!(status.next_schedule_time, None);
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_seconds_field_is_refused() {
        let err = parse("*/10 * * * * *").unwrap_err();
        assert!(err.contains("5 fields"), "{err}");
        assert!(parse("0 0 0 1 1 * 2030").is_err(), "nor a year field");
    }

    #[test]
    fn the_example_schedule_is_accepted() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/examples/ingress-scheduled.yaml"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let ib: crds::IngressBenchmark = serde_yaml::from_str(&text).unwrap();
        let schedule = ib
            .spec
            .repetition
            .schedule
            .as_deref()
            .expect("the example has a schedule");
        assert!(parse(schedule).is_ok(), "{schedule}");
    }

    #[test]
    fn macros_and_the_five_field_syntax_are_accepted() {
        let now = at("2026-12-01T18:04:10Z");
        for (expr, next) in [
            ("@hourly", "2026-12-01T19:00:00Z"),
            ("@daily", "2026-12-02T00:00:00Z"),
            ("@weekly", "2026-12-06T00:00:00Z"),
            ("@monthly", "2027-01-01T00:00:00Z"),
            ("@yearly", "2027-01-01T00:00:00Z"),
            ("@annually", "2027-01-01T00:00:00Z"),
            ("30 6 * * MON-FRI", "2026-12-02T06:30:00Z"),
            ("0,30 * * * *", "2026-12-01T18:30:00Z"),
        ] {
            let status = RunStatus::default();
            let s = scheduled(decide(&input(Some(expr), &status), now));
            assert_eq!(s.status.next_schedule_time, Some(Time(at(next))), "{expr}");
        }
    }

    #[test]
    fn a_spec_change_restarts_the_round_only_when_the_measured_spec_changed() {
        let status = round_two(Phase::Succeeded);
        let now = at("2026-12-01T18:07:00Z");
        // Generation 2 changed only the schedule fields: the run is kept.
        let mut i = input(Some("*/10 * * * *"), &status);
        i.generation = 2;
        let s = scheduled(decide(&i, now));
        assert_eq!((s.run.as_deref(), s.kept), (Some("3f2a9c1d-g1-r2"), true));
        // Generation 3 changed what is measured: round 2 runs again with it.
        i.generation = 3;
        i.spec_hash = "00000000000000bb";
        let s = scheduled(decide(&i, now));
        assert_eq!(s.run.as_deref(), Some("3f2a9c1d-g3-r2"));
        assert_eq!(s.status.spec_hash.as_deref(), Some("00000000000000bb"));
        assert_eq!((s.status.round, s.fired), (2, Fired::Nothing));
        // Suspended with the round's run finished: kept; the new spec applies next round.
        i.suspend = true;
        let s = scheduled(decide(&i, now));
        assert_eq!(s.run.as_deref(), Some("3f2a9c1d-g1-r2"));
        assert_eq!(s.status.spec_hash.as_deref(), Some("00000000000000bb"));
        // Suspended with it under way: it goes on with the new spec (restarted).
        let mut running = status.clone();
        running.phase = Some(Phase::Running);
        let mut j = i;
        j.status = &running;
        assert_eq!(
            scheduled(decide(&j, now)).run.as_deref(),
            Some("3f2a9c1d-g3-r2")
        );
    }

    #[test]
    fn the_spec_hash_ignores_only_what_does_not_measure() {
        let ib = |extra: serde_json::Value| -> crds::IngressBenchmark {
            let mut spec = serde_json::json!({"target": {"url": "http://x/"}});
            if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
                s.extend(e.clone());
            }
            serde_json::from_value(serde_json::json!({
                "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
                "metadata": {"name": "b"}, "spec": spec,
            }))
            .unwrap()
        };
        let plain = spec_hash(&ib(serde_json::json!({})));
        let scheduled = spec_hash(&ib(serde_json::json!({
            "schedule": "@daily", "suspend": true, "concurrencyPolicy": "Replace"
        })));
        assert_eq!(plain, scheduled);
        let kept = spec_hash(&ib(
            serde_json::json!({"historyLimit": 3, "cleanup": "Never"}),
        ));
        assert_eq!(plain, kept);
        assert_eq!(plain.len(), 64);
        let other = spec_hash(&ib(serde_json::json!({"load": {"connections": 3}})));
        assert_ne!(plain, other);
    }

    #[test]
    fn run_ids_are_valid_label_values() {
        assert_eq!(labels::scheduled_run_id(UID, 7, 3), "3f2a9c1d-g7-r3");
        let longest = labels::scheduled_run_id(UID, i64::MIN, u64::MAX);
        assert!(longest.len() <= 63, "{longest}");
        let valid = |v: &str| {
            v.len() <= 63
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        for id in [longest.clone(), labels::scheduled_run_id(UID, i64::MAX, 0)] {
            assert!(valid(&id), "{id}");
        }
        assert!(is_round_run("3f2a9c1d-g12-r3", UID, 3));
        assert!(!is_round_run("3f2a9c1d-g12-r3", UID, 4));
        assert!(!is_round_run("3f2a9c1d-gx-r3", UID, 3));
        assert!(!is_round_run("00000000-g1-r3", UID, 3));
        assert!(!is_round_run("3f2a9c1d-g1", UID, 1));
        assert_eq!(
            round_of("3f2a9c1d-g-4-r18446744073709551615", UID),
            Some(u64::MAX)
        );
        assert_eq!(round_of("3f2a9c1d-g1-r", UID), None);
        // Worker pod names stay within 63 characters (report labels carry them).
        let w = labels::worker_name(&"b".repeat(80), &longest, 19, 99);
        assert!(w.len() <= 63, "{w}");
    }
}
