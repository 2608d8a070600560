//! A benchmark's offload records as one book: loaded from and saved to the operator's
//! namespace (crate::store::records), deleted once every restore is verified, copied to status.

use crds::egress::{EgressBenchmark, OffloadRecord};

use super::record::DeviceRecord;
use crate::base::error::Result;
use crate::context::Context;
use crate::store::records::{Owner, Store, Stored};

/// The records' kind in the operator's namespace.
pub(super) const WHAT: &str = "offload";

/// A benchmark's offload records, kept in the operator's namespace.
pub struct Book {
    store: Store,
    owner: Owner,
    pub(super) stored: Stored<Vec<DeviceRecord>>,
    exists: bool,
    /// Records were read or written in this reconcile: the status copy follows them.
    touched: bool,
}

impl Book {
    /// The benchmark's records; none without a request when this process knows there are none.
    pub async fn load(ctx: &Context, eb: &EgressBenchmark) -> Result<Book> {
        Book::load_from(ctx.restore_records(WHAT), eb).await
    }

    /// The benchmark's records in `store`.
    pub(super) async fn load_from(store: Store, eb: &EgressBenchmark) -> Result<Book> {
        let owner = Owner::of(eb);
        let (stored, exists) = match store.load(&owner).await? {
            Some(s) => (s, true),
            None => (Stored::new(vec![]), false),
        };
        Ok(Book {
            store,
            owner,
            stored,
            exists,
            touched: exists,
        })
    }

    pub fn records(&self) -> &[DeviceRecord] {
        &self.stored.data
    }

    /// Some device may still differ from its state before.
    pub fn open(&self) -> bool {
        self.records().iter().any(DeviceRecord::needs_restore)
    }

    pub(super) async fn save(&mut self) -> Result<()> {
        self.store.save(&self.owner, &mut self.stored).await?;
        self.exists = true;
        self.touched = true;
        Ok(())
    }

    /// Deletes the records once no device needs a restore (each restore was verified).
    pub async fn delete_if_resolved(&mut self) -> Result<()> {
        if self.exists && !self.open() {
            self.store.delete(&self.owner).await?;
            self.exists = false;
            // A later save creates the record afresh.
            self.stored = Stored::new(std::mem::take(&mut self.stored.data));
        }
        Ok(())
    }

    /// Deletes resolved records and forgets them (a new run starts with none).
    pub async fn start_over(&mut self) -> Result<()> {
        self.delete_if_resolved().await?;
        if !self.exists {
            self.stored.data.clear();
            self.touched = false;
        }
        Ok(())
    }

    /// The status copy; None when no records were seen in this reconcile (the status keeps its
    /// last report).
    pub fn report(&self) -> Option<Vec<OffloadRecord>> {
        self.touched
            .then(|| self.records().iter().map(DeviceRecord::report).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::config::Config;
    use crate::testing::fake_api::{context, status, FakeApi};

    #[tokio::test]
    async fn a_benchmark_without_records_is_asked_for_them_once() {
        let fake = FakeApi::default();
        let client = fake.client(|_| (404, status(404, "NotFound")));
        let ctx = context(client, Config::for_tests());
        let eb = super::super::record::tests::eb();
        for _ in 0..3 {
            let book = Book::load(&ctx, &eb).await.unwrap();
            assert!(book.records().is_empty() && book.report().is_none());
        }
        let asked = fake.requests();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(asked[0]
            .starts_with("GET /api/v1/namespaces/netbench-system/configmaps/netbench-offload-"));
    }
}
