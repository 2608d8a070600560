#!/usr/bin/env bash
# The release pipeline without GitHub (what tests/run-all.sh runs; root for buildah):
#   1. actionlint on .github/workflows/*.yml (the workflow is a thin wrapper over .ci/release.sh)
#   2. every .ci/release.sh command the workflow runs, for this machine's architecture:
#      binaries (already built by tests/e2e/setup.sh when dist/bin exists), images, check-images,
#      chart, bundle, cli-archives, changelog, checksums, verify
#   3. publish-images into a local OCI layout (the registry push's offline twin): one index per
#      image, naming the tag and the architecture
#   4. reproducible images: building them again from the same binaries gives the same image IDs
#   5. a release build for an architecture this machine cannot build fails with a clear message
#      (no silent half release)
# Exit 0 = everything passed. Needs: buildah, jq, python3-yaml, helm and actionlint (built by
# tests/cluster/build.sh --with-tools).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$repo/tests/chart/lib.sh"
cd "$repo"
[[ $(id -u) -eq 0 ]] || die "must run as root (buildah)"
need_cmds buildah jq python3

export NB_HELM
NB_HELM=$(helm_bin)
release=.ci/release.sh
case $(uname -m) in x86_64) host=amd64 ;; aarch64) host=arm64 ;; *) die "unsupported machine $(uname -m)" ;; esac
version=$("$release" version)

log "== 1. actionlint"
actionlint=$(actionlint_bin)
"$actionlint" -color=false .github/workflows/*.yml || die "actionlint found problems"
# ... and it does look: a reference to a step that does not exist is an error.
broken=$(mktemp -d)
mkdir -p "$broken/.github/workflows"
sed 's/steps\.names\.outputs\.prefix/steps.nosuchstep.outputs.prefix/' .github/workflows/release.yml \
    >"$broken/.github/workflows/release.yml"
if (cd "$broken" && "$actionlint" -color=false .github/workflows/release.yml >/dev/null 2>&1); then
    die "actionlint accepted a workflow that names a step that does not exist"
fi
rm -rf "$broken"
log "PASS actionlint .github/workflows/*.yml (and it refuses a broken copy)"

log "== 2. .ci/release.sh for $host"
if [[ ! -x dist/bin/linux-$host/netbench-operator || ! -x dist/bin/linux-$host/kubectl-netbench ]]; then
    NB_PROFILE=${NB_PROFILE:-image} "$release" binaries host
fi
"$release" images host
"$release" check-images host
NB_SOURCE_URL=https://github.com/example/netbench "$release" chart
"$release" bundle
"$release" cli-archives host
"$release" changelog
"$release" checksums
"$release" verify host
grep -q "^# netbench v$version" dist/CHANGELOG.md || die "changelog has no heading for v$version"
[[ $(grep -c '^- ' dist/CHANGELOG.md) -gt 0 ]] || die "changelog lists no commit"
# The packaged chart lints on its own and renders the release's images.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NB_HELM" lint --strict "dist/netbench-$version.tgz" >/dev/null || die "helm lint of the package failed"
rendered=$("$NB_HELM" template netbench "dist/netbench-$version.tgz" -n netbench-system)
grep -Eq "image: \"?localhost/netbench/operator:$version\"?$" <<<"$rendered" || die "packaged chart does not deploy localhost/netbench/operator:$version"
"$NB_HELM" show chart "dist/netbench-$version.tgz" | grep -qx -- "- https://github.com/example/netbench" ||
    die "packaged chart does not name its sources"
log "PASS release artefacts for $host: $(find dist -maxdepth 1 -type f -printf '%f ')"

log "== 3. publish-images into a local OCI layout"
"$release" publish-images "oci:$tmp/oci"
for img in operator loadgen; do
    jq -e --arg ref "$img-$version" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $ref)' \
        "$tmp/oci/index.json" >/dev/null || die "OCI layout has no $img-$version: $(cat "$tmp/oci/index.json")"
done
# Each published name is a manifest list whose entries carry their platform.
list=$(jq -r --arg ref "operator-$version" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $ref) | .digest' "$tmp/oci/index.json")
jq -e --arg arch "$host" '.manifests | any(.platform.architecture == $arch and .platform.os == "linux")' \
    "$tmp/oci/blobs/sha256/${list#sha256:}" >/dev/null || die "operator manifest list lacks linux/$host"
log "PASS publish-images: manifest lists for operator and loadgen ($host) in an OCI layout"

log "== 4. the same binaries give the same images"
ids() {
    local img
    for img in operator loadgen; do
        buildah images --noheading --no-trunc --format '{{.ID}}' "localhost/netbench/$img:$version-$host"
    done
}
before=$(ids)
for img in operator loadgen; do buildah rmi -f "localhost/netbench/$img:$version-$host" >/dev/null; done
"$release" images host
after=$(ids)
[[ -n $before && $before == "$after" ]] || die "image IDs differ between two builds of the same binaries: $before / $after"
log "PASS reproducible images: $(tr '\n' ' ' <<<"$after")"

log "== 4b. the build context leaves out what the images never need"
# .containerignore (Podman, Buildah; .dockerignore links to it for Docker): a context copied
# whole into a scratch image holds the sources and dist/bin, never .git, target or the rest of
# dist (a clean clone with CARGO_TARGET_DIR elsewhere has no target/; a developer's has GBs).
[[ -L .dockerignore && $(readlink .dockerignore) == .containerignore ]] ||
    die ".dockerignore is not a link to .containerignore"
probe=$(mktemp -d)
made=()
for d in target dist/images; do
    [[ -d $d ]] || { mkdir -p "$d" && made+=("$d"); }
    touch "$d/.netbench-probe"
done
printf 'FROM scratch\nCOPY . /ctx/\n' >"$probe/Containerfile"
ctx_ref=localhost/netbench-context-probe
buildah build --quiet --network none -f "$probe/Containerfile" -t "$ctx_ref" . >/dev/null
ctr=$(buildah from "$ctx_ref")
mnt=$(buildah mount "$ctr")
for kept in Cargo.toml operator/src/main.rs .ci/release.sh deploy/images/rootfs/etc/passwd \
    "dist/bin/linux-$host/netbench-operator"; do
    [[ -e $mnt/ctx/$kept ]] || die "the build context lacks $kept"
done
for left in .git target dist/images tests/cluster/.state; do
    [[ ! -e $mnt/ctx/$left ]] || die "the build context carries $left"
done
buildah umount "$ctr" >/dev/null
buildah rm "$ctr" >/dev/null
buildah rmi "$ctx_ref" >/dev/null
rm -rf "$probe" target/.netbench-probe dist/images/.netbench-probe "${made[@]}"
log "PASS build context: sources and dist/bin only"

log "== 5. a missing architecture fails clearly"
other=arm64
[[ $host == arm64 ]] && other=amd64
if out=$(NB_PROFILE=image "$release" binaries "$other" 2>&1); then
    log "NOTE binaries $other built here (its Rust target is installed)"
else
    grep -q "needs the Rust target" <<<"$out" || die "binaries $other failed without saying why: $out"
    log "PASS binaries $other refuses: $(tail -1 <<<"$out")"
fi
log "all release checks passed"
