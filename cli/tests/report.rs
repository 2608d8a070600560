//! `netbench report` from fixture results: the Markdown has the measured numbers, the scaling
//! figures and the conclusion; every chart is valid XML with one mark per measured value.

mod common;

use common::{chart, elements, fixtures, texts, xml};
use netbench_cli::report;

#[test]
fn an_ingress_sweep_reads_like_the_seed_report() {
    let r = report::render(&fixtures(&["ingress-sweep.yaml"])).unwrap();
    let md = &r.markdown;
    assert_contains_all(
        md,
        &[
            "| step 0 | 1 | - | 3209.66 ± 60.76 | 3 |",
            "| step 1 | 2 | - | 5709.07 ± 93.83 | 3 |",
            "| step 2 | 4 | - | 9005.79 ± 138.32 | 3 |",
            "| step 3 | 8 | - | 20696.19 ± 235.10 | 3 |",
        ],
    );
    // Speed-up and efficiency against linear from the first step.
    assert!(md.contains("| 1.78x | 89% |"), "{md}");
    assert!(md.contains("| 2.81x | 70% |"), "{md}");
    assert!(md.contains("| 6.45x | 81% |"), "{md}");
    assert!(
        md.contains("**8 CPUs: 6.45x of 1 CPU, 81% of linear**"),
        "{md}"
    );
    // What ran, the cluster, the verdict, the merged latency.
    assert_contains_all(
        md,
        &[
            "| run id | r4 |",
            "| spec hash | 9c4e1f0b2a7d3e6c |",
            "2026-12-01 10:07:00 UTC (7 min 0 s)",
            "Kubernetes v1.37.2",
            "| worker-1 | 6.18.0-1-amd64 |",
            "eth0 (1500), vxlan.calico (1450)",
            "Compared with result web-sweep-r3: regressed **False**.",
            "| step 3 | 931000 |",
            "![RPS against CPU with the linear-scaling line](1-ingress-scaling.svg)",
            "![latency distribution: latency (ms) against percentile](1-latency-steps.svg)",
        ],
    );
    let files: Vec<&str> = r.charts.iter().map(|c| c.file.as_str()).collect();
    assert_eq!(
        files,
        ["1-ingress-scaling.svg", "1-latency-steps.svg"],
        "one result: no history chart"
    );
}

#[test]
fn the_environment_fingerprint_and_the_results_a_verdict_skipped_are_shown() {
    let mut results = fixtures(&["ingress-regressed.yaml"]);
    let r = &mut results[0];
    r.spec.environment = Some(crds::environment::Environment {
        kernel: Some("6.18.0-1-amd64".into()),
        placement: Some("client: worker-1".into()),
        ..Default::default()
    });
    if let Some(v) = r.spec.verdict.as_mut() {
        v.skipped = vec!["web-r2: kernel 6.12.0-2-amd64 (this run: 6.18.0-1-amd64)".into()];
        v.ignored = vec!["web-r3: placement client: worker-2 (this run: client: worker-1)".into()];
    }
    let md = report::render(&results).unwrap().markdown;
    assert_contains_all(
        &md,
        &[
            "| kernel | 6.18.0-1-amd64 |",
            "| placement | client: worker-1 |",
            "| cni | - |",
            "Not compared with (another environment):\n\n- web-r2: kernel 6.12.0-2-amd64 (this run: 6.18.0-1-amd64)",
            "Environment differences ignored:\n\n- web-r3: placement client: worker-2 (this run: client: worker-1)",
        ],
    );
}

#[test]
fn the_scaling_chart_has_a_point_per_step_and_the_linear_line() {
    let r = report::render(&fixtures(&["ingress-sweep.yaml"])).unwrap();
    let svg = chart(&r, "-ingress-scaling.svg");
    let doc = xml(svg);
    // Point markers are filled circles of radius 4 (the intervals' circles are hollow).
    let points = elements(&doc, "circle")
        .into_iter()
        .filter(|c| c.attribute("r") == Some("4"))
        .count();
    assert_eq!(points, 4);
    // The measured line: one polyline through the four steps.
    let measured = elements(&doc, "polyline").into_iter().any(|p| {
        p.attribute("stroke") == Some("#1F77B4")
            && p.attribute("points").map(|s| s.split_whitespace().count()) == Some(4)
    });
    assert!(measured, "{svg}");
    // The linear line is dashed: many grey segments.
    let dashes = elements(&doc, "polyline")
        .into_iter()
        .filter(|p| p.attribute("stroke") == Some("#787878"))
        .count();
    assert!(dashes > 10, "{dashes}");
    assert_texts(
        &doc,
        &[
            "3210",
            "5709",
            "9006",
            "20696",
            "controller CPUs",
            "linear scaling from the first step",
        ],
    );
}

#[test]
fn an_egress_run_shows_gbits_overhead_and_a_bar_per_case_by_profile() {
    let r = report::render(&fixtures(&["egress-offload.yaml"])).unwrap();
    let md = &r.markdown;
    assert_contains_all(
        md,
        &[
            "| node-to-node | as found | worker-1 | worker-2 | 9.41 ± 0.07 |",
            "| vxlan-offload-on | vxlan-csum-on | worker-1 | worker-2 | 8.90 ± 0.12 |",
            "| vxlan-offload-off | vxlan-csum-off | worker-1 | worker-2 | 2.50 ± 0.12 |",
            "| 3 | baseline |",
            "| 3 | 5.4% |",
            "| 3 | 73.4% |",
        ],
    );
    let doc = xml(chart(&r, "-egress-throughput.svg"));
    let height = bar_heights(&doc, 3, "offload profiles");
    assert!(
        height[2] < height[1] && height[1] < height[0],
        "offload off is the shortest bar"
    );
    assert_texts(
        &doc,
        &[
            "9.41",
            "8.90",
            "2.50",
            "node-to-node",
            "vxlan-offload-off",
            "offload profile vxlan-csum-off",
        ],
    );
}

#[test]
fn several_results_of_a_benchmark_add_a_history() {
    let r = report::render(&fixtures(&[
        "ingress-sweep.yaml",
        "ingress-history.yaml",
        "egress-offload.yaml",
    ]))
    .unwrap();
    let md = &r.markdown;
    assert!(md.contains("### History (4 results)"), "{md}");
    let history = md.split("### History").nth(1).unwrap();
    let runs: Vec<usize> = [
        "web-sweep-r1",
        "web-sweep-r2",
        "web-sweep-r3",
        "web-sweep-r4",
    ]
    .iter()
    .map(|n| history.find(n).unwrap_or_else(|| panic!("{n} missing")))
    .collect();
    assert!(runs.windows(2).all(|w| w[0] < w[1]), "oldest first");
    assert!(history.contains("step 3: 20696.19 ± 235.10 req/s"));
    // The newest result is the one reported in full.
    assert!(md.contains("| run id | r4 |"));
    let doc = xml(chart(&r, "-history.svg"));
    // One line per step, four runs each.
    let lines = elements(&doc, "polyline")
        .into_iter()
        .filter(|p| p.attribute("points").map(|s| s.split_whitespace().count()) == Some(4))
        .count();
    assert_eq!(lines, 4);
    // Sections and charts per benchmark; the egress one has no history.
    assert!(md.contains("## EgressBenchmark team-a/vxlan-offload"));
    let files: Vec<&str> = r.charts.iter().map(|c| c.file.as_str()).collect();
    assert_eq!(
        files,
        [
            "1-ingress-scaling.svg",
            "1-latency-steps.svg",
            "1-history.svg",
            "2-egress-throughput.svg"
        ]
    );
}

#[test]
fn hostile_names_stay_text() {
    let r = report::render(&fixtures(&["hostile.yaml"])).unwrap();
    let md = &r.markdown;
    assert!(!md.contains("<script>"), "{md}");
    assert!(
        md.contains("evil&lt;script&gt;&amp;\"quoted\" \\| pipe next line"),
        "{md}"
    );
    assert!(md.contains("| node\\|&lt;1&gt;&amp;\" |"), "{md}");
    // Every row of the steps table keeps its 10 columns: no name broke out of its cell.
    let unescaped_pipes = |l: &str| l.replace("\\|", "").matches('|').count();
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| step &lt;"))
        .collect();
    assert!(rows.len() >= 4, "{md}");
    assert!(
        rows[0].starts_with("| step &lt;0&gt; &amp; \"0\" \\| x | 1 | - | 3209.66"),
        "{}",
        rows[0]
    );
    for row in rows.iter().take(4) {
        assert_eq!(unescaped_pipes(row), 11, "{row}");
    }
    assert!(
        md.contains(
            "## IngressBenchmark team-a/evil&lt;script&gt;&amp;\"quoted\" \\| pipe next line\n"
        ),
        "{md}"
    );
    for c in &r.charts {
        let doc = xml(&c.svg);
        let all = texts(&doc).join("\n");
        if c.file.ends_with("egress-throughput.svg") {
            assert!(all.contains("case <a> & \"b\" | c"), "{all}");
            assert!(all.contains("offload profile profile<&\">"), "{all}");
            assert!(
                all.contains("second case"),
                "line breaks become spaces: {all}"
            );
        }
        if c.file.ends_with("ingress-scaling.svg") {
            assert!(all.contains("evil<script>&\"quoted\""), "{all}");
        }
    }
}

#[test]
fn the_report_is_written_to_its_directory() {
    let dir = std::env::temp_dir().join(format!("netbench-cli-report-{}", std::process::id()));
    let r = report::render(&fixtures(&["ingress-sweep.yaml", "egress-offload.yaml"])).unwrap();
    report::write(&dir, &r).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert_eq!(md, r.markdown);
    for c in &r.charts {
        xml(&std::fs::read_to_string(dir.join(&c.file)).unwrap());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn absurd_numbers_and_missing_figures_draw_without_panicking() {
    let mut results = fixtures(&["ingress-sweep.yaml", "egress-offload.yaml"]);
    {
        let ms = &mut results[0].spec.measurements;
        ms[0].metrics[0].mean = 0.0;
        ms[1].metrics[0].mean = 1e300;
        ms[1].metrics[0].ci95 = -5.0;
        ms[2].parameters.insert("cpu".into(), "lots".into());
        ms[3].metrics.clear();
        ms[3].histogram = Some("not a histogram".into());
    }
    results[1].spec.measurements[0].metrics.clear();
    results[1].spec.benchmark_spec = "{not json".into();
    let r = report::render(&results).unwrap();
    assert!(
        r.markdown.contains("unreadable histogram"),
        "{}",
        r.markdown
    );
    assert!(
        r.markdown.contains("| step 3 | 8 | - | - |"),
        "{}",
        r.markdown
    );
    for c in &r.charts {
        xml(&c.svg);
    }
    // Nothing at all: an empty report, still a report.
    let empty = report::render(&[]).unwrap();
    assert_eq!(empty.markdown, "# netbench report\n\n");
}

/// Ten nightly runs of the one-step ingress fixture, "nightly-0" to "nightly-9" with run ids
/// "run-0" to "run-9", whose main figure (rps) has run-to-run noise of about 1 % (the same
/// pattern in every history) and is `level` times as high from the 6th run on. `dated`: the runs
/// start a day apart from 2026-11-10 (otherwise they keep the fixture's start time).
fn nightly_history(level: f64, dated: bool) -> Vec<netbench_cli::source::Loaded> {
    let base = fixtures(&["ingress-one-step.yaml"]).remove(0);
    (0..10usize)
        .map(|i| {
            let mut r = base.clone();
            r.name = format!("nightly-{i}");
            r.spec.run_id = format!("run-{i}");
            if dated {
                r.spec.start_time = serde_json::from_value(serde_json::json!(format!(
                    "2026-11-{:02}T02:00:00Z",
                    10 + i
                )))
                .unwrap();
            }
            let noise = [0.4, -0.9, 1.1, -0.2, 0.7, -1.0, 0.3, 0.9, -0.6, 0.1][i];
            let level = if i >= 5 { level } else { 1.0 };
            for m in &mut r.spec.measurements {
                for f in &mut m.metrics {
                    if f.name == "rps" {
                        f.mean = f.mean * level * (1.0 + noise / 100.0);
                    }
                }
            }
            r
        })
        .collect()
}

/// A history whose main figure drops 10 % from the 6th run on: the report names that run as a
/// change point, worse; the same history without the drop has none.
#[test]
fn a_shift_in_the_history_is_named_as_a_change_point() {
    let history = |drop: bool| nightly_history(if drop { 0.9 } else { 1.0 }, true);
    let md = report::render(&history(true)).unwrap().markdown;
    let section = md
        .split("Change points of the main figure")
        .nth(1)
        .unwrap_or_else(|| panic!("no change points section in\n{md}"));
    let first = section.lines().find(|l| l.starts_with("- ")).unwrap();
    assert!(
        first.contains("(run-5)") && first.contains("worse") && first.contains("-10."),
        "{first}"
    );
    let calm = report::render(&history(false)).unwrap().markdown;
    assert!(
        calm.contains("- none: no shift stands out of the run-to-run noise"),
        "{calm}"
    );
}

/// The same shifted history: the chart has a dashed red line between runs 4 and 5, labelled
/// with the direction and size, and the calm history's chart has none.
#[test]
fn a_change_point_is_marked_on_the_history_chart() {
    let history = |drop: bool| nightly_history(if drop { 0.88 } else { 1.0 }, false);
    // The vertical dashes of the mark (2-point polylines of one x) in its colour.
    let dashes = |doc: &roxmltree::Document<'_>| -> Vec<f64> {
        elements(doc, "polyline")
            .into_iter()
            .filter(|p| p.attribute("stroke") == Some("#B2182B"))
            .filter_map(|p| {
                let xs: Vec<f64> = p
                    .attribute("points")?
                    .split_whitespace()
                    .filter_map(|xy| xy.split(',').next()?.parse().ok())
                    .collect();
                (xs.len() == 2 && xs[0] == xs[1]).then_some(xs[0])
            })
            .collect()
    };
    let shifted = report::render(&history(true)).unwrap();
    let doc = xml(chart(&shifted, "-history.svg"));
    let xs = dashes(&doc);
    assert!(xs.len() >= 10, "a dashed line of many dashes: {xs:?}");
    assert!(xs.iter().all(|&x| x == xs[0]), "one vertical line: {xs:?}");
    // Between the 5th and the 6th run's points (the dots of the one series, oldest first).
    let mut runs: Vec<f64> = elements(&doc, "circle")
        .iter()
        .filter_map(|c| c.attribute("cx")?.parse().ok())
        .collect();
    runs.sort_by(f64::total_cmp);
    runs.dedup();
    assert_eq!(runs.len(), 10, "{runs:?}");
    assert!(
        runs[4] < xs[0] && xs[0] < runs[5],
        "{} not between {runs:?}",
        xs[0]
    );
    assert!(
        texts(&doc).iter().any(|t| t == "step 0: worse -12%"),
        "{:?}",
        texts(&doc)
    );
    let calm = report::render(&history(false)).unwrap();
    let doc = xml(chart(&calm, "-history.svg"));
    assert!(dashes(&doc).is_empty());
    assert!(!texts(&doc).iter().any(|t| t.contains("worse")));
}

/// Asserts that `md` holds every one of `parts`.
fn assert_contains_all(md: &str, parts: &[&str]) {
    for part in parts {
        assert!(md.contains(part), "missing {part:?} in\n{md}");
    }
}

/// Asserts that a chart has a <text> element reading each of `values`.
fn assert_texts(doc: &roxmltree::Document<'_>, values: &[&str]) {
    let labels = texts(doc);
    for v in values {
        assert!(labels.iter().any(|t| t == v), "no text {v:?} in {labels:?}");
    }
}

/// The heights of a bar chart's bars, in pixels, once it is checked that there are `n` bars
/// (`what` they stand for), each in a colour of its own.
fn bar_heights(doc: &roxmltree::Document<'_>, n: usize, what: &str) -> Vec<f64> {
    let bars = bars(doc);
    assert_eq!(bars.len(), n, "{what}: a bar each");
    let fills: std::collections::BTreeSet<_> =
        bars.iter().filter_map(|b| b.attribute("fill")).collect();
    assert_eq!(fills.len(), n, "{what}: a colour each");
    bars.iter()
        .map(|b| {
            b.attribute("height")
                .and_then(|h| h.parse::<f64>().ok())
                .unwrap()
        })
        .collect()
}

/// The filled bars of a bar chart (wider than 20 px: not legend swatches or ticks).
fn bars<'a>(doc: &'a roxmltree::Document<'a>) -> Vec<roxmltree::Node<'a, 'a>> {
    elements(doc, "rect")
        .into_iter()
        .filter(|r| {
            r.attribute("fill")
                .is_some_and(|f| f != "#FFFFFF" && f != "none")
        })
        .filter(|r| {
            r.attribute("width")
                .and_then(|w| w.parse::<f64>().ok())
                .unwrap_or(0.0)
                > 20.0
        })
        .collect()
}

#[test]
fn controllers_swept_side_by_side_are_compared_at_each_size_and_scaled_each() {
    let r = report::render(&fixtures(&["ingress-controllers-swept.yaml"])).unwrap();
    let md = &r.markdown;
    assert_contains_all(
        md,
        &[
            "### Controllers side by side at 1 CPU",
            "| haproxy | 3 | 7000 | 248 | 100.0%, best |",
            "| traefik | 3 | 5000 | 248 | 71.4%, worse (significant) |",
            "### Controllers side by side at 2 CPUs",
            "| traefik | 3 | 9000 | 248 | 100.0%, best |",
            "| haproxy | 3 | 8000 | 248 | 88.9%, worse (significant) |",
            "1-controllers-rps-0.svg",
            "1-controllers-rps-1.svg",
            "1-ingress-scaling-0.svg",
            "1-ingress-scaling-1.svg",
            // Each controller against its own first step, never another controller.
            "**traefik: 2 CPUs: 1.80x of 1 CPU, 90% of linear; haproxy: 2 CPUs: 1.14x of 1 CPU, 57% of linear**",
        ],
    );
    // Each controller's chart holds its own two steps, with linear scaling from its first.
    for (suffix, title) in [
        ("-ingress-scaling-0.svg", "traefik"),
        ("-ingress-scaling-1.svg", "haproxy"),
    ] {
        let svg = chart(&r, suffix);
        assert!(
            svg.contains(&format!("swept: {title}: requests/s against size")),
            "{suffix}"
        );
    }
    let files: std::collections::BTreeSet<_> = r.charts.iter().map(|c| c.file.as_str()).collect();
    assert_eq!(files.len(), r.charts.len(), "every chart has its own file");
}

#[test]
fn controllers_are_drawn_side_by_side_with_what_is_significant() {
    let r = report::render(&fixtures(&["ingress-controllers.yaml"])).unwrap();
    let md = &r.markdown;
    assert_contains_all(
        md,
        &[
            "### Controllers side by side",
            "| traefik | 3 | 10000 | 248 | 100.0%, best | 2.00 | 0.25 | worse (significant) |",
            "| envoy-gateway | 3 | 8000 | 248 | 80.0%, worse (significant) | 1.20 | 0.25 | best |",
            "20.0% fewer than traefik (significant)",
            "### Route changes under load",
            "| controller | swaps shown | swap p99 ms |\n|---|---|---|\n",
            "| traefik | 50% ± 25 | 2000.0 ± 248.4 |",
            "| envoy-gateway | 100% ± 0 | 25.0 ± 12.4 |",
        ],
    );
    assert!(
        !md.contains("-ingress-scaling.svg"),
        "no scaling chart for controllers"
    );
    assert!(
        !md.contains("### Route scale"),
        "no scale table without a scale"
    );
    let plain = report::render(&fixtures(&["ingress-sweep.yaml"])).unwrap();
    assert!(
        !plain.markdown.contains("Route changes"),
        "no route table without route figures"
    );
    // A route scale: its own table, shares as percentages, times in ms.
    let scale = report::render(&fixtures(&["ingress-route-scale.yaml"])).unwrap();
    assert_contains_all(
        &scale.markdown,
        &[
            "### Route scale",
            "| controller | routes answered | all answered ms |\n|---|---|---|\n",
            "| traefik | 100% ± 0 | 2300.0 ± 248.4 |",
            "| envoy-gateway | 99% ± 3 | 1700.0 ± 248.4 |",
        ],
    );
    assert!(!scale.markdown.contains("Route changes"), "no churn table");
    for (suffix, tallest_first) in [
        ("-controllers-rps.svg", true),
        ("-controllers-p99.svg", true),
    ] {
        let doc = xml(chart(&r, suffix));
        let h = bar_heights(&doc, 2, &format!("{suffix}: controllers"));
        assert_eq!(
            h[0] > h[1],
            tallest_first,
            "{suffix}: traefik's bar is the taller"
        );
    }
}
