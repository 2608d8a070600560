//! `netbench compare --history KIND/NAME`: change points over a benchmark's history, from
//! fixture histories (a known step; noise only) and hostile input, through the library and the
//! binary (no cluster needed with --file).

mod common;

use std::path::PathBuf;

use common::{fixture_path, fixtures, netbench};
use netbench_cli::history::{self, History};
use netbench_cli::kube_client::BenchRef;
use netbench_cli::source::Loaded;

fn judged(fixture: &str, name: &str, runs: usize, all_specs: bool) -> History {
    let results = fixtures(&[fixture]);
    let bench: BenchRef = format!("ib/{name}").parse().unwrap();
    let ours = history::select(&results, &bench, None).unwrap();
    history::judge(&ours, runs, all_specs)
}

/// `netbench compare --history BENCH --file PATH EXTRA...`.
fn history_of(bench: &str, path: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let path = path.to_str().unwrap();
    let mut args = vec!["compare", "--history", bench, "--file", path];
    args.extend_from_slice(extra);
    netbench(&args)
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that the command was refused (exit 2) with an error holding `expected`.
fn assert_refused(out: &std::process::Output, expected: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stdout(out));
    assert!(stderr(out).contains(expected), "{}", stderr(out));
}

/// A file of this test's own in the temp directory.
fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netbench-compare-history-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_step_is_found_at_its_run_with_size_and_direction_and_nothing_else() {
    let h = judged("ingress-nightly-step.yaml", "nightly", 100, false);
    assert_eq!(h.benchmark, "IngressBenchmark team-a/nightly");
    // 12 succeeded runs of the spec: the failed run and the older spec's are left out.
    assert_eq!(h.runs.len(), 12);
    assert_eq!(h.runs[0].result, "nightly-r1");
    assert_eq!(h.runs[11].result, "nightly-r12");
    assert_eq!(h.notes.len(), 2, "{:?}", h.notes);
    assert!(h.notes[0].contains("1 result(s) of runs that did not succeed"));
    assert!(h.notes[1].contains("1 result(s) of other specs"));
    // Every figure of every step is judged: 4 steps x 6 figures.
    assert_eq!(h.figures.len(), 24);
    let found: Vec<_> = h.change_points().collect();
    let [(figure, cp)] = found.as_slice() else {
        panic!("one change point expected: {found:#?}")
    };
    assert_eq!(
        (figure.measurement.as_str(), figure.figure.as_str()),
        ("step 3", "rps")
    );
    assert_eq!((cp.at.run, cp.at.result.as_str()), (7, "nightly-r7"));
    assert_eq!(cp.at.run_id, "r7");
    assert_eq!(cp.runs_ago, 5);
    assert_eq!(cp.direction, "worse");
    assert!((cp.change_percent + 12.0).abs() < 1.0, "{cp:?}");
    assert!(cp.after < cp.before && cp.p_value < 0.01, "{cp:?}");
    assert_eq!(
        cp.at.date.as_ref().map(|t| t.0.to_string()),
        Some("2026-11-07T10:00:00Z".to_string())
    );
}

#[test]
fn noise_alone_gives_no_change_point() {
    let h = judged("ingress-nightly-noise.yaml", "steady", 100, false);
    assert_eq!(h.runs.len(), 12);
    assert_eq!(h.figures.len(), 24);
    assert_eq!(h.change_points().count(), 0, "{h:#?}");
    assert!(h.figures.iter().all(|f| f.results == 12));
    let text = history::to_text(&h);
    assert!(text.contains("no change point in 24 figure(s)"), "{text}");
    assert!(
        !text.contains("STEP/CASE"),
        "no table without change points:\n{text}"
    );
}

#[test]
fn runs_and_specs_choose_the_history() {
    // The newest 8: two runs before the step, too few on that side for a change point.
    let h = judged("ingress-nightly-step.yaml", "nightly", 8, false);
    assert_eq!(h.runs.len(), 8);
    assert_eq!(h.runs[0].result, "nightly-r5");
    assert!(
        h.notes
            .iter()
            .any(|n| n.contains("4 older result(s) left out")),
        "{:?}",
        h.notes
    );
    // Every spec: the older spec's run is judged too (first), the failed one still is not.
    let h = judged("ingress-nightly-step.yaml", "nightly", 100, true);
    assert_eq!(h.runs.len(), 13);
    assert_eq!(h.runs[0].result, "nightly-r0");
    assert_eq!(h.spec_hash, None);
    // Too few results: said, and nothing found.
    let h = judged("ingress-nightly-step.yaml", "nightly", 5, false);
    assert_eq!(h.change_points().count(), 0);
    assert!(
        h.notes.iter().any(|n| n.contains("needs at least 6")),
        "{:?}",
        h.notes
    );
}

#[test]
fn select_refuses_other_benchmarks_and_mixed_namespaces() {
    let results = fixtures(&["ingress-nightly-step.yaml", "ingress-nightly-noise.yaml"]);
    let nightly: BenchRef = "ib/nightly".parse().unwrap();
    assert_eq!(history::select(&results, &nightly, None).unwrap().len(), 14);
    assert!(history::select(&results, &nightly, Some("team-a")).is_ok());
    let e = history::select(&results, &nightly, Some("other"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no result of IngressBenchmark other/nightly"),
        "{e}"
    );
    let eb: BenchRef = "eb/nightly".parse().unwrap();
    assert!(history::select(&results, &eb, None).is_err());
    let mut mixed = results.clone();
    mixed[3].spec.benchmark.namespace = "team-b".into();
    let e = history::select(&mixed, &nightly, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("choose one with -n"), "{e}");
}

#[test]
fn text_and_json_through_the_binary() {
    let step = fixture_path("ingress-nightly-step.yaml");
    let step = step.to_str().unwrap();
    let out = history_of("ib/nightly", std::path::Path::new(step), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("step 3"))
        .unwrap_or_else(|| panic!("no step 3 line in\n{text}"));
    for want in [
        "rps (req/s)",
        "7 (5 ago)",
        "nightly-r7",
        "2026-11-07 10:00:00 UTC",
        "-11.9%",
        "worse",
    ] {
        assert!(line.contains(want), "{want:?} not in {line}");
    }
    assert!(
        text.contains("1 change point(s) in 1 of 24 figure(s), 1 for the worse"),
        "{text}"
    );

    let out = history_of("ib/nightly", std::path::Path::new(step), &["-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["benchmark"], "IngressBenchmark team-a/nightly");
    assert_eq!(json["runs"].as_array().unwrap().len(), 12);
    let figures = json["figures"].as_array().unwrap();
    let rps = figures
        .iter()
        .find(|f| f["measurement"] == "step 3" && f["figure"] == "rps")
        .unwrap();
    assert_eq!(rps["better"], "Higher");
    assert_eq!(rps["results"], 12);
    let cp = &rps["changePoints"][0];
    assert_eq!(cp["run"], 7);
    assert_eq!(cp["result"], "nightly-r7");
    assert_eq!(cp["runId"], "r7");
    assert_eq!(cp["date"], "2026-11-07T10:00:00Z");
    assert_eq!(cp["runsAgo"], 5);
    assert_eq!(cp["direction"], "worse");
    assert!(cp["changePercent"].as_f64().unwrap() < -11.0);
    let total: usize = figures
        .iter()
        .map(|f| f["changePoints"].as_array().unwrap().len())
        .sum();
    assert_eq!(total, 1);

    // Noise only: exit 0, nothing found.
    let noise = fixture_path("ingress-nightly-noise.yaml");
    let out = history_of("ib/steady", &noise, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("no change point in 24 figure(s)"));
}

#[test]
fn history_arguments_are_checked() {
    let step = fixture_path("ingress-nightly-step.yaml");
    let step = step.to_str().unwrap();
    // A history is not B against A: no result names, no regression exit, no tolerance.
    for extra in [
        &["a", "b"][..],
        &["--fail-on-regression"],
        &["--tolerance", "3"],
        &["--runs", "0"],
        &["--runs", "1001"],
    ] {
        let mut args = vec!["compare", "--history", "ib/nightly", "--file", step];
        args.extend_from_slice(extra);
        let out = netbench(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stdout(&out));
    }
    // --runs and --all-specs need --history.
    let out = netbench(&["compare", "--file", step, "--runs", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let out = history_of("pod/x", std::path::Path::new(step), &[]);
    assert_refused(&out, "unknown benchmark kind");
    // A benchmark the files do not hold: an error naming it.
    let out = history_of("eb/nightly", std::path::Path::new(step), &[]);
    assert_refused(&out, "no result of EgressBenchmark");
}

/// A history of `n` results of one step, whose rps means cycle through absurd values.
fn absurd(n: usize) -> Vec<Loaded> {
    let base = fixtures(&["ingress-nightly-step.yaml"]).swap_remove(1);
    let values = [
        f64::MAX,
        -f64::MAX,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e-300,
        0.0,
        -1.0,
        f64::MIN_POSITIVE,
        1e300,
    ];
    (0..n)
        .map(|i| {
            let mut r = base.clone();
            r.name = format!("absurd-{i}\u{1b}[31m\n");
            r.spec.run_id = format!("a{i}");
            r.created = None;
            r.spec.start_time = None;
            for m in &mut r.spec.measurements {
                for f in &mut m.metrics {
                    f.mean = values[(i + m.index as usize) % values.len()];
                    f.ci95 = f64::NAN;
                }
            }
            r
        })
        .collect()
}

#[test]
fn absurd_values_and_many_results_never_panic_and_stay_bounded() {
    let results = absurd(1000);
    let refs: Vec<&Loaded> = results.iter().collect();
    let h = history::judge(&refs, 1000, false);
    assert_eq!(h.runs.len(), 1000);
    let text = history::to_text(&h);
    assert!(!text.contains('\u{1b}'), "control characters are dropped");
    let json = serde_json::to_string(&h).unwrap();
    assert!(json.len() < 4_000_000, "{}", json.len());
    // A step from absurd to sane values is still a change point with finite figures or none.
    let mut mixed = absurd(12);
    for r in mixed.iter_mut().skip(6) {
        for m in &mut r.spec.measurements {
            for f in &mut m.metrics {
                f.mean = 1.0;
            }
        }
    }
    let refs: Vec<&Loaded> = mixed.iter().collect();
    let h = history::judge(&refs, 100, false);
    for (_, cp) in h.change_points() {
        assert!(cp.p_value.is_finite() && cp.runs_ago < 12, "{cp:?}");
    }
    let _ = history::to_text(&h);
    // More measurements and figures than the schema allows: only the first 64 x 32 are read.
    let mut huge = absurd(8);
    for r in &mut huge {
        let m = r.spec.measurements[0].clone();
        r.spec.measurements = (0..500)
            .map(|i| {
                let mut m = m.clone();
                m.name = format!("step {i}");
                m.metrics = vec![m.metrics[0].clone(); 100]
                    .into_iter()
                    .enumerate()
                    .map(|(j, mut f)| {
                        f.name = format!("f{j}");
                        f
                    })
                    .collect();
                m
            })
            .collect();
    }
    let refs: Vec<&Loaded> = huge.iter().collect();
    assert_eq!(history::judge(&refs, 100, false).figures.len(), 64 * 32);
    assert_eq!(history::judge(&[], 100, false).figures.len(), 0);
}

#[test]
fn hostile_files_through_the_binary_are_refused_or_judged_never_a_panic() {
    let base = fixtures(&["ingress-nightly-step.yaml"]).swap_remove(1);
    let object = |i: usize, mean: serde_json::Value| {
        let mut v = serde_json::json!({
            "apiVersion": "netbench.io/v1alpha1",
            "kind": "BenchmarkResult",
            "metadata": {"name": format!("nightly-x{i}"), "namespace": "team-a"},
            "spec": serde_json::to_value(&base.spec).unwrap(),
        });
        v["spec"]["runId"] = format!("x{i}").into();
        v["spec"]["startTime"] = format!("2026-12-{:02}T10:00:00Z", i % 28 + 1).into();
        v["spec"]["measurements"][0]["metrics"][0]["mean"] = mean;
        v
    };
    let yaml = |means: &[&str]| -> String {
        let docs: Vec<String> = means
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut v = object(i, serde_json::json!(0.0));
                v["spec"]["measurements"][0]["metrics"][0]["mean"] = "MEAN".into();
                serde_yaml::to_string(&v).unwrap().replace("MEAN", m)
            })
            .collect();
        docs.join("---\n")
    };
    // Absurd finite means: judged, exit 0, in text and JSON.
    let means = [
        "1e308",
        "-1e308",
        "1.7976931348623157e308",
        "0",
        "1e-320",
        "-5",
        "5",
        "5",
        "5",
        "5",
    ];
    let path = temp_file("absurd.yaml", &yaml(&means));
    let path = path.to_str().unwrap();
    let out = history_of("ib/nightly", std::path::Path::new(path), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("10 succeeded result(s)"),
        "{}",
        stdout(&out)
    );
    let out = history_of("ib/nightly", std::path::Path::new(path), &["-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("valid JSON");
    // Not a number (YAML can say .nan and .inf; a file is read as JSON values): refused, exit 2.
    let path = temp_file("nan.yaml", &yaml(&["5", "5", ".nan", "5", "-.inf", "5"]));
    let out = history_of("ib/nightly", &path, &[]);
    assert_refused(&out, "document 3, item 1 is not a valid BenchmarkResult");
    // More results than a command reads: refused with the reason, exit 2.
    let many: Vec<serde_json::Value> = (0..1001)
        .map(|i| object(i, serde_json::json!(1.0)))
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": many});
    let path = temp_file("many.json", &list.to_string());
    let out = history_of("ib/nightly", &path, &[]);
    assert_refused(&out, "more than 1000 results");
}
