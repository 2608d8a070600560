#!/usr/bin/env bash
# The release pipeline without GitHub (what tests/run-all.sh runs; root for buildah):
#   1. actionlint on .github/workflows/*.yml (release.yml, a thin wrapper over .ci/release.sh, and
#      ci.yml, the pull-request checks); every `uses:` pinned to a full commit SHA with its tag in
#      a comment; Rust only from rust-toolchain.toml (the Containerfiles' rust image agrees)
#   2. every .ci/release.sh command the workflow runs, for this machine's architecture:
#      binaries (already built by tests/e2e/setup.sh when dist/bin exists), images, check-images,
#      chart, bundle, cli-archives, changelog, sbom (CycloneDX, amd64 + arm64), checksums, verify
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
for wf in release ci; do [[ -f .github/workflows/$wf.yml ]] || die ".github/workflows/$wf.yml is missing"; done
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
log "PASS actionlint $(cd .github/workflows && echo *.yml) (and it refuses a broken copy)"

# unpinned_uses FILE...: every `uses:` whose reference is not a full commit SHA followed by the
# tag it stands for (`uses: actions/checkout@<40 hex> # v7.0.1`): a tag or a branch can be moved
# to other code after review. Prints the offending lines (none: all pinned).
unpinned_uses() {
    grep -HnE '^[[:space:]]*(-[[:space:]]+)?uses:' "$@" |
        grep -vE 'uses:[[:space:]]+[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}[[:space:]]+#[[:space:]]*v[0-9]+(\.[0-9]+)*[[:space:]]*$' || true
}
bad=$(unpinned_uses .github/workflows/*.yml)
[[ -z $bad ]] || die "actions not pinned to a full commit SHA with its tag in a comment:
$bad"
n=$(cat .github/workflows/*.yml | grep -cE '^[[:space:]]*(-[[:space:]]+)?uses:')
# ... and the check does look: a tag, a short SHA or a missing comment is refused.
probe=$(mktemp)
printf '    steps:\n      - uses: actions/checkout@v7\n      - uses: actions/cache@27d5ce7 # v5.0.5\n      - uses: actions/setup-go@b7ad1dad31e06c5925ef5d2fc7ad053ef454303e\n' >"$probe"
[[ $(unpinned_uses "$probe" | wc -l) -eq 3 ]] || die "the pin check accepts an unpinned uses: $(unpinned_uses "$probe")"
rm -f "$probe"
log "PASS all $n uses: in .github/workflows pinned to a commit SHA (tag in a comment)"

# One Rust version: rust-toolchain.toml's, which rustup (and so the workflows) reads; the
# Containerfiles' from-source stage uses the same rust image.
channel=$(sed -n 's/^channel *= *"\(.*\)"$/\1/p' rust-toolchain.toml)
[[ $channel =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "rust-toolchain.toml pins no Rust version: '$channel'"
for f in deploy/images/*.Containerfile; do
    grep -q "^FROM docker.io/library/rust:$channel-" "$f" || die "$f does not build FROM rust:$channel (rust-toolchain.toml)"
done
if grep -nE 'RUST_VERSION|rustup (toolchain install|default|override set) +[0-9a-z]|toolchain: *[0-9]|rust-toolchain@' .github/workflows/*.yml; then
    die "a workflow names a Rust version of its own: rust-toolchain.toml is the one place"
fi
log "PASS Rust $channel from rust-toolchain.toml in the workflows and the Containerfiles"

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
"$release" sbom
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

# The SBOMs: CycloneDX of each shipped crate, listing the crates it is built from (a direct
# dependency of each: kube for the operator and the CLI, hyper for all three), covering both
# release targets, listed in SHA256SUMS; cargo-cyclonedx's files left nothing in the checkout.
for c in operator loadgen cli; do
    f=dist/sbom/netbench-$c.cdx.json
    [[ -s $f ]] || die "$f missing"
    want='["hyper"]'
    [[ $c != loadgen ]] && want='["hyper","kube"]'
    jq -e --arg c "$c" --arg version "$version" --argjson want "$want" '
        .bomFormat == "CycloneDX" and .specVersion == "1.5"
        and .metadata.component.name == $c and .metadata.component.version == $version
        and ([.components[].name] as $names | $want | all(. as $w | $names | any(. == $w)))
        and ([.components[] | select(.name == "kube" or .name == "hyper") | .purl | startswith("pkg:cargo/")] | all)
        and ([.metadata.properties[] | select(.name == "cdx:rustc:sbom:target:triple") | .value] | sort
             == ["aarch64-unknown-linux-gnu", "x86_64-unknown-linux-gnu"])
    ' "$f" >/dev/null || die "$f is not the SBOM of $c $version with $want for both targets"
    grep -q " sbom/netbench-$c.cdx.json$" dist/SHA256SUMS || die "SHA256SUMS does not list $f"
done
leftovers=$(git status --porcelain --ignored | grep -F '.release-sbom-' || true)
[[ -z $leftovers ]] || die "sbom left files in the checkout: $leftovers"
log "PASS SBOMs: $(cd dist/sbom && for f in *.cdx.json; do printf '%s (%s components) ' "$f" "$(jq '.components | length' "$f")"; done)"

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
