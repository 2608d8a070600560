#!/usr/bin/env python3
"""The API server's view of one bench/operator-scale.sh row: requests by verb and resource
during the row, and their mean latency, from the metrics NB_SCALE_METRICS_DIR kept.

    bench/api-by-resource.py DIR ROW [BENCHMARKS]
        e.g. bench/api-by-resource.py /tmp/scale-metrics b20 20

Every client's requests count in the first table (the operator's, kwok's, the scheduler's, the
kubelets', the namespace controller's); the second is the operator's own, as it counted them
(netbench_kube_requests_total in its /metrics), per benchmark when BENCHMARKS is given.
"""
import re
import sys


def parse(path):
    out = {}
    for line in open(path):
        m = re.match(r'([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)', line)
        if m:
            out[(m.group(1), m.group(2) or '')] = float(m.group(3))
    return out


def label(labels, key):
    m = re.search(key + r'="([^"]*)"', labels)
    return m.group(1) if m else ''


def main():
    directory, row = sys.argv[1], sys.argv[2]
    before = parse(f"{directory}/{row}.apiserver.before.prom")
    after = parse(f"{directory}/{row}.apiserver.after.prom")
    rows = {}
    for (name, labels), value in after.items():
        delta = value - before.get((name, labels), 0.0)
        if delta <= 0:
            continue
        key = (label(labels, 'verb'), label(labels, 'resource'), label(labels, 'subresource'))
        entry = rows.setdefault(key, [0.0, 0.0, 0.0])
        if name == 'apiserver_request_total':
            entry[0] += delta
        elif name == 'apiserver_request_duration_seconds_sum':
            entry[1] += delta
        elif name == 'apiserver_request_duration_seconds_count':
            entry[2] += delta
    print(f"| verb | resource | requests | mean latency (ms) |\n| --- | --- | --- | --- |")
    for (verb, resource, sub), (count, total, timed) in sorted(rows.items(), key=lambda r: -r[1][0]):
        if count < 1:
            continue
        what = f"{resource}/{sub}" if sub else resource
        mean = f"{1000 * total / timed:.1f}" if timed else "-"
        print(f"| {verb} | {what} | {count:.0f} | {mean} |")
    operator(directory, row, float(sys.argv[3]) if len(sys.argv) > 3 else None)
    scheduler(directory, row)


def operator(directory, row, benchmarks):
    """The operator's own requests during the row, by verb and resource."""
    before = parse(f"{directory}/{row}.before.prom")
    after = parse(f"{directory}/{row}.after.prom")
    rows = []
    for (name, labels), value in after.items():
        if name != 'netbench_kube_requests_total':
            continue
        delta = value - before.get((name, labels), 0.0)
        if delta > 0:
            rows.append((delta, label(labels, 'verb'), label(labels, 'resource')))
    if not rows:
        return
    total = sum(r[0] for r in rows)
    per = f" | per benchmark" if benchmarks else ""
    print(f"\nThe operator's own requests ({total:.0f}):\n\n| verb | resource | requests{per} |")
    print("| --- | --- | --- |" + (" --- |" if benchmarks else ""))
    for count, verb, resource in sorted(rows, reverse=True):
        share = f" | {count / benchmarks:.2f}" if benchmarks else ""
        print(f"| {verb} | {resource} | {count:.0f}{share} |")
    if benchmarks:
        print(f"| all | | {total:.0f} | {total / benchmarks:.2f} |")


def scheduler(directory, row):
    """How long the scheduler's requests waited in its own client-side rate limiter (its
    --kube-api-qps and --kube-api-burst) during the row: the longest wait bounds how late the
    last pod was bound for that reason alone."""
    try:
        before = parse(f"{directory}/{row}.scheduler.before.prom")
        after = parse(f"{directory}/{row}.scheduler.after.prom")
    except FileNotFoundError:
        return
    name = 'rest_client_rate_limiter_duration_seconds'
    delta = {k: v - before.get(k, 0.0) for k, v in after.items() if k[0].startswith(name)}
    count = sum(v for (n, _), v in delta.items() if n == name + '_count')
    total = sum(v for (n, _), v in delta.items() if n == name + '_sum')
    if count < 1:
        print("\nThe scheduler's rate limiter: no request in this row")
        return
    # The longest wait lies in the first bucket that holds every request.
    buckets = {}
    for (n, labels), v in delta.items():
        if n == name + '_bucket':
            le = label(labels, 'le')
            buckets[le] = buckets.get(le, 0.0) + v
    bounds = sorted((float(le), v) for le, v in buckets.items() if le != '+Inf')
    longest = next((le for le, v in bounds if v >= count), float('inf'))
    print(f"\nThe scheduler's rate limiter: {count:.0f} requests waited {total:.2f} s in all, "
          f"{1000 * total / count:.0f} ms mean, the longest at most {longest:g} s")


if __name__ == '__main__':
    main()
