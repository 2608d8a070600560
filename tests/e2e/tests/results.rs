//! Results that last, on the real test cluster: samples with confidence intervals, one
//! BenchmarkResult per run kept after the benchmark is gone (up to historyLimit), and
//! regression verdicts against a baseline with a deliberately slowed target.

use std::time::Duration;

use e2e::*;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use crds::BenchmarkResult;

/// A short IngressBenchmark with `samples` samples of each step, loading `url`.
fn sampled(ns: &str, name: &str, url: &str, samples: u32) -> Value {
    let mut ib = ingress_simple(ns, url, "2s", 8);
    set(&mut ib, "/metadata/name", json!(name));
    set(
        &mut ib,
        "/spec/samples",
        json!({"count": samples, "pause": "1s"}),
    );
    ib
}

async fn results(client: &kube::Client, ns: &str) -> Vec<BenchmarkResult> {
    let api = Api::<BenchmarkResult>::namespaced(client.clone(), ns);
    let mut all = api.list(&ListParams::default()).await.unwrap().items;
    all.sort_by_key(|r| r.spec.completion_time.as_ref().map(|t| t.0));
    all
}

async fn result(client: &kube::Client, ns: &str, name: &str) -> BenchmarkResult {
    Api::<BenchmarkResult>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("result {name}: {e}"))
}

/// Patches the benchmark's spec (a new generation: a new run) and waits for that run's end.
async fn rerun(client: &kube::Client, ns: &str, name: &str, patch: Value) -> Value {
    let api = Api::<crds::IngressBenchmark>::namespaced(client.clone(), ns);
    let before = api.get(name).await.unwrap();
    let generation = before.metadata.generation.unwrap_or(0);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": patch})),
    )
    .await
    .unwrap();
    let what = format!("generation {} finished", generation + 1);
    wait_until(client, IB, ns, name, &what, RUN_TIMEOUT, |v| {
        v["status"]["observedGeneration"].as_i64() > Some(generation)
            && FINISHED.iter().any(|p| v["status"]["phase"] == *p)
    })
    .await
}

fn regressed(v: &Value) -> &Value {
    &condition(v, "Regressed")["status"]
}

/// The message of a Succeeded run's Regressed condition, once its (status, reason) are checked
/// (`context` is shown with the run's status when the status is not the one expected).
fn regressed_message(done: &Value, (status, reason): (&str, &str), context: &str) -> String {
    assert_phase(done, "Succeeded");
    let c = condition(done, "Regressed");
    assert_eq!(c["status"], status, "{:#}\n{context}", done["status"]);
    assert_eq!(c["reason"], reason);
    c["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn every_run_leaves_a_result_with_samples_kept_up_to_the_history_limit() {
    let client = client().await;
    let ns = TestNs::new(&client, "history").await;
    let mut ib = sampled(&ns.name, "hist", TARGET, 2);
    set(&mut ib, "/spec/historyLimit", json!(3));
    set(
        &mut ib,
        "/spec/baseline",
        // The scheduler may put each run's worker on another node.
        json!({"previous": 1, "ignoreEnvironment": ["placement"],
               "metrics": [{"name": "rps", "tolerancePercent": 80}]}),
    );
    create(&client, &ns.name, &ib).await.unwrap();
    // Someone takes the name the first run's result will have (it is derived from the uid).
    let created = get_benchmark(&client, IB, &ns.name, "hist").await.unwrap();
    let uid: String = created["metadata"]["uid"]
        .as_str()
        .unwrap()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect();
    let squatted = format!("hist-{uid}-g1");
    let mut squatter = serde_json::to_value(BenchmarkResult::new(
        &squatted,
        crds::BenchmarkResultSpec {
            benchmark: crds::BenchmarkRef {
                kind: IB.into(),
                namespace: ns.name.clone(),
                name: "hist".into(),
            },
            benchmark_uid: "forged".into(),
            summary: Some("1000000 req/s (forged)".into()),
            ..operator::testing::results::succeeded("forged", vec![])
        },
    ))
    .unwrap();
    set(&mut squatter, "/metadata/namespace", json!(ns.name));
    create(&client, &ns.name, &squatter).await.unwrap();
    let first = wait_succeeded(&client, IB, &ns.name, "hist").await;
    let st = &first["status"];
    let rps = &st["statistics"][0]["metrics"][0];
    assert_eq!(rps["name"], "rps", "{st:#}");
    assert_eq!(rps["values"].as_array().unwrap().len(), 2, "{st:#}");
    assert!(
        st["rpsInterval"].as_str().unwrap().contains(" ± "),
        "{st:#}"
    );
    // The first run has nothing to compare with.
    assert_eq!(*regressed(&first), "Unknown", "{st:#}");

    // Its result: what ran, on what, every sample, the merged histogram.
    let r1_name = st["latestResult"].as_str().unwrap().to_string();
    assert_eq!(
        r1_name, squatted,
        "the squatter was replaced by the real result"
    );
    let r1 = result(&client, &ns.name, &r1_name).await;
    assert_eq!(
        r1.spec.benchmark_uid,
        created["metadata"]["uid"].as_str().unwrap()
    );
    let events = events(&ns.name, "ResultReplaced", &[]).unwrap();
    assert!(events.contains("was not its result"), "{events}");
    // Results are immutable: the API server refuses a change with the rule's message.
    let edit = kubectl(&[
        "-n",
        &ns.name,
        "patch",
        "benchmarkresult",
        &r1_name,
        "--type=merge",
        "-p",
        r#"{"spec":{"summary":"999999 req/s"}}"#,
    ]);
    let refusal = format!("{edit:?}");
    assert!(
        edit.is_err() && refusal.contains("a BenchmarkResult is immutable"),
        "{refusal}"
    );
    assert_eq!(r1.spec.phase, crds::Phase::Succeeded);
    assert_eq!(r1.spec.benchmark.name, "hist");
    assert_eq!(r1.spec.run_id, st["runId"].as_str().unwrap());
    assert!(r1.spec.benchmark_spec.contains("nginx-target"));
    let step = &r1.spec.measurements[0];
    let r1_rps = step.metrics.iter().find(|m| m.name == "rps").unwrap();
    assert_eq!(r1_rps.values.len(), 2);
    assert!(r1_rps.mean > 0.0 && r1_rps.ci95 >= 0.0);
    let hist = protocol::report::histogram::decode(step.histogram.as_deref().unwrap()).unwrap();
    assert!(!hist.is_empty(), "the merged histogram holds the requests");
    let cluster = &r1.spec.cluster;
    assert!(cluster
        .kubernetes_version
        .as_deref()
        .unwrap()
        .starts_with("v1."));
    let node = cluster.nodes.first().expect("the worker's node");
    assert!(
        node.kernel_version.is_some() && node.cpus.is_some(),
        "{node:?}"
    );
    let table = kubectl(&["-n", &ns.name, "get", "benchmarkresults"]).unwrap();
    assert!(
        table.contains(&r1_name) && table.contains("Succeeded"),
        "{table}"
    );

    // Two more runs of the same spec (historyLimit and cleanup are not part of its hash): each
    // is judged against the previous one, and only the newest three... then two are kept.
    let second = rerun(&client, &ns.name, "hist", json!({"historyLimit": 2})).await;
    assert_phase(&second, "Succeeded");
    assert_eq!(*regressed(&second), "False", "{:#}", second["status"]);
    let r2 = second["status"]["latestResult"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(r2, r1_name);
    let names = |rs: Vec<BenchmarkResult>| -> Vec<String> {
        rs.iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect()
    };
    assert_eq!(
        names(results(&client, &ns.name).await),
        [r1_name.clone(), r2.clone()]
    );
    let verdict = result(&client, &ns.name, &r2).await.spec.verdict.unwrap();
    assert_eq!(verdict.baseline_results, std::slice::from_ref(&r1_name));

    let third = rerun(&client, &ns.name, "hist", json!({"cleanup": "OnSuccess"})).await;
    assert_phase(&third, "Succeeded");
    let r3 = third["status"]["latestResult"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        names(results(&client, &ns.name).await),
        [r2.clone(), r3.clone()]
    );

    // The report of this history: both kept results, a chart of the main figure over runs.
    let mut numbers = vec![r2.clone(), r3.clone()];
    for r in [&r2, &r3] {
        let rps = result(&client, &ns.name, r).await.spec.measurements[0].metrics[0].mean;
        numbers.push(format!("{rps:.2}"));
    }
    check_report(&ns.name, "hist", &numbers).await;

    // The benchmark goes; its history stays.
    Api::<crds::IngressBenchmark>::namespaced(client.clone(), &ns.name)
        .delete("hist", &DeleteParams::default())
        .await
        .unwrap();
    eventually(Duration::from_secs(60), async || {
        match get_benchmark(&client, IB, &ns.name, "hist").await {
            Err(_) => Ok(()),
            Ok(_) => Err("the benchmark still exists".to_string()),
        }
    })
    .await;
    assert_eq!(names(results(&client, &ns.name).await), [r2, r3]);
}

#[tokio::test]
async fn a_slowed_target_regresses_and_an_unchanged_one_does_not() {
    let client = client().await;
    let ns = TestNs::new(&client, "regress").await;
    create_nginx(&client, &ns.name, "web", "100m").await;
    rolled_out(&ns.name, "web");
    // The slowed target answers each request after 50 ms: 8 connections give at most 160
    // req/s, whatever else the nodes' cores are doing. (An nginx held to a hundredth of a CPU
    // gave about 600 req/s, and a noisy baseline sample then hid the regression in the noise.)
    shipped_target(&client, &ns.name, "slow", &["--delay", "50ms"]).await;
    let url = |svc: &str| format!("http://{svc}.{}.svc.cluster.local/", ns.name);

    let base = sampled(&ns.name, "base", &url("web"), 3);
    let base = create_and_wait(&client, &base, FINISHED, RUN_TIMEOUT).await;
    assert_phase(&base, "Succeeded");
    let baseline_result = base["status"]["latestResult"].as_str().unwrap().to_string();
    let judged = |name: &str, svc: &str| {
        let mut ib = sampled(&ns.name, name, &url(svc), 3);
        set(
            &mut ib,
            "/spec/baseline",
            json!({"result": baseline_result, "ignoreEnvironment": ["placement"],
                   "metrics": [{"name": "rps", "tolerancePercent": 50}]}),
        );
        ib
    };

    let same = create_and_wait(&client, &judged("same", "web"), FINISHED, RUN_TIMEOUT).await;
    let seen = format!(
        "baseline: {}\nsame: {}",
        base["status"]["statistics"], same["status"]["statistics"]
    );
    assert_phase(&same, "Succeeded");
    assert_eq!(*regressed(&same), "False", "{:#}", same["status"]);

    let slowed = create_and_wait(&client, &judged("slowed", "slow"), FINISHED, RUN_TIMEOUT).await;
    let message = regressed_message(&slowed, ("True", "Regressed"), &seen);
    assert!(
        message.contains("step 0 rps") && message.contains(&baseline_result),
        "{message}"
    );
    let r = result(
        &client,
        &ns.name,
        slowed["status"]["latestResult"].as_str().unwrap(),
    )
    .await;
    let v = r.spec.verdict.unwrap();
    assert_eq!(v.regressed, "True");
    let rps = v.metrics.iter().find(|m| m.metric == "rps").unwrap();
    assert!(
        rps.regressed && rps.beyond_noise && rps.delta_percent < -50.0,
        "{rps:?}"
    );

    // The verdict as Prometheus sees it.
    let metrics = operator_metrics(&client).await.unwrap();
    let series = |name: &str| {
        format!(
            "netbench_regression{{kind=\"IngressBenchmark\",measurement=\"step 0\",metric=\"rps\",name=\"{name}\",namespace=\"{}\"}}",
            ns.name
        )
    };
    assert!(
        metrics.contains(&format!("{} 1", series("slowed"))),
        "{metrics}"
    );
    assert!(metrics.contains(&format!("{} 0", series("same"))));

    // The command line against these real results.
    let slowed_result = slowed["status"]["latestResult"]
        .as_str()
        .unwrap()
        .to_string();
    let compare = [
        "-n",
        &ns.name,
        "compare",
        &baseline_result,
        &slowed_result,
        "--tolerance",
        "50",
        "--fail-on-regression",
    ];
    assert!(
        netbench_status(&compare).await,
        "compare finds the regression"
    );
    let junit = std::env::temp_dir().join(format!("nb-junit-{}.xml", ns.name));
    netbench(&[
        "-n",
        &ns.name,
        "junit",
        "--benchmark",
        "ib/slowed",
        "--out",
        junit.to_str().unwrap(),
    ])
    .await;
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    assert!(
        doc.descendants().any(|n| n.has_tag_name("failure")),
        "{xml}"
    );
    let _ = std::fs::remove_file(&junit);
}

/// `netbench report --benchmark ib/NAME` writes Markdown holding `numbers` and charts that
/// parse as XML.
async fn check_report(ns: &str, name: &str, numbers: &[String]) {
    let out = std::env::temp_dir().join(format!("nb-report-{ns}-{name}"));
    let out_dir = out.to_str().unwrap();
    let benchmark = format!("ib/{name}");
    netbench(&[
        "-n",
        ns,
        "report",
        "--benchmark",
        &benchmark,
        "--out",
        out_dir,
    ])
    .await;
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for n in numbers {
        assert!(md.contains(n.as_str()), "{n} missing:\n{md}");
    }
    let svgs: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "svg"))
        .collect();
    assert!(!svgs.is_empty(), "no chart in {out_dir}:\n{md}");
    for svg in svgs {
        let text = std::fs::read_to_string(svg.path()).unwrap();
        roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{:?}: {e}", svg.path()));
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Runs the `netbench` command line in this process; panics when it fails.
async fn netbench(args: &[&str]) {
    assert!(!netbench_status(args).await, "netbench {args:?} said no");
}

/// Runs the `netbench` command line in this process: true when it answers "no" (a regression,
/// a failed run).
async fn netbench_status(args: &[&str]) -> bool {
    use clap::Parser;
    use netbench_cli::app::{Cli, Command};
    let cli = Cli::parse_from(std::iter::once("netbench").chain(args.iter().copied()));
    let c = &cli.cluster;
    match &cli.command {
        Command::Report(a) => netbench_cli::report::run(a, c).await.map(|()| false),
        Command::Compare(a) => netbench_cli::compare::run(a, c).await,
        Command::Junit(a) => netbench_cli::junit::run(a, c).await.map(|()| false),
        Command::Watch(_) => unreachable!("not used here"),
    }
    .unwrap_or_else(|e| panic!("netbench {args:?}: {e:#}"))
}

/// Six runs of one spec (only `cleanup`, which the spec hash leaves out, changes between
/// them), the target held to a twentieth of a CPU from the 4th on: the 6th run's result starts
/// a new regime at the 4th, worse, 2 runs ago; condition, Event and gauge say so. The 5 runs
/// before it are too few to judge.
/// A baseline of another environment is not used: the baseline's worker ran on nb-node1, the
/// judged run's on nb-node2 (the same nodes otherwise, so only the placement differs). Regressed
/// is Unknown (OtherEnvironment) and the verdict names the skipped result; told to ignore the
/// placement, the run is compared with it and the verdict names the ignored difference.
#[tokio::test]
async fn a_baseline_with_a_different_fingerprint_is_not_used() {
    let client = client().await;
    let ns = TestNs::new(&client, "fingerprint").await;
    let pinned = |name: &str, node: &str| {
        let mut ib = sampled(&ns.name, name, TARGET, 1);
        set(&mut ib, "/spec/workers", json!({"nodeNames": [node]}));
        ib
    };
    let base = create_and_wait(&client, &pinned("base", "nb-node1"), FINISHED, RUN_TIMEOUT).await;
    assert_phase(&base, "Succeeded");
    let base_result = base["status"]["latestResult"].as_str().unwrap().to_string();
    let env = result(&client, &ns.name, &base_result)
        .await
        .spec
        .environment
        .expect("a new result has a fingerprint");
    assert_eq!(
        env.placement.as_deref(),
        Some("client: nb-node1"),
        "{env:?}"
    );
    assert!(env.kubernetes.is_some() && env.kernel.is_some(), "{env:?}");

    let baseline = |ignore: Value| {
        json!({"result": base_result, "ignoreEnvironment": ignore,
               "metrics": [{"name": "rps", "tolerancePercent": 80}]})
    };
    let mut other = pinned("other", "nb-node2");
    set(&mut other, "/spec/baseline", baseline(json!([])));
    let other = create_and_wait(&client, &other, FINISHED, RUN_TIMEOUT).await;
    let message = regressed_message(&other, ("Unknown", "OtherEnvironment"), "");
    assert!(
        message.contains(&format!("{base_result}: placement")),
        "{message}"
    );
    let latest = |v: &Value| v["status"]["latestResult"].as_str().unwrap().to_string();
    let v = result(&client, &ns.name, &latest(&other))
        .await
        .spec
        .verdict
        .unwrap();
    let line = format!("{base_result}: placement client: nb-node1 (this run: client: nb-node2)");
    assert!(v.baseline_results.is_empty(), "{v:?}");
    assert_eq!(v.skipped, std::slice::from_ref(&line));

    let ignoring = rerun(
        &client,
        &ns.name,
        "other",
        json!({"baseline": baseline(json!(["placement"]))}),
    )
    .await;
    assert_phase(&ignoring, "Succeeded");
    let c = condition(&ignoring, "Regressed");
    assert_ne!(c["status"], "Unknown", "{:#}", ignoring["status"]);
    let v = result(&client, &ns.name, &latest(&ignoring))
        .await
        .spec
        .verdict
        .unwrap();
    assert_eq!(v.baseline_results, std::slice::from_ref(&base_result));
    assert_eq!(v.ignored, [line]);
    assert!(v.skipped.is_empty(), "{v:?}");
}

#[tokio::test]
async fn a_target_slowed_from_the_4th_run_gives_a_new_regime_at_the_6th() {
    let client = client().await;
    let ns = TestNs::new(&client, "regime").await;
    create_nginx(&client, &ns.name, "web", "500m").await;
    let rollout = || {
        kubectl(&[
            "-n",
            &ns.name,
            "rollout",
            "status",
            "deployment/web",
            "--timeout=120s",
        ])
        .unwrap()
    };
    rollout();
    endpoints_settled(&ns.name, "web").await;
    let url = format!("http://web.{}.svc.cluster.local/", ns.name);
    let ib = sampled(&ns.name, "nightly", &url, 1);
    let mut last = create_and_wait(&client, &ib, FINISHED, RUN_TIMEOUT).await;
    let mut results = vec![];
    for run in 1..=6 {
        if run > 1 {
            if run == 4 {
                let limits = ["-n", &ns.name, "set", "resources", "deployment/web"];
                kubectl(&[&limits[..], &["--limits=cpu=10m", "--requests=cpu=10m"]].concat())
                    .unwrap();
                rollout();
                endpoints_settled(&ns.name, "web").await;
            }
            let cleanup = if run % 2 == 0 { "OnSuccess" } else { "Always" };
            last = rerun(&client, &ns.name, "nightly", json!({"cleanup": cleanup})).await;
        }
        assert_phase(&last, "Succeeded");
        results.push(last["status"]["latestResult"].as_str().unwrap().to_string());
        if run < 6 {
            let c = condition(&last, "NewRegime");
            assert_eq!(
                (&c["status"], &c["reason"]),
                (&json!("Unknown"), &json!("TooFewResults")),
                "run {run}: {:#}",
                last["status"]
            );
        }
    }
    let c = condition(&last, "NewRegime");
    assert_eq!(c["status"], "True", "{:#}", last["status"]);
    let message = c["message"].as_str().unwrap();
    let since = format!("since {} (2 runs ago", results[3]);
    assert!(
        message.contains("step 0 rps worse -") && message.contains(&since),
        "{message}"
    );
    let events = events(&ns.name, "NewRegime", &["-o", "jsonpath={.items[*].type}"]).unwrap();
    assert_eq!(events.trim(), "Warning", "one Event, for the worse");
    let metrics = operator_metrics(&client).await.unwrap();
    let series = format!(
        "netbench_change_point_runs_ago{{direction=\"worse\",figure=\"rps\",kind=\"IngressBenchmark\",measurement=\"step 0\",name=\"nightly\",namespace=\"{}\"}} 2",
        ns.name
    );
    assert!(metrics.contains(&series), "{metrics}");
}

/// Waits until Service `service`'s endpoints are exactly its ready pods, none terminating: a
/// run started while the Service still leads to the pod a rollout replaced fails its preflight.
async fn endpoints_settled(ns: &str, service: &str) {
    eventually(Duration::from_secs(60), async || {
        let get = |args: &[&str]| kubectl(&[&["-n", ns][..], args].concat()).unwrap_or_default();
        let selector = format!("kubernetes.io/service-name={service}");
        let serving = get(&[
            "get", "endpointslices", "-l", &selector, "-o",
            "jsonpath={range .items[*].endpoints[*]}{.addresses[0]} {.conditions.ready} {.conditions.terminating}{\"\\n\"}{end}",
        ]);
        let mut ready: Vec<&str> = serving
            .lines()
            .filter(|l| l.ends_with(" true false") || l.ends_with(" true "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let listed = serving.lines().filter(|l| !l.is_empty()).count();
        let pods = get(&[
            "get", "pods", "-l", &format!("app={service}"), "-o",
            "jsonpath={range .items[?(@.metadata.deletionTimestamp)]}x{end}{range .items[*]}{.status.podIP}{\" \"}{end}",
        ]);
        let (terminating, ips) = pods.split_at(pods.chars().take_while(|c| *c == 'x').count());
        let mut ips: Vec<&str> = ips.split_whitespace().collect();
        ready.sort_unstable();
        ips.sort_unstable();
        if terminating.is_empty() && listed == ready.len() && !ready.is_empty() && ready == ips {
            Ok(())
        } else {
            Err(format!("Service {service}: endpoints {serving:?}, pods {pods:?}"))
        }
    })
    .await;
}

/// Every BenchmarkResult creation in one namespace denied (as a policy, or RBAC taken away,
/// would), enforced before it returns. Dropping it deletes the policy.
async fn deny_results(client: &kube::Client, ns: &str) -> DenyPolicy {
    let rule = json!({"apiGroups": ["netbench.io"], "apiVersions": ["*"],
                      "operations": ["CREATE"], "resources": ["benchmarkresults"]});
    let deny = DenyPolicy::create(
        client,
        format!("netbench-e2e-deny-results-{ns}"),
        ns,
        rule,
        "false",
        format!("netbench-e2e {ns}: results are denied"),
    )
    .await;
    // Enforced once a dry-run creation is denied with our message.
    let api = Api::<BenchmarkResult>::namespaced(client.clone(), ns);
    let dry = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let probe: BenchmarkResult = serde_json::from_value(json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": "BenchmarkResult",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {"benchmark": {"kind": IB, "namespace": ns, "name": "probe"},
                 "benchmarkUid": "u", "runId": "r", "specHash": "h",
                 "benchmarkSpec": "{}", "phase": "Failed"}
    }))
    .unwrap();
    eventually(Duration::from_secs(60), async || {
        match api.create(&dry, &probe).await {
            Err(e) if e.to_string().contains(&deny.message) => Ok(()),
            other => Err(format!("the policy is not enforced after 60s: {other:?}")),
        }
    })
    .await;
    deny
}

/// Waits for `name`'s run to end with its result denied (ResultRecorded=False).
async fn held_by_denial(client: &kube::Client, ns: &str, name: &str) -> Value {
    let recorded = |v: &Value| condition(v, "ResultRecorded").clone();
    wait_until(
        client,
        IB,
        ns,
        name,
        "finished with ResultRecorded=False",
        RUN_TIMEOUT,
        |v| FINISHED.iter().any(|p| v["status"]["phase"] == *p) && recorded(v)["status"] == "False",
    )
    .await
}

/// Waits (90 s at most) for `name`'s result to be written (ResultRecorded=True).
async fn result_recorded(client: &kube::Client, ns: &str, name: &str) -> Value {
    let recorded = |v: &Value| condition(v, "ResultRecorded").clone();
    let wait = Duration::from_secs(90);
    wait_until(client, IB, ns, name, "ResultRecorded=True", wait, |v| {
        recorded(v)["status"] == "True"
    })
    .await
}

/// A result denied while the run ends: the run keeps its phase, ResultRecorded=False
/// (ResultWritePending) says why, no result exists and the reports stay, each sample folded
/// into one object (its worker reports gone); once the denial is lifted the result is written
/// within seconds (retried every 10 s) from the folded samples, ResultRecorded turns True and
/// the reports go.
#[tokio::test]
async fn a_denied_result_is_written_seconds_after_the_denial_ends() {
    let client = client().await;
    let ns = TestNs::new(&client, "resdeny").await;
    let deny = deny_results(&client, &ns.name).await;
    let mut held = sampled(&ns.name, "held", TARGET, 3);
    set(&mut held, "/spec/workers", json!({"replicas": 2}));
    create(&client, &ns.name, &held).await.unwrap();
    let recorded = |v: &Value| condition(v, "ResultRecorded").clone();
    let held = held_by_denial(&client, &ns.name, "held").await;
    let c = recorded(&held);
    assert_eq!(c["reason"], "ResultWritePending", "{c:#}");
    assert!(
        c["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&deny.message),
        "{c:#}"
    );
    assert_eq!(held["status"]["phase"], "Succeeded", "{:#}", held["status"]);
    assert!(results(&client, &ns.name).await.is_empty());
    // Three samples of two workers: three folded objects, no worker report left (the last
    // sample is folded right after the write that recorded it, which may come a moment
    // after the status this test saw).
    eventually(
        Duration::from_secs(30),
        async || match stored_reports_by_form(&client, &ns.name).await.unwrap() {
            (workers, samples) if workers.is_empty() && samples.len() == 3 => Ok(()),
            other => Err(format!("want 3 folded samples only: {other:?}")),
        },
    )
    .await;
    let statistics = held["status"]["statistics"].clone();

    deny.lift(&client).await;
    let lifted = std::time::Instant::now();
    let done = result_recorded(&client, &ns.name, "held").await;
    let took = lifted.elapsed();
    // The policy's removal takes a moment to reach the API server; then the next try (at most
    // 10 s away) writes it.
    assert!(took < Duration::from_secs(40), "took {took:?}");
    let name = done["status"]["latestResult"].as_str().unwrap().to_string();
    let r = result(&client, &ns.name, &name).await;
    assert_eq!(r.spec.phase, crds::Phase::Succeeded, "{:?}", r.spec.message);
    // The result made of the folded samples holds the figures the run collected from the
    // worker reports, sample for sample, with the histogram merged over all of them.
    let m = &r.spec.measurements[0];
    assert_eq!(
        serde_json::to_value(&m.metrics).unwrap(),
        statistics[0]["metrics"],
        "{statistics:#}"
    );
    assert_eq!(m.metrics[0].values.len(), 3);
    let h = protocol::report::histogram::decode(m.histogram.as_deref().unwrap()).unwrap();
    assert!(!h.is_empty());
    // The nodes the workers ran on, from the folded samples.
    assert!(!r.spec.cluster.nodes.is_empty(), "{:?}", r.spec.cluster);
    eventually(Duration::from_secs(30), async || {
        let left = stored_reports(&client, &ns.name).await.unwrap();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "reports left after the result was written: {left:?}"
            ))
        }
    })
    .await;
}

/// Status is a report, never an authority, for results too: a run the operator failed itself
/// (a gate, every report complete) whose status is then forged to say Succeeded, with its start
/// cleared and times and message of the author's own, while results are denied: the reports
/// stay (clearing the start once meant "no result due"), and the result written once the
/// denial is lifted says Failed with the operator's message and the operator's times (from the
/// run record `netbench-run-<uid>` in the operator's namespace).
///
///   cargo test -p e2e --test results a_forged_status_changes_nothing_in_the_result -- --test-threads=1
#[tokio::test]
async fn a_forged_status_changes_nothing_in_the_result() {
    let client = client().await;
    let ns = TestNs::new(&client, "resforge").await;
    let deny = deny_results(&client, &ns.name).await;
    let mut ib = sampled(&ns.name, "forged", TARGET, 1);
    set(
        &mut ib,
        "/spec/gates",
        json!([{"figure": "rps", "min": 1e9}]),
    );
    create(&client, &ns.name, &ib).await.unwrap();
    let held = held_by_denial(&client, &ns.name, "forged").await;
    assert_eq!(held["status"]["phase"], "Failed", "{:#}", held["status"]);
    let operator_says = held["status"]["message"].as_str().unwrap().to_string();
    assert!(
        operator_says.contains("rps >= 1000000000"),
        "{operator_says}"
    );

    // The forgery, through the status subresource.
    let api = Api::<crds::IngressBenchmark>::namespaced(client.clone(), &ns.name);
    let forged = json!({"status": {"phase": "Succeeded", "message": "all good, trust me",
        "startTime": null, "completionTime": "2999-01-01T00:00:00Z"}});
    api.patch_status("forged", &PatchParams::default(), &Patch::Merge(forged))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(
        !stored_reports(&client, &ns.name).await.unwrap().is_empty(),
        "a cleared start must release no report before the result is written"
    );
    assert!(results(&client, &ns.name).await.is_empty());

    deny.lift(&client).await;
    let done = result_recorded(&client, &ns.name, "forged").await;
    let name = done["status"]["latestResult"].as_str().unwrap().to_string();
    let r = result(&client, &ns.name, &name).await;
    assert_eq!(r.spec.phase, crds::Phase::Failed, "{:?}", r.spec.message);
    assert_eq!(r.spec.message.as_deref(), Some(operator_says.as_str()));
    let start = r.spec.start_time.as_ref().expect("a start").0;
    let end = r.spec.completion_time.as_ref().expect("a completion").0;
    let stamp = |v: &Value| {
        serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>(v.clone())
            .unwrap()
            .0
    };
    let created = stamp(&done["metadata"]["creationTimestamp"]);
    let written = r.metadata.creation_timestamp.as_ref().expect("stamped").0;
    assert!(created <= start && start <= end, "{created} {start} {end}");
    assert!(
        end <= written,
        "not after the result was written: {end} {written}"
    );
}
