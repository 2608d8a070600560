//! Everything an egress case does per protocol, one module per family: `stream` (tcp-stream),
//! `datagram` (udp-stream), `request_response` (tcp-rr, tcp-crr, udp-rr). Each implements
//! [`Family`] (`family.rs`): its client's flags, its report read into the case's result, its
//! figures, its own finished-case series on /metrics. This file is the one place a protocol is
//! matched to its family (`with_family!`); a new family is a module beside these, its arm
//! there and its entry in [`case_gauges`]. Every report is validated again here
//! (`protocol::worker::validate_final`): a stored report is as hostile as the request that
//! brought it. Pure but for the series `case_gauges` registers.

use crds::egress::{CaseResult, EgressCase};
use prometheus::Registry;
use protocol::worker::{validate_final, FinalReport};
use protocol::Protocol;

use super::readings::Errors;

mod datagram;
mod family;
mod request_response;
mod stream;

pub use family::{CaseGauges, Family, Row};

/// `$body` with the type `$f` the family of protocol `$p`.
macro_rules! with_family {
    ($p:expr, $f:ident => $body:expr) => {
        match $p {
            Protocol::TcpStream => {
                type $f = stream::Stream;
                $body
            }
            Protocol::UdpStream => {
                type $f = datagram::Datagram;
                $body
            }
            Protocol::TcpRr | Protocol::TcpCrr | Protocol::UdpRr => {
                type $f = request_response::RequestResponse;
                $body
            }
        }
    };
}

/// Every family's own series of a finished case, registered in `registry`.
pub fn case_gauges(registry: &Registry) -> Vec<Box<dyn CaseGauges>> {
    vec![
        stream::Stream::gauges(registry),
        datagram::Datagram::gauges(registry),
        request_response::RequestResponse::gauges(registry),
    ]
}

/// The flags of the case's protocol (the loadgen refuses a flag of another protocol).
pub fn client_flags(case: &EgressCase) -> Vec<String> {
    let mut args = vec![];
    let mut flag = |name: &str, value: String| args.extend([name.to_string(), value]);
    with_family!(case.protocol, F => F::flags(case, &mut flag));
    args
}

/// The figures of protocol `p`'s case `r`, main figure first, before the CPU per GB every case
/// has.
pub fn figures(p: Protocol, r: &CaseResult) -> Vec<Row> {
    with_family!(p, F => F::figures(r))
}

/// The clients' reports of a case of protocol `p`, each validated once: read one by one (a
/// result per report, when `each`), then into `r` merged exactly (rates and counts add up,
/// latency histograms merge, percentiles are recomputed; one report is read as it is).
/// Returns the results one by one and why streams ended early (if they did).
pub fn read(
    p: Protocol,
    clients: &[&FinalReport],
    each: bool,
    r: &mut CaseResult,
) -> Result<(Vec<CaseResult>, Errors), String> {
    with_family!(p, F => read_as::<F>(p, clients, each, r))
}

fn read_as<F: Family>(
    p: Protocol,
    clients: &[&FinalReport],
    each: bool,
    r: &mut CaseResult,
) -> Result<(Vec<CaseResult>, Errors), String> {
    let reports = clients
        .iter()
        .map(|c| check_as::<F>(p, c))
        .collect::<Result<Vec<_>, _>>()?;
    let mut one_by_one = Vec::new();
    if each {
        for report in &reports {
            let mut one = CaseResult::default();
            F::fill(report, &mut one);
            one_by_one.push(one);
        }
    }
    Ok((one_by_one, read_all::<F>(&reports, r)?))
}

/// `client`'s report validated as one of protocol `p`: the kind `p` delivers, and for
/// request/response the test `p` names. Err says why it is refused (what [`read`] fails with).
pub fn check(p: Protocol, client: &FinalReport) -> Result<(), String> {
    with_family!(p, F => check_as::<F>(p, client).map(drop))
}

fn check_as<F: Family>(p: Protocol, client: &FinalReport) -> Result<F::Report, String> {
    let checked = validate_final(client, p.report_kind())
        .map_err(|e| format!("report of worker {:.253}: {e}", client.worker))?;
    F::report(p, checked).map_err(|e| format!("report of worker {:.253} {e}", client.worker))
}

/// Fills `r` from the checked reports of clients that ran at the same time (a topology's
/// pairs), merged.
fn read_all<F: Family>(reports: &[F::Report], r: &mut CaseResult) -> Result<Errors, String> {
    match reports {
        [] => Err("no client report to read".into()),
        [one] => Ok(F::fill(one, r)),
        all => {
            let merged = F::merge(all)
                .map_err(|e| format!("merging the reports of {} clients: {e}", all.len()))?;
            Ok(F::fill(&merged, r))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `netbench report` shows first for a protocol (the protocol crate's
    /// `Protocol::main_figures`) is among the figures its family writes, headline first.
    #[test]
    fn each_protocols_main_figures_are_written_by_its_family_headline_first() {
        for p in Protocol::ALL {
            let names: Vec<_> = figures(p, &CaseResult::default())
                .into_iter()
                .map(|row| row.0)
                .collect();
            let main = p.main_figures();
            assert_eq!(names.first(), main.first(), "{p}");
            for figure in main {
                assert!(names.contains(figure), "{p}: {figure} in {names:?}");
            }
        }
    }
}
