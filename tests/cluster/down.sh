#!/usr/bin/env bash
# Stop the test cluster (every node) and put the machine back as up.sh found it: kills every process it
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

# Nodes: the recorded ones plus any node namespace left by an earlier, interrupted run.
nodes=$( (cluster_nodes; ls /run/netns 2>/dev/null | grep -E '^nb-node[0-9]+$') | sort -u)

ctr_() { ctr --address "$(node_containerd_sock "$1")" -n k8s.io "${@:2}"; }
tasks_left() {
    local node
    for node in $nodes; do [[ -S $(node_containerd_sock "$node") ]] && ctr_ "$node" tasks ls -q 2>/dev/null; done
}

# 1. Let the kubelets tear pods down properly (CNI DEL, unmounts) while they still run.
stop_component kube-controller-manager
stop_component kube-scheduler
stop_component kwok
if [[ -n $(component_pid kube-apiserver) ]]; then
    log "deleting all pods"
    kc delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1
    for ((i = 0; i < 60; i++)); do
        [[ -z $(tasks_left) ]] && break
        sleep 1
    done
fi
stop_component coredns
for node in $nodes; do
    stop_component "kube-proxy-$node"
    stop_component "kubelet-$node"
done

# 2. Whatever still runs in a containerd: kill tasks, then containerd, then stray shims.
for node in $nodes; do
    sock=$(node_containerd_sock "$node")
    if [[ -S $sock ]]; then
        for id in $(ctr_ "$node" tasks ls -q 2>/dev/null); do
            ctr_ "$node" tasks kill -s SIGKILL "$id" >/dev/null 2>&1
        done
        sleep 1
        for id in $(ctr_ "$node" tasks ls -q 2>/dev/null); do ctr_ "$node" tasks delete -f "$id" >/dev/null 2>&1; done
    fi
    stop_component "containerd-$node"
done
for proc in /proc/[0-9]*; do
    # Our shims name our sockets (under $NB_RUN) on their command line; kill exactly those.
    if tr '\0' ' ' 2>/dev/null <"$proc/cmdline" | grep -qF -- "-address $NB_RUN/"; then
        log "killing leftover shim pid ${proc#/proc/}"
        kill -KILL "${proc#/proc/}" 2>/dev/null
    fi
done

# 3. Pod processes left in the nodes' cgroups, then the cgroups themselves.
for ctl in /sys/fs/cgroup/*/; do
    for root in "$ctl"nb-node[0-9]*; do
        [[ -d $root ]] || continue
        for pid in $(find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null); do
            log "killing leftover pod process $pid"
            kill -KILL "$pid" 2>/dev/null
        done
    done
done
sleep 0.5
for ctl in /sys/fs/cgroup/*/; do
    for root in "$ctl"nb-node[0-9]*; do
        [[ -d $root ]] && find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
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

# 6. The node and target namespaces (with every device, route and iptables rule in them) once
#    nothing runs there any more, then the switch. The root-namespace iptables chains below are
#    only left by clusters of older versions, which ran a node in the root namespace.
for netns in $nodes "$NB_TARGET_NS"; do
    [[ -e /run/netns/$netns ]] || continue
    for pid in $(ip netns pids "$netns" 2>/dev/null); do
        log "killing pid $pid left in namespace $netns"
        kill -KILL "$pid" 2>/dev/null
    done
    ip netns del "$netns" 2>/dev/null
done
for dev in $nodes "$NB_SWITCH" nb-cni0 nb-node0; do
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
