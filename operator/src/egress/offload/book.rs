//! A benchmark's offload records as one book: loaded from and saved to the operator's
//! namespace (crate::store::records), deleted once every restore is verified, copied to status.

use kube::Client;

use crds::egress::{EgressBenchmark, OffloadRecord};

use super::record::DeviceRecord;
use crate::admin::config::Config;
use crate::base::error::Result;
use crate::store::records::{Owner, Store, Stored};

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
    pub async fn load(client: &Client, config: &Config, eb: &EgressBenchmark) -> Result<Book> {
        let store = Store::new(client, &config.namespace, "offload");
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
