//! A kind's entry in the operator's list of kinds (`context::Kinds`): what the passes that look
//! across every kind need of it, without naming it.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use kube::api::ListParams;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use super::plan::Plan;
use super::Hooks;
use crate::admin::scope::Scope;
use crate::base::metrics::Metrics;
use crate::context::{CachedFn, KindEntry, Listed};
use crate::policy::queue::Contender;

/// The entry of kind `K`.
pub fn entry<K: Hooks>() -> KindEntry {
    KindEntry {
        kind: K::kind(&()).into_owned(),
        contenders: contenders::<K>,
        cached: Arc::default(),
        list: list::<K>,
    }
}

/// The queue's view of kind `K` from its controllers' caches (one per watched place): every
/// benchmark they hold (one that does not parse is left out, as the API server's list would fail
/// on it), once every cache has had its first complete listing.
pub fn cached<K: Plan>(stores: Vec<Store<DeserializeGuard<K>>>) -> CachedFn {
    Arc::new(move || {
        let mut all: Vec<Contender> = vec![];
        for store in &stores {
            // Ready once the first listing is complete (never blocks).
            store.wait_until_ready().now_or_never()?.ok()?;
            all.extend(
                store
                    .state()
                    .iter()
                    .filter_map(|b| b.0.as_ref().ok())
                    .map(K::contender),
            );
        }
        // In the order a list has (the cache is a hash map).
        all.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Some(all)
    })
}

/// Every benchmark of kind `K` in the operator's scope, as the queue sees it.
fn contenders<'c, K: Plan>(
    client: &'c Client,
    scope: &'c Scope,
) -> BoxFuture<'c, Result<Vec<Contender>, kube::Error>> {
    async move {
        let all = scope.list::<K>(client, &ListParams::default()).await?;
        Ok(all.items.iter().map(K::contender).collect())
    }
    .boxed()
}

/// Every benchmark of kind `K` in the operator's scope: their uids, and the export of the
/// results their status holds.
fn list<'c, K: Hooks>(
    client: &'c Client,
    scope: &'c Scope,
) -> BoxFuture<'c, Result<Listed, kube::Error>> {
    async move {
        let listed = scope.list::<K>(client, &ListParams::default()).await?;
        let (all, skipped) = (listed.items, listed.skipped);
        let uids = all.iter().filter_map(|b| b.uid()).collect();
        let export = move |metrics: &Metrics| {
            for b in &all {
                b.export_results(metrics);
            }
        };
        Ok(Listed {
            uids,
            complete: skipped.is_empty(),
            export: Box::new(export),
        })
    }
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Kinds;
    use crate::testing::fake_api::{empty_list, FakeApi};
    use crds::{EgressBenchmark, IngressBenchmark};
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    fn guarded(name: &str) -> DeserializeGuard<IngressBenchmark> {
        let b: IngressBenchmark = serde_json::from_value(serde_json::json!({
            "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
            "metadata": {"name": name, "namespace": "team", "uid": format!("u-{name}")},
            "spec": {"target": {"url": "http://x/"}, "load": {}},
        }))
        .unwrap();
        DeserializeGuard(Ok(b))
    }

    #[tokio::test]
    async fn the_queue_reads_a_ready_cache_instead_of_listing_every_benchmark() {
        let fake = FakeApi::default();
        let client = fake.client(|_| (200, empty_list()));
        let kinds = Kinds(vec![
            entry::<IngressBenchmark>(),
            entry::<EgressBenchmark>(),
        ]);
        let (store, mut writer) = reflector::store::<DeserializeGuard<IngressBenchmark>>();
        kinds.cache("IngressBenchmark", cached::<IngressBenchmark>(vec![store]));

        // Before the cache's first complete listing the API server is asked.
        let all = kinds.contenders(&client, &Scope::Cluster).await.unwrap();
        assert!(all.is_empty());
        let lists = |fake: &FakeApi, plural: &str| {
            fake.requests()
                .iter()
                .filter(|r| r.contains(plural))
                .count()
        };
        assert_eq!(lists(&fake, "ingressbenchmarks"), 1);

        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(guarded("a")));
        writer.apply_watcher_event(&Event::InitApply(guarded("b")));
        writer.apply_watcher_event(&Event::InitDone);
        let all = kinds.contenders(&client, &Scope::Cluster).await.unwrap();
        let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        // IngressBenchmarks from the cache; EgressBenchmarks (no controller here) still listed.
        assert_eq!(lists(&fake, "ingressbenchmarks"), 1);
        assert_eq!(lists(&fake, "egressbenchmarks"), 2);
    }

    #[tokio::test]
    async fn a_namespace_scoped_operator_lists_and_caches_only_its_namespaces() {
        let fake = FakeApi::default();
        let client = fake.client(|_| (200, empty_list()));
        let kinds = Kinds(vec![entry::<IngressBenchmark>()]);
        let scope = Scope::parse("team-b,team-a").unwrap();
        let (store_a, mut writer_a) = reflector::store::<DeserializeGuard<IngressBenchmark>>();
        let (store_b, mut writer_b) = reflector::store::<DeserializeGuard<IngressBenchmark>>();
        kinds.cache(
            "IngressBenchmark",
            cached::<IngressBenchmark>(vec![store_a, store_b]),
        );

        // Until every cache is ready: one list per watched namespace, none across the cluster.
        writer_a.apply_watcher_event(&Event::Init);
        writer_a.apply_watcher_event(&Event::InitApply(guarded("a")));
        writer_a.apply_watcher_event(&Event::InitDone);
        kinds.contenders(&client, &scope).await.unwrap();
        let paths: Vec<String> = fake
            .requests()
            .iter()
            .map(|r| r.split(' ').nth(1).unwrap_or_default().to_string())
            .collect();
        assert_eq!(paths.len(), 2, "{paths:?}");
        assert!(
            paths[0].ends_with("/namespaces/team-a/ingressbenchmarks"),
            "{paths:?}"
        );
        assert!(
            paths[1].ends_with("/namespaces/team-b/ingressbenchmarks"),
            "{paths:?}"
        );

        // Both ready: the union of the caches, no request.
        writer_b.apply_watcher_event(&Event::Init);
        writer_b.apply_watcher_event(&Event::InitApply(guarded("b")));
        writer_b.apply_watcher_event(&Event::InitDone);
        let all = kinds.contenders(&client, &scope).await.unwrap();
        let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(fake.requests().len(), 2);
    }

    #[tokio::test]
    async fn a_watched_namespace_that_refuses_is_left_out_and_the_listing_says_so() {
        let fake = FakeApi::default();
        let b = serde_json::json!({
            "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
            "metadata": {"name": "b", "namespace": "team-b", "uid": "u-b"},
            "spec": {"target": {"url": "http://x/"}, "load": {}},
        });
        let client = fake.client(move |seen| {
            if seen.path.contains("/namespaces/team-a/") {
                (403, crate::testing::fake_api::status(403, "Forbidden"))
            } else {
                (200, serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [b.clone()]}))
            }
        });
        let scope = Scope::parse("team-a,team-b").unwrap();
        let kinds = Kinds(vec![entry::<IngressBenchmark>()]);
        // The queue still sees team-b's benchmarks.
        let all = kinds.contenders(&client, &scope).await.unwrap();
        let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["b"]);
        // A new leader's listing is marked incomplete (no report is then taken for an orphan).
        let listed = (kinds.0[0].list)(&client, &scope).await.unwrap();
        assert_eq!(listed.uids, ["u-b"]);
        assert!(!listed.complete);
        // A cluster-wide operator refused is an error, as before.
        assert!(kinds.contenders(&client, &Scope::Cluster).await.is_ok());
        let refused = fake.client(|_| (403, crate::testing::fake_api::status(403, "Forbidden")));
        assert!(kinds.contenders(&refused, &Scope::Cluster).await.is_err());
    }
}
