package devcluster

import (
	"net"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
)

// ClusterID is the cluster ID of a dev cluster; its certificates are bound
// to it.
const ClusterID = "dev"

// Config returns a validated configuration of role for a process of a dev
// cluster (cluster ID "dev", loopback host, short timing, no drain): it
// runs without TLS unless mutate configures it. The in-process
// benchmarks build their coordinators' configurations from it too.
func Config(role cluster.Role, nodeID, host string, mutate func(c *config.Config)) (*config.Config, error) {
	l, err := config.Load(role, config.Options{Environ: []string{"TALON_INSECURE_CONTROL_PLANE=true"}})
	if err != nil {
		return nil, err
	}
	c := l.Config
	c.ClusterID = ClusterID
	c.NodeID = nodeID
	c.Listen = net.JoinHostPort(host, "0")
	c.AdminListen = net.JoinHostPort(host, "0")
	c.HeartbeatInterval, c.UnhealthyAfter, c.LeaseTTL = time.Second, 3*time.Second, 6*time.Second
	c.RequestTimeout = time.Second
	if role == cluster.RoleCoordinator {
		// The demo shows traffic as it happens; on the memory store a
		// status write costs nothing (production keeps the 1m default).
		c.StatusInterval = 2 * time.Second
	}
	c.DrainDelay = 0
	c.ShutdownTimeout = 5 * time.Second
	c.LogLevel = "warn"
	mutate(c)
	return c, c.Validate()
}
