//! Worker reports are stored the moment they arrive, one ConfigMap per worker and step, in the
//! operator's namespace: benchmark authors cannot write there, so they can neither add a
//! "worker" to a result nor take a report's name. Owner references cannot cross namespaces, so
//! each object is tied to its benchmark by labels (kind, namespace, name, uid, run, step,
//! worker) and by a name derived from all of them. An object is read back only if its name,
//! labels and content all agree; the phases delete a run's reports only once the status holding
//! their result is persisted.
//!
//! The files: `object.rs` (names, labels, selectors and checks of report objects),
//! `store.rs` (the [`Store`] and its requests), `forged.rs` (forgeries: their counter and
//! Event), `folded.rs` (one object per finished sample), `watched.rs` (the operator's watch of
//! its report objects) and `sink.rs` (the worker API's way in).

pub use crate::store::owner::Owner;

pub mod folded;
mod forged;
mod object;
mod sink;
mod store;
mod watched;
pub use folded::Folded;
pub use forged::{ReportMetrics, FORGED, REPORT_REJECTIONS};
pub(crate) use object::report_object;
pub use object::{every_client_reported, object_name};
pub use sink::{ApiSink, ReportSink};
pub use store::{Loaded, Store, StoreError, Stored};
pub use watched::WatchedReports;

#[cfg(test)]
mod tests;
