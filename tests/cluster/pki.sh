# shellcheck shell=bash
# Certificates and kubeconfigs of the test cluster (sourced by up.sh after lib.sh).

# gen_cert NAME CN [O] [SANS]: NAME.crt/NAME.key signed by our CA. SANS like "DNS:a,IP:1.2.3.4";
# a cert with SANs is a server+client cert, otherwise a client cert.
gen_cert() {
    local name=$1 cn=$2 org=${3:-} sans=${4:-} subj ext
    [[ -f $NB_PKI/$name.crt ]] && return 0
    subj="/CN=$cn"
    [[ -n $org ]] && subj="/O=$org$subj"
    ext=$(mktemp)
    {
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        if [[ -n $sans ]]; then
            echo "extendedKeyUsage=serverAuth,clientAuth"
            echo "subjectAltName=$sans"
        else
            echo "extendedKeyUsage=clientAuth"
        fi
    } >"$ext"
    openssl ecparam -name prime256v1 -genkey -noout -out "$NB_PKI/$name.key"
    openssl req -new -key "$NB_PKI/$name.key" -subj "$subj" -out "$NB_PKI/$name.csr" 2>/dev/null
    openssl x509 -req -in "$NB_PKI/$name.csr" -CA "$NB_PKI/ca.crt" -CAkey "$NB_PKI/ca.key" \
        -CAcreateserial -days 3650 -extfile "$ext" -out "$NB_PKI/$name.crt" 2>/dev/null
    rm -f "$ext" "$NB_PKI/$name.csr"
}

# write_kubeconfig NAME CERT: $NB_STATE/NAME.kubeconfig with embedded credentials.
write_kubeconfig() {
    local name=$1 cert=$2 b64='base64 -w0'
    cat >"$NB_STATE/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: netbench
  cluster:
    server: https://$NB_APISERVER_IP:$NB_APISERVER_PORT
    certificate-authority-data: $($b64 <"$NB_PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $($b64 <"$NB_PKI/$cert.crt")
    client-key-data: $($b64 <"$NB_PKI/$cert.key")
contexts:
- name: netbench
  context: {cluster: netbench, user: $name}
current-context: netbench
EOF
    chmod 600 "$NB_STATE/$name.kubeconfig"
}

make_pki() {
    mkdir -p "$NB_PKI"
    chmod 700 "$NB_PKI"
    if [[ ! -f $NB_PKI/ca.crt ]]; then
        log "generating certificates in $NB_PKI"
        openssl ecparam -name prime256v1 -genkey -noout -out "$NB_PKI/ca.key"
        openssl req -x509 -new -key "$NB_PKI/ca.key" -subj "/CN=netbench-cluster-ca" -days 3650 \
            -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
            -out "$NB_PKI/ca.crt" 2>/dev/null
    fi
    [[ -f $NB_PKI/sa.key ]] || {
        openssl ecparam -name prime256v1 -genkey -noout -out "$NB_PKI/sa.key"
        openssl ec -in "$NB_PKI/sa.key" -pubout -out "$NB_PKI/sa.pub" 2>/dev/null
    }
    local d=$NB_CLUSTER_DOMAIN
    gen_cert apiserver kube-apiserver "" \
        "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$d,DNS:localhost,IP:127.0.0.1,IP:$NB_APISERVER_IP,IP:$NB_SVC_KUBERNETES_IP"
    gen_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
    gen_cert admin netbench-admin system:masters
    gen_cert controller-manager system:kube-controller-manager
    gen_cert scheduler system:kube-scheduler
    local node
    for node in $(cluster_nodes); do
        gen_cert "kubelet-$node" "system:node:$node" system:nodes
        write_kubeconfig "kubelet-$node" "kubelet-$node"
    done
    gen_cert kube-proxy system:kube-proxy
    gen_cert coredns netbench:coredns
    write_kubeconfig admin admin
    write_kubeconfig controller-manager controller-manager
    write_kubeconfig scheduler scheduler
    write_kubeconfig kube-proxy kube-proxy
    write_kubeconfig coredns coredns
}
