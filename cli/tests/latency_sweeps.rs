//! `netbench report` draws latency distributions and egress sweeps: the distribution SVG of a
//! histogram of known samples climbs monotonically and marks the histogram's own p99 where the
//! 99% tick is; a one-step ingress run links its chart; a swept egress case gets a table with a
//! row per value in order and a chart on a log2 axis; every protocol's figures are shown; and
//! hostile results (absurd parameters, broken histograms, 64 measurements) still render.

mod common;

use common::{chart, elements, fixtures, measurement_mut, series, texts, xml};
use crds::history::Better;
use crds::result::Measurement;
use crds::stats::metric;
use netbench_cli::report;

const BLUE: &str = "#1F77B4";

/// (value, pixel y) of each numeric y-axis label (right-aligned text left of the axis).
fn y_labels(doc: &roxmltree::Document<'_>) -> Vec<(f64, f64)> {
    elements(doc, "text")
        .iter()
        .filter(|t| t.attribute("text-anchor") == Some("end"))
        .filter_map(|t| {
            let v: f64 = t.text()?.trim().parse().ok()?;
            let y: f64 = t.attribute("y")?.parse().ok()?;
            Some((v, y))
        })
        .collect()
}

/// The x pixel of a tick label.
fn tick_x(doc: &roxmltree::Document<'_>, label: &str) -> f64 {
    elements(doc, "text")
        .iter()
        .find(|t| t.text().map(str::trim) == Some(label))
        .and_then(|t| t.attribute("x")?.parse().ok())
        .unwrap_or_else(|| panic!("no tick {label:?} in {:?}", texts(doc)))
}

#[test]
fn a_one_step_ingress_report_links_its_latency_distribution() {
    let r = report::render(&fixtures(&["ingress-one-step.yaml"])).unwrap();
    let files: Vec<&str> = r.charts.iter().map(|c| c.file.as_str()).collect();
    assert_eq!(
        files,
        ["1-latency-steps.svg"],
        "no scaling chart for one step"
    );
    assert!(
        r.markdown.contains(
            "![latency distribution: latency (ms) against percentile](1-latency-steps.svg)"
        ),
        "{}",
        r.markdown
    );
    assert!(r.markdown.contains("| step 0 | 200000 |"), "{}", r.markdown);
}

#[test]
fn the_distribution_climbs_and_marks_the_histograms_p99_at_the_99_percent_tick() {
    let results = fixtures(&["ingress-one-step.yaml"]);
    let encoded = results[0].spec.measurements[0]
        .histogram
        .as_deref()
        .unwrap();
    let h = protocol::report::histogram::decode(encoded).unwrap();
    let p99 = h.value_at_quantile(0.99) as f64 / 1000.0;
    assert!(p99 > 1.0, "the fixture's p99 is {p99} ms");
    let r = report::render(&results).unwrap();
    let doc = xml(chart(&r, "1-latency-steps.svg"));

    // One series, sampled densely, never falling (SVG y grows downwards).
    let lines = series(&doc, BLUE, 50);
    assert_eq!(lines.len(), 1);
    let curve = &lines[0];
    assert!(curve.windows(2).all(|w| w[0].0 <= w[1].0), "x ascends");
    assert!(
        curve.windows(2).all(|w| w[0].1 >= w[1].1),
        "latency never falls"
    );
    assert!(
        curve.first().unwrap().1 > curve.last().unwrap().1,
        "and climbs"
    );

    // Ticks on the log scale of 1/(1-p), evenly spaced.
    let ticks: Vec<f64> = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
        .iter()
        .map(|t| tick_x(&doc, t))
        .collect();
    let step = ticks[1] - ticks[0];
    assert!(step > 50.0);
    assert!(
        ticks.windows(2).all(|w| (w[1] - w[0] - step).abs() <= 1.0),
        "{ticks:?}"
    );

    // The p99 dot sits on the 99% tick at the histogram's p99, read back through the y axis.
    let dot = elements(&doc, "circle")
        .into_iter()
        .filter(|c| c.attribute("r") == Some("3"))
        .map(|c| {
            let at = |a: &str| c.attribute(a).unwrap().parse::<f64>().unwrap();
            (at("cx"), at("cy"))
        })
        .find(|(x, _)| (x - ticks[2]).abs() <= 1.0)
        .expect("a dot at the 99% tick");
    let ys = y_labels(&doc);
    let (lo, hi) = (ys.first().unwrap(), ys.last().unwrap());
    let ms_per_px = (hi.0 - lo.0) / (lo.1 - hi.1);
    let at_dot = lo.0 + (lo.1 - dot.1) * ms_per_px;
    assert!(
        (at_dot - p99).abs() <= 1.5 * ms_per_px,
        "dot at {at_dot} ms, histogram p99 {p99} ms"
    );
    assert!(
        curve
            .iter()
            .any(|p| (p.0 - dot.0).abs() <= 1.0 && (p.1 - dot.1).abs() <= 1.0),
        "the curve passes through the p99 dot"
    );
    // And its label says the same number.
    let label = texts(&doc)
        .into_iter()
        .find_map(|t| {
            t.strip_prefix("p99: ")?
                .strip_suffix(" ms")?
                .parse::<f64>()
                .ok()
        })
        .expect("a p99 label");
    assert!((label - p99).abs() < 0.01, "label {label}, p99 {p99}");
}

/// The lines of a Markdown table whose first cell is one of `firsts`, in document order.
fn rows_starting<'a>(md: &'a str, firsts: &[&str]) -> Vec<&'a str> {
    md.lines()
        .filter(|l| firsts.iter().any(|f| l.starts_with(&format!("| {f} |"))))
        .collect()
}

#[test]
fn a_swept_case_gives_a_table_in_order_and_a_chart_on_a_log2_axis() {
    let r = report::render(&fixtures(&["egress-protocols.yaml"])).unwrap();
    let md = &r.markdown;
    let sweep = md
        .split("#### Case rr-sizes swept over message size")
        .nth(1)
        .unwrap_or_else(|| panic!("no rr-sizes sweep in\n{md}"));
    let sweep = sweep.split("###").next().unwrap();
    let sizes = ["64 B", "256 B", "1 KiB", "4 KiB", "16 KiB", "64 KiB"];
    let rows = rows_starting(sweep, &sizes);
    assert_eq!(rows.len(), 6, "{sweep}");
    for (row, (size, bytes)) in rows.iter().zip(
        sizes
            .iter()
            .zip([64f64, 256.0, 1024.0, 4096.0, 16384.0, 65536.0]),
    ) {
        // The fixture's transactions/s fall by 900 per doubling of the size.
        let tps = 24_000.0 - 900.0 * bytes.log2();
        assert!(row.starts_with(&format!("| {size} | {tps:.2} ± ")), "{row}");
    }
    assert!(
        sweep.contains("| message size | transactions (tx/s) | p99 (ms) | p50 (ms) |"),
        "main figures first: {sweep}"
    );
    assert!(sweep.contains("![main figures against the swept parameter](1-sweep-6.svg)"));
    assert!(sweep.contains("](1-latency-sweep-6.svg)"));

    let doc = xml(chart(&r, "1-sweep-6.svg"));
    // Two panels (transactions/s, p99), a line of six points each.
    let lines = series(&doc, BLUE, 6);
    assert_eq!(lines.len(), 2, "{:?}", lines);
    let tps = &lines[0];
    // log2 axis: sizes a factor 4 apart are evenly spaced; transactions/s fall (y grows).
    let gaps: Vec<f64> = tps.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(
        gaps.iter().all(|g| (g - gaps[0]).abs() <= 1.0 && *g > 50.0),
        "{gaps:?}"
    );
    assert!(tps.windows(2).all(|w| w[1].1 > w[0].1));
    let p99 = &lines[1];
    assert!(
        p99.windows(2).all(|w| w[1].1 < w[0].1),
        "p99 rises with the size"
    );
    let labels = texts(&doc);
    for t in sizes
        .iter()
        .chain(&["transactions (tx/s)", "p99 (ms)", "18600"])
    {
        assert!(labels.iter().any(|l| l == t), "no {t:?} in {labels:?}");
    }
    // The sweep's latency: a curve per size, named by its size.
    let lat = xml(chart(&r, "1-latency-sweep-6.svg"));
    let names = texts(&lat);
    assert!(
        sizes.iter().all(|s| names.iter().any(|n| n == s)),
        "{names:?}"
    );

    // The streams sweep: rows 1, 2, 4, 8 in order; receiver and loss drawn.
    let streams = md
        .split("#### Case udp-streams swept over streams")
        .nth(1)
        .unwrap();
    let rows = rows_starting(streams, &["1", "2", "4", "8"]);
    let firsts: Vec<&str> = rows.iter().map(|r| &r[2..3]).collect();
    assert_eq!(firsts, ["1", "2", "4", "8"]);
    let doc = xml(chart(&r, "1-sweep-7.svg"));
    assert_eq!(series(&doc, BLUE, 4).len(), 2);
    let labels = texts(&doc);
    assert!(labels.iter().any(|l| l == "loss (%)"), "{labels:?}");
}

#[test]
fn every_protocol_shows_its_own_figures_and_overhead_compares_like_with_like() {
    let r = report::render(&fixtures(&["egress-protocols.yaml"])).unwrap();
    let md = &r.markdown;
    for heading in [
        "### tcp-stream cases",
        "### tcp-rr cases",
        "### tcp-crr cases",
        "### udp-rr cases",
        "### udp-stream cases",
    ] {
        assert!(md.contains(heading), "no {heading:?} in\n{md}");
    }
    let section = |from: &str| md.split(from).nth(1).unwrap().split("### ").next().unwrap();
    // Whatever figures a measurement has are columns: the main figures first.
    for (part, columns) in [
        (
            "### tcp-stream cases",
            &[
                "receiver (Gbit/s)",
                "sender (Gbit/s)",
                "retransmits",
                "process CPU per GB (s/GB)",
                "probe p50 (ms)",
                "probe p99 (ms)",
            ][..],
        ),
        (
            "### tcp-rr cases",
            &[
                "transactions (tx/s)",
                "p99 (ms)",
                "p50 (ms)",
                "max (ms)",
                "failures",
                "client process CPU per transaction (us)",
                "server process CPU per transaction (us)",
            ][..],
        ),
        (
            "### udp-rr cases",
            &["transactions (tx/s)", "p99 (ms)", "loss (%)"][..],
        ),
        (
            "### udp-stream cases",
            &["receiver (Gbit/s)", "loss (%)", "jitter (ms)"][..],
        ),
    ] {
        let head = section(part)
            .lines()
            .find(|l| l.starts_with("| case |"))
            .unwrap();
        let mut at = 0;
        for c in columns {
            let found = head[at..]
                .find(&format!("| {c} |"))
                .unwrap_or_else(|| panic!("{c:?} not after {at} in {head}"));
            at += found + 1;
        }
    }
    // pod-rr is the baseline; service-rr is 1 - 17500/21000 slower; other protocols and the
    // sweep are not compared with it.
    assert!(md.contains("| 3 | baseline |"), "{md}");
    let service = md
        .lines()
        .find(|l| l.starts_with("| service-rr |"))
        .unwrap();
    assert!(service.ends_with("| 3 | 16.7% |"), "{service}");
    let crr = md.lines().find(|l| l.starts_with("| pod-crr |")).unwrap();
    assert!(crr.ends_with("| 3 | - |"), "{crr}");
    // Request/response latency below a millisecond keeps three significant digits.
    let pod = md
        .lines()
        .find(|l| l.starts_with("| pod-rr | 100000 |"))
        .unwrap();
    assert!(
        pod.contains("| 0.0460 |") || pod.contains("| 0.0459 |"),
        "{pod}"
    );
    // A latency chart per protocol that has histograms, a bar chart per protocol.
    for f in [
        "1-egress-throughput.svg",
        "1-egress-tcp-rr.svg",
        "1-latency-tcp-rr.svg",
        "1-latency-tcp-crr.svg",
        "1-latency-udp-rr.svg",
        "1-egress-udp-stream.svg",
    ] {
        xml(chart(&r, f));
    }
    let rr = xml(chart(&r, "1-latency-tcp-rr.svg"));
    assert_eq!(series(&rr, BLUE, 50).len(), 1);
    assert_eq!(
        series(&rr, "#FF7F0E", 50).len(),
        1,
        "service-rr is the second curve"
    );
}

/// A request/response measurement of the rr-sizes case with these parameters.
fn sized(template: &Measurement, index: u32, params: &[(&str, String)]) -> Measurement {
    let mut m = template.clone();
    m.index = index;
    m.name = format!("sized-{index}");
    for (k, v) in params {
        m.parameters.insert(k.to_string(), v.clone());
    }
    m
}

#[test]
fn absurd_parameters_and_broken_histograms_still_render() {
    let mut results = fixtures(&["egress-protocols.yaml"]);
    let spec = &mut results[0].spec;
    let long = "9".repeat(5000);
    let values = ["NaN", "1e400", "-5", "<script>|x", &long, "128"];
    let sweep: Vec<&mut Measurement> = spec
        .measurements
        .iter_mut()
        .filter(|m| m.parameters.get("case").map(String::as_str) == Some("rr-sizes"))
        .collect();
    assert_eq!(sweep.len(), 6);
    for (m, v) in sweep.into_iter().zip(values) {
        m.parameters.insert("messageSize".into(), v.to_string());
        m.metrics[0].mean = f64::NAN;
    }
    spec.measurements[1].histogram = Some("not a histogram".into());
    spec.measurements[2].histogram = Some(String::new());
    spec.measurements[2].metrics[0].ci95 = f64::INFINITY;
    let r = report::render(&results).unwrap();
    let md = &r.markdown;
    assert!(md.contains("| pod-rr | unreadable histogram:"), "{md}");
    assert!(md.contains("| &lt;script&gt;\\|x | n/a |"), "{md}");
    assert!(md.contains("| NaN | n/a |"), "{md}");
    assert!(
        md.contains(
            "5 measurement(s) whose swept value does not parse are in the table, not in the chart."
        ),
        "{md}"
    );
    assert!(
        md.contains(&format!("| {}… |", "9".repeat(256))),
        "long text is cut"
    );
    // The one drawable size is drawn (its transactions/s are not a number: no line, no panic).
    let doc = xml(chart(&r, "1-sweep-6.svg"));
    assert!(texts(&doc).iter().any(|t| t == "128 B"));
    for c in &r.charts {
        xml(&c.svg);
    }
}

#[test]
fn sixty_four_measurements_in_one_sweep_stay_readable() {
    let mut results = fixtures(&["egress-protocols.yaml"]);
    let spec = &mut results[0].spec;
    let template = spec
        .measurements
        .iter()
        .find(|m| m.name == "rr-sizes/64")
        .unwrap()
        .clone();
    // 8 sizes x 8 stream counts, listed backwards, plus many figures nobody knows.
    spec.measurements = (0..64u32)
        .rev()
        .map(|i| {
            let mut m = sized(
                &template,
                63 - i,
                &[
                    ("messageSize", (64u64 << (i % 8)).to_string()),
                    ("streams", (1 + i / 8).to_string()),
                ],
            );
            m.metrics.truncate(9);
            for k in 0..23 {
                m.metrics.push(metric(
                    &format!("extra{i}x{k}"),
                    "widgets",
                    Better::Higher,
                    vec![1.0],
                ));
            }
            m
        })
        .collect();
    results[0].spec.measurements.sort_by_key(|m| m.index);
    netbench_cli::source::check_bounds(&results[0]).unwrap();
    let r = report::render(&results).unwrap();
    let md = &r.markdown;
    assert!(
        md.contains("#### Case rr-sizes swept over message size and streams"),
        "{md}"
    );
    let sweep = md.split("#### Case rr-sizes").nth(1).unwrap();
    let rows: Vec<&str> = sweep
        .lines()
        .filter(|l| l.contains(" B | ") || l.contains(" KiB | "))
        .filter(|l| l.starts_with("| "))
        .collect();
    assert_eq!(rows.len(), 64, "{sweep}");
    assert!(
        rows[0].starts_with("| 64 B | 1 |") && rows[1].starts_with("| 64 B | 2 |"),
        "{}",
        rows[0]
    );
    assert!(rows[63].starts_with("| 8 KiB | 8 |"), "{}", rows[63]);
    assert!(sweep.contains("more figure(s) not shown here"), "{sweep}");
    let head = sweep
        .lines()
        .find(|l| l.starts_with("| message size |"))
        .unwrap();
    assert!(head.matches(" | ").count() <= 2 + 16 + 2, "{head}");
    // The sweep chart: one line per stream count (8), eight points each, 8 size ticks.
    let doc = xml(chart(&r, "-sweep-0.svg"));
    let labels = texts(&doc);
    assert!(labels.iter().any(|l| l == "streams 8"), "{labels:?}");
    assert_eq!(
        labels.iter().filter(|l| *l == "8 KiB").count(),
        2,
        "a tick per panel"
    );
    // Latency: 64 curves in charts of at most 8.
    let latency: Vec<&str> = r
        .charts
        .iter()
        .filter(|c| c.file.contains("-latency-sweep-0"))
        .map(|c| c.svg.as_str())
        .collect();
    assert_eq!(latency.len(), 8);
    for svg in latency {
        let doc = xml(svg);
        let curves: usize = [
            "#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B", "#E377C2", "#17BECF",
        ]
        .iter()
        .map(|c| series(&doc, c, 20).len())
        .sum();
        assert_eq!(curves, 8);
    }
}

/// A long title is drawn whole, in lines (it was cut after 48 characters: "... against
/// message ..."); every chart of the report, not only the sweep's.
#[test]
fn chart_titles_are_never_cut() {
    let mut results = fixtures(&["egress-protocols.yaml"]);
    let name = "egress-protocols-between-two-nodes-of-the-overlay";
    results[0].spec.benchmark.name = name.into();
    let r = report::render(&results).unwrap();
    let title = format!("{name}: case rr-sizes against message size");
    let doc = xml(chart(&r, "1-sweep-6.svg"));
    let words: Vec<String> = texts(&doc)
        .iter()
        .flat_map(|t| t.split(' ').map(str::to_string).collect::<Vec<_>>())
        .collect();
    let joined = words.join(" ");
    assert!(joined.contains(&title), "{title:?} not whole in {joined:?}");
    for c in &r.charts {
        let doc = xml(&c.svg);
        let cut: Vec<String> = texts(&doc)
            .into_iter()
            .filter(|t| t.contains('…'))
            .collect();
        assert!(cut.is_empty(), "{} cuts {cut:?}", c.file);
    }
}

/// A sweep whose values ran on different node pairs gets no chart and says why; its table
/// says which pairs.
#[test]
fn a_sweep_across_node_pairs_is_not_drawn_as_one_line() {
    let mut results = fixtures(&["egress-protocols.yaml"]);
    let moved = measurement_mut(&mut results[0], "rr-sizes/1024");
    moved
        .parameters
        .insert("clientNode".into(), "worker-2".into());
    moved
        .parameters
        .insert("serverNode".into(), "worker-1".into());
    let r = report::render(&results).unwrap();
    let sweep = r
        .markdown
        .split("#### Case rr-sizes swept over message size")
        .nth(1)
        .unwrap()
        .split("###")
        .next()
        .unwrap();
    assert!(
        sweep.contains("No chart: not comparable: worker-1-&gt;worker-2 vs worker-2-&gt;worker-1.")
            || sweep
                .contains("No chart: not comparable: worker-1->worker-2 vs worker-2->worker-1."),
        "{sweep}"
    );
    assert!(
        sweep.contains("its values ran on different node pairs"),
        "{sweep}"
    );
    assert!(!r.charts.iter().any(|c| c.file.ends_with("1-sweep-6.svg")));
}
