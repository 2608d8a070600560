// Command k8s is a hyperkube-style binary: one executable holding kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl, all built
// from k8s.io/kubernetes used as a Go module dependency.
//
// Usage: k8s COMPONENT [flags...]   (or invoke it through a symlink named after the component)
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // CronJob time zone support, as in the upstream mains

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// servers maps a component name to its cobra command constructor.
var servers = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": kcm.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy":              proxy.NewProxyCommand,
}

func usage() {
	names := []string{"kubectl"}
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: k8s COMPONENT [flags]\ncomponents: %v\n", names)
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := servers[name]; !ok && name != "kubectl" {
		if len(os.Args) < 2 {
			usage()
			os.Exit(2)
		}
		name = os.Args[1]
		// Drop our own name so each component sees argv as its upstream main would.
		os.Args = os.Args[1:]
	}
	if name == "kubectl" {
		runKubectl()
		return
	}
	newCmd, ok := servers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "k8s: unknown component %q\n", name)
		usage()
		os.Exit(2)
	}
	os.Exit(cli.Run(newCmd()))
}

// runKubectl mirrors k8s.io/kubernetes/cmd/kubectl/kubectl.go.
func runKubectl() {
	logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err)
	}
}
