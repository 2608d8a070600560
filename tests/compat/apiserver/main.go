// Command kube-apiserver is the upstream kube-apiserver main (k8s.io/kubernetes
// cmd/kube-apiserver/apiserver.go) of the Kubernetes version this module requires, built as a
// module dependency like tests/cluster/cmd/k8s. tests/compat/run.sh checks the CRDs, their CEL
// rules, the chart and the examples against it (the oldest Kubernetes the README claims).
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zone support, as in the upstream main

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
