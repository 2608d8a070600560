//! A kind's entry in the operator's list of kinds (`context::Kinds`): what the passes that look
//! across every kind need of it, without naming it.

use futures::future::BoxFuture;
use futures::FutureExt;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::Plan;
use crate::base::metrics::Metrics;
use crate::context::{KindEntry, Listed};
use crate::policy::queue::Contender;

/// The entry of kind `K`.
pub fn entry<K: Plan>() -> KindEntry {
    KindEntry {
        contenders: contenders::<K>,
        list: list::<K>,
    }
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
