#!/usr/bin/env bash
# Stop the test cluster and put the machine back as up.sh found it: kills every process it
# started (by recorded PID, plus the containerd shims and pod processes those left behind),
# unmounts its mounts, deletes its devices and iptables chains, restores sysctls and mount
# propagation, removes its state. Keeps the build cache. Safe to run when nothing is up.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root
set +e # best effort from here on: keep cleaning even if one step fails

saved=$NB_STATE/host.saved
[[ -f $saved ]] || saved=/dev/null

# stop_pid NAME PID: SIGTERM, wait up to 10s, then SIGKILL.
stop_pid() {
    local name=$1 pid=$2 i
    pid_alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 100; i++)); do
        pid_alive "$pid" || return 0
        sleep 0.1
    done
    log "$name (pid $pid) ignored SIGTERM, killing"
    kill -KILL "$pid" 2>/dev/null
    for ((i = 0; i < 50; i++)); do
        pid_alive "$pid" || return 0
        sleep 0.1
    done
}

stop_component() {
    local pid
    pid=$(component_pid "$1")
    if [[ -n $pid ]]; then
        log "stopping $1 (pid $pid)"
        stop_pid "$1" "$pid"
    fi
    rm -f "$NB_PIDS/$1.pid"
}

ctr_() { ctr --address "$NB_CONTAINERD_SOCK" -n k8s.io "$@"; }

# 1. Let the kubelet tear pods down properly (CNI DEL, unmounts) while it still runs.
stop_component kube-controller-manager
stop_component kube-scheduler
stop_component kwok
if [[ -n $(component_pid kubelet) && -n $(component_pid kube-apiserver) && -S $NB_CONTAINERD_SOCK ]]; then
    log "deleting all pods"
    kc delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1
    for ((i = 0; i < 60; i++)); do
        [[ -z $(ctr_ tasks ls -q 2>/dev/null) ]] && break
        sleep 1
    done
fi
stop_component coredns
stop_component kube-proxy
stop_component kubelet

# 2. Whatever is still running in containerd: kill tasks, then containerd, then stray shims.
if [[ -S $NB_CONTAINERD_SOCK ]]; then
    for id in $(ctr_ tasks ls -q 2>/dev/null); do
        ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1
    done
    sleep 1
    for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$id" >/dev/null 2>&1; done
fi
stop_component containerd
for proc in /proc/[0-9]*; do
    # Our shims name our socket on their command line; kill exactly those.
    if tr '\0' ' ' 2>/dev/null <"$proc/cmdline" | grep -qF -- "-address $NB_CONTAINERD_SOCK"; then
        log "killing leftover shim pid ${proc#/proc/}"
        kill -KILL "${proc#/proc/}" 2>/dev/null
    fi
done

# 3. Pod processes left in the kubelet's cgroups, then the cgroups themselves.
for ctl in /sys/fs/cgroup/*/; do
    [[ -d $ctl/kubepods ]] || continue
    for pid in $(find "$ctl/kubepods" -name cgroup.procs -exec cat {} + 2>/dev/null); do
        log "killing leftover pod process $pid"
        kill -KILL "$pid" 2>/dev/null
    done
done
sleep 0.5
for ctl in /sys/fs/cgroup/*/; do
    [[ -d $ctl/kubepods ]] && find "$ctl/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null
    # containerd's default parent for containers started outside the CRI (ctr run).
    if [[ -d $ctl/k8s.io ]] && ! grep -qx "existed ${ctl}k8s.io" "$saved"; then
        find "$ctl/k8s.io" -depth -type d -exec rmdir {} \; 2>/dev/null
    fi
done

# 4. Control plane last.
stop_component kube-apiserver
stop_component etcd

# 5. Mounts under our directories and pod network namespaces created since up.sh.
for dir in "$NB_STATE" "$NB_RUN"; do
    findmnt -rno TARGET | grep -E "^$dir(/|$)" | sort -r | while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done
done
for ns in /run/netns/cni-*; do
    [[ -e $ns ]] || continue
    grep -qx "netns ${ns##*/}" "$saved" && continue
    umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null
    rm -f "$ns"
done

# 6. Network devices and iptables chains (KUBE-* from kubelet/kube-proxy, CNI-* from the bridge
#    plugin's masquerading), except chains that existed before up.sh.
for dev in "$NB_CNI_BRIDGE" "$NB_NODE_DEV"; do
    ip link show "$dev" >/dev/null 2>&1 && ip link del "$dev"
done
for ipt in iptables ip6tables; do
    command -v $ipt >/dev/null || continue
    for table in filter nat mangle raw; do
        rules=$($ipt -w -t $table -S 2>/dev/null) || continue
        ours=$(grep -oE '^-N (KUBE|CNI)-[^ ]+' <<<"$rules" | cut -d' ' -f2 |
            while read -r c; do grep -qx "chain $ipt $table $c" "$saved" || echo "$c"; done)
        [[ -n $ours ]] || continue
        # Rules in other chains that jump to ours, then our chains.
        grep -E '^-A ' <<<"$rules" | while read -r rule; do
            chain=$(cut -d' ' -f2 <<<"$rule")
            target=$(grep -oE -- '-j [^ ]+' <<<"$rule" | cut -d' ' -f2)
            grep -qx -- "$chain" <<<"$ours" && continue
            grep -qx -- "$target" <<<"$ours" || continue
            eval "$ipt -w -t $table -D ${rule#-A }" 2>/dev/null
        done
        for c in $ours; do $ipt -w -t "$table" -F "$c" 2>/dev/null; done
        for c in $ours; do $ipt -w -t "$table" -X "$c" 2>/dev/null; done
    done
done
command -v conntrack >/dev/null && conntrack -D -d "$NB_DNS_IP" >/dev/null 2>&1

# 7. Sysctls, mount propagation, host paths that did not exist before.
while read -r kind a b; do
    case $kind in
        sysctl) sysctl -qw "$a=$b" 2>/dev/null ;;
        propagation)
            # Put back each mount's propagation (up.sh made / recursively shared).
            now=$(findmnt -no PROPAGATION --mountpoint "$a" 2>/dev/null)
            if [[ -n $now && $now != "$b" && $b =~ ^(private|shared|slave|unbindable)$ ]]; then
                mount --make-"$b" "$a"
            fi
            ;;
    esac
done <"$saved"
for p in /run/containerd /var/log/containers; do
    [[ -e $p ]] || continue
    grep -qx "existed $p" "$saved" && continue
    if [[ $p == /var/log/containers ]]; then
        find "$p" -maxdepth 1 -type l -lname "$NB_STATE/*" -delete
        rmdir "$p" 2>/dev/null
    else
        find "$p" -depth -type d -empty -delete 2>/dev/null
    fi
done
if ! grep -qx "existed /run/netns" "$saved" && [[ -d /run/netns ]] && [[ -z $(ls -A /run/netns) ]]; then
    rmdir /run/netns
fi

rm -rf --one-file-system "$NB_STATE" "$NB_RUN"
log "cluster down"
