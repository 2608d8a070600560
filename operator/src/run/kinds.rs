//! A kind's entry in the operator's list of kinds (`context::Kinds`): what the passes that look
//! across every kind need of it, without naming it.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use kube::api::{Api, ListParams};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use super::Plan;
use crate::base::metrics::Metrics;
use crate::context::{CachedFn, KindEntry, Listed};
use crate::policy::queue::Contender;

/// The entry of kind `K`.
pub fn entry<K: Plan>() -> KindEntry {
    KindEntry {
        kind: K::kind(&()).into_owned(),
        contenders: contenders::<K>,
        cached: Arc::default(),
        list: list::<K>,
    }
}

/// The queue's view of kind `K` from its controller's cache: every benchmark the cache holds
/// (one that does not parse is left out, as the API server's list would fail on it), once
/// the cache has had its first complete listing.
pub fn cached<K: Plan>(store: Store<DeserializeGuard<K>>) -> CachedFn {
    Arc::new(move || {
        // Ready once the first listing is complete (never blocks).
        store.wait_until_ready().now_or_never()?.ok()?;
        let mut all: Vec<Contender> = store
            .state()
            .iter()
            .filter_map(|b| b.0.as_ref().ok())
            .map(K::contender)
            .collect();
        // In the order a list has (the cache is a hash map).
        all.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Some(all)
    })
}

/// Every benchmark of kind `K`, as the queue sees it.
fn contenders<K: Plan>(client: &Client) -> BoxFuture<'_, Result<Vec<Contender>, kube::Error>> {
    async move {
        let all = Api::<K>::all(client.clone())
            .list(&ListParams::default())
            .await?;
        Ok(all.items.iter().map(K::contender).collect())
    }
    .boxed()
}

/// Every benchmark of kind `K`: their uids, and the export of the results their status holds.
fn list<K: Plan>(client: &Client) -> BoxFuture<'_, Result<Listed, kube::Error>> {
    async move {
        let all = Api::<K>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let uids = all.iter().filter_map(|b| b.uid()).collect();
        let export = move |metrics: &Metrics| {
            for b in &all {
                b.export_results(metrics);
            }
        };
        Ok(Listed {
            uids,
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
        kinds.cache("IngressBenchmark", cached::<IngressBenchmark>(store));

        // Before the cache's first complete listing the API server is asked.
        let all = kinds.contenders(&client).await.unwrap();
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
        let all = kinds.contenders(&client).await.unwrap();
        let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        // IngressBenchmarks from the cache; EgressBenchmarks (no controller here) still listed.
        assert_eq!(lists(&fake, "ingressbenchmarks"), 1);
        assert_eq!(lists(&fake, "egressbenchmarks"), 2);
    }
}
