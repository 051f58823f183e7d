package apiv1

import "github.com/talonhq/talon/internal/cluster"

// Cluster is the body of GET /api/v1/cluster.
type Cluster struct {
	Meta
	ClusterID string `json:"clusterId"`
	// ServedBy is the node ID of the coordinator that answered.
	ServedBy string `json:"servedBy"`
	// PlacementVersion is the snapshot's PlacementVersion, 16 hex digits.
	PlacementVersion string `json:"placementVersion"`
	// EligibleWorkers is how many workers placement may choose.
	EligibleWorkers int `json:"eligibleWorkers"`
	// PlacementReplicas is how many owners the cluster's clients read a
	// block from (placement-replicas); /api/v1/placement's default.
	PlacementReplicas int          `json:"placementReplicas"`
	Store             StoreStatus  `json:"store"`
	Nodes             ClusterNodes `json:"nodes"`
	Timing            Timing       `json:"timing"`
	// Coordinators compares the live coordinators with the number the
	// cluster is configured to run (coordinator-replicas).
	Coordinators CoordinatorPresence `json:"coordinators"`
	// Capacity sums the live workers' capacity and counters.
	Capacity ClusterCapacity `json:"capacity"`
	// Upgrade is the cluster's feature level and the build versions its
	// live processes run; absent from coordinators of builds before
	// feature levels.
	Upgrade *Upgrade `json:"upgrade,omitempty"`
}

// Upgrade is what the live records say about the builds that run the
// cluster (cluster.Survey).
type Upgrade struct {
	// FeatureLevel is the cluster's feature level: the lowest level among
	// the live processes. Behaviour of a higher level waits for it.
	FeatureLevel int64 `json:"featureLevel"`
	// HighestLevel is the highest level among the live processes.
	HighestLevel int64 `json:"highestLevel"`
	// ServerLevel is the level the answering coordinator's build speaks.
	ServerLevel int64 `json:"serverLevel"`
	// Mixed is true while more than one build version or feature level
	// runs: the cluster is mid-upgrade (or mid-rollback).
	Mixed bool `json:"mixed"`
	// LowestNode names a process at the cluster's level ("role/node")
	// while that level is below the answering coordinator's; empty
	// otherwise.
	LowestNode string `json:"lowestNode,omitempty"`
	// Versions counts the live processes by role, build version and
	// feature level, sorted by role, version, level; never null.
	Versions []VersionCount `json:"versions"`
}

// VersionCount is how many live processes of one role run one build
// version at one feature level.
type VersionCount struct {
	Role         string `json:"role"`
	Version      string `json:"version"`
	FeatureLevel int64  `json:"featureLevel"`
	Count        int    `json:"count"`
}

// UpgradeFromSurvey converts a survey to its API form; server is the
// answering coordinator's own level.
func UpgradeFromSurvey(s cluster.Survey, server int64) *Upgrade {
	u := &Upgrade{FeatureLevel: s.Level, HighestLevel: s.Highest, ServerLevel: server, Mixed: s.Mixed(),
		LowestNode: s.Lowest, Versions: make([]VersionCount, 0, len(s.Versions))}
	for _, v := range s.Versions {
		u.Versions = append(u.Versions, VersionCount{Role: string(v.Role), Version: v.Version, FeatureLevel: v.Level, Count: v.Count})
	}
	return u
}

// CoordinatorPresence is the live coordinators against the expected count.
type CoordinatorPresence struct {
	// Expected is the answering coordinator's coordinator-replicas.
	Expected int `json:"expected"`
	// Present is how many coordinators have a live record.
	Present int `json:"present"`
	// Ready is how many of them report ready.
	Ready int `json:"ready"`
	// Missing are the coordinators the answering one saw live since it
	// started (within the last hour) that have no live record now, while
	// fewer than Expected are present; never null. It may hold fewer than
	// Expected − Present (one never seen by this coordinator).
	Missing []MissingCoordinator `json:"missing"`
	// Complete is true when Present and Ready both reach Expected.
	Complete bool `json:"complete"`
}

// MissingCoordinator is a coordinator seen live before that has no live
// record now.
type MissingCoordinator struct {
	NodeID string `json:"nodeId"`
	// AdminAddress is the admin address its record advertised ("" if none).
	AdminAddress string `json:"adminAddress"`
	// LastSeenUnixMs is when the answering coordinator last saw its record
	// live (its clock).
	LastSeenUnixMs int64 `json:"lastSeenUnixMs"`
}

// MissingNames returns the node IDs of ms.
func MissingNames(ms []MissingCoordinator) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.NodeID
	}
	return out
}

// ClusterCapacity is the live workers' totals, computed by the answering
// coordinator from their last status writes.
type ClusterCapacity struct {
	// Workers is how many live workers the totals cover.
	Workers       int    `json:"workers"`
	CapacityBytes uint64 `json:"capacityBytes"`
	ResidentBytes uint64 `json:"residentBytes"`
	// HitRatio is the workers' hits over hits plus misses since they
	// started (their cumulative counters); null before any request.
	HitRatio *float64 `json:"hitRatio"`
	// RequestsPerSecond, BytesServedPerSecond and BackendErrorsPerSecond
	// are summed over the workers whose counters the answering
	// coordinator saw in two status writes of one incarnation (a quiet
	// worker writes its status once per status interval, so the rates
	// are over up to that long); null until it has seen any.
	RequestsPerSecond      *float64 `json:"requestsPerSecond"`
	BytesServedPerSecond   *float64 `json:"bytesServedPerSecond"`
	BackendErrorsPerSecond *float64 `json:"backendErrorsPerSecond"`
	// RateWorkers is how many workers the rates cover.
	RateWorkers int `json:"rateWorkers"`
}

// StoreStatus is the shared store as the answering coordinator sees it.
type StoreStatus struct {
	// Backend is memory, etcd or kubernetes.
	Backend string `json:"backend"`
	// Healthy is whether the store answered the read this response was
	// built from: true on fresh answers, false on stale ones.
	Healthy bool `json:"healthy"`
	// ErrorCode classifies the last store error when not healthy
	// (unavailable, timeout, ...); empty when healthy.
	ErrorCode string `json:"errorCode,omitempty"`
	// Alarms are the store's active alarms (etcd: NOSPACE, CORRUPT), each
	// with what it means and what to do; absent when none.
	Alarms []StoreAlarm `json:"alarms,omitempty"`
	// Capacity is the store's database size and quota as the backend last
	// reported them; absent for backends that report none.
	Capacity *StoreCapacity `json:"capacity,omitempty"`
}

// StoreAlarm is one active alarm of the store.
type StoreAlarm struct {
	// Alarm is the backend's name for it (etcd: NOSPACE, CORRUPT).
	Alarm string `json:"alarm"`
	// Message says in words what it means and what the operator does.
	Message string `json:"message"`
}

// StoreCapacity is how full the store's database is.
type StoreCapacity struct {
	// DBSizeBytes is the database file's size, what the quota counts.
	DBSizeBytes int64 `json:"dbSizeBytes"`
	// DBInUseBytes is the part of it holding data and kept history.
	DBInUseBytes int64 `json:"dbInUseBytes"`
	// QuotaBytes is the size at which the store refuses writes.
	QuotaBytes int64 `json:"quotaBytes"`
	// CheckedAtUnixMs is when the backend reported these figures.
	CheckedAtUnixMs int64 `json:"checkedAtUnixMs"`
}

// ClusterNodes counts the live (non-expired) nodes by role.
type ClusterNodes struct {
	Total        int    `json:"total"`
	Coordinators Counts `json:"coordinators"`
	Workers      Counts `json:"workers"`
}

// Counts counts the nodes of one role by effective health and readiness.
type Counts struct {
	Total     int `json:"total"`
	Healthy   int `json:"healthy"`
	Degraded  int `json:"degraded"`
	Unhealthy int `json:"unhealthy"`
	Unknown   int `json:"unknown"`
	Ready     int `json:"ready"`
}

// Timing is the heartbeat timing the coordinator applies.
type Timing struct {
	HeartbeatIntervalMs int64 `json:"heartbeatIntervalMs"`
	UnhealthyAfterMs    int64 `json:"unhealthyAfterMs"`
	LeaseTTLMs          int64 `json:"leaseTtlMs"`
	// StatusIntervalMs is how often at most a quiet node's status
	// (counters, capacity) is written while its heartbeats only renew its
	// lease; 0 when every heartbeat writes it.
	StatusIntervalMs int64 `json:"statusIntervalMs"`
}
