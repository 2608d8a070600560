// Command etcd is etcd's own server main (go.etcd.io/etcd/server/v3/etcdmain), built as a
// dependency of this module: `go install go.etcd.io/etcd/server/v3@...` does not work because
// etcd's go.mod uses replace lines. The version is the one k8s.io/kubernetes itself requires.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
