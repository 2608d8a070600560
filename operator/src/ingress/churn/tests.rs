use protocol::report::answers::{Answers, Sighting};

use crds::ingress::RouteChangeResult;

use super::reading::{add_sample, checked_log, figures_of, given, p99_ms, propagation};
use super::*;

fn made(at: u64, backend: &str) -> MadeChange {
    MadeChange {
        at_unix_us: at,
        backend: backend.into(),
        ..Default::default()
    }
}

fn seen(status: u16, backend: &str, from: u64, to: u64) -> Sighting {
    Sighting {
        status,
        backend: Some(backend.into()),
        from_unix_us: from,
        to_unix_us: to,
    }
}

#[test]
fn changes_are_due_on_the_schedule_never_squeezed_and_stop_at_the_window() {
    assert_eq!(next_due(1_000, 500, &[], 3), Some(1_000));
    // A few late µs do not add up: the next is still on the schedule.
    assert_eq!(next_due(1_000, 500, &[made(1_010, "b")], 3), Some(1_500));
    let late = [made(1_000, "b"), made(1_510, "a")];
    assert_eq!(next_due(1_000, 500, &late, 3), Some(2_000));
    // A very late change: the next keeps every/2 after it...
    assert_eq!(next_due(1_000, 500, &[made(1_400, "b")], 3), Some(1_650));
    // ...and none comes with less than every/2 before the window's end (1000 + 3·500).
    assert_eq!(
        next_due(1_000, 500, &[made(1_000, "b"), made(2_100, "a")], 3),
        None
    );
    let three = [made(1_000, "b"), made(1_500, "a"), made(2_000, "b")];
    assert_eq!(next_due(1_000, 500, &three, 3), None);
    assert_eq!(next_due(1_000, 500, &[], 0), None);
}

#[test]
fn a_change_left_on_the_route_is_found_once_and_only_if_plausible() {
    let v = Some("1/3/5000");
    assert_eq!(recorded_change(v, 1, 3, 4_000, 6_000), Some(5_000));
    for (sample, change, from, to, why) in [
        (0, 3, 4_000, 6_000, "another sample"),
        (1, 4, 4_000, 6_000, "another change"),
        (1, 3, 5_001, 6_000, "before the window"),
        (1, 3, 4_000, 4_999, "in the future"),
    ] {
        assert_eq!(recorded_change(v, sample, change, from, to), None, "{why}");
    }
    for hostile in [
        "",
        "1/3",
        "x/3/5000",
        "1/3/-1",
        "1/3/5000/7",
        "99999999999/3/5000",
    ] {
        assert_eq!(
            recorded_change(Some(hostile), 1, 3, 0, u64::MAX),
            None,
            "{hostile}"
        );
    }
    assert_eq!(recorded_change(None, 1, 3, 0, u64::MAX), None);
}

#[test]
fn propagation_is_to_the_first_2xx_of_the_new_backend_before_the_next_change() {
    let mut a = Answers::new();
    a.add(seen(200, "web-a", 0, 1_120));
    a.add(seen(503, "web-b", 1_050, 1_060)); // a 503 of the new backend does not count
    a.add(seen(200, "web-b", 1_100, 2_030));
    a.add(seen(200, "web-a", 2_040, 3_000));
    let changes = [
        made(1_000, "web-b"),
        made(2_000, "web-a"),
        made(2_500, "web-b"), // never answered: not shown
    ];
    assert_eq!(
        propagation(&changes, &a, 3_000),
        vec![Some(100), Some(40), None]
    );
    // A data plane that coalesced a change: web-a went on answering through the swap to
    // web-b and back, so neither change shows (not a propagation of 0).
    let mut steady = Answers::new();
    steady.add(seen(200, "web-a", 0, 3_000));
    let coalesced = [made(1_000, "web-b"), made(1_500, "web-a")];
    assert_eq!(propagation(&coalesced, &steady, 3_000), vec![None, None]);
}

fn of(kind: Made, at: u64, backend: &str) -> MadeChange {
    MadeChange {
        made: kind,
        ..made(at, backend)
    }
}

fn gateway_404(from: u64, to: u64) -> Sighting {
    Sighting {
        status: 404,
        backend: None,
        from_unix_us: from,
        to_unix_us: to,
    }
}

#[test]
fn a_deletion_shows_at_the_gateways_own_404_and_a_creation_at_the_backends_2xx() {
    let mut a = Answers::new();
    a.add(seen(200, "web-a", 0, 1_030));
    a.add(seen(404, "web-a", 1_010, 1_020)); // the backend's own 404 is not the Gateway's
    a.add(gateway_404(1_040, 2_070));
    a.add(seen(200, "web-a", 2_080, 3_000));
    let changes = [
        of(Made::Deleted, 1_000, "web-a"),
        of(Made::Created, 2_000, "web-a"),
    ];
    assert_eq!(propagation(&changes, &a, 3_000), vec![Some(40), Some(80)]);
    // A deletion the data plane never applied before the route came back shows nothing,
    // and so does the creation of a route that never stopped answering.
    let mut steady = Answers::new();
    steady.add(seen(200, "web-a", 0, 3_000));
    assert_eq!(propagation(&changes, &steady, 3_000), vec![None, None]);
    // An untimed deletion is never shown, even when a 404 followed it.
    let lost = [MadeChange {
        untimed: true,
        ..of(Made::Deleted, 1_000, "web-a")
    }];
    assert_eq!(propagation(&lost, &a, 3_000), vec![None]);
}

#[test]
fn creations_and_deletions_are_counted_apart_with_the_untimed_ones() {
    let changes = [
        of(Made::Deleted, 1_000, "web-a"),
        of(Made::Created, 2_000, "web-a"),
        MadeChange {
            untimed: true,
            ..of(Made::Deleted, 3_000, "web-a")
        },
        of(Made::Created, 4_000, "web-a"),
    ];
    let shown = [Some(40), Some(80), None, None];
    let deleted = figures_of(Made::Deleted, &changes, &shown, None, 0)
        .unwrap()
        .unwrap();
    assert_eq!((deleted.changes, deleted.shown, deleted.untimed), (2, 1, 1));
    let created = figures_of(Made::Created, &changes, &shown, None, 0)
        .unwrap()
        .unwrap();
    assert_eq!((created.changes, created.shown, created.untimed), (2, 1, 0));
    assert!(
        (created.max_ms.unwrap() - 0.08).abs() < 0.001,
        "{:?}",
        created.max_ms
    );
    let swapped = figures_of(Made::Swapped, &changes, &shown, None, 0)
        .unwrap()
        .unwrap();
    assert_eq!((swapped.changes, swapped.samples.clone()), (0, vec![0]));
    // None shown: no percentile, rather than a 0 ms that would read as instant.
    assert_eq!(
        (swapped.p50_ms, swapped.p99_ms, swapped.max_ms),
        (None, None, None)
    );
}

#[test]
fn a_change_not_shown_counts_in_the_sample_figure_at_the_time_it_was_given() {
    let changes = [
        made(1_000, "web-b"),
        made(2_000, "web-a"),
        made(2_500, "web-b"),
    ];
    let shown = [Some(100), None, None];
    // Shown: its propagation; not shown: until the next change, or the end.
    assert_eq!(
        given(&changes, &shown, 3_200),
        vec![Some(100), Some(500), Some(700)]
    );
    assert_eq!(p99_ms(&[100, 500, 700]), Some(0.7));
    assert_eq!(p99_ms(&[]), None);
    // Nearest rank: of 200 values the 198th.
    let many: Vec<u64> = (1..=200).map(|ms| ms * 1000).collect();
    assert_eq!(p99_ms(&many), Some(198.0));
    // An untimed change has no time to count.
    let lost = [MadeChange {
        untimed: true,
        ..of(Made::Deleted, 1_000, "web-a")
    }];
    assert_eq!(given(&lost, &[None], 3_000), vec![None]);
}

fn log(anchor: u64, changes: Vec<MadeChange>) -> RouteChangeLog {
    RouteChangeLog {
        step: 0,
        sample: 1,
        anchor_unix_us: Some(anchor),
        changes,
    }
}

#[test]
fn a_log_out_of_order_missing_or_without_a_kind_of_change_is_refused() {
    let slot = Slot {
        measurement: 0,
        sample: 1,
    };
    let swap = RouteChangeAction::SwapBackend;
    let recreate = RouteChangeAction::DeleteAndCreate;
    let good = log(1_000, vec![made(1_000, "web-b"), made(2_000, "web-a")]);
    assert_eq!(checked_log(Some(&good), slot, swap).unwrap().1, 1_000);
    let refused = |l: Option<&RouteChangeLog>, action| checked_log(l, slot, action).unwrap_err();
    assert!(refused(None, swap).contains("no route change of this sample"));
    let other = RouteChangeLog {
        sample: 0,
        ..good.clone()
    };
    assert!(refused(Some(&other), swap).contains("no route change of this sample"));
    // Forged: a change before the one before it, or before the window's start (a 0 ms
    // "time given" otherwise).
    let back = log(1_000, vec![made(2_000, "web-b"), made(1_500, "web-a")]);
    assert!(refused(Some(&back), swap).contains("out of order"));
    let early = log(1_000, vec![made(500, "web-b")]);
    assert!(refused(Some(&early), swap).contains("out of order"));
    let twice = log(1_000, vec![made(1_500, "web-b"), made(1_500, "web-a")]);
    assert!(refused(Some(&twice), swap).contains("out of order"));
    // A sample of DeleteAndCreate that made no creation has no creation figures: refused,
    // so that every sample has the same figures.
    let deleted = log(1_000, vec![of(Made::Deleted, 1_000, "web-a")]);
    assert!(refused(Some(&deleted), recreate).contains("Created"));
    assert!(refused(Some(&log(1_000, vec![])), swap).contains("Swapped"));
}

#[test]
fn figures_merge_over_samples_once_each() {
    let one = add_sample(None, 0, &[Some(10_000), Some(30_000), None], 0).unwrap();
    assert_eq!((one.changes, one.shown), (3, 2));
    assert!((one.max_ms.unwrap() - 30.0).abs() < 0.1, "{:?}", one.max_ms);
    // The same sample collected again changes nothing.
    assert_eq!(add_sample(Some(&one), 0, &[Some(1)], 0).unwrap(), one);
    let two = add_sample(Some(&one), 1, &[Some(50_000)], 0).unwrap();
    assert_eq!(
        (two.changes, two.shown, two.samples.clone()),
        (4, 3, vec![0, 1])
    );
    assert!((two.max_ms.unwrap() - 50.0).abs() < 0.1);
    assert!((two.p50_ms.unwrap() - 30.0).abs() < 0.1, "{:?}", two.p50_ms);
    // Percentiles come from the histogram alone: a forged one beside an empty histogram
    // does not survive.
    let forged = RouteChangeResult {
        p99_ms: Some(1.0),
        ..Default::default()
    };
    let none = add_sample(Some(&forged), 0, &[None], 0).unwrap();
    assert_eq!(none.p99_ms, None);
    // A hostile histogram in status is refused, not trusted.
    let forged = RouteChangeResult {
        histogram: "not base64".into(),
        ..Default::default()
    };
    assert!(add_sample(Some(&forged), 1, &[Some(1)], 0).is_err());
}

#[test]
fn the_count_fits_the_measured_window_and_each_change_is_a_change() {
    let spec: IngressBenchmarkSpec = serde_yaml::from_str(
        r#"
target: {url: "http://gw/"}
load: {duration: 30s, warmup: 5s}
controllers:
  - name: eg
    route: {gateway: {name: bench}, hostname: a.example, backend: {name: web-a, port: 80}}
routeChanges: {every: 2s, swapTo: {name: web-b, port: 80}}
"#,
    )
    .unwrap();
    assert!(!deletes_routes(&spec));
    // load.duration is the measured time, after the warm-up.
    assert_eq!(count(&spec), 15);
    let to = |current| swap_target(&spec, 0, current).map(|b| b.name.as_str());
    assert_eq!(to(Some("web-a")), Some("web-b"));
    assert_eq!(to(Some("web-b")), Some("web-a"));
    // Anything else on the route (someone edited it): back to a backend of the spec.
    assert_eq!(to(Some("elsewhere")), Some("web-b"));
    assert_eq!(to(None), Some("web-b"));
    assert_eq!(swap_target(&spec, 1, None), None);
}
