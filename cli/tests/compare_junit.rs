//! `netbench compare` and `netbench junit` from fixture results, through the library and
//! through the binary (exit codes; no cluster needed with --file).

mod common;

use common::{elements, fixture_path, fixtures, measurement_mut, netbench, xml};
use netbench_cli::compare::{self, Comparison};

fn sweep_then_regressed(tolerance: f64) -> Comparison {
    let r = fixtures(&["ingress-sweep.yaml", "ingress-regressed.yaml"]);
    compare::compare(&r[0], &r[1], tolerance).unwrap()
}

fn row<'a>(c: &'a Comparison, measurement: &str, metric: &str) -> &'a compare::Row {
    c.rows
        .iter()
        .find(|r| r.judged.measurement == measurement && r.judged.metric == metric)
        .unwrap_or_else(|| panic!("no row {measurement} {metric}"))
}

#[test]
fn a_clear_drop_is_a_significant_regression() {
    let c = sweep_then_regressed(5.0);
    let r = row(&c, "step 3", "rps");
    assert!(r.significant && r.judged.regressed, "{r:?}");
    assert_eq!(r.verdict, "regressed");
    assert!(
        (r.judged.delta_percent + 31.77).abs() < 0.01,
        "{}",
        r.judged.delta_percent
    );
    assert!((r.judged.baseline_mean - 20696.19).abs() < 1e-6);
    assert!(c.regressed);
    assert!(c.notes.is_empty(), "{:?}", c.notes);
}

#[test]
fn overlapping_intervals_are_not_significant() {
    let c = sweep_then_regressed(0.0);
    let r = row(&c, "step 0", "rps");
    // 3209.66 ± 60.76 against 3190 ± 347.78: worse, beyond a 0% tolerance, but within the noise.
    assert!(
        r.judged.exceeds_tolerance && !r.significant && !r.judged.regressed,
        "{r:?}"
    );
    assert_eq!(r.verdict, "within noise");
    assert_eq!(row(&c, "step 1", "rps").verdict, "same");
}

#[test]
fn a_wide_tolerance_forgives_a_significant_drop() {
    let c = sweep_then_regressed(50.0);
    let r = row(&c, "step 3", "rps");
    assert!(r.significant && !r.judged.regressed);
    assert_eq!(r.verdict, "worse");
    assert!(!c.regressed);
    assert!(compare::compare(
        &fixtures(&["ingress-sweep.yaml"])[0],
        &fixtures(&["ingress-sweep.yaml"])[0],
        f64::NAN
    )
    .is_err());
}

#[test]
fn text_and_json_say_the_same() {
    let c = sweep_then_regressed(5.0);
    let text = compare::to_text(&c);
    let line = text_line(&text, "step 3", "rps");
    assert!(
        line.contains("20696.19 ± 235.10") && line.contains("14120.27 ± 273.01"),
        "{line}"
    );
    assert!(
        line.contains("-31.8%") && line.contains("yes") && line.contains("regressed"),
        "{line}"
    );
    assert!(text.contains("REGRESSED: 1 figure(s)"), "{text}");
    let json: serde_json::Value = serde_json::to_value(&c).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let step3 = rows
        .iter()
        .find(|r| r["measurement"] == "step 3" && r["metric"] == "rps")
        .unwrap();
    assert_eq!(step3["significant"], true);
    assert_eq!(step3["regressed"], true);
    assert_eq!(json["regressed"], true);
}

/// The line of a comparison's text that starts with `start` (the measurement) and names `figure`.
fn text_line<'a>(text: &'a str, start: &str, figure: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start) && l.contains(figure))
        .unwrap_or_else(|| panic!("no line {start}... {figure} in\n{text}"))
}

/// Scales every sample of one figure of one measurement, recomputing its statistics.
fn scale(r: &mut netbench_cli::source::Loaded, measurement: &str, figure: &str, factor: f64) {
    let m = measurement_mut(r, measurement);
    let f = m.metrics.iter_mut().find(|f| f.name == figure).unwrap();
    let values = f.values.iter().map(|v| v * factor).collect();
    *f = crds::stats::metric(&f.name, &f.unit, f.better, values);
}

#[test]
fn compare_names_the_environment_differences_a_baseline_would_skip() {
    let mut r = fixtures(&["ingress-sweep.yaml", "ingress-regressed.yaml"]);
    let env = |kernel: &str| crds::environment::Environment {
        kubernetes: Some("v1.37.2".into()),
        kernel: Some(kernel.into()),
        ..Default::default()
    };
    r[1].spec.environment = Some(env("6.18.0-1-amd64"));
    let c = compare::compare(&r[0], &r[1], 5.0).unwrap();
    assert_eq!(
        c.notes,
        ["A records no environment (written before fingerprints); a baseline would not use it unless ignoreEnvironment: [all]"]
    );
    r[0].spec.environment = Some(env("6.12.0-2-amd64"));
    let c = compare::compare(&r[0], &r[1], 5.0).unwrap();
    assert_eq!(
        c.notes,
        ["environments differ in kernel: A 6.12.0-2-amd64, B 6.18.0-1-amd64"]
    );
    assert!(compare::to_text(&c).contains("note: environments differ in kernel"));
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["b"]["environment"]["kernel"], "6.18.0-1-amd64");
    r[1].spec.environment = r[0].spec.environment.clone();
    assert!(compare::compare(&r[0], &r[1], 5.0)
        .unwrap()
        .notes
        .is_empty());
}

#[test]
fn compare_judges_request_response_and_udp_figures_by_their_own_direction() {
    let a = fixtures(&["egress-protocols.yaml"]).remove(0);
    let mut b = a.clone();
    scale(&mut b, "pod-rr", "transactionsPerSecond", 0.8);
    scale(&mut b, "pod-rr", "p99Ms", 1.3);
    scale(&mut b, "pod-udp-rr", "lossPercent", 10.0);
    scale(&mut b, "pod-udp", "jitterMs", 0.5);
    scale(&mut b, "rr-sizes/4096", "clientCpuUsPerTransaction", 1.5);
    let c = compare::compare(&a, &b, 5.0).unwrap();
    let tps = row(&c, "pod-rr", "transactionsPerSecond");
    assert_eq!(tps.verdict, "regressed", "fewer transactions/s is worse");
    assert!((tps.judged.delta_percent + 20.0).abs() < 1e-6);
    assert_eq!(tps.unit, "tx/s");
    for (measurement, metric, verdict, why) in [
        ("pod-rr", "p99Ms", "regressed", "a higher p99 is worse"),
        ("pod-udp", "jitterMs", "better", "less jitter is better"),
        (
            "rr-sizes/4096",
            "clientCpuUsPerTransaction",
            "regressed",
            "a swept measurement is judged against the same size",
        ),
        ("service-rr", "transactionsPerSecond", "same", "unchanged"),
        (
            "udp-streams/8",
            "receiverBitsPerSecond",
            "same",
            "unchanged",
        ),
    ] {
        assert_eq!(
            row(&c, measurement, metric).verdict,
            verdict,
            "{measurement} {metric}: {why}"
        );
    }
    // Loss: 0.01 % with an interval that holds 0, now 0.1 %: worse, beyond the tolerance.
    let loss = row(&c, "pod-udp-rr", "lossPercent");
    assert!(loss.judged.exceeds_tolerance, "{loss:?}");
    assert!(c.regressed && c.notes.is_empty(), "{:?}", c.notes);
    // Every figure of every measurement is judged: 16 measurements.
    let figures: usize = b.spec.measurements.iter().map(|m| m.metrics.len()).sum();
    assert_eq!(c.rows.len(), figures);
    let text = compare::to_text(&c);
    let line = text_line(&text, "pod-rr ", "transactionsPerSecond");
    assert!(
        line.contains("(tx/s)") && line.contains("-20.0%") && line.contains("regressed"),
        "{line}"
    );
    assert!(text.contains("lossPercent (%)"), "{text}");
    assert!(text.contains("REGRESSED: 3 figure(s)"), "{text}");
}

#[test]
fn fail_on_regression_sets_the_exit_code() {
    let a = fixture_path("ingress-sweep.yaml");
    let b = fixture_path("ingress-regressed.yaml");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = netbench(&["compare", "--file", a, "--file", b, "--fail-on-regression"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = netbench(&["compare", "--file", a, "--file", b, "-o", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["b"]["runId"], "r5");
    // Not two results: an error (2), with the reason.
    let out = netbench(&["compare", "--file", a]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exactly two results"));
}

#[test]
fn junit_has_a_suite_per_benchmark_and_fails_the_regressed_figure() {
    let xml_text = netbench_cli::junit::render(&fixtures(&[
        "ingress-regressed.yaml",
        "egress-offload.yaml",
    ]))
    .unwrap();
    let doc = xml(&xml_text);
    let suites = elements(&doc, "testsuite");
    assert_eq!(suites.len(), 2);
    assert_eq!(
        suites[0].attribute("name"),
        Some("IngressBenchmark team-a/web-sweep")
    );
    assert_eq!(suites[0].attribute("failures"), Some("1"));
    let failing: Vec<_> = elements(&doc, "testcase")
        .into_iter()
        .filter(|c| c.children().any(|f| f.has_tag_name("failure")))
        .collect();
    assert_eq!(failing.len(), 1);
    assert_eq!(failing[0].attribute("name"), Some("step 3 rps"));
    let failure = failing[0]
        .children()
        .find(|f| f.has_tag_name("failure"))
        .unwrap();
    assert!(
        failure.attribute("message").unwrap().contains("-31.8%"),
        "{xml_text}"
    );
    let names: Vec<_> = elements(&doc, "testcase")
        .iter()
        .filter_map(|c| c.attribute("name"))
        .collect();
    assert!(
        names.contains(&"run succeeded") && names.contains(&"step 0 rps"),
        "{names:?}"
    );
    // The egress result has no verdict: just its run.
    assert_eq!(suites[1].attribute("tests"), Some("1"));
}

/// Runs `netbench COMMAND --file <fixture> --out OUT` and asserts that it succeeded.
fn run_to(command: &str, fixture: &str, out: &std::path::Path) {
    let f = fixture_path(fixture);
    let run = netbench(&[
        command,
        "--file",
        f.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn junit_of_hostile_names_is_still_xml_and_goes_to_a_file() {
    let path = std::env::temp_dir().join(format!("netbench-cli-junit-{}.xml", std::process::id()));
    run_to("junit", "hostile.yaml", &path);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let doc = xml(&text);
    let suites = elements(&doc, "testsuite");
    assert_eq!(suites.len(), 2);
    let name = suites[0].attribute("name").unwrap();
    assert!(
        name.contains("evil<script>&\"quoted\" | pipe next line"),
        "{name}"
    );
}

#[test]
fn report_runs_without_a_cluster() {
    let dir = std::env::temp_dir().join(format!("netbench-cli-bin-report-{}", std::process::id()));
    run_to("report", "egress-offload.yaml", &dir);
    assert!(dir.join("report.md").exists() && dir.join("1-egress-throughput.svg").exists());
    std::fs::remove_dir_all(&dir).unwrap();
    // A missing file is an error naming it.
    let out = netbench(&["report", "--file", "/nonexistent/r.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open /nonexistent/r.yaml"));
}

/// A case that ran on another node pair in B is not judged against A's: no row, a note that
/// names both pairs; the cases on the same pair still are.
#[test]
fn compare_sets_side_by_side_only_the_same_node_pair() {
    let a = fixtures(&["egress-protocols.yaml"]).remove(0);
    let mut b = a.clone();
    let moved = measurement_mut(&mut b, "pod-rr");
    moved
        .parameters
        .insert("serverNode".into(), "worker-1".into());
    let c = compare::compare(&a, &b, 5.0).unwrap();
    assert!(
        !c.rows.iter().any(|r| r.judged.measurement == "pod-rr"),
        "{:?}",
        c.rows
    );
    assert!(
        c.notes.contains(
            &"pod-rr: not comparable: worker-1->worker-2 vs worker-1->worker-1".to_string()
        ),
        "{:?}",
        c.notes
    );
    assert_eq!(
        row(&c, "service-rr", "transactionsPerSecond").verdict,
        "same"
    );
    assert!(
        compare::to_text(&c).contains("not comparable: worker-1->worker-2 vs worker-1->worker-1")
    );
}
