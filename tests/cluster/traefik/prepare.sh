#!/usr/bin/env bash
# prepare.sh DIR: make DIR, which holds a copy of this module's go.mod (and go.sum), a buildable
# copy of the module with traefik's main package in it. Used by ../build.sh (build_traefik) and
# by update-mod.sh; a build input, so ../lib.sh's source_hash covers it. It adds to DIR:
#   *.go   cmd/traefik/*.go (not the tests) of the traefik version go.mod requires, from the
#          module cache: traefik's main package cannot be imported, and copying it at build
#          time keeps third-party code out of this repository and always matches the pin.
#   ext/   the stand-in for traefik's nested module pkg/config/dynamic/ext (see ext/go.mod).
#   lego/  github.com/go-acme/lego/v5 at the version traefik requires (its hash checked against
#          traefik's go.sum), minus the ACME DNS-01 providers in LEGO_DROP: the module proxy
#          here answers 403 for the SDK module each of them imports, so they cannot be built.
#          Traefik then rejects those names as an unknown DNS provider; nothing else changes.
# Nothing is written outside DIR except Go's module cache.
set -euo pipefail

die() {
    echo "prepare.sh: $*" >&2
    exit 1
}

# lego/v5 providers/dns/<name> whose SDK module (version required by lego v5.4.1) is not served.
LEGO_DROP=(alidns aliesa azion dnsimple edgedns edgeone huaweicloud oraclecloud regfish
    sakuracloud tencentcloud ucloud yandexcloud)

(($# == 1)) || die "usage: prepare.sh DIR"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(cd "$1" && pwd)
[[ -f $dir/go.mod ]] || die "$dir/go.mod missing"

# required MODFILE PATH: the version MODFILE requires of module PATH.
required() {
    go mod edit -json "$1" | jq -r --arg p "$2" '.Require[] | select(.Path == $p) | .Version'
}
# download PATH@VERSION: the module's JSON from `go mod download -json`, run outside any module.
download() {
    local info
    info=$(cd / && go mod download -json "$1") || die "go mod download $1 failed: $info"
    echo "$info"
}

version=$(required "$dir/go.mod" github.com/traefik/traefik/v3)
[[ -n $version ]] || die "$dir/go.mod does not require github.com/traefik/traefik/v3"
src=$(download "github.com/traefik/traefik/v3@$version" | jq -r .Dir)

for f in "$src"/cmd/traefik/*.go; do
    [[ $f == *_test.go ]] && continue
    cp "$f" "$dir/"
    chmod u+w "$dir/${f##*/}"
done
rm -rf "$dir/ext" "$dir/lego"
cp -r "$here/ext" "$dir/ext"

lego=github.com/go-acme/lego/v5
lego_version=$(required "$src/go.mod" "$lego")
[[ -n $lego_version ]] || die "traefik $version does not require $lego"
info=$(download "$lego@$lego_version")
want=$(awk -v m="$lego" -v v="$lego_version" '$1 == m && $2 == v { print $3 }' "$src/go.sum")
[[ -n $want && $(jq -r .Sum <<<"$info") == "$want" ]] ||
    die "$lego@$lego_version: hash $(jq -r .Sum <<<"$info") is not the one in traefik's go.sum ($want)"
cp -r "$(jq -r .Dir <<<"$info")" "$dir/lego"
chmod -R u+w "$dir/lego"
gen=$dir/lego/providers/dns/zz_gen_dns_providers.go
for p in "${LEGO_DROP[@]}"; do
    [[ -d $dir/lego/providers/dns/$p ]] || die "$lego@$lego_version has no providers/dns/$p"
    rm -rf "${dir:?}/lego/providers/dns/$p"
done
# The generated registry: drop the import line and the `case ...: return p.NewDNSProvider()`
# pair of each dropped provider.
awk -v drop="${LEGO_DROP[*]}" '
    BEGIN { n = split(drop, a, " "); for (i = 1; i <= n; i++) d[a[i]] = 1 }
    /^\t"github.com\/go-acme\/lego\/v5\/providers\/dns\/[a-z0-9]+"$/ {
        p = $0; gsub(/.*\/|"/, "", p); if (p in d) next
    }
    /^\tcase "/ {
        c = $0; getline r; p = r; sub(/^\t\treturn /, "", p); sub(/\..*/, "", p)
        if (p in d) next
        print c; print r; next
    }
    { print }' "$gen" >"$gen.tmp"
mv "$gen.tmp" "$gen"
left=$(grep -rlE --include='*.go' "\"$lego/providers/dns/($(
    IFS='|'
    echo "${LEGO_DROP[*]}"
))(/|\")" "$dir/lego" || true)
[[ -z $left ]] || die "still importing a dropped lego provider: $left"
