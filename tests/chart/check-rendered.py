#!/usr/bin/env python3
"""Assertions on `helm template` output (stdin):
check-rendered.py default|default-optin|nondefault DASHBOARD.

Checks what the chart promises: least-privilege RBAC (exact verbs per resource, opt-in rules only
when enabled and only where enabled), a hardened Deployment wired to the values, the Service,
the optional ServiceMonitor, the dashboard ConfigMap carrying the dashboard unchanged, the
release Namespace with its Pod Security labels (namespace.create) and the NetworkPolicy
(networkPolicy.enabled), each only when asked for; the CRDs unchanged from files/crds/ with the
keep policy (crds.install); the `helm test` hook (a tiny benchmark watched by the CLI).
default-optin = default values plus namespace.create=true and networkPolicy.enabled=true.
"""
import json
import os
import sys

import yaml

CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "charts", "netbench")
with open(os.path.join(CHART, "Chart.yaml")) as _f:
    APP_VERSION = yaml.safe_load(_f)["appVersion"]

# The rules every install gets (ClusterRole "<fullname>"), exactly.
# The operator's rules on namespaced objects: in its ClusterRole, or (watchNamespaces) in a Role
# of that name in each watched namespace.
NAMESPACED_RULES = [
    (("",), ("pods",), ("get", "list", "watch", "create", "delete", "deletecollection")),
    (("",), ("services",), ("get", "list", "create", "delete")),
    (("",), ("configmaps",), ("list",)),
    (("events.k8s.io",), ("events",), ("create", "patch")),
    (("netbench.io",), ("benchmarkresults",), ("get", "list", "watch", "create", "delete")),
]
# What stays cluster-wide in every install: netbench's own benchmark kinds (a namespace being
# deleted loses its Role before its benchmarks' finalizers are done), nodes and TokenReviews.
BENCHMARK_RULES = [
    (("netbench.io",), ("ingressbenchmarks", "egressbenchmarks"), ("get", "list", "watch", "patch", "update")),
    (("netbench.io",), ("ingressbenchmarks/status", "egressbenchmarks/status"), ("get", "patch", "update")),
    (("netbench.io",), ("ingressbenchmarks/finalizers", "egressbenchmarks/finalizers"), ("update",)),
]
CLUSTER_WIDE_RULES = BENCHMARK_RULES + [
    (("authentication.k8s.io",), ("tokenreviews",), ("create",)),
    (("",), ("nodes",), ("get", "list")),
]
BASE_RULES = BENCHMARK_RULES + NAMESPACED_RULES + CLUSTER_WIDE_RULES[len(BENCHMARK_RULES):]
# Roles for people, aggregated into the built-in view/edit/admin roles (never bound by the
# chart): read everything; edit benchmarks and delete results; nobody but the operator creates
# or changes a result.
VIEW_RULES = [(("netbench.io",), ("ingressbenchmarks", "egressbenchmarks", "benchmarkresults"), ("get", "list", "watch"))]
EDIT_RULES = [(("netbench.io",), ("ingressbenchmarks", "egressbenchmarks"), ("create", "update", "patch", "delete", "deletecollection")),
              (("netbench.io",), ("benchmarkresults",), ("delete", "deletecollection"))]
# Report ConfigMaps live in the release namespace only (Role "<fullname>-reports").
REPORT_RULES = [(("",), ("configmaps",), ("get", "list", "watch", "create", "delete", "deletecollection"))]
LEASE_RULES = [(("coordination.k8s.io",), ("leases",), ("get", "create", "update"))]
SWEEP_RULES = [(("apps",), ("deployments", "daemonsets"), ("get", "list", "watch", "patch"))]
# security.usageTargets: a workload's selector where it lives, and every kubelet's
# /metrics/resource through the API server (nodes/proxy get, cluster-wide).
USAGE_RULES = [(("apps",), ("deployments", "daemonsets"), ("get",)), (("",), ("pods",), ("list",))]
KUBELET_RULES = [(("",), ("nodes/proxy",), ("get",))]
OFFLOAD_RULES = [(("batch",), ("jobs",), ("get", "list", "watch", "create", "delete")),
                 (("",), ("pods",), ("list",)), (("",), ("pods/log",), ("get",))]
RECORDS_RULES = [(("",), ("configmaps",), ("update",))]
# targets.denyApiServer: get on exactly Service and EndpointSlice default/kubernetes.
APISERVER_RULES = [(("",), ("services",), ("get",)), (("discovery.k8s.io",), ("endpointslices",), ("get",))]

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


# The operator's labels on worker pods (operator/src/base/labels.rs; the operator's
# chart_network_policy test checks the same selector against the pods it plans).
WORKER_PEER = {"namespaceSelector": {},
               "podSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "netbench-operator"},
                               "matchExpressions": [{"key": "netbench.io/role", "operator": "In",
                                                     "values": ["client", "server"]}]}}


def pod_security(level):
    return {f"pod-security.kubernetes.io/{mode}{suffix}": value
            for mode, lvl in (("enforce", level), ("warn", "restricted"), ("audit", "restricted"))
            for suffix, value in (("", lvl), ("-version", "latest"))}


def check_namespace_and_policy(mode, by, ns, port, dep):
    namespaces = [d for (k, _, _), d in by.items() if k == "Namespace"]
    policies = [d for (k, _, _), d in by.items() if k == "NetworkPolicy"]
    if mode == "default":
        check(namespaces == [], "Namespace rendered without namespace.create")
        check(policies == [], "NetworkPolicy rendered without networkPolicy.enabled")
        return
    # Offload Jobs (hostNetwork, NET_ADMIN) run in the release namespace only in nondefault.
    level = "privileged" if mode == "nondefault" else "restricted"
    check(len(namespaces) == 1 and namespaces[0]["metadata"]["name"] == ns,
          f"one Namespace {ns}: {[n['metadata'] for n in namespaces]}")
    if namespaces:
        labels = namespaces[0]["metadata"].get("labels", {})
        want = {"app.kubernetes.io/part-of": "netbench", **pod_security(level)}
        check(labels == want, f"Namespace labels {labels} != {want}")
    check(len(policies) == 1, f"one NetworkPolicy: {len(policies)}")
    if not policies:
        return
    pol = policies[0]
    spec = pol["spec"]
    check(pol["metadata"]["namespace"] == ns, "NetworkPolicy namespace")
    check(dep is not None and spec["podSelector"] == {"matchLabels": dep["spec"]["selector"]["matchLabels"]},
          f"NetworkPolicy selects the operator's pods: {spec['podSelector']}")
    check(spec["policyTypes"] == ["Ingress"], f"policyTypes {spec['policyTypes']}")
    rules = spec.get("ingress", [])
    check(all(r.get("ports") == [{"port": port, "protocol": "TCP"}] for r in rules),
          f"every rule admits only port {port}/TCP: {rules}")
    sources = [r.get("from") for r in rules]
    if mode == "nondefault":
        want = [[WORKER_PEER],
                [{"ipBlock": {"cidr": "10.0.0.0/16"}}, {"ipBlock": {"cidr": "fd00::/64"}}],
                [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]]
    else:
        # No node CIDRs and no Prometheus selector: workers only (an empty selector is none).
        want = [[WORKER_PEER]]
    check(sources == want, f"NetworkPolicy sources {sources} != {want}")


def rules_of(obj):
    return [(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"])) for r in obj["rules"]]


CRD_NAMES = ["benchmarkresults.netbench.io", "egressbenchmarks.netbench.io", "ingressbenchmarks.netbench.io"]


def check_crds(crds, install):
    """crds.install renders every generated CRD unchanged, plus labels and the keep policy."""
    names = sorted(d["metadata"]["name"] for d in crds)
    if not install:
        check(names == [], f"CRDs rendered with crds.install=false: {names}")
        return
    check(names == CRD_NAMES, f"CRDs {names} != {CRD_NAMES}")
    for d in crds:
        name = d["metadata"]["name"]
        with open(f"{CHART}/files/crds/{name}.yaml") as f:
            generated = yaml.safe_load(f)
        check(d["spec"] == generated["spec"], f"CRD {name}: spec differs from files/crds/{name}.yaml")
        check(d["metadata"].get("annotations", {}).get("helm.sh/resource-policy") == "keep",
              f"CRD {name} lacks helm.sh/resource-policy: keep")
        check(d["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "netbench", f"CRD {name} labels")


# OpenShift's restricted-v2 SCC, as far as a pod spec can break it: non-root, no id outside the
# namespace's range (so none fixed unless asked: `uid`), seccomp RuntimeDefault (or unset), no
# privilege escalation, every capability dropped and none added, no host namespaces or paths.
def check_restricted_v2(what, pod_spec, uid):
    sc = pod_spec.get("securityContext", {})
    check(sc.get("runAsNonRoot") is True, f"{what}: runAsNonRoot")
    check(sc.get("runAsUser") == uid and sc.get("runAsGroup") == uid,
          f"{what}: runAsUser/runAsGroup {sc.get('runAsUser')}/{sc.get('runAsGroup')}, want {uid} (restricted-v2 assigns its own)")
    check(sc.get("seccompProfile", {"type": "RuntimeDefault"}) == {"type": "RuntimeDefault"}, f"{what}: seccompProfile")
    check("fsGroup" not in sc and "supplementalGroups" not in sc, f"{what}: fixed fsGroup/supplementalGroups")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        check(not pod_spec.get(key), f"{what}: {key}")
    check(all("hostPath" not in v for v in pod_spec.get("volumes", [])), f"{what}: hostPath volume")
    for c in pod_spec.get("containers", []) + pod_spec.get("initContainers", []):
        csc = c.get("securityContext", {})
        check(csc.get("allowPrivilegeEscalation") is False, f"{what}/{c['name']}: allowPrivilegeEscalation")
        check(not csc.get("privileged") and "runAsUser" not in csc, f"{what}/{c['name']}: privileged or a fixed uid")
        caps = csc.get("capabilities", {})
        check(caps.get("drop") == ["ALL"] and not caps.get("add"), f"{what}/{c['name']}: capabilities {caps}")


def check_test_hook(hooks, full, ns, image, target, uid):
    """`helm test`: a tiny IngressBenchmark and a Pod that watches it with the CLI, read-only RBAC."""
    by = {(d["kind"], d["metadata"]["name"]): d for d in hooks}
    name = f"{full}-test"
    want = {("ServiceAccount", name), ("Role", name), ("RoleBinding", name), ("IngressBenchmark", name), ("Pod", name)}
    check(set(by) == want, f"test hook objects {sorted(by)} != {sorted(want)}")
    for d in hooks:
        a = d["metadata"].get("annotations", {})
        check(a.get("helm.sh/hook") == "test" and d["metadata"].get("namespace") == ns,
              f"hook {d['kind']} {d['metadata']['name']}: {a}")
    role = by.get(("Role", name))
    check(role is not None and role["rules"] == [{"apiGroups": ["netbench.io"], "resources": ["ingressbenchmarks"],
                                                "resourceNames": [name], "verbs": ["get", "list", "watch"]}],
          f"test Role must only read its benchmark: {role and role['rules']}")
    ib = by.get(("IngressBenchmark", name))
    check(ib is not None and ib["spec"]["target"]["url"] == target and ib["spec"]["workers"]["replicas"] == 1,
          f"test benchmark {ib and ib['spec']}")
    pod = by.get(("Pod", name))
    if pod:
        c = pod["spec"]["containers"][0]
        check(c["image"] == image and c["command"][:3] == ["/netbench", "watch", f"ib/{name}"],
              f"test Pod {c['image']} {c['command']}")
        check(pod["spec"]["securityContext"]["runAsNonRoot"] is True and c["securityContext"]["readOnlyRootFilesystem"] is True
              and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}, "test Pod is not hardened")
        check(pod["spec"]["serviceAccountName"] == name and pod["spec"]["restartPolicy"] == "Never", "test Pod SA/restart")
        check_restricted_v2("test Pod", pod["spec"], uid)


def main():
    mode, dashboard_path = sys.argv[1], sys.argv[2]
    rendered = [d for d in yaml.safe_load_all(sys.stdin) if d]
    hooks = [d for d in rendered if "helm.sh/hook" in d["metadata"].get("annotations", {})]
    crds = [d for d in rendered if d["kind"] == "CustomResourceDefinition"]
    docs = [d for d in rendered if d not in hooks and d not in crds]
    by = {}
    for d in docs:
        by.setdefault((d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")), d)
    kinds = sorted({d["kind"] for d in docs})
    default = mode in ("default", "default-optin")
    full = "netbench-operator" if default else "nb"
    ns = "netbench-system" if default else "bench-system"
    port = 8080 if default else 9090
    image = f"localhost/netbench/operator:{APP_VERSION}" if default else "registry.example/netbench/operator:9.9.9"
    # No fixed user id unless security.runAsUser asks for one (values-nondefault.yaml does).
    uid = None if default else 1000650000
    loadgen = f"localhost/netbench/loadgen:{APP_VERSION}" if default else "registry.example/netbench/loadgen:9.9.9"
    check_crds(crds, install=default)
    target = f"http://{full}.{ns}.svc:{port}/healthz" if default else "http://target.bench-a.svc/"
    check_test_hook(hooks, full, ns, image, target, uid)

    # RBAC
    cr = by.get(("ClusterRole", full, None))
    # values-nondefault.yaml watches bench-a, bench-b and bench-system: a Role there; only
    # the benchmark kinds, nodes and TokenReviews cluster-wide.
    watched = [] if default else ["bench-a", "bench-b", "bench-system"]
    want_cr = CLUSTER_WIDE_RULES if watched else BASE_RULES
    check(cr is not None and rules_of(cr) == want_cr, f"ClusterRole {full} rules: {cr and rules_of(cr)}")
    scoped = sorted((k, w) for (k, n, w) in by if n == full and k in ("Role", "RoleBinding"))
    check(scoped == sorted([("Role", w) for w in watched] + [("RoleBinding", w) for w in watched]),
          f"watchNamespaces Roles: {scoped}")
    for w in watched:
        role = by.get(("Role", full, w))
        check(role is not None and rules_of(role) == NAMESPACED_RULES, f"Role {w}/{full}: {role and rules_of(role)}")
    lease = by.get(("Role", f"{full}-leader", ns))
    check(lease is not None and rules_of(lease) == LEASE_RULES, f"leader Role in {ns}")
    records = by.get(("Role", f"{full}-records", ns))
    check(records is not None and rules_of(records) == RECORDS_RULES, f"records Role in {ns}")
    reports = by.get(("Role", f"{full}-reports", ns))
    check(reports is not None and rules_of(reports) == REPORT_RULES, f"reports Role in {ns}")
    check(by.get(("RoleBinding", f"{full}-reports", ns)) is not None, f"reports RoleBinding in {ns}")
    for kind in ("ClusterRole", "Role"):
        for (k, name, where), d in by.items():
            if k != kind or name in (full, f"{full}-leader", f"{full}-records", f"{full}-reports"):
                continue
            want = {f"{full}-sweep": SWEEP_RULES, f"{full}-offload": OFFLOAD_RULES,
                    f"{full}-usage": USAGE_RULES, f"{full}-kubelet-metrics": KUBELET_RULES,
                    f"{full}-apiserver": APISERVER_RULES, f"{full}-view": VIEW_RULES,
                    f"{full}-edit": EDIT_RULES}.get(name)
            if name in (f"{full}-view", f"{full}-edit"):
                labels = d["metadata"].get("labels", {})
                check(kind == "ClusterRole" and labels.get("rbac.authorization.k8s.io/aggregate-to-edit") == "true",
                      f"{kind} {name} must be a ClusterRole aggregated into edit")
            check(want is not None and rules_of(d) == want, f"unexpected {kind} {where}/{name}: {rules_of(d)}")
            if name == f"{full}-apiserver":
                check(kind == "Role" and where == "default"
                      and all(r.get("resourceNames") == ["kubernetes"] for r in d["rules"]),
                      f"apiserver {kind} {where}/{name} must be a Role in default limited to 'kubernetes'")
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for (k, name, where), d in by.items():
            if k == kind:
                check(d["subjects"] == [{"kind": "ServiceAccount", "name": full, "namespace": ns}],
                      f"{kind} {name} subjects {d['subjects']}")
                check(d["roleRef"]["name"] == name, f"{kind} {name} binds {d['roleRef']}")
    apiserver = sorted((k, w) for (k, n, w) in by if n == f"{full}-apiserver")
    want_apiserver = [("Role", "default"), ("RoleBinding", "default")] if default else []
    check(apiserver == want_apiserver, f"apiserver RBAC: {apiserver}")
    sweep = sorted((k, w) for (k, n, w) in by if n == f"{full}-sweep")
    offload = sorted((k, w) for (k, n, w) in by if n == f"{full}-offload")
    usage = sorted((k, w) for (k, n, w) in by if n in (f"{full}-usage", f"{full}-kubelet-metrics"))
    if default:
        check(sweep == [] and offload == [] and usage == [],
              f"opt-in RBAC rendered by default: {sweep} {offload} {usage}")
        check("ServiceMonitor" not in kinds, "ServiceMonitor rendered by default")
    else:
        # sweepNamespaces and the target namespaces of sweepTargets.
        check(sweep == [("Role", "bench-a"), ("Role", "bench-b"), ("Role", "ingress"),
                        ("RoleBinding", "bench-a"), ("RoleBinding", "bench-b"), ("RoleBinding", "ingress")],
              f"sweep RBAC: {sweep}")
        # Usage: the target namespace of each usageTargets pair, and nodes/proxy cluster-wide.
        check(usage == [("ClusterRole", None), ("ClusterRoleBinding", None),
                        ("Role", "gateway-system"), ("RoleBinding", "gateway-system")],
              f"usage RBAC: {usage}")
        # Offload Jobs run in the release namespace, whatever namespaces may request them.
        check(offload == [("Role", ns), ("RoleBinding", ns)], f"offload RBAC: {offload}")
        sm = by.get(("ServiceMonitor", full, ns))
        check(sm is not None and sm["spec"]["endpoints"][0]["port"] == "http"
              and sm["spec"]["endpoints"][0]["interval"] == "5s"
              and sm["spec"]["endpoints"][0]["honorLabels"] is True
              and sm["metadata"]["labels"].get("release") == "kube-prometheus-stack", "ServiceMonitor")

    # Deployment
    dep = by.get(("Deployment", full, ns))
    check(dep is not None, f"Deployment {ns}/{full}")
    if dep:
        spec = dep["spec"]["template"]["spec"]
        c = spec["containers"][0]
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
        check(dep["spec"]["replicas"] == (1 if default else 2), "replicas")
        check(spec["serviceAccountName"] == full, "serviceAccountName")
        check_restricted_v2("Deployment", spec, uid)
        # The workers' tolerations travel as JSON to the operator; the operator's own pod keeps
        # the chart's `tolerations` (none here).
        want_tolerations = [] if default else [
            {"key": "dedicated", "operator": "Equal", "value": "benchmarks", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 30}]
        check(json.loads(env.get("NETBENCH_WORKER_TOLERATIONS") or "null") == want_tolerations,
              f"NETBENCH_WORKER_TOLERATIONS {env.get('NETBENCH_WORKER_TOLERATIONS')!r}")
        check(not spec.get("tolerations"), f"the operator's pod took the workers' tolerations: {spec.get('tolerations')}")
        if uid is None:
            check("NETBENCH_WORKER_UID" not in env, "NETBENCH_WORKER_UID set by default")
        else:
            check(env.get("NETBENCH_WORKER_UID") == str(uid), f"NETBENCH_WORKER_UID {env.get('NETBENCH_WORKER_UID')!r}")
        check(c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                       "capabilities": {"drop": ["ALL"]}}, f"container securityContext {c['securityContext']}")
        check(c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz", "probes")
        check("requests" in c["resources"] and "memory" in c["resources"].get("limits", {}), "resources")
        check(c["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}], f"ports {c['ports']}")
        check(env["NETBENCH_LISTEN"] == f"0.0.0.0:{port}", "NETBENCH_LISTEN")
        check(env["NETBENCH_API_URL"] == f"http://{full}.{ns}.svc:{port}", f"NETBENCH_API_URL {env['NETBENCH_API_URL']}")
        check(env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}, "POD_NAMESPACE")
        check(env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}, "POD_NAME")
        if default:
            check(c["image"] == image and c["imagePullPolicy"] == "IfNotPresent", f"image {c['image']}")
            check(env["NETBENCH_LOADGEN_IMAGE"] == loadgen, "loadgen image")
            for k in ("WATCH", "HOST_NETWORK", "OFFLOAD", "SWEEP"):
                check(env[f"NETBENCH_{k}_NAMESPACES"] == "", f"{k} namespaces not empty by default")
            for k in ("SWEEP_TARGETS", "USAGE_TARGETS", "OFFLOAD_INTERFACES", "OFFLOAD_NODE_SELECTOR"):
                check(env[f"NETBENCH_{k}"] == "", f"{k} not empty by default")
            check("tx-checksumming" in env["NETBENCH_OFFLOAD_FEATURES"].split(","), "default offload features")
            caps = {"MAX_WORKERS": "16", "MAX_CONNECTIONS_PER_WORKER": "10000", "MAX_TOTAL_CONNECTIONS": "50000",
                    "MAX_RUN_SECONDS": "3600", "MAX_RUNS_PER_NAMESPACE": "2", "ALLOWED_TARGETS": "0.0.0.0/0,::/0",
                    "DENIED_TARGETS": "127.0.0.0/8,::1/128,0.0.0.0/8,::/128,169.254.0.0/16,fe80::/10",
                    "DENY_API_SERVER": "true", "TARGET_RESOLVE_TIMEOUT": "5"}
            for k, v in caps.items():
                check(env.get(f"NETBENCH_{k}") == v, f"NETBENCH_{k} {env.get(f'NETBENCH_{k}')!r} != {v!r} by default")
        else:
            check(c["image"] == image, f"image {c['image']}")
            check(env["NETBENCH_LOADGEN_IMAGE"] == loadgen, f"loadgen image {env['NETBENCH_LOADGEN_IMAGE']}")
            check(env["NETBENCH_IMAGE_PULL_POLICY"] == "Always", "worker pull policy")
            check(env["NETBENCH_SWEEP_NAMESPACES"] == "bench-a,bench-b", "sweep namespaces env")
            check(env["NETBENCH_WATCH_NAMESPACES"] == "bench-a,bench-b,bench-system", "watch namespaces env")
            check(env["NETBENCH_OFFLOAD_NAMESPACES"] == "*", "offload namespaces env")
            check(env["NETBENCH_HOST_NETWORK_NAMESPACES"] == "bench-a", "hostNetwork namespaces env")
            check(env["NETBENCH_SWEEP_TARGETS"] == "bench-a=ingress/ingress-nginx-controller", "sweep targets env")
            check(env["NETBENCH_USAGE_TARGETS"] == "bench-a=gateway-system/envoy-*", "usage targets env")
            check(env["NETBENCH_OFFLOAD_INTERFACES"] == "vxlan.calico,nbe-*", "offload interfaces env")
            check(env["NETBENCH_OFFLOAD_FEATURES"] == "tx-checksumming", "offload features env")
            check(env["NETBENCH_OFFLOAD_NODE_SELECTOR"] == "netbench.io/offload=true", "offload node selector env")
            check(env["NETBENCH_WORKER_START_TIMEOUT"] == "30" and env["RUST_LOG"] == "debug", "timeouts/log")
            check(env["NETBENCH_MAX_TOTAL_CONNECTIONS"] == "2000000" and env["NETBENCH_MAX_RUNS_PER_NAMESPACE"] == "1",
                  f"caps env {env['NETBENCH_MAX_TOTAL_CONNECTIONS']} {env['NETBENCH_MAX_RUNS_PER_NAMESPACE']}")
            check(env["NETBENCH_ALLOWED_TARGETS"] == "10.0.0.0/8,*.svc.cluster.local"
                  and env["NETBENCH_DENY_API_SERVER"] == "false", "targets env")
            check(spec["nodeSelector"] == {"kubernetes.io/os": "linux"}, "nodeSelector")

    check_namespace_and_policy(mode, by, ns, port, dep)

    svc = by.get(("Service", full, ns))
    check(svc is not None and svc["spec"]["ports"][0]["port"] == port and svc["spec"]["ports"][0]["name"] == "http"
          and svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"], "Service")

    # Dashboard
    cm_ns = ns if default else "monitoring"
    cm = by.get(("ConfigMap", f"{full}-dashboard", cm_ns))
    check(cm is not None, f"dashboard ConfigMap in {cm_ns}")
    if cm:
        check(cm["metadata"]["labels"].get("grafana_dashboard") == ("1" if default else "yes"), "sidecar label")
        with open(dashboard_path) as f:
            check(json.loads(cm["data"]["netbench.json"]) == json.load(f), "dashboard JSON differs from dashboards/netbench.json")

    for f in failures:
        print(f"FAIL {mode}: {f}")
    print(f"{mode}: {len(docs)} objects ({', '.join(kinds)}), {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
