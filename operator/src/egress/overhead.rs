//! Cases compared with each other: overheadPercent against the baseline case, only between
//! cases measured on the same node pair, or from the same client node to a server outside the
//! cluster (`notComparable` says why not), and the printer columns (the best case, the largest
//! overhead). Pure.

use crds::egress::CaseResult;
use protocol::Protocol;

use super::readings::round2;
use super::result::{format_bits, format_tps, main_figure, protocol_of};

/// A measured run of the baseline case, as the others are matched with it.
struct Base {
    protocol: Protocol,
    size: Option<u32>,
    streams: Option<u32>,
    figure: f64,
    /// Where it measured (`measured_on`).
    on: String,
    name: String,
}

/// Sets every non-baseline case's overheadPercent: the main figure it lost against the
/// baseline (negative when better), between cases of the same protocol only, never for a case
/// with a topology or against one (a sum over pairs). A swept baseline case is matched by
/// message size and streams. Without a measured baseline nothing is set. Only cases measured on
/// the same node pair (client node -> server node) and the same kind of path (in the cluster
/// or to an external server) are compared: otherwise the case gets `notComparable` instead,
/// e.g. "not comparable: nb-node1->nb-node1 vs nb-node2->nb-node0".
pub fn set_overheads(cases: &mut [CaseResult], baseline: &str) {
    let bases: Vec<Base> = cases
        .iter()
        .filter(|c| c.name == baseline || c.case.as_deref() == Some(baseline))
        .map(|c| Base {
            protocol: protocol_of(c),
            size: c.message_size,
            streams: c.streams,
            figure: main_figure(c),
            on: measured_on(c),
            name: c.name.clone(),
        })
        .filter(|b| b.figure > 0.0)
        .collect();
    // Swept: the baseline case's runs carry their own names ("case/messageSize=N"), whether
    // one or all of them measured anything (never decided by how many measured).
    let swept = cases
        .iter()
        .any(|c| c.case.as_deref() == Some(baseline) && c.name != baseline);
    let base_is_many = cases
        .iter()
        .any(|c| c.name == baseline && !c.pairs.is_empty());
    for c in cases.iter_mut() {
        let own = c.name == baseline || c.case.as_deref() == Some(baseline);
        let base = bases.iter().find(|b| {
            b.protocol == protocol_of(c)
                && (!swept || (b.size == c.message_size && b.streams == c.streams))
        });
        // A topology's figure is a sum over its pairs: not comparable with one pair's.
        let many = !c.pairs.is_empty() || base_is_many;
        let here = measured_on(c);
        (c.overhead_percent, c.not_comparable) = match (own, base) {
            (false, Some(b)) if !many && comparable(&here, &b.on) => (
                Some(round2((1.0 - main_figure(c) / b.figure) * 100.0)),
                None,
            ),
            (false, Some(b)) if !many => (
                None,
                Some(format!(
                    "not comparable: {here} vs {} (baseline {})",
                    b.on, b.name
                )),
            ),
            _ => (None, None),
        };
    }
}

/// Where a case measured, as "client node->server node" ("?" for a node not known; an external
/// server by its address).
pub fn measured_on(c: &CaseResult) -> String {
    let node = |n: &Option<String>| n.clone().unwrap_or_else(|| "?".into());
    let server = if c.path.as_deref() == Some("external") {
        format!(
            "external {}",
            c.server_address.as_deref().unwrap_or("server")
        )
    } else {
        node(&c.server_node)
    };
    format!("{}->{server}", node(&c.client_node))
}

/// Two cases measured the same pair of known nodes; or from the same known client node, one of
/// them to a server outside the cluster: the seed's "pod -> egress node -> target" against
/// "node -> node", where the way out is what is compared (the user named that server).
fn comparable(a: &str, b: &str) -> bool {
    let split = |on: &str| {
        let (client, server) = on.split_once("->").unwrap_or((on, "?"));
        (client.to_string(), server.to_string())
    };
    let ((ac, as_), (bc, bs)) = (split(a), split(b));
    let known = |n: &str| n != "?";
    let external = |s: &str| s.starts_with("external ");
    known(&ac) && ac == bc && ((known(&as_) && as_ == bs) || external(&as_) || external(&bs))
}

/// The printer columns: the best receiver throughput of the stream cases (or, with none, the
/// most transactions/s) and the largest overhead.
pub fn summary(cases: &[CaseResult]) -> (Option<String>, Option<String>) {
    let best = cases
        .iter()
        .filter(|c| c.transactions_per_second.is_none())
        .filter_map(|c| Some((c.receiver_bits_per_second?, &c.name)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(bps, name)| format!("{} ({name})", format_bits(bps)))
        .or_else(|| {
            cases
                .iter()
                .filter_map(|c| Some((c.transactions_per_second?, &c.name)))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(tps, name)| format!("{} ({name})", format_tps(tps)))
        });
    let largest = cases
        .iter()
        .filter_map(|c| c.overhead_percent.map(|o| (o, &c.name)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(o, name)| format!("{o:.1}% ({name})"));
    // Cases left out for another node pair are said, never silently dropped.
    let apart = cases.iter().filter(|c| c.not_comparable.is_some()).count();
    let overhead = match (largest, apart) {
        (o, 0) => o,
        (Some(o), n) => Some(format!("{o}; {n} not comparable")),
        (None, n) => Some(format!("{n} not comparable")),
    };
    (best, overhead)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::result::tests::case;
    use crds::egress::PairResult;

    fn on(mut c: CaseResult, client: &str, server: &str) -> CaseResult {
        c.client_node = Some(client.into());
        c.server_node = Some(server.into());
        c
    }

    #[test]
    fn cases_on_different_node_pairs_get_no_overhead_but_the_reason() {
        let rr = |name: &str, tps: f64| CaseResult {
            protocol: Some(Protocol::TcpRr),
            transactions_per_second: Some(tps),
            ..case(name, 0.0)
        };
        // The run: rr-pod same-node, rr-service across the overlay.
        let mut cases = vec![
            on(rr("rr-pod", 14_769.0), "nb-node1", "nb-node1"),
            on(rr("rr-service", 7_383.0), "nb-node2", "nb-node0"),
            on(
                rr("rr-sizes/messageSize=1024", 6_947.0),
                "nb-node2",
                "nb-node0",
            ),
            on(rr("rr-same", 13_000.0), "nb-node1", "nb-node1"),
        ];
        cases[2].case = Some("rr-sizes".into());
        set_overheads(&mut cases, "rr-pod");
        assert_eq!(cases[1].overhead_percent, None);
        assert_eq!(
            cases[1].not_comparable.as_deref(),
            Some("not comparable: nb-node2->nb-node0 vs nb-node1->nb-node1 (baseline rr-pod)")
        );
        assert_eq!(cases[2].overhead_percent, None);
        assert!(cases[2].not_comparable.is_some());
        assert_eq!(cases[3].overhead_percent, Some(11.98));
        assert_eq!(cases[3].not_comparable, None);
        assert_eq!(cases[0].not_comparable, None, "the baseline itself");
        // The printer column leads with a comparable overhead and says what was left out.
        let (_, overhead) = summary(&cases);
        assert_eq!(overhead.unwrap(), "12.0% (rr-same); 2 not comparable");
        // Measured again on the same pair: compared, the reason gone.
        cases[1] = on(cases[1].clone(), "nb-node1", "nb-node1");
        set_overheads(&mut cases, "rr-pod");
        assert_eq!(cases[1].overhead_percent, Some(50.01));
        assert_eq!(cases[1].not_comparable, None);
        // Only cases left apart: the column says so instead of a figure.
        let mut apart = vec![on(rr("base", 10.0), "x", "y"), on(rr("o", 5.0), "y", "x")];
        set_overheads(&mut apart, "base");
        assert_eq!(summary(&apart).1.unwrap(), "1 not comparable");
    }

    #[test]
    fn unknown_nodes_are_not_the_same_pair_and_an_external_server_compares_from_its_client_node() {
        let unknown = CaseResult {
            server_node: None,
            ..case("unknown", 9e9)
        };
        let external = CaseResult {
            server_node: None,
            path: Some("external".into()),
            server_address: Some("198.18.20.2:5201".into()),
            ..case("external", 9e9)
        };
        let mut cases = vec![case("base", 10e9), unknown, external.clone()];
        set_overheads(&mut cases, "base");
        assert_eq!(
            cases[1].not_comparable.as_deref(),
            Some("not comparable: a->? vs a->b (baseline base)")
        );
        // The seed's pod -> egress node -> target against node -> node: the same client node,
        // the way out compared.
        assert_eq!(cases[2].not_comparable, None);
        assert_eq!(cases[2].overhead_percent, Some(10.0));
        // From another client node, it is not.
        let mut elsewhere = vec![
            case("base", 10e9),
            CaseResult {
                client_node: Some("c".into()),
                ..external.clone()
            },
        ];
        set_overheads(&mut elsewhere, "base");
        assert_eq!(
            elsewhere[1].not_comparable.as_deref(),
            Some("not comparable: c->external 198.18.20.2:5201 vs a->b (baseline base)")
        );
        // Two cases to the same external server from the same node are compared.
        let mut ext = vec![
            external.clone(),
            CaseResult {
                name: "e2".into(),
                receiver_bits_per_second: Some(4.5e9),
                ..external
            },
        ];
        set_overheads(&mut ext, "external");
        assert_eq!(ext[1].overhead_percent, Some(50.0));
        // A baseline whose own nodes are unknown is compared with nothing.
        let mut blind = vec![
            CaseResult {
                client_node: None,
                ..case("base", 10e9)
            },
            case("o", 9e9),
        ];
        set_overheads(&mut blind, "base");
        assert_eq!(blind[1].overhead_percent, None);
        assert!(blind[1]
            .not_comparable
            .as_deref()
            .unwrap()
            .ends_with("vs ?->b (baseline base)"));
    }

    #[test]
    fn overhead_is_against_the_baseline() {
        let mut cases = vec![
            case("node", 10e9),
            case("vxlan", 9e9),
            case("csum-off", 2.5e9),
        ];
        set_overheads(&mut cases, "node");
        assert_eq!(cases[0].overhead_percent, None);
        assert_eq!(cases[1].overhead_percent, Some(10.0));
        assert_eq!(cases[2].overhead_percent, Some(75.0));
        let (best, overhead) = summary(&cases);
        assert_eq!(best.unwrap(), "10.00 Gbit/s (node)");
        assert_eq!(overhead.unwrap(), "75.0% (csum-off)");
    }

    /// A one-stream tcp-stream client report that moved `bytes` in one second, started at
    /// `started` (Unix ms).
    #[test]
    fn a_swept_baseline_is_matched_by_size_even_when_one_run_measured() {
        let run = |name: &str, of: &str, size: u32, bps: f64| CaseResult {
            case: Some(of.into()),
            message_size: Some(size),
            ..case(name, bps)
        };
        let mut cases = vec![
            run("base/messageSize=64", "base", 64, 0.0),
            run("base/messageSize=1024", "base", 1024, 8e9),
            run("other/messageSize=64", "other", 64, 1e9),
            run("other/messageSize=1024", "other", 1024, 4e9),
        ];
        set_overheads(&mut cases, "base");
        // 64 B has no measured baseline run: no overhead, never one against the 1024 B run.
        assert_eq!(cases[2].overhead_percent, None);
        assert_eq!(cases[3].overhead_percent, Some(50.0));
    }

    #[test]
    fn a_topology_case_gets_no_overhead_either_way() {
        let mut many = case("pairs", 18e9);
        many.pairs = vec![PairResult::default(); 2];
        let mut cases = vec![case("one", 10e9), many.clone(), case("other", 9e9)];
        set_overheads(&mut cases, "one");
        assert_eq!(
            cases[1].overhead_percent, None,
            "a sum over pairs against one pair"
        );
        assert_eq!(cases[2].overhead_percent, Some(10.0));
        let mut cases = vec![many, case("one", 10e9)];
        set_overheads(&mut cases, "pairs");
        assert_eq!(cases[1].overhead_percent, None, "one pair against a sum");
    }

    #[test]
    fn no_baseline_no_overhead() {
        let mut cases = vec![case("vxlan", 9e9)];
        set_overheads(&mut cases, "node");
        assert_eq!(cases[0].overhead_percent, None);
        assert_eq!(summary(&cases).1, None);
        assert_eq!(format_bits(812.34e6), "812.3 Mbit/s");
    }
}
