#!/usr/bin/env bash
# The main job in one command (as root, on a fresh machine): build netbench from this checkout,
# bring up the local Kubernetes cluster (tests/cluster), install the CRDs and the operator,
# run deploy/examples/ingress-simple.yaml against the target that ships with the project
# (deploy/examples/target.yaml, in namespace default), and print the result.
#   tests/demo.sh [EXAMPLE.yaml]      the cluster stays up; tests/cluster/down.sh removes it
#   e.g. tests/demo.sh deploy/examples/egress-pod-to-pod.yaml
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
example=${1:-$repo/deploy/examples/ingress-simple.yaml}
"$repo/tests/install-deps.sh"
env_lines=$("$repo/tests/e2e/setup.sh" --no-traefik)
eval "$env_lines"
# The shipped target, where ingress-simple.yaml looks for it (other examples ignore it).
kubectl -n default apply -f "$repo/deploy/examples/target.yaml"
kubectl -n default rollout status deployment/netbench-target --timeout=120s
kind=$(sed -n 's/^kind: *//p' "$example" | head -1)
name=$(kubectl create --dry-run=client -o jsonpath='{.metadata.name}' -f "$example")
kubectl delete -f "$example" --ignore-not-found --wait=true >/dev/null
kubectl apply -f "$example"
echo "waiting for $kind/$name (kubectl get $kind -w shows the phases)"
for _ in $(seq 1 600); do
    phase=$(kubectl get -f "$example" -o jsonpath='{.status.phase}' 2>/dev/null || true)
    [[ $phase == Succeeded || $phase == Failed ]] && break
    sleep 1
done
kubectl get "$kind"
# The result as the user reads it: the status block (steps for ingress, cases for egress).
kubectl get -f "$example" -o yaml | sed -n '/^status:/,$p'
printf '\nThe cluster stays up:\n%s\n' "$env_lines"
[[ $phase == Succeeded ]]
