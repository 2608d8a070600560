#!/usr/bin/env bash
# One command for the main job: bring the cluster up, deploy the in-cluster nginx target, and -
# when the operator parts exist - import the operator/loadgen images, install the CRDs and the
# operator, apply an example benchmark, wait for it, and print `kubectl get ingressbenchmark`.
#
#   demo.sh [--netbench-images] [--example FILE] [--timeout SECONDS]
#
# --netbench-images: import the operator and loadgen images .ci/release.sh built into dist/images/
#   (images.sh import_netbench_images). CRDs come from crds/manifests/*.yaml, the operator
#   from deploy/*.yaml, both applied only if present. Without --example it stops after the
#   target is serving. The cluster stays up; tear it down with down.sh.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$NB_CLUSTER_DIR/images.sh"
need_root

repo=$(cd "$NB_CLUSTER_DIR/../.." && pwd)
netbench_images=false example= timeout=600
while (($#)); do
    case $1 in
        --netbench-images)
            netbench_images=true
            shift
            continue
            ;;
        --example) example=$2 ;;
        --timeout) timeout=$2 ;;
        *) die "unknown argument $1 (see the header of $0)" ;;
    esac
    shift 2
done

"$NB_CLUSTER_DIR/up.sh" >"$NB_RUN.env" || die "up.sh failed"
cat "$NB_RUN.env"
rm -f "$NB_RUN.env"

log "deploying the nginx target (Service nginx-target.netbench-target:80)"
kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: netbench-target}
---
$(nginx_yaml nginx-target netbench-target 1 80)
EOF
kc -n netbench-target rollout status deployment/nginx-target --timeout=180s

if $netbench_images; then import_netbench_images; fi
if compgen -G "$repo/crds/manifests/*.yaml" >/dev/null; then
    log "installing CRDs"
    kc apply -f "$repo/crds/manifests/"
    established 60 -f "$repo/crds/manifests/"
fi
if compgen -G "$repo/deploy/*.yaml" >/dev/null; then
    log "installing the operator"
    kc apply -f "$repo/deploy/"
fi
[[ -n $example ]] || {
    log "no --example given: cluster and target ready"
    exit 0
}

kc apply -f "$example"
name=$(kc get -f "$example" -o jsonpath='{.metadata.name}')
ns=$(kc get -f "$example" -o jsonpath='{.metadata.namespace}')
log "waiting up to ${timeout}s for ingressbenchmark $ns/$name to finish"
deadline=$((SECONDS + timeout))
while ((SECONDS < deadline)); do
    phase=$(kc -n "$ns" get ingressbenchmark "$name" -o jsonpath='{.status.phase}' 2>/dev/null)
    [[ $phase == Succeeded || $phase == Failed ]] && break
    sleep 5
done
kc get ingressbenchmark -A
[[ $phase == Succeeded ]] || die "benchmark ended in phase '${phase:-none}'"
