//! What every protocol family of an egress case says about itself ([`Family`]), and the rows
//! of figures several families share. Below the families and their dispatch (`mod.rs`), so
//! neither imports the other through it.

use crds::egress::{CaseResult, Direction, EgressCase};
use crds::history::Better;
use prometheus::Registry;
use protocol::worker::CheckedReport;
use protocol::Protocol;

use crate::policy::gates::SCHEDULE_MISSED;

use super::super::readings::Errors;

/// One figure of a case before it is known to have a value: name, unit, better, value.
pub type Row = (&'static str, &'static str, Better, Option<f64>);

/// A protocol family of an egress case (tcp-stream; udp-stream; tcp-rr, tcp-crr and udp-rr):
/// its client's flags, its report read into the case's result, and its figures.
pub trait Family {
    /// The report its clients send, validated.
    type Report;
    /// The client's flags of the case's protocol (the loadgen refuses a flag of another).
    fn flags(case: &EgressCase, flag: &mut dyn FnMut(&str, String));
    /// Its report out of a checked one of protocol `p`; Err says what the report is instead,
    /// after "report of worker W ".
    fn report(p: Protocol, checked: CheckedReport) -> Result<Self::Report, String>;
    /// The exact merge of the reports of clients that ran at the same time.
    fn merge(all: &[Self::Report]) -> Result<Self::Report, String>;
    /// Fills `r` from one report; returns why streams ended early (if they did).
    fn fill(report: &Self::Report, r: &mut CaseResult) -> Errors;
    /// The case's own figures, main figure first (the CPU per GB of every case follows).
    fn figures(r: &CaseResult) -> Vec<Row>;
    /// Its own series of a finished case on /metrics, registered in `registry`.
    fn gauges(registry: &Registry) -> Box<dyn CaseGauges>;
}

/// A family's own series of a finished case (what the cases of other families have no figure
/// for). Each is set from the figures a case has, whatever its protocol.
pub trait CaseGauges: Send + Sync {
    /// Sets the series of case `c` (labels: namespace, name, case) that it has figures for.
    fn set(&self, labels: [&str; 3], c: &CaseResult);
    /// Drops the case's series.
    fn forget(&self, labels: [&str; 3]);
}

/// What a checked report of another family is, for [`Family::report`]'s error.
pub fn not_of(other: &CheckedReport) -> String {
    match other {
        CheckedReport::Http(_) => "is an HTTP report".to_string(),
        other => format!("is a {} report", other.kind()),
    }
}

/// `--direction`'s value for a stream case.
pub fn direction(case: &EgressCase) -> String {
    match case.direction {
        Direction::Send => "send",
        Direction::Receive => "receive",
        Direction::Both => "both",
    }
    .into()
}

pub fn received(r: &CaseResult) -> Row {
    (
        "receiverBitsPerSecond",
        "bit/s",
        Better::Higher,
        r.receiver_bits_per_second,
    )
}

pub fn sent(r: &CaseResult) -> Row {
    (
        "senderBitsPerSecond",
        "bit/s",
        Better::Higher,
        r.sender_bits_per_second,
    )
}

pub fn missed(r: &CaseResult) -> Row {
    (
        SCHEDULE_MISSED,
        "%",
        Better::Lower,
        r.schedule_missed_percent,
    )
}

pub fn loss(r: &CaseResult) -> Row {
    ("lossPercent", "%", Better::Lower, r.loss_percent)
}

/// A count as a figure's value.
pub fn count(n: Option<u64>) -> Option<f64> {
    n.map(|n| n as f64)
}
