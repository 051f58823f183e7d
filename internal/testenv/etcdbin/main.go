// Command etcdbin is etcd's own server main, built from source so Talon's
// integration tests can start a real etcd without a prebuilt download.
// It lives in a nested module so etcd's server dependencies stay out of
// Talon's go.mod; internal/testenv/build-servers.sh builds it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
