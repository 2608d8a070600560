#!/usr/bin/env python3
"""Where one bench/operator-scale.sh row's reconciles spent their time, step by step, from the
operator's /metrics that NB_SCALE_METRICS_DIR kept before and after the row.

    bench/reconcile-steps.py DIR ROW
        e.g. bench/reconcile-steps.py /tmp/scale-metrics b200

For each kind and step of netbench_reconcile_step_duration_seconds (docs/scale.md, "What the
reconcile histogram covers"): how many times it ran during the row, its mean, and how many of
those took over 100 ms; then the whole reconciles (netbench_reconcile_duration_seconds: how long
each held its object) and their work (netbench_reconcile_work_duration_seconds: including what
went on behind the reconcile past its grace) the same way, with the bucket the slowest fell in.
"""
import re
import sys

LINE = re.compile(r'([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)')


def parse(path):
    out = {}
    for line in open(path):
        m = LINE.match(line)
        if m:
            out[(m.group(1), m.group(2) or '')] = float(m.group(3))
    return out


def labels_of(text):
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


def delta(before, after, name):
    """{labels without le: {'sum', 'count', 'buckets': {le: count}}} of the row."""
    series = {}
    for (metric, text), value in after.items():
        if not metric.startswith(name):
            continue
        change = value - before.get((metric, text), 0.0)
        labels = labels_of(text)
        le = labels.pop('le', None)
        key = tuple(sorted(labels.items()))
        entry = series.setdefault(key, {'sum': 0.0, 'count': 0.0, 'buckets': {}})
        if metric == name + '_sum':
            entry['sum'] = change
        elif metric == name + '_count':
            entry['count'] = change
        elif metric == name + '_bucket' and le is not None:
            entry['buckets'][float(le)] = change
    return {k: v for k, v in series.items() if v['count'] > 0}


def over(entry, limit):
    """How many observations exceeded `limit` (a bucket bound)."""
    return entry['count'] - entry['buckets'].get(limit, entry['count'])


def slowest_bucket(entry):
    """The bounds of the highest bucket any observation fell in."""
    bounds = sorted(entry['buckets'])
    below = 0.0
    for lower, upper in zip([0.0] + bounds, bounds):
        if entry['buckets'][upper] >= entry['count']:
            return lower, upper
        below = upper
    return below, float('inf')


def show(title, series, key_name):
    print(title)
    print(f"{'kind':<17} {key_name:<26} {'count':>7} {'mean ms':>9} {'> 100 ms':>9} {'slowest in (ms)':>17}")
    for key, entry in sorted(series.items(), key=lambda kv: -kv[1]['sum']):
        labels = dict(key)
        low, high = slowest_bucket(entry)
        print(f"{labels.get('kind', ''):<17} {labels.get(key_name, '(whole)'):<26} {entry['count']:>7.0f} "
              f"{1000 * entry['sum'] / entry['count']:>9.1f} {over(entry, 0.1):>9.0f} "
              f"{f'{1000 * low:g}-{1000 * high:g}':>17}")
    print()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    directory, row = sys.argv[1], sys.argv[2]
    before = parse(f"{directory}/{row}.before.prom")
    after = parse(f"{directory}/{row}.after.prom")
    show("reconcile steps (netbench_reconcile_step_duration_seconds)",
         delta(before, after, 'netbench_reconcile_step_duration_seconds'), 'step')
    show("whole reconciles, the time each held its object (netbench_reconcile_duration_seconds)",
         delta(before, after, 'netbench_reconcile_duration_seconds'), 'step')
    show("their work, wherever it ran (netbench_reconcile_work_duration_seconds)",
         delta(before, after, 'netbench_reconcile_work_duration_seconds'), 'step')


if __name__ == '__main__':
    main()
