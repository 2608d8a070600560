#!/usr/bin/env bash
# Check the generated CRDs and the example benchmarks against the real API server: every
# crds/manifests/*.yaml must be accepted and become Established (this is where CEL cost limits
# and schema errors show up), and every deploy/examples/*.yaml must pass a server-side dry run.
# Brings the cluster up if needed (and leaves it up). Exit non-zero on the first failure.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root
repo=$(cd "$NB_CLUSTER_DIR/../.." && pwd)

"$NB_CLUSTER_DIR/up.sh" >/dev/null || die "up.sh failed"
compgen -G "$repo/crds/manifests/*.yaml" >/dev/null || die "no CRDs in crds/manifests/"

failed=0
for crd in "$repo"/crds/manifests/*.yaml; do
    if out=$(kc apply -f "$crd" 2>&1) && kc wait --for condition=established --timeout=30s -f "$crd" >/dev/null; then
        echo "ok   CRD ${crd#"$repo"/}"
    else
        echo "FAIL CRD ${crd#"$repo"/}:"
        sed 's/^/     /' <<<"$out"
        failed=1
    fi
done
for ex in "$repo"/deploy/examples/*.yaml; do
    [[ -e $ex ]] || continue
    # Examples name their namespace; create it so the dry run checks the object itself.
    for ns in $(sed -n 's/^  namespace: *//p' "$ex" | sort -u); do
        kc create namespace "$ns" --dry-run=client -o yaml | kc apply -f - >/dev/null
    done
    if out=$(kc apply --dry-run=server -f "$ex" 2>&1); then
        echo "ok   example ${ex#"$repo"/}"
    else
        echo "FAIL example ${ex#"$repo"/}:"
        sed 's/^/     /' <<<"$out"
        failed=1
    fi
done
exit $failed
