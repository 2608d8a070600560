#!/usr/bin/env python3
"""The API server's view of one bench/operator-scale.sh row: requests by verb and resource
during the row, and their mean latency, from the metrics NB_SCALE_METRICS_DIR kept.

    bench/api-by-resource.py DIR ROW        e.g. bench/api-by-resource.py /tmp/scale-metrics b20

Every client's requests count (the operator's, kwok's, the scheduler's, the kubelets'); the
resources only the operator touches (configmaps, tokenreviews, pods create and get, the
benchmarks and their status, benchmarkresults) are its own.
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


if __name__ == '__main__':
    main()
