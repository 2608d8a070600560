//! Events a reconcile publishes once its status is written.

use kube::runtime::events::EventType;

/// An Event to publish once the reconcile's status is written: (type, reason, note).
pub type PendingEvent = (EventType, String, String);
