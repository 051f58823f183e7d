package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
)

// Role is the kind of process a record describes.
type Role string

// Roles a Talon process can have.
const (
	RoleCoordinator Role = "coordinator"
	RoleWorker      Role = "worker"
)

// Roles returns every valid role in canonical order.
func Roles() []Role { return []Role{RoleCoordinator, RoleWorker} }

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleCoordinator || r == RoleWorker }

// ParseRole returns the role named s, or an error naming the valid roles.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !r.Valid() {
		return "", fmt.Errorf("role %q is not one of coordinator, worker", s)
	}
	return r, nil
}

// Health is the health summary of a process. Readiness is separate (Ready).
type Health string

// Health states (ADR section 2).
const (
	HealthHealthy   Health = "healthy"
	HealthDegraded  Health = "degraded"
	HealthUnhealthy Health = "unhealthy"
	HealthUnknown   Health = "unknown"
)

// HealthStates returns every valid health state in canonical order.
func HealthStates() []Health {
	return []Health{HealthHealthy, HealthDegraded, HealthUnhealthy, HealthUnknown}
}

// Valid reports whether h is a known health state.
func (h Health) Valid() bool {
	return h == HealthHealthy || h == HealthDegraded || h == HealthUnhealthy || h == HealthUnknown
}

// ParseHealth returns the health state named s, or an error naming the valid states.
func ParseHealth(s string) (Health, error) {
	h := Health(s)
	if !h.Valid() {
		return "", fmt.Errorf("health %q is not one of healthy, degraded, unhealthy, unknown", s)
	}
	return h, nil
}

// Record is one process's leased status record. Field names in the encoded
// form are lowerCamelCase; times are integer milliseconds since the Unix
// epoch and the field name says so. The encoder, the canonical scanner
// and the /api/v1 conversions are generated from these structs and their
// json tags (internal/tools/recordgen; run go generate ./internal/cluster/
// ./internal/apiv1/ after changing a field): a new scalar field, or a new
// counter, needs no other edit in those packages.
type Record struct {
	ClusterID     string `json:"clusterId"`
	NodeID        string `json:"nodeId"`
	Role          Role   `json:"role"`
	IncarnationID string `json:"incarnationId"`
	// Address is the control address of a coordinator or the data address of a worker.
	Address string `json:"address"`
	// AdminAddress is the administration listener's advertised address; empty when disabled.
	AdminAddress    string `json:"adminAddress,omitempty"`
	Version         string `json:"version"`
	StartTimeUnixMs int64  `json:"startTimeUnixMs"`
	HeartbeatSeq    uint64 `json:"heartbeatSeq"`
	// UpdatedAtUnixMs is the time the store observed the last accepted
	// update. Stores set it; the value a process sends is ignored.
	UpdatedAtUnixMs int64  `json:"updatedAtUnixMs"`
	Health          Health `json:"health"`
	Ready           bool   `json:"ready"`
	// NotReadyReason says why a process reports Ready false ("cordoned",
	// "draining: shutting down", ...); empty when ready or unknown.
	NotReadyReason string            `json:"notReadyReason,omitempty"`
	Capacity       Capacity          `json:"capacity"`
	Counters       Counters          `json:"counters"`
	Labels         map[string]string `json:"labels,omitempty"`
	// Generation is issued by the store: it grows with every registration
	// that takes the slot (an insert or a restart) and is kept while the
	// incarnation heartbeats, so a slot's (Generation, HeartbeatSeq) only
	// ever grows while its record exists. Stores set it; the value a
	// process sends is ignored.
	Generation uint64 `json:"generation,omitempty"`
	// Superseded lists the incarnations that held the slot before this
	// one, newest first, at most MaxSuperseded: a delayed message of one of
	// them is refused even when it arrives first after a restart. Stores
	// set it; the value a process sends is ignored.
	Superseded []string `json:"superseded,omitempty"`
	// Late is set by the store, never by the process: a coordinator that
	// watched this version of the record go unchanged for unhealthy-after
	// of continuous observation marked it so, in a compare-and-swap
	// guarded by the incarnation and sequence it saw (state.Store
	// ProposeTransition). A late record is unhealthy for every reader at
	// every revision that holds it; the process's next accepted update
	// clears it. Stores set it; the value a process sends is ignored.
	Late bool `json:"late,omitempty"`
	// Drained is set by a cordoned worker once it serves no data request
	// and loads no block; false otherwise (and always for coordinators).
	Drained bool `json:"drained,omitempty"`
	// CordonedBy names the operator (the principal a coordinator
	// authenticated: a token name or a certificate identity) whose cordon
	// holds the node out of placement; empty when not cordoned. Stores
	// set it with SetMarks, never the process: an accepted update keeps
	// it (a registration takes it from the slot's previous record, or,
	// for a new record, from the process, which persisted its cordon).
	CordonedBy string `json:"cordonedBy,omitempty"`
	// CordonedAtUnixMs is when the cordon was set (the coordinator's clock).
	CordonedAtUnixMs int64 `json:"cordonedAtUnixMs,omitempty"`
	// CordonPersist says the worker keeps the cordon across restarts.
	CordonPersist bool `json:"cordonPersist,omitempty"`
	// RevokedBy names the coordinator that found this incarnation's
	// credential on its deny list; a revoked record is out of placement on
	// every coordinator. Stores set it with SetMarks; accepted updates of
	// the incarnation keep it, a new incarnation starts without it.
	RevokedBy string `json:"revokedBy,omitempty"`
	// RevokedReason says which deny-list entry matched.
	RevokedReason string `json:"revokedReason,omitempty"`
	// CredentialSerial is the serial number (lower-case hex) of the
	// certificate the process registered with, as the coordinator that
	// accepted the registration saw it on the connection; empty without
	// mutual TLS. Coordinators set it, never the process, so a deny list
	// entry by serial reaches the record on every coordinator.
	CredentialSerial string `json:"credentialSerial,omitempty"`
	// StatusAtUnixMs is when the record's status (capacity, counters,
	// health, readiness) was last written in full, by the clock of the
	// process that wrote it; a renewal (issue 36) keeps the status and
	// moves only the lease, so UpdatedAtUnixMs may be newer. Stores set
	// it; the value a process sends is ignored. 0 on records written
	// before it existed.
	StatusAtUnixMs int64 `json:"statusAtUnixMs,omitempty"`
	// HeartbeatAtUnixMs is when a store last accepted a heartbeat of the
	// process that it knows of, by the clock of the coordinator that
	// accepted it: a full write or a renewal that shows in the record.
	// Marks (late, cordon, revocation) keep it, so it says how long the
	// process has been silent whatever else wrote the record since
	// (UpdatedAtUnixMs moves with every write). A store whose renewals do
	// not show in the record (etcd) raises it when it marks the record
	// late, to when the lease was last renewed at the latest. Stores set
	// it; the value a process sends is ignored. 0 on records written
	// before it existed: UpdatedAtUnixMs stands in (HeartbeatAt).
	HeartbeatAtUnixMs int64 `json:"heartbeatAtUnixMs,omitempty"`
	// PlacementVersion and EligibleWorkers are, on a coordinator's
	// record, the placement it computed from its last view (16 hex
	// digits, and how many workers it may place on), so that any
	// coordinator, and the views that ask one, can compare them with its
	// own (issue 38: agreement was visible only to talonctl coordinators
	// list). A change is a status change: it is written within a
	// heartbeat interval. Empty and 0 on workers.
	PlacementVersion string `json:"placementVersion,omitempty"`
	EligibleWorkers  int64  `json:"eligibleWorkers,omitempty"`
	// FeatureLevel is the protocol feature level the process's build
	// speaks (BuildLevel; see feature.go). The process sets it; 0 (absent)
	// is what builds before feature levels wrote, and what an older
	// coordinator's re-encoding of the record leaves. The cluster's level
	// is the lowest among its live records (Survey).
	FeatureLevel int64 `json:"featureLevel,omitempty"`
}

// HeartbeatAt returns HeartbeatAtUnixMs, or UpdatedAtUnixMs on a record
// written before the field existed.
func (r *Record) HeartbeatAt() int64 {
	if r.HeartbeatAtUnixMs > 0 {
		return r.HeartbeatAtUnixMs
	}
	return r.UpdatedAtUnixMs
}

// Cordoned reports whether an operator's cordon holds the node out of
// placement.
func (r *Record) Cordoned() bool { return r.CordonedBy != "" }

// NotReadyCordoned is the not-ready reason a worker reports while it
// applies an operator's cordon.
const NotReadyCordoned = "cordoned"

// UncordonPending reports whether the record is not ready only because
// the worker still reports an operator's cordon that the store no longer
// holds: it learns the uncordon after its next heartbeat.
func (r *Record) UncordonPending() bool {
	return !r.Ready && r.NotReadyReason == NotReadyCordoned && !r.Cordoned()
}

// Revoked reports whether a coordinator found the incarnation's
// credential deny-listed.
func (r *Record) Revoked() bool { return r.RevokedBy != "" }

// Capacity is the bounded gauge snapshot of a process: what it holds now.
type Capacity struct {
	CapacityBytes uint64 `json:"capacityBytes"`
	ResidentBytes uint64 `json:"residentBytes"`
	Blocks        uint64 `json:"blocks"`
	Pages         uint64 `json:"pages"`
	InflightLoads uint64 `json:"inflightLoads"`
	// StoreHealthy is meaningful for coordinators: whether their last
	// snapshot of the shared store succeeded. Workers report false.
	StoreHealthy bool `json:"storeHealthy,omitempty"`
}

// Counters is the cumulative counter snapshot of a process. Every counter
// only grows within one incarnation.
type Counters struct {
	RequestsTotal         uint64 `json:"requestsTotal"`
	ErrorsTotal           uint64 `json:"errorsTotal"`
	HitsTotal             uint64 `json:"hitsTotal"`
	MissesTotal           uint64 `json:"missesTotal"`
	BytesServedTotal      uint64 `json:"bytesServedTotal"`
	BackendFetchesTotal   uint64 `json:"backendFetchesTotal"`
	BackendErrorsTotal    uint64 `json:"backendErrorsTotal"`
	EvictionsTotal        uint64 `json:"evictionsTotal"`
	PlacementLookupsTotal uint64 `json:"placementLookupsTotal"`
	PlacementErrorsTotal  uint64 `json:"placementErrorsTotal"`
	StoreErrorsTotal      uint64 `json:"storeErrorsTotal"`
}

// Key identifies the store slot a record occupies: one per process identity.
type Key struct {
	ClusterID string
	Role      Role
	NodeID    string
}

// Key returns the store slot of r.
func (r *Record) Key() Key { return Key{ClusterID: r.ClusterID, Role: r.Role, NodeID: r.NodeID} }

// String renders the key as cluster/role/node for diagnostics.
func (k Key) String() string { return k.ClusterID + "/" + string(k.Role) + "/" + k.NodeID }

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	if r == nil {
		return nil
	}
	c := *r
	c.Labels = maps.Clone(r.Labels)
	c.Superseded = slices.Clone(r.Superseded)
	return &c
}

// NewIncarnationID returns a random process-incarnation ID (ADR 0001
// section 3): 128 bits from crypto/rand as 32 lowercase hex digits, well
// within MaxIDBytes.
func NewIncarnationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
