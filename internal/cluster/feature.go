package cluster

import (
	"fmt"
	"slices"
	"strings"
)

// Feature levels (ADR 0001 amendment, "Upgrades without a flag day").
//
// A feature level numbers what a build writes to the store or sends on
// the wire that a build of a lower level would misread. Every process
// puts its build's level in its own record (Record.FeatureLevel); the
// cluster's level is the lowest among the live records (Survey), so every
// coordinator reading the same snapshot computes the same level, as etcd's
// cluster version is its lowest member's. A behaviour that a lower level
// would misread is used only while the cluster's level allows it, and
// stops as soon as a process of a lower level joins: a coordinator of the
// level before renewals judges a worker's liveness by its record's version
// alone, and marks late every worker whose heartbeats only renew the
// lease.
//
// Each level and what it enables:
const (
	// LevelBase (0) is what builds before feature levels speak (c17bbb4
	// and before): every accepted heartbeat writes the whole
	// record, and no record carries featureLevel.
	LevelBase int64 = 0
	// LevelRenewals (1) enables heartbeats that change nothing renewing
	// the record's lease without writing it (etcd: a lease keepalive;
	// Kubernetes: spec.renewTime and the talon.io/renew-seq annotation),
	// and operator cordons held in the store as record marks (SetMarks),
	// which a level-0 coordinator's next write of the record would drop.
	LevelRenewals int64 = 1
	// LevelJobs (2) enables the operator's cache jobs (warm, free): a
	// worker of level 2 asks the coordinators for its jobs over its
	// control connection (protocol.Jobs) and reports its progress; one of
	// a lower level never would, so no job starts while one is live.
	LevelJobs int64 = 2

	// BuildLevel is the level this build speaks.
	BuildLevel = LevelJobs
	// MaxLevelSkew is the version-skew policy: two processes may run in
	// one cluster when their levels differ by at most this much
	// (coordinators N and N-1, workers one level either side of them).
	MaxLevelSkew int64 = 1
	// MaxFeatureLevel bounds Record.FeatureLevel.
	MaxFeatureLevel int64 = 1 << 20
)

// LevelOf returns the feature level a record speaks (0 when it carries
// none).
func LevelOf(r *Record) int64 { return r.FeatureLevel }

// SkewError is a process outside the version-skew policy of this build.
type SkewError struct {
	Role          Role
	NodeID        string
	Version       string
	Level         int64
	OwnVersion    string
	OwnLevel      int64
	OwnRole       Role
	OwnNodeID     string
	AllowedLowest int64
	AllowedHigh   int64
}

func (e *SkewError) Error() string {
	return fmt.Sprintf("version skew: %s %q runs version %s at feature level %d, but %s %q runs version %s at feature level %d; "+
		"the version-skew policy lets processes within %d feature level of each other run together (levels %d to %d here): "+
		"upgrade one minor release at a time, coordinators before workers (docs/operations.md, \"Upgrades and version skew\")",
		e.Role, e.NodeID, displayVersion(e.Version), e.Level, e.OwnRole, e.OwnNodeID, displayVersion(e.OwnVersion), e.OwnLevel,
		MaxLevelSkew, e.AllowedLowest, e.AllowedHigh)
}

func displayVersion(v string) string {
	if v == "" {
		return "(unknown)"
	}
	return v
}

// CheckSkew returns a *SkewError when a process of r's level may not run
// beside a process of level own (role ownRole, node ownNode, version
// ownVersion) under the version-skew policy, and nil otherwise.
func CheckSkew(r *Record, ownRole Role, ownNode, ownVersion string, own int64) error {
	lo, hi := max(own-MaxLevelSkew, 0), own+MaxLevelSkew
	if l := LevelOf(r); l >= lo && l <= hi {
		return nil
	}
	return &SkewError{Role: r.Role, NodeID: r.NodeID, Version: r.Version, Level: LevelOf(r),
		OwnRole: ownRole, OwnNodeID: ownNode, OwnVersion: ownVersion, OwnLevel: own, AllowedLowest: lo, AllowedHigh: hi}
}

// VersionCount is how many live processes of one role run one build
// version at one feature level.
type VersionCount struct {
	Version string
	Level   int64
	Role    Role
	Count   int
}

// Survey is what a set of live records says about the builds that run
// the cluster: the cluster's feature level and the versions seen. It is a
// pure function of the records, so every coordinator reading one snapshot
// computes the same survey.
type Survey struct {
	// Level is the cluster's feature level: the lowest among the records,
	// BuildLevel when there is none (nothing live can misread anything).
	Level int64
	// Highest is the highest level among the records (Level when none).
	Highest int64
	// Versions counts the records by (role, version, level), sorted by
	// role, then version, then level.
	Versions []VersionCount
	// Lowest names one process at the cluster's level ("role/node", the
	// first in key order), "" when there is no record or all speak
	// BuildLevel or more.
	Lowest string
}

// SurveyRecords surveys records (a snapshot's: every record the store
// holds, late ones included, since a late process may still be running).
func SurveyRecords(records []*Record) Survey {
	if len(records) == 0 {
		return Survey{Level: BuildLevel, Highest: BuildLevel}
	}
	s := Survey{Level: LevelOf(records[0]), Highest: LevelOf(records[0])}
	counts := map[VersionCount]int{}
	lowestKey := ""
	for _, r := range records {
		l := LevelOf(r)
		s.Level, s.Highest = min(s.Level, l), max(s.Highest, l)
		counts[VersionCount{Version: r.Version, Level: l, Role: r.Role}]++
	}
	for _, r := range records {
		if LevelOf(r) == s.Level && s.Level < BuildLevel {
			if k := string(r.Role) + "/" + r.NodeID; lowestKey == "" || k < lowestKey {
				lowestKey = k
			}
		}
	}
	s.Lowest = lowestKey
	for vc, n := range counts {
		vc.Count = n
		s.Versions = append(s.Versions, vc)
	}
	slices.SortFunc(s.Versions, func(a, b VersionCount) int {
		if c := strings.Compare(string(a.Role), string(b.Role)); c != 0 {
			return c
		}
		if c := strings.Compare(a.Version, b.Version); c != 0 {
			return c
		}
		return int(a.Level - b.Level)
	})
	return s
}

// Allows reports whether the cluster's level enables the behaviour of
// level l.
func (s Survey) Allows(l int64) bool { return s.Level >= l }

// Mixed reports whether more than one build version, or more than one
// feature level, runs in the cluster: it is mid-upgrade (or mid-rollback).
func (s Survey) Mixed() bool {
	if s.Level != s.Highest {
		return true
	}
	for _, v := range s.Versions {
		if v.Version != s.Versions[0].Version {
			return true
		}
	}
	return false
}

// DistinctVersions returns the build versions seen, sorted, each once.
func (s Survey) DistinctVersions() []string {
	var out []string
	for _, v := range s.Versions {
		out = append(out, v.Version)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
