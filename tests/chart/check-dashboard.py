#!/usr/bin/env python3
"""Check the Grafana dashboard's structure and every PromQL expression in it.

  check-dashboard.py DASHBOARD.json --static
      structure (ids, grid, datasource, variables) and PromQL syntax via `promtool check rules`
  check-dashboard.py DASHBOARD.json --prometheus URL --start UNIX --end UNIX \
        [--var NAME=VALUE]... [--may-be-empty REGEX=REASON]...
      runs every expression (panels and variables) as a range query over [start, end] against a
      real Prometheus: an error fails; no data fails unless the expression mentions a metric
      matching a --may-be-empty REGEX, which is then reported with its REASON (never as passing
      silently). Exit 0 only if nothing failed.
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

# Grafana's built-in interval variables, replaced by what a 2 s scrape interval would give.
BUILTINS = {"__rate_interval": "30s", "__interval": "10s", "__range": "5m"}
METRIC = re.compile(r"\b(netbench_[a-z0-9_]+)\b")


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def prometheus_annotations(dash):
    """The annotation queries on Prometheus (Grafana's built-in one has no expression)."""
    return [a for a in dash.get("annotations", {}).get("list", []) if "expr" in a]


def expressions(dash):
    """(where, expr) for every panel target, annotation query and query variable."""
    out = []
    for p in walk_panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            out.append((f'panel {p["id"]} "{p["title"]}" {t.get("refId", "?")}', t["expr"]))
    for a in prometheus_annotations(dash):
        out.append((f'annotation "{a["name"]}"', a["expr"]))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*", q)
        if not m:
            sys.exit(f"variable {v['name']}: only label_values(SELECTOR, LABEL) is supported: {q}")
        out.append((f'variable ${v["name"]}', f"group by ({m.group(2)}) ({m.group(1)})"))
    return out


def substitute(expr, values):
    def repl(m):
        name = m.group(1) or m.group(2)
        if name in values:
            return values[name]
        if name in BUILTINS:
            return BUILTINS[name]
        sys.exit(f"no value for variable ${name} in: {expr}")

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)


def check_structure(dash):
    errors = []
    ids = [p["id"] for p in walk_panels(dash["panels"])]
    if len(ids) != len(set(ids)):
        errors.append(f"duplicate panel ids: {ids}")
    names = [v["name"] for v in dash["templating"]["list"]]
    for want in ("datasource", "namespace", "benchmark"):
        if want not in names:
            errors.append(f"missing variable ${want}")
    for a in prometheus_annotations(dash):
        if a.get("datasource", {}).get("uid") != "${datasource}":
            errors.append(f'annotation "{a["name"]}": not on ${{datasource}}')
        # A mark of one benchmark must not land on another's dashboard.
        if "$namespace" not in a["expr"] or "$benchmark" not in a["expr"]:
            errors.append(f'annotation "{a["name"]}": not filtered by $namespace/$benchmark')
    for p in walk_panels(dash["panels"]):
        g = p.get("gridPos", {})
        if not all(k in g for k in "hwxy") or g["x"] + g["w"] > 24:
            errors.append(f'panel {p["id"]}: bad gridPos {g}')
        if p["type"] == "row":
            continue
        if not p.get("targets"):
            errors.append(f'panel {p["id"]} "{p["title"]}": no queries')
        for t in p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                errors.append(f'panel {p["id"]}: target not on ${{datasource}}')
            # Benchmark series must follow the namespace/benchmark selectors.
            for m in METRIC.findall(t["expr"]):
                if m.startswith(("netbench_ingress_", "netbench_egress_", "netbench_live_")) and (
                    "$namespace" not in t["expr"] or "$benchmark" not in t["expr"]
                ):
                    errors.append(f'panel {p["id"]}: {m} not filtered by $namespace/$benchmark')
    return errors


def check_syntax(exprs):
    """Parse every expression with promtool (as recording rules). Returns error lines."""
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr{i}", "expr": e} for i, (_, e) in enumerate(exprs)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(rules, f)  # JSON is YAML
        f.flush()
        try:
            r = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
        except FileNotFoundError:
            sys.exit("promtool not found (apt-get install -y prometheus)")
    if r.returncode != 0:
        return [r.stdout + r.stderr]
    return []


def query_range(url, expr, start, end, step):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=30) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        body = json.load(e)
    if body.get("status") != "success":
        return None, f'{body.get("errorType")}: {body.get("error")}'
    return body["data"]["result"], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dashboard")
    ap.add_argument("--static", action="store_true")
    ap.add_argument("--prometheus")
    ap.add_argument("--start", type=float)
    ap.add_argument("--end", type=float)
    ap.add_argument("--step", default="2")
    ap.add_argument("--var", action="append", default=[])
    ap.add_argument("--may-be-empty", action="append", default=[])
    a = ap.parse_args()
    with open(a.dashboard) as f:
        dash = json.load(f)
    values = dict(v.split("=", 1) for v in a.var)
    values.setdefault("datasource", "prometheus")
    # The node-pair panel's case picker: every case unless one is chosen.
    values.setdefault("pair_case", ".*")
    if a.static:
        values.setdefault("namespace", ".*")
        values.setdefault("benchmark", ".*")
    exprs = [(w, substitute(e, values)) for w, e in expressions(dash)]
    failed = 0
    if a.static:
        for e in check_structure(dash) + check_syntax(exprs):
            print(f"FAIL {e}")
            failed += 1
        print(f"{len(exprs)} expressions, {failed} problem(s)")
        return 1 if failed else 0
    if not (a.prometheus and a.start and a.end):
        sys.exit("--prometheus, --start and --end are required (or --static)")
    empties = [tuple(m.split("=", 1)) for m in a.may_be_empty]
    counts = {"data": 0, "empty-explained": 0, "fail": 0}
    for where, expr in exprs:
        result, err = query_range(a.prometheus, expr, a.start, a.end, a.step)
        if err:
            print(f"FAIL   {where}: query error {err}\n       {expr}")
            counts["fail"] += 1
        elif result:
            n = sum(len(s["values"]) for s in result)
            print(f"DATA   {where}: {len(result)} series, {n} samples")
            counts["data"] += 1
        else:
            reasons = [r for rx, r in empties if any(re.fullmatch(rx, m) for m in METRIC.findall(expr))]
            if reasons:
                print(f"EMPTY  {where}: no data, expected: {reasons[0]}\n       {expr}")
                counts["empty-explained"] += 1
            else:
                print(f"FAIL   {where}: no data\n       {expr}")
                counts["fail"] += 1
    print(f'{len(exprs)} expressions: {counts["data"]} with data, '
          f'{counts["empty-explained"]} empty for a stated reason, {counts["fail"]} failed')
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
