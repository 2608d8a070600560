#!/usr/bin/env bash
# Builds a netbench release into dist/. The GitHub workflow (.github/workflows/release.yml) is a
# thin wrapper over these commands, and CI (tests/run-all.sh) runs them for the host's
# architecture, so what a tag publishes is what CI tested.
#
#   .ci/release.sh version                 prints the version (Cargo.toml's, which the chart's equals)
#   .ci/release.sh arch ARCH               prints ARCH as the builds name it (amd64, arm64; host =
#                                           this machine's): dist/bin/linux-ARCH/ holds its binaries
#   .ci/release.sh binaries ARCH [BIN...]  static binaries -> dist/bin/linux-ARCH/
#                                           (BIN: netbench-operator netbench-loadgen netbench
#                                           kubectl-netbench; default all four; also
#                                           netbench-sim, never shipped: the bench's workers)
#   .ci/release.sh images ARCH...          OCI images from those binaries with buildah (the
#                                           Containerfiles' offline path: FROM scratch, --network
#                                           none, no registry) -> dist/images/*.tar (docker-archive,
#                                           for ctr/k3s/kind/docker load) and one OCI layout
#                                           dist/images/oci/ holding every architecture
#   .ci/release.sh check-images ARCH...    inspects those images: user, entrypoint, OCI labels,
#                                           architecture, files (no shell, nothing but ours)
#   .ci/release.sh publish-images DEST     pushes the multi-arch images: DEST is a registry prefix
#                                           (docker://ghcr.io/OWNER/netbench; the digests go to
#                                           dist/images/IMAGE.digest for provenance) or oci:DIR
#                                           (a local OCI layout, what CI checks)
#   .ci/release.sh chart                   helm lint --strict + helm package -> dist/netbench-VERSION.tgz
#   .ci/release.sh bundle                  dist/netbench-VERSION.yaml: CRDs + operator for
#                                           `kubectl apply -f` (images from NB_IMAGE_PREFIX)
#   .ci/release.sh cli-archives ARCH...    dist/netbench_linux_ARCH.tar.gz (netbench,
#                                           kubectl-netbench, LICENSE, README.md) + dist/netbench.krew.yaml
#   .ci/release.sh changelog               dist/CHANGELOG.md: commits since the previous tag
#   .ci/release.sh sbom [ARCH...]          CycloneDX SBOMs (cargo-cyclonedx) of the shipped crates:
#                                           dist/sbom/netbench-{operator,loadgen,cli}.cdx.json, each
#                                           the union of the dependencies the linux ARCH builds use
#                                           (default amd64 arm64); needs no build
#   .ci/release.sh sbom-tool               installs cargo-cyclonedx at the pinned version into
#                                           NB_TOOLS (once) and prints its path
#   .ci/release.sh checksums               dist/SHA256SUMS over every file above (image tars and
#                                           SBOMs too)
#   .ci/release.sh all ARCH...             all of the above but publish-images and sbom-tool
#   .ci/release.sh verify ARCH...          checks dist/: static binaries, images, archive contents,
#                                           krew manifest, chart package, checksums
#
# ARCH: amd64, arm64 or host (this machine's). Environment:
#   NB_PROFILE       cargo profile: release (default; fat LTO) or image (CI: no LTO, faster)
#   NB_IMAGE_PREFIX  image names are PREFIX/operator and PREFIX/loadgen (default: localhost/netbench)
#   NB_RELEASE_URL   where the release's files are downloadable (for the krew manifest; default
#                    https://github.com/$GITHUB_REPOSITORY/releases/download/vVERSION)
#   NB_SOURCE_URL    the repository URL for the images' org.opencontainers.image.source label
#   NB_HELM          helm binary (default: helm on PATH)
#   NB_TOOLS         where sbom-tool installs cargo-cyclonedx (default: /var/cache/netbench/tools,
#                    outside the clone)
#   CARGO_TARGET_DIR as cargo uses it
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

DIST=$repo/dist
PROFILE=${NB_PROFILE:-release}
IMAGE_PREFIX=${NB_IMAGE_PREFIX:-localhost/netbench}
HELM=${NB_HELM:-helm}
BINS=(netbench-operator netbench-loadgen netbench kubectl-netbench)
IMAGES=(operator loadgen)
# The crates whose programs a release ships (images and CLI archives), each with an SBOM.
SBOM_CRATES=(operator loadgen cli)
# cargo-cyclonedx, the SBOM generator (crates.io), at one version everywhere: CI, the workflow.
CYCLONEDX_VERSION=0.5.9
TOOLS=${NB_TOOLS:-/var/cache/netbench/tools}

log() { printf '[release %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
    printf '[release] ERROR: %s\n' "$*" >&2
    exit 1
}

# version: the workspace version (Cargo.toml), which the chart's version and appVersion must equal.
version() {
    local v
    v=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml)
    [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "no semver version in Cargo.toml [workspace.package]: '$v'"
    echo "$v"
}
VERSION=$(version)

revision() { git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown; }
source_url() {
    if [[ -n ${NB_SOURCE_URL:-} ]]; then echo "$NB_SOURCE_URL"
    elif [[ -n ${GITHUB_REPOSITORY:-} ]]; then echo "${GITHUB_SERVER_URL:-https://github.com}/$GITHUB_REPOSITORY"
    else echo ""; fi
}

host_arch() {
    case $(uname -m) in
        x86_64) echo amd64 ;;
        aarch64 | arm64) echo arm64 ;;
        *) die "unsupported machine $(uname -m)" ;;
    esac
}
# arch_of ARCH: amd64|arm64 (host resolved).
arch_of() {
    case $1 in
        host) host_arch ;;
        amd64 | arm64) echo "$1" ;;
        *) die "unknown architecture '$1' (amd64, arm64 or host)" ;;
    esac
}
rust_target() {
    case $1 in
        amd64) echo x86_64-unknown-linux-gnu ;;
        arm64) echo aarch64-unknown-linux-gnu ;;
    esac
}
package_of() {
    case $1 in
        netbench-operator) echo operator ;;
        netbench-loadgen) echo loadgen ;;
        netbench | kubectl-netbench) echo cli ;;
        # Not shipped: bench/operator-scale.sh's simulated workers, built as the images' binaries
        # are (so with the crates they share already compiled), fast enough not to take the CPU
        # the operator and API server under test share with it.
        netbench-sim) echo sim ;;
        *) die "unknown binary '$1' (one of ${BINS[*]})" ;;
    esac
}

check_versions() {
    local chart=charts/netbench/Chart.yaml cv av
    cv=$(sed -n 's/^version: *//p' "$chart")
    av=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart")
    [[ $cv == "$VERSION" && $av == "$VERSION" ]] ||
        die "$chart has version $cv / appVersion $av; Cargo.toml says $VERSION: keep them equal"
}

# --- binaries -------------------------------------------------------------------------------

# Static binaries (glibc, crt-static: nothing to load at run time, so a FROM scratch image needs
# no libraries). Cargo names this workspace's sources by relative paths; cargo's home (where the
# crates' sources are) is remapped to /cargo, so the bytes do not depend on where the repository
# was cloned or cargo lives. (The checkout's path stays out of RUSTFLAGS: a flag that differs
# per clone would make cargo rebuild everything in every fresh clone.)
cmd_binaries() {
    (($# >= 1)) || die "usage: binaries ARCH [BIN...]"
    local arch target out bins=("${@:2}") pkgs=() b p flags=() dir
    arch=$(arch_of "$1")
    target=$(rust_target "$arch")
    ((${#bins[@]})) || bins=("${BINS[@]}")
    for b in "${bins[@]}"; do
        p=$(package_of "$b")
        [[ " ${pkgs[*]} " == *" $p "* ]] || pkgs+=("$p")
        flags+=(--bin "$b")
    done
    for p in "${pkgs[@]}"; do flags+=(-p "$p"); done
    if [[ $arch != "$(host_arch)" ]]; then
        grep -qx "$target" <<<"$(rustup target list --installed 2>/dev/null)" ||
            die "cross-building $arch needs the Rust target $target (rustup target add $target) and a linker (CARGO_TARGET_$(tr a-z- A-Z_ <<<"$target")_LINKER)"
    fi
    local rustflags="-C target-feature=+crt-static --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo"
    log "cargo build --profile $PROFILE --target $target ${flags[*]}"
    RUSTFLAGS="$rustflags" cargo build --locked --profile "$PROFILE" --target "$target" "${flags[@]}"
    dir=${CARGO_TARGET_DIR:-$repo/target}/$target/$PROFILE
    [[ $PROFILE == dev ]] && dir=${CARGO_TARGET_DIR:-$repo/target}/$target/debug
    out=$DIST/bin/linux-$arch
    mkdir -p "$out"
    for b in "${bins[@]}"; do
        install -m 0755 "$dir/$b" "$out/$b"
        check_static "$out/$b"
    done
    log "binaries ($PROFILE, $target): $(cd "$out" && ls | tr '\n' ' ')"
}

# check_static FILE: an ELF executable that needs no interpreter and no shared library.
check_static() {
    local desc
    desc=$(file -b "$1")
    [[ $desc == *ELF* && $desc != *"dynamically linked"* && $desc != *interpreter* ]] ||
        die "$1 is not a static executable: $desc"
}

# --- images ---------------------------------------------------------------------------------

image_name() { echo "$IMAGE_PREFIX/$1:$VERSION"; }
# local_ref IMG: buildah's local name of the image (under localhost/, never twice).
local_ref() {
    local name
    name=$(image_name "$1")
    echo "localhost/${name#localhost/}"
}
image_tar() { echo "$DIST/images/netbench-$1_${VERSION}_linux_$2.tar"; }

cmd_images() {
    (($# >= 1)) || die "usage: images ARCH..."
    command -v buildah >/dev/null || die "buildah is missing (apt-get install -y buildah)"
    local a arch img ref id tar
    mkdir -p "$DIST/images"
    for a in "$@"; do
        arch=$(arch_of "$a")
        for img in "${IMAGES[@]}"; do
            [[ -x $DIST/bin/linux-$arch/netbench-$img ]] ||
                die "dist/bin/linux-$arch/netbench-$img missing: run '.ci/release.sh binaries $arch' first"
            ref=$(local_ref "$img")-$arch
            # --timestamp 0: layer and config times are the epoch, so the same binaries always
            # give the same image digest. --network none: nothing can be fetched.
            id=$(buildah build --quiet --network none --timestamp 0 --identity-label=false \
                --platform "linux/$arch" --build-arg BINARIES=dist \
                --build-arg VERSION="$VERSION" --build-arg REVISION="$(revision)" \
                --build-arg SOURCE="$(source_url)" \
                -f "deploy/images/$img.Containerfile" -t "$ref" "$repo")
            tar=$(image_tar "$img" "$arch")
            rm -f "$tar"
            buildah push --quiet "$ref" "docker-archive:$tar:$(image_name "$img")" >/dev/null
            log "image $(image_name "$img") linux/$arch: ${id:0:12} -> ${tar#"$repo"/}"
        done
    done
}

# check_image TAR ARCH IMAGE: the image's config and files are what we ship and nothing else.
check_image() {
    local tar=$1 arch=$2 img=$3 work cfg files want_files entry
    work=$(mktemp -d)
    tar -C "$work" -xf "$tar"
    cfg=$work/$(jq -r '.[0].Config' "$work/manifest.json")
    # (buildah qualifies a short name: netbench/x becomes docker.io/netbench/x)
    local tag
    tag=$(jq -r '.[0].RepoTags[0]' "$work/manifest.json")
    [[ $tag == "$(image_name "$img")" || $tag == "docker.io/$(image_name "$img")" ]] ||
        die "$tar: tag is $tag, want $(image_name "$img")"
    jq -e --arg arch "$arch" '.architecture == $arch and .os == "linux"' "$cfg" >/dev/null ||
        die "$tar: architecture $(jq -r .architecture "$cfg"), want $arch"
    jq -e '.config.User == "65532:65532"' "$cfg" >/dev/null || die "$tar: user $(jq -r .config.User "$cfg"), want 65532:65532"
    entry=$(jq -c .config.Entrypoint "$cfg")
    [[ $entry == "[\"/$img\"]" ]] || die "$tar: entrypoint $entry, want [\"/$img\"]"
    local label
    for label in title description version revision source licenses; do
        jq -e --arg k "org.opencontainers.image.$label" '.config.Labels | has($k)' "$cfg" >/dev/null ||
            die "$tar: no label org.opencontainers.image.$label"
    done
    jq -e --arg v "$VERSION" '.config.Labels["org.opencontainers.image.version"] == $v and
        .config.Labels["org.opencontainers.image.licenses"] == "Apache-2.0"' "$cfg" >/dev/null ||
        die "$tar: version/licenses labels wrong: $(jq -c .config.Labels "$cfg")"
    files=$(jq -r '.[0].Layers[]' "$work/manifest.json" | while read -r layer; do
        tar -tf "$work/$layer"
    done | sed 's|^\./||; s|/$||' | grep -v '^$' | sort -u | tr '\n' ' ')
    want_files="etc etc/group etc/hosts etc/nsswitch.conf etc/passwd $img "
    [[ $img == operator ]] && want_files="etc etc/group etc/hosts etc/nsswitch.conf etc/passwd netbench operator "
    [[ $files == "$want_files" ]] || die "$tar: files are '$files', want '$want_files' (no shell, nothing else)"
    rm -rf "$work"
    log "image $(image_name "$img") linux/$arch: user 65532, entrypoint /$img, OCI labels, files: $files"
}

cmd_check_images() {
    (($# >= 1)) || die "usage: check-images ARCH..."
    local a arch img
    for a in "$@"; do
        arch=$(arch_of "$a")
        for img in "${IMAGES[@]}"; do check_image "$(image_tar "$img" "$arch")" "$arch" "$img"; done
    done
}

# publish-images DEST: one manifest list per image, every architecture built by `images`.
cmd_publish_images() {
    (($# == 1)) || die "usage: publish-images DEST (docker://REGISTRY/PREFIX or oci:DIR)"
    local dest=$1 img list arch ref
    for img in "${IMAGES[@]}"; do
        list=$(local_ref "$img")
        buildah manifest rm "$list" >/dev/null 2>&1 || true
        buildah manifest create "$list" >/dev/null
        for arch in amd64 arm64; do
            ref=$(local_ref "$img")-$arch
            buildah inspect --type image "$ref" >/dev/null 2>&1 || continue
            buildah manifest add "$list" "$ref" >/dev/null
        done
        case $dest in
            docker://*)
                mkdir -p "$DIST/images"
                rm -f "$DIST/images/$img.digest"
                buildah manifest push --all --digestfile "$DIST/images/$img.digest" "$list" "$dest/$img:$VERSION"
                # buildah (1.28 at least) can print an error and exit 0 when the push failed (a
                # registry refusing the credentials, unreachable): the digest is the proof.
                [[ $(cat "$DIST/images/$img.digest" 2>/dev/null) =~ ^sha256:[0-9a-f]{64}$ ]] ||
                    die "pushing $img to $dest failed: buildah wrote no digest"
                ;;
            oci:*) buildah manifest push --all --quiet "$list" "$dest:$img-$VERSION" >/dev/null ;;
            *) die "publish-images: DEST must start with docker:// or oci:" ;;
        esac
        log "published $img:$VERSION ($(buildah manifest inspect "$list" | jq -r '[.manifests[].platform.architecture] | join(", ")')) to $dest"
    done
}

# --- chart, bundle ----------------------------------------------------------------------------

# chart: the package's default images are this release's (NB_IMAGE_PREFIX), so a plain
# `helm install` of the published chart runs the published images.
cmd_chart() {
    check_versions
    mkdir -p "$DIST"
    local work img
    work=$(mktemp -d)
    cp -r charts/netbench "$work/netbench"
    for img in "${IMAGES[@]}"; do
        grep -qx "  repository: localhost/netbench/$img" "$work/netbench/values.yaml" ||
            die "charts/netbench/values.yaml has no line '  repository: localhost/netbench/$img'"
        sed -i "s|^  repository: localhost/netbench/$img\$|  repository: $IMAGE_PREFIX/$img|" "$work/netbench/values.yaml"
    done
    # Where the chart comes from (Artifact Hub and `helm show chart` list it), when known.
    local source
    source=$(source_url)
    if [[ -n $source ]]; then
        printf 'home: %s\nsources:\n  - %s\n' "$source" "$source" >>"$work/netbench/Chart.yaml"
    fi
    "$HELM" lint --strict "$work/netbench" >/dev/null || die "helm lint --strict charts/netbench failed"
    "$HELM" package "$work/netbench" -d "$DIST" >/dev/null
    rm -rf "$work"
    [[ -f $DIST/netbench-$VERSION.tgz ]] || die "helm package did not write dist/netbench-$VERSION.tgz"
    log "chart: dist/netbench-$VERSION.tgz (images $IMAGE_PREFIX/{operator,loadgen}:$VERSION)"
}

# bundle: what `kubectl apply -f` needs on a fresh cluster, in order: the CRDs, the release
# Namespace (Pod Security restricted), the operator with the images of this release.
cmd_bundle() {
    check_versions
    mkdir -p "$DIST"
    local out=$DIST/netbench-$VERSION.yaml
    {
        printf '# netbench %s: CRDs and operator for `kubectl apply --server-side -f`.\n' "$VERSION"
        printf '# Rendered from charts/netbench with default values, namespace netbench-system.\n'
        "$HELM" template netbench charts/netbench --namespace netbench-system \
            --set namespace.create=true \
            --set image.repository="$IMAGE_PREFIX/operator" --set loadgen.repository="$IMAGE_PREFIX/loadgen" \
            --skip-tests
    } >"$out"
    log "bundle: ${out#"$repo"/}"
}

# --- CLI archives ----------------------------------------------------------------------------

release_url() {
    if [[ -n ${NB_RELEASE_URL:-} ]]; then echo "$NB_RELEASE_URL"
    elif [[ -n ${GITHUB_REPOSITORY:-} ]]; then echo "${GITHUB_SERVER_URL:-https://github.com}/$GITHUB_REPOSITORY/releases/download/v$VERSION"
    else echo "https://RELEASE-URL-PLACEHOLDER/netbench/v$VERSION"; fi
}

# reproducible_tgz OUT DIR FILE...: a tar.gz whose bytes depend only on the files' contents.
reproducible_tgz() {
    local out=$1 dir=$2
    shift 2
    tar -C "$dir" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --mode='u+w,go-w' \
        -cf - "$@" | gzip -n -9 >"$out"
}

cmd_cli_archives() {
    (($# >= 1)) || die "usage: cli-archives ARCH..."
    local a arch work tgz sums=() url
    url=$(release_url)
    for a in "$@"; do
        arch=$(arch_of "$a")
        work=$(mktemp -d)
        for b in netbench kubectl-netbench; do
            [[ -x $DIST/bin/linux-$arch/$b ]] || die "dist/bin/linux-$arch/$b missing: run '.ci/release.sh binaries $arch' first"
            install -m 0755 "$DIST/bin/linux-$arch/$b" "$work/$b"
        done
        install -m 0644 LICENSE README.md "$work/"
        tgz=$DIST/netbench_linux_$arch.tar.gz
        reproducible_tgz "$tgz" "$work" LICENSE README.md kubectl-netbench netbench
        rm -rf "$work"
        sums+=("$arch=$(sha256sum "$tgz" | cut -c1-64)")
        log "CLI archive: ${tgz#"$repo"/}"
    done
    # The krew manifest for the archives built here (platforms without an archive are left out).
    python3 - "$repo/cli/krew/netbench.yaml" "$DIST/netbench.krew.yaml" "$VERSION" "$url" "${sums[@]}" <<'EOF'
import sys, yaml
src, out, version, url, *sums = sys.argv[1:]
sums = dict(s.split("=", 1) for s in sums)
m = yaml.safe_load(open(src))
m["spec"]["version"] = "v" + version
m["spec"]["homepage"] = url.rsplit("/releases/", 1)[0] if "/releases/" in url else m["spec"]["homepage"]
platforms = []
for p in m["spec"]["platforms"]:
    sel = p["selector"]["matchLabels"]
    if sel["os"] != "linux" or sel["arch"] not in sums:
        continue
    p["uri"] = f"{url}/netbench_linux_{sel['arch']}.tar.gz"
    p["sha256"] = sums[sel["arch"]]
    platforms.append(p)
m["spec"]["platforms"] = platforms
class Dumper(yaml.SafeDumper):
    pass
Dumper.add_representer(str, lambda d, s: d.represent_scalar(
    "tag:yaml.org,2002:str", s, style="|" if "\n" in s else None))
with open(out, "w") as f:
    f.write(f"# krew plugin manifest of netbench v{version} (generated by .ci/release.sh)\n")
    yaml.dump(m, f, Dumper=Dumper, sort_keys=False)
EOF
    log "krew manifest: dist/netbench.krew.yaml ($url)"
}

# --- SBOM -------------------------------------------------------------------------------------

# sbom_tool: the path of cargo-cyclonedx at CYCLONEDX_VERSION, installed from crates.io
# (--locked: its own Cargo.lock) into TOOLS when missing or at another version.
sbom_tool() {
    local bin=$TOOLS/bin/cargo-cyclonedx
    if [[ ! -x $bin || $("$bin" cyclonedx --version 2>/dev/null) != *" $CYCLONEDX_VERSION" ]]; then
        log "installing cargo-cyclonedx $CYCLONEDX_VERSION into $TOOLS"
        mkdir -p "$TOOLS"
        cargo install --locked --quiet --force cargo-cyclonedx --version "=$CYCLONEDX_VERSION" --root "$TOOLS" >&2
        [[ $("$bin" cyclonedx --version) == *" $CYCLONEDX_VERSION" ]] ||
            die "cargo-cyclonedx --version says '$("$bin" cyclonedx --version)', want $CYCLONEDX_VERSION"
    fi
    echo "$bin"
}

# sbom [ARCH...]: one CycloneDX 1.5 JSON SBOM per shipped crate: every crate it depends on (with
# build dependencies), version, license, checksum, as Cargo.lock resolves them for the default
# features. cargo-cyclonedx describes one target at a time; the SBOM of a crate is the union of
# its SBOMs for the linux targets the release builds (they differ by a crate or two), with each
# target named in metadata.properties. SOURCE_DATE_EPOCH (the commit's time) makes the output
# depend on the sources only (no random serial number, no wall-clock time).
cmd_sbom() {
    local archs=("$@") bin arch t c name work out targets=() files
    ((${#archs[@]})) || archs=(amd64 arm64)
    bin=$(sbom_tool)
    work=$(mktemp -d)
    # cargo-cyclonedx writes NAME.json beside every workspace member's Cargo.toml: a name of its
    # own, moved out at once (and removed on failure), so the checkout is left as it was.
    name=.release-sbom-$$
    SBOM_LEFTOVERS=("$work" "$name")
    trap sbom_cleanup EXIT
    for arch in "${archs[@]}"; do
        arch=$(arch_of "$arch")
        t=$(rust_target "$arch")
        targets+=("$t")
        SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0) PATH="$(dirname "$bin"):$PATH" \
            cargo cyclonedx --quiet --format json --spec-version 1.5 --target "$t" \
            --override-filename "$name" --manifest-path "$repo/Cargo.toml"
        for c in "${SBOM_CRATES[@]}"; do
            [[ -f $c/$name.json ]] || die "cargo cyclonedx wrote no $c/$name.json"
            mv "$c/$name.json" "$work/$c-$arch.json"
        done
        sbom_cleanup_files "$name"
    done
    mkdir -p "$DIST/sbom"
    for c in "${SBOM_CRATES[@]}"; do
        files=()
        for arch in "${archs[@]}"; do files+=("$work/$c-$(arch_of "$arch").json"); done
        out=$DIST/sbom/netbench-$c.cdx.json
        jq -s --argjson targets "$(printf '%s\n' "${targets[@]}" | jq -R . | jq -s .)" '
            . as $all
            | .[0]
            | .components = ([$all[].components[]?] | unique_by(."bom-ref"))
            | .dependencies = ([$all[].dependencies[]?] | group_by(.ref)
                | map({ref: .[0].ref, dependsOn: ([.[].dependsOn[]?] | unique)}))
            | .metadata.properties = ([.metadata.properties[]? | select(.name != "cdx:rustc:sbom:target:triple")]
                + [$targets[] | {name: "cdx:rustc:sbom:target:triple", value: .}])
        ' "${files[@]}" >"$out.tmp"
        check_sbom "$out.tmp" "$c" || { rm -f "$out.tmp"; exit 1; }
        mv "$out.tmp" "$out"
        log "SBOM: ${out#"$repo"/} ($(jq '.components | length' "$out") components; ${targets[*]})"
    done
    sbom_cleanup
    trap - EXIT
}
SBOM_LEFTOVERS=()
# sbom_cleanup_files NAME: cargo-cyclonedx's NAME.json files left in the workspace's crates.
sbom_cleanup_files() {
    [[ $1 == .release-sbom-* ]] || return 0
    find "$repo" -path "$repo/target" -prune -o -path "$repo/dist" -prune -o -path "$repo/.git" -prune \
        -o -type f -name "$1.json" -print0 | xargs -0r rm -f
}
sbom_cleanup() {
    ((${#SBOM_LEFTOVERS[@]} == 2)) || return 0
    rm -rf "${SBOM_LEFTOVERS[0]}"
    sbom_cleanup_files "${SBOM_LEFTOVERS[1]}"
    SBOM_LEFTOVERS=()
}

# check_sbom FILE CRATE: CycloneDX JSON describing CRATE, with components, whose dependency graph
# names only components of the SBOM.
check_sbom() {
    jq -e --arg c "$2" '
        .bomFormat == "CycloneDX" and .specVersion == "1.5" and .metadata.component.name == $c
        and (.components | length) > 0
        and ([.metadata.component."bom-ref", .components[]."bom-ref"] | map({key: ., value: true})
             | from_entries) as $refs
        | [.dependencies[] | .ref, .dependsOn[]?] | all($refs[.] == true)
    ' "$1" >/dev/null || die "$1 is not a consistent CycloneDX SBOM of crate $2"
}

# --- changelog, checksums ---------------------------------------------------------------------

cmd_changelog() {
    mkdir -p "$DIST"
    local prev range
    prev=$(git describe --tags --abbrev=0 --match 'v*' HEAD^ 2>/dev/null || true)
    range=${prev:+$prev..}HEAD
    {
        printf '# netbench v%s\n\n' "$VERSION"
        if [[ -n $prev ]]; then printf 'Changes since %s:\n\n' "$prev"; else printf 'First release. Changes:\n\n'; fi
        git log --no-merges --format='- %s (%h)' "$range"
    } >"$DIST/CHANGELOG.md"
    log "changelog: dist/CHANGELOG.md ($(git rev-list --no-merges --count "$range") commits since ${prev:-the first commit})"
}

cmd_checksums() {
    [[ -d $DIST ]] || die "nothing in dist/ yet"
    local sums
    sums=$( (cd "$DIST" && find . -maxdepth 1 -type f ! -name 'SHA256SUMS*' -printf '%P\n' &&
        find images -maxdepth 1 -name '*.tar' 2>/dev/null &&
        find sbom -maxdepth 1 -name '*.cdx.json' 2>/dev/null) | sort | (cd "$DIST" && xargs -r sha256sum))
    printf '%s\n' "$sums" >"$DIST/SHA256SUMS"
    log "checksums: dist/SHA256SUMS ($(wc -l <"$DIST/SHA256SUMS") files)"
}

# --- verify -----------------------------------------------------------------------------------

cmd_verify() {
    (($# >= 1)) || die "usage: verify ARCH..."
    local a arch b files
    check_versions
    for a in "$@"; do
        arch=$(arch_of "$a")
        for b in "${BINS[@]}"; do check_static "$DIST/bin/linux-$arch/$b"; done
        if [[ $arch == "$(host_arch)" ]]; then
            for b in "${BINS[@]}"; do
                grep -q "$VERSION" <<<"$("$DIST/bin/linux-$arch/$b" --version)" ||
                    die "$b --version does not say $VERSION: $("$DIST/bin/linux-$arch/$b" --version)"
            done
        fi
        cmd_check_images "$arch"
        files=$(tar -tzf "$DIST/netbench_linux_$arch.tar.gz" | sort | tr '\n' ' ')
        [[ $files == "LICENSE README.md kubectl-netbench netbench " ]] ||
            die "netbench_linux_$arch.tar.gz holds '$files'"
        python3 - "$DIST/netbench.krew.yaml" "$DIST/netbench_linux_$arch.tar.gz" "$arch" <<'EOF'
import hashlib, sys, tarfile, yaml
manifest, archive, arch = sys.argv[1:]
m = yaml.safe_load(open(manifest))
[p] = [p for p in m["spec"]["platforms"] if p["selector"]["matchLabels"]["arch"] == arch]
assert p["sha256"] == hashlib.sha256(open(archive, "rb").read()).hexdigest(), "krew sha256 differs from the archive"
names = tarfile.open(archive).getnames()
assert p["bin"] in names, f"krew bin {p['bin']} not in the archive"
for f in p["files"]:
    assert f["from"] in names, f"krew file {f['from']} not in the archive"
EOF
    done
    grep -qx 'netbench/Chart.yaml' <<<"$(tar -tzf "$DIST/netbench-$VERSION.tgz")" || die "chart package has no netbench/Chart.yaml"
    grep -q "image: \"\{0,1\}$IMAGE_PREFIX/operator:$VERSION" "$DIST/netbench-$VERSION.yaml" ||
        die "bundle does not use $IMAGE_PREFIX/operator:$VERSION"
    grep -q '^kind: CustomResourceDefinition' "$DIST/netbench-$VERSION.yaml" || die "bundle has no CRDs"
    (cd "$DIST" && sha256sum --quiet -c SHA256SUMS) || die "SHA256SUMS does not match dist/"
    log "verified dist/ for ${*}"
}

cmd_all() {
    (($# >= 1)) || die "usage: all ARCH..."
    local a
    for a in "$@"; do cmd_binaries "$a"; done
    cmd_images "$@"
    cmd_chart
    cmd_bundle
    cmd_cli_archives "$@"
    cmd_changelog
    cmd_sbom "$@"
    cmd_checksums
}

(($# >= 1)) || die "usage: $0 version|arch|binaries|images|check-images|publish-images|chart|bundle|cli-archives|changelog|sbom|sbom-tool|checksums|all|verify ... (see the header)"
cmd=$1
shift
case $cmd in
    version) echo "$VERSION" ;;
    arch) arch_of "${1:-host}" ;;
    binaries) cmd_binaries "$@" ;;
    images) cmd_images "$@" ;;
    check-images) cmd_check_images "$@" ;;
    publish-images) cmd_publish_images "$@" ;;
    chart) cmd_chart ;;
    bundle) cmd_bundle ;;
    cli-archives) cmd_cli_archives "$@" ;;
    changelog) cmd_changelog ;;
    sbom) cmd_sbom "$@" ;;
    sbom-tool) sbom_tool ;;
    checksums) cmd_checksums ;;
    all) cmd_all "$@" ;;
    verify) cmd_verify "$@" ;;
    *) die "unknown command '$cmd' (see the header of $0)" ;;
esac
