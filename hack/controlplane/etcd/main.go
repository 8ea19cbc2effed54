// Command etcd runs the etcd server built from go.etcd.io/etcd/server/v3, so
// tests get a real etcd without downloading a prebuilt binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
