use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use protocol::worker::{FinalReport, Role};
use serde_json::{json, Value};

use super::forged::poses_as_report;
use super::object::{report_object, selector, verify, KEY};
use super::*;
use crate::base::labels;

const RUN: &str = "3f2a9c1d-g1";

const OWNER_UID: &str = "3f2a9c1d-aaaa-bbbb-cccc-123456789012";

fn owner() -> Owner {
    crate::testing::owner("IngressBenchmark", "bench", OWNER_UID)
}

fn report(worker: &str, step: u32) -> FinalReport {
    let report = json!({"kind": "http", "requests": 10});
    FinalReport::new(worker, Some("node-1"), step, 1, report)
}

fn expected(names: &[&str]) -> BTreeMap<String, Role> {
    names
        .iter()
        .map(|n| (n.to_string(), Role::Client))
        .collect()
}

fn stored(worker: &str, step: u32) -> ConfigMap {
    report_object("netbench-system", &owner(), RUN, &report(worker, step)).unwrap()
}

fn check(cm: &ConfigMap, workers: &[&str]) -> Result<FinalReport, String> {
    let expected = expected(workers);
    verify(cm, &owner(), RUN, 0, |w| expected.contains_key(w))
}

#[test]
fn what_store_writes_verifies() {
    let w = "bench-3f2a9c1d-g1-s0-w0";
    assert_eq!(check(&stored(w, 0), &[w]), Ok(report(w, 0)));
}

#[test]
fn names_tell_apart_every_part_of_the_identity() {
    let w = "bench-3f2a9c1d-g1-s0-w0";
    let base = object_name(&owner(), RUN, 0, w);
    assert!(base.starts_with(&format!("{w}-report-")), "{base}");
    assert_eq!(base, object_name(&owner(), RUN, 0, w), "deterministic");
    let mut other_ns = owner();
    other_ns.namespace = "team-b".into();
    let mut other_uid = owner();
    other_uid.uid = "3f2a9c1d-ffff".into();
    let mut other_kind = owner();
    other_kind.kind = "EgressBenchmark".into();
    let names = [
        object_name(&other_ns, RUN, 0, w),
        object_name(&other_uid, RUN, 0, w),
        object_name(&other_kind, RUN, 0, w),
        object_name(&owner(), "3f2a9c1d-g2", 0, w),
        object_name(&owner(), RUN, 1, w),
        object_name(&owner(), RUN, 0, "bench-3f2a9c1d-g1-s0-w1"),
    ];
    for n in &names {
        assert_ne!(*n, base);
        assert!(n.len() <= 253);
    }
    // The longest worker name (63) still gives a valid object name.
    assert!(object_name(&owner(), RUN, 0, &"w".repeat(63)).len() <= 253);
}

#[test]
fn a_worker_outside_the_step_is_rejected() {
    let cm = stored("intruder", 0);
    let err = check(&cm, &["bench-3f2a9c1d-g1-s0-w0"]).unwrap_err();
    assert!(err.contains("intruder is not a worker"), "{err}");
}

#[test]
fn wrong_or_missing_labels_are_rejected() {
    let w = "w0";
    for (key, value) in [
        (labels::NAMESPACE, Some("team-b")),
        (labels::BENCHMARK_UID, Some("other-uid")),
        (labels::KIND, Some("egressbenchmark")),
        (labels::RUN, Some("other-g1")),
        (labels::STEP, Some("1")),
        (labels::MANAGED_BY, None),
        (labels::WORKER, None),
    ] {
        let mut cm = stored(w, 0);
        let l = cm.metadata.labels.as_mut().unwrap();
        match value {
            Some(v) => l.insert(key.to_string(), v.to_string()),
            None => l.remove(key),
        };
        assert!(check(&cm, &[w]).is_err(), "accepted with {key}={value:?}");
    }
}

#[test]
fn a_report_under_another_workers_name_is_rejected() {
    // Labels and name of w1, content of w0: one worker must not speak for another.
    let mut cm = stored("w1", 0);
    let forged = serde_json::to_string(&report("w0", 0)).unwrap();
    cm.data = Some(BTreeMap::from([(KEY.to_string(), forged)]));
    let err = check(&cm, &["w0", "w1"]).unwrap_err();
    assert!(err.contains("claims worker w0"), "{err}");
    // The same for a report of another step.
    let mut cm = stored("w1", 0);
    let forged = serde_json::to_string(&report("w1", 3)).unwrap();
    cm.data = Some(BTreeMap::from([(KEY.to_string(), forged)]));
    assert!(check(&cm, &["w1"]).unwrap_err().contains("step 3"));
}

#[test]
fn a_renamed_copy_or_unreadable_content_is_rejected() {
    let mut cm = stored("w0", 0);
    cm.metadata.name = Some("w0-report".into());
    assert!(check(&cm, &["w0"]).unwrap_err().contains("is named"));
    let mut cm = stored("w0", 0);
    cm.data = Some(BTreeMap::from([(KEY.to_string(), "{not json".to_string())]));
    assert!(check(&cm, &["w0"]).unwrap_err().contains("unreadable"));
    let mut cm = stored("w0", 0);
    cm.data = None;
    assert!(check(&cm, &["w0"]).unwrap_err().contains("no report.json"));
}

#[test]
fn selectors_scope_to_benchmark_run_and_step() {
    let o = owner();
    let all = selector(&o, None, None);
    assert!(all.contains("netbench.io/namespace=team-a"), "{all}");
    assert!(all.contains(&format!("netbench.io/benchmark-uid={}", o.uid)));
    assert!(all.contains("netbench.io/report=true"));
    assert!(!all.contains("netbench.io/run"));
    let step = selector(&o, Some(RUN), Some(2));
    assert!(
        step.ends_with(&format!(
            "netbench.io/run={RUN},netbench.io/step=2,!netbench.io/sample"
        )),
        "a step's worker reports, never its folded sample: {step}"
    );
}

#[test]
fn impostors_are_report_labelled_objects_naming_the_benchmark_or_run() {
    let o = owner();
    let with = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let old_style = with(&[
        (labels::REPORT, "true"),
        (labels::RUN, RUN),
        (labels::STEP, "0"),
    ]);
    assert!(poses_as_report(Some(&old_style), &o, RUN));
    let by_name = with(&[(labels::REPORT, "true"), (labels::BENCHMARK, "bench")]);
    assert!(poses_as_report(Some(&by_name), &o, RUN));
    let other_run = with(&[(labels::REPORT, "true"), (labels::RUN, "x-g1")]);
    assert!(!poses_as_report(Some(&other_run), &o, RUN));
    let not_a_report = with(&[(labels::RUN, RUN)]);
    assert!(!poses_as_report(Some(&not_a_report), &o, RUN));
    assert!(!poses_as_report(None, &o, RUN));
}

/// A store over a fake API server that counts its lists (and holds nothing; a creation is
/// answered with the object sent), reading `watched`.
fn watched_store(objects: Vec<ConfigMap>) -> (Store, crate::testing::FakeApi, Arc<WatchedReports>) {
    watched_store_answering(objects, |sent| sent)
}

/// [`watched_store`] whose API server answers a creation with `answer(object sent)`.
fn watched_store_answering(
    objects: Vec<ConfigMap>,
    answer: fn(Value) -> Value,
) -> (Store, crate::testing::FakeApi, Arc<WatchedReports>) {
    let api_server = crate::testing::FakeApi::default();
    let client = api_server.client(move |seen| match seen.method.as_str() {
        "POST" => (201, answer(serde_json::from_str(&seen.body).unwrap())),
        _ => (200, crate::testing::fake_api::empty_list()),
    });
    let watched = Arc::new(WatchedReports::listed(objects));
    let store = Store::new(client, "netbench-system").reading(watched.clone());
    (store, api_server, watched)
}

fn lists(api_server: &crate::testing::FakeApi) -> usize {
    api_server
        .requests()
        .iter()
        .filter(|l| l.starts_with("GET ") && l.contains("labelSelector"))
        .count()
}

#[tokio::test]
async fn a_finished_sample_loads_from_the_watch_without_a_list() {
    let (w0, w1) = ("bench-3f2a9c1d-g1-s0-w0", "bench-3f2a9c1d-g1-s0-w1");
    let mut forged = stored(w1, 0);
    forged.metadata.name = Some("not-its-name".into());
    let (store, api_server, _) = watched_store(vec![stored(w0, 0), stored(w1, 0), forged]);
    let loaded = store
        .load(&owner(), RUN, 0, &expected(&[w0, w1]))
        .await
        .unwrap();
    assert_eq!(lists(&api_server), 0, "{:?}", api_server.requests());
    assert_eq!(loaded.reports.keys().collect::<Vec<_>>(), [w0, w1]);
    // What the watch holds goes through the same checks as a list.
    assert_eq!(loaded.rejected.len(), 1, "{:?}", loaded.rejected);
    assert!(
        loaded.rejected[0].contains("not-its-name"),
        "{:?}",
        loaded.rejected
    );
}

#[tokio::test]
async fn a_sample_the_watch_holds_only_part_of_is_listed() {
    let (w0, w1) = ("bench-3f2a9c1d-g1-s0-w0", "bench-3f2a9c1d-g1-s0-w1");
    let (store, api_server, _) = watched_store(vec![stored(w0, 0)]);
    store
        .load(&owner(), RUN, 0, &expected(&[w0, w1]))
        .await
        .unwrap();
    assert_eq!(lists(&api_server), 1, "{:?}", api_server.requests());
}

/// The worker API wakes the benchmark right after storing a sample's last report, usually
/// before the watch shows it: the load reads it as the API server answered its creation, with
/// the same checks, and lists nothing. An answer that is not the object stored is not used.
#[tokio::test]
async fn a_report_just_stored_is_loaded_as_created_without_a_list() {
    let (w0, w1) = ("bench-3f2a9c1d-g1-s0-w0", "bench-3f2a9c1d-g1-s0-w1");
    let all = expected(&[w0, w1]);
    let (store, api_server, _) = watched_store(vec![stored(w0, 0)]);
    store.store(&owner(), RUN, &report(w1, 0)).await.unwrap();
    let loaded = store.load(&owner(), RUN, 0, &all).await.unwrap();
    assert_eq!(loaded.reports.keys().collect::<Vec<_>>(), [w0, w1]);
    assert_eq!(loaded.reports[w1], report(w1, 0));
    assert!(loaded.rejected.is_empty(), "{:?}", loaded.rejected);
    assert_eq!(lists(&api_server), 0, "{:?}", api_server.requests());
    // Another run's or step's load does not see it.
    assert!(store
        .load_watched(&owner(), "3f2a9c1d-g2", 0, &all)
        .is_none());
    assert!(store.load_watched(&owner(), RUN, 1, &all).is_none());

    // An answer naming another object (or none): only the name is noted, and the load lists.
    let (store, api_server, watched) = watched_store_answering(
        vec![stored(w0, 0)],
        |_| json!({"metadata": {"name": "other"}}),
    );
    store.store(&owner(), RUN, &report(w1, 0)).await.unwrap();
    assert!(watched.is_unseen(&object_name(&owner(), RUN, 0, w1)));
    assert!(store.load_watched(&owner(), RUN, 0, &all).is_none());
    store.load(&owner(), RUN, 0, &all).await.unwrap();
    assert_eq!(lists(&api_server), 1, "{:?}", api_server.requests());
}

/// What is held of stored objects stays bounded and never outlives its use: not held when the
/// watch shows it already, nor when a worker posts its report again (it could pin objects),
/// nor beyond 16 MiB; dropped when its run's reports are deleted (the name stays, so the
/// deletion is still sent).
#[tokio::test]
async fn what_is_held_of_stored_reports_is_bounded_and_dropped_with_them() {
    let (w0, w1) = ("bench-3f2a9c1d-g1-s0-w0", "bench-3f2a9c1d-g1-s0-w1");
    let all = expected(&[w0, w1]);
    // Shown by the watch already (its ADDED event came before the creation's answer).
    let (_, _, watched) = watched_store(vec![stored(w0, 0), stored(w1, 0)]);
    let name = object_name(&owner(), RUN, 0, w1);
    watched.stored(&name, OWNER_UID, RUN, Some(stored(w1, 0)));
    assert_eq!(watched.held_bytes(), 0);

    // Posted again: the API server answers 409 and holds the same report; nothing is held.
    let api_server = crate::testing::FakeApi::default();
    let existing = serde_json::to_value(stored(w1, 0)).unwrap();
    let client = api_server.client(move |seen| match seen.method.as_str() {
        "POST" => (409, crate::testing::fake_api::status(409, "AlreadyExists")),
        _ => (200, existing.clone()),
    });
    let watched = Arc::new(WatchedReports::listed(vec![stored(w0, 0)]));
    let store = Store::new(client, "netbench-system").reading(watched.clone());
    let again = store.store(&owner(), RUN, &report(w1, 0)).await.unwrap();
    assert_eq!(again, Stored::Again);
    assert!(watched.is_unseen(&name));
    assert_eq!(watched.held_bytes(), 0);

    // At most 16 MiB held: 1 MiB objects, the 17th and later only named.
    let watched = WatchedReports::listed(vec![]);
    for i in 0..24 {
        let mut cm = stored(&format!("bench-3f2a9c1d-g1-s0-w{i}"), 0);
        cm.metadata.name = Some(format!("big-{i}"));
        cm.data = Some(BTreeMap::from([("pad".to_string(), "x".repeat(1 << 20))]));
        watched.stored(&format!("big-{i}"), OWNER_UID, RUN, Some(cm));
        assert!(watched.is_unseen(&format!("big-{i}")));
    }
    assert!(watched.held_bytes() <= 16 << 20, "{}", watched.held_bytes());
    assert_eq!(watched.unseen_objects(OWNER_UID, RUN).len(), 15);
    assert!(watched.unseen_objects(OWNER_UID, "3f2a9c1d-g2").is_empty());
    assert!(watched.unseen_objects("another-uid", RUN).is_empty());

    // Deleted with its run: no longer read, still counted as there.
    let (store, _, watched) = watched_store(vec![stored(w0, 0)]);
    store.store(&owner(), RUN, &report(w1, 0)).await.unwrap();
    assert!(store.load_watched(&owner(), RUN, 0, &all).is_some());
    store.delete(&owner(), Some(RUN)).await.unwrap();
    assert!(store.load_watched(&owner(), RUN, 0, &all).is_none());
    assert_eq!(watched.held_bytes(), 0);
    assert!(!store.holds_none(&owner(), Some(RUN)));
}

/// What the API server answered goes through the checks a listed object does: an answer whose
/// content is not the report (a mutating webhook, say) is rejected, never taken as the report.
#[tokio::test]
async fn a_report_answered_changed_is_rejected_like_a_listed_one() {
    let (w0, w1) = ("bench-3f2a9c1d-g1-s0-w0", "bench-3f2a9c1d-g1-s0-w1");
    let all = expected(&[w0, w1]);
    let (store, _, _) = watched_store_answering(vec![stored(w0, 0)], |mut sent| {
        if let Some(data) = sent["data"].as_object_mut() {
            for value in data.values_mut() {
                *value = json!("{\"not\": \"the report\"}");
            }
        }
        sent
    });
    store.store(&owner(), RUN, &report(w1, 0)).await.unwrap();
    let loaded = store.load(&owner(), RUN, 0, &all).await.unwrap();
    assert!(
        !loaded.reports.contains_key(w1),
        "{:?}",
        loaded.reports.keys()
    );
}

#[tokio::test]
async fn reported_counts_the_watch_and_what_was_just_stored() {
    let (w0, w1, w2) = (
        "bench-3f2a9c1d-g1-s0-w0",
        "bench-3f2a9c1d-g1-s0-w1",
        "bench-3f2a9c1d-g1-s0-w2",
    );
    let other_step = stored(w2, 1);
    let (store, api_server, watched) = watched_store(vec![stored(w0, 0), other_step]);
    let all = expected(&[w0, w1, w2]);
    let seen = store.reported(&owner(), RUN, 0, &all).unwrap();
    assert_eq!(seen.iter().collect::<Vec<_>>(), [w0]);
    // Stored by this process a moment ago, not in the watch yet: counted.
    let stored = store.store(&owner(), RUN, &report(w1, 0)).await.unwrap();
    assert_eq!(stored, Stored::New);
    assert!(watched.is_unseen(&object_name(&owner(), RUN, 0, w1)));
    let seen = store.reported(&owner(), RUN, 0, &all).unwrap();
    assert_eq!(seen.iter().collect::<Vec<_>>(), [w0, w1]);
    assert_eq!(lists(&api_server), 0, "{:?}", api_server.requests());
    // A store whose watch has not listed answers nothing.
    let unlisted = Store::new(store.client.clone(), "netbench-system")
        .reading(Arc::new(WatchedReports::default()));
    assert_eq!(unlisted.reported(&owner(), RUN, 0, &all), None);
}

#[tokio::test]
async fn a_delete_the_watch_says_would_find_nothing_is_not_sent() {
    let deletes = |api_server: &crate::testing::FakeApi| {
        api_server
            .requests()
            .iter()
            .filter(|l| l.starts_with("DELETE "))
            .count()
    };
    let w0 = "bench-3f2a9c1d-g1-s0-w0";
    // Nothing of the benchmark in the watch: no request.
    let (store, api_server, _) = watched_store(vec![]);
    store.delete(&owner(), Some(RUN)).await.unwrap();
    store.delete_folds(&owner(), RUN).await.unwrap();
    assert_eq!(deletes(&api_server), 0, "{:?}", api_server.requests());
    // A worker report of the run: the run's delete is sent, the folds' (none) is not.
    let (store, api_server, _) = watched_store(vec![stored(w0, 0)]);
    store.delete(&owner(), Some(RUN)).await.unwrap();
    store.delete_folds(&owner(), RUN).await.unwrap();
    assert_eq!(deletes(&api_server), 1, "{:?}", api_server.requests());
    // A watch that has not listed decides nothing: both are sent.
    let api_server = crate::testing::FakeApi::default();
    let client = api_server.client(|_| (200, crate::testing::fake_api::empty_list()));
    let store = Store::new(client, "netbench-system").reading(Arc::new(WatchedReports::default()));
    store.delete(&owner(), Some(RUN)).await.unwrap();
    store.delete_folds(&owner(), RUN).await.unwrap();
    assert_eq!(deletes(&api_server), 2, "{:?}", api_server.requests());
}

#[tokio::test]
async fn a_report_stored_a_moment_ago_keeps_its_run_s_delete() {
    // Stored by this process, not in the watch yet: the watch alone would say "none".
    let (store, api_server, _) = watched_store(vec![]);
    let w0 = "bench-3f2a9c1d-g1-s0-w0";
    store.store(&owner(), RUN, &report(w0, 0)).await.unwrap();
    assert!(!store.holds_none(&owner(), Some(RUN)));
    assert!(
        store.holds_none(&owner(), Some("3f2a9c1d-g2")),
        "another run's"
    );
    store.delete(&owner(), Some(RUN)).await.unwrap();
    let deletes = api_server
        .requests()
        .iter()
        .filter(|l| l.starts_with("DELETE "))
        .count();
    assert_eq!(deletes, 1, "{:?}", api_server.requests());
}

#[tokio::test]
async fn a_fold_stored_a_moment_ago_keeps_its_run_s_release() {
    // The fold of a sample, just stored, not in the watch yet: the run's reports are not
    // "none" (a finished run's release would skip its delete and leave the fold behind).
    let (store, _, _) = watched_store(vec![]);
    store
        .keep_folded(&owner(), RUN, &Folded::new(0))
        .await
        .unwrap();
    assert!(!store.holds_none(&owner(), Some(RUN)));
}

#[tokio::test]
async fn a_sample_is_read_from_the_watch_alone_only_when_it_holds_every_client() {
    let (w0, w1) = ("bench-3f2a9c1d-g1-s0-w0", "bench-3f2a9c1d-g1-s0-w1");
    let all = expected(&[w0, w1]);
    let (store, api_server, _) = watched_store(vec![stored(w0, 0), stored(w1, 0)]);
    let loaded = store.load_watched(&owner(), RUN, 0, &all).unwrap();
    assert_eq!(loaded.reports.keys().collect::<Vec<_>>(), [w0, w1]);
    // Part of them: nothing (the caller asks the API server for the fold, then lists).
    let (partial, _, _) = watched_store(vec![stored(w0, 0)]);
    assert!(partial.load_watched(&owner(), RUN, 0, &all).is_none());
    assert!(
        api_server.requests().is_empty(),
        "{:?}",
        api_server.requests()
    );
    // A fold is always asked of the API server: the watch's "none" may lag.
    let (store, api_server, _) = watched_store(vec![]);
    let _ = store.folded(&owner(), RUN, 0).await;
    let gets = api_server.requests();
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert!(
        gets[0].starts_with("GET ") && gets[0].contains("netbench-sample-"),
        "{gets:?}"
    );
}
