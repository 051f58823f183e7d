package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/cluster"
)

// Upgrades without a flag day (issue 46; cluster/feature.go): every
// view carries the survey of its records (View.Survey), and a behaviour
// that a process of a lower feature level would misread waits for the
// cluster's level. The survey is a pure function of the snapshot, so
// coordinators reading one revision decide alike.

// statusEvery is the StatusEvery of the heartbeat writes a coordinator
// whose last good view is v makes: the timing's once every live process speaks
// cluster.LevelRenewals, and 0 (every heartbeat writes the whole record)
// before the first view and while a process of a lower level is live. A
// coordinator of the level before renewals judges a worker's liveness by
// its record's version alone: a heartbeat that only renewed the lease
// would look like silence to it, and it would mark the worker late every
// unhealthy-after. The first write after a lower-level process joins is
// at most one heartbeat away, well inside unhealthy-after.
func statusEvery(v *View, t cluster.Timing) uint64 {
	if v == nil || !v.Survey.Allows(cluster.LevelRenewals) {
		return 0
	}
	return t.StatusEvery()
}

// ErrVersionSkew is what Run returns when a live process of the cluster is
// outside this build's version-skew policy: the coordinator refuses to
// start rather than join a cluster it would misread or be misread by.
var ErrVersionSkew = errors.New("version skew")

// preflightSkew reads one snapshot before the coordinator writes its own
// record and returns an error wrapping ErrVersionSkew (and the
// cluster.SkewError naming both versions) when a live process is outside
// the version-skew policy. A store that does not answer in time is not a
// refusal: the coordinator starts as usual (it fails closed until the
// store answers), and registrations through it are still checked.
func (c *Coordinator) preflightSkew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	snap, err := c.store.Snapshot(ctx, c.opts.ClusterID)
	if err != nil {
		c.log.Warn("could not read the store to check the version-skew policy before starting; starting anyway", "error", err)
		return nil
	}
	for _, r := range snap.Records {
		if r == nil || r.Key() == c.ownKey() {
			continue
		}
		if err := cluster.CheckSkew(r, cluster.RoleCoordinator, c.opts.NodeID, buildinfo.Version, cluster.BuildLevel); err != nil {
			return fmt.Errorf("%w: coordinator not started, nothing written: %w", ErrVersionSkew, err)
		}
	}
	return nil
}

// requireLevel refuses an operation that a process of a lower feature
// level would undo or misread, while the cluster's level is below l: an
// error wrapping ErrFeatureLevel that names the level, the process that
// holds it back, and what to do (admin answers it 409 feature_level).
func requireLevel(v *View, l int64, what string) error {
	if v == nil || v.Survey.Allows(l) {
		return nil
	}
	return fmt.Errorf("%w: %s needs cluster feature level %d, but the cluster is at level %d (%s runs a build of level %d); finish the upgrade first (talonctl version lists every process's version)",
		ErrFeatureLevel, what, l, v.Survey.Level, cmp.Or(v.Survey.Lowest, "a live process"), v.Survey.Level)
}

// ErrFeatureLevel is an operation refused because the cluster's feature
// level is below the one it needs (mid-upgrade).
var ErrFeatureLevel = errors.New("cluster feature level too low")

// noteSurvey logs to log a change of the cluster's feature level or of the set
// of build versions between two views.
func noteSurvey(log *slog.Logger, prev, v *View) {
	if prev == nil {
		if v.Survey.Mixed() {
			log.Info("cluster is mid-upgrade: more than one build version or feature level is live", "feature_level", v.Survey.Level,
				"highest_level", v.Survey.Highest, "versions", v.Survey.DistinctVersions(), "own_feature_level", cluster.BuildLevel)
		}
		return
	}
	if prev.Survey.Level != v.Survey.Level {
		log.Info("cluster feature level changed", "old", prev.Survey.Level, "new", v.Survey.Level,
			"renewals", v.Survey.Allows(cluster.LevelRenewals), "lowest", v.Survey.Lowest, "versions", v.Survey.DistinctVersions())
	}
}

// registerUpgradeMetrics exports the survey of the last good view
// (lastGood).
func registerUpgradeMetrics(reg prometheus.Registerer, lastGood func() *View) error {
	survey := func() (cluster.Survey, bool) {
		v := lastGood()
		if v == nil {
			return cluster.Survey{}, false
		}
		return v.Survey, true
	}
	gauges := []struct {
		name, help string
		none       float64 // the value before the first view
		f          func(cluster.Survey) float64
	}{
		{"talon_cluster_feature_level", "The cluster's feature level in this coordinator's last good view: the lowest level among live processes; behaviour of a higher level waits for it. -1 before the first view.",
			-1, func(s cluster.Survey) float64 { return float64(s.Level) }},
		{"talon_cluster_build_versions", "Distinct build versions among the live processes in this coordinator's last good view: more than 1 while the cluster is mid-upgrade (TalonMixedVersions). 0 before the first view.",
			0, func(s cluster.Survey) float64 { return float64(len(s.DistinctVersions())) }},
	}
	for _, g := range gauges {
		f, none := g.f, g.none
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, func() float64 {
			s, ok := survey()
			if !ok {
				return none
			}
			return f(s)
		})); err != nil {
			return err
		}
	}
	return nil
}
