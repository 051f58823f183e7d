package bench

import (
	"context"
	"errors"
	"time"
)

// FleetOptions configures Fleet, the simulated workers of `talon bench
// fleet`.
type FleetOptions struct {
	// Coordinators are control addresses; worker w registers and
	// heartbeats through Coordinators[w % len(Coordinators)] over a
	// connection of its own, as a real worker holds one.
	Coordinators []string
	ClusterID    string
	// NodePrefix starts the workers' node IDs (NodePrefix + 5 digits):
	// several fleets against one cluster need different ones.
	NodePrefix string
	Workers    int
	// Interval is each worker's heartbeat interval; Duration how long the
	// fleet heartbeats, zero until ctx ends.
	Interval time.Duration
	Duration time.Duration
	// RegisterAttempts bounds the attempts of a registration the
	// coordinators shed; default 600 (about half a minute of backoffs).
	RegisterAttempts int
	// Source, when set, is the local IP address the workers dial from.
	Source string
	// Registered, when set, is called once every worker has registered,
	// with the time that took, before the first heartbeat; the
	// heartbeats start when it returns, so it may wait for a go-ahead.
	// A non-nil error ends the fleet.
	Registered func(took time.Duration) error
}

// FleetReport is what a fleet measured: what `talon bench fleet` prints.
type FleetReport struct {
	Coordinators    []string `json:"coordinators"`
	Workers         int      `json:"workers"`
	IntervalSeconds float64  `json:"intervalSeconds"`
	// RegisterSeconds is how long registering every worker took.
	RegisterSeconds float64 `json:"registerSeconds"`
	// ExpectedPerSecond is the offered load, Workers/Interval.
	ExpectedPerSecond float64 `json:"expectedPerSecond"`
	// Heartbeats are the heartbeats accepted (ops, perSecond, latency)
	// and the failures by code, over ElapsedSeconds.
	Heartbeats Summary `json:"heartbeats"`
	// Sent counts the heartbeats sent; Missed the heartbeat times skipped
	// because the worker's previous heartbeat was still unanswered.
	Sent   int `json:"sent"`
	Missed int `json:"missed"`
	// FirstError is the first failure's message, for diagnosis.
	FirstError string `json:"firstError,omitempty"`
	// CPUSeconds is the fleet process's CPU time while it heartbeat, when
	// the caller measured it (talon bench fleet does, on Linux).
	CPUSeconds float64 `json:"cpuSeconds,omitempty"`

	Result Paced `json:"-"`
}

// Fleet registers o.Workers simulated workers (the typical record, each
// with a connection of its own) through o.Coordinators, then has each
// heartbeat once per o.Interval, open loop (RunPaced: the workers'
// heartbeats spread evenly over the interval, a slow answer delaying only
// its own worker), for o.Duration or until ctx ends, and reports what it
// measured. Every heartbeat but one in each status interval only renews
// the record's lease at the coordinator, as a real worker's do. A refused
// heartbeat is counted by its code and not retried: the worker's next
// heartbeat is the next interval's.
func Fleet(ctx context.Context, o FleetOptions) (FleetReport, error) {
	if o.Interval <= 0 {
		return FleetReport{}, errors.New("fleet: the interval must be positive")
	}
	if o.RegisterAttempts < 1 {
		o.RegisterAttempts = 600
	}
	rep := FleetReport{Coordinators: o.Coordinators, Workers: o.Workers, IntervalSeconds: o.Interval.Seconds(),
		ExpectedPerSecond: float64(o.Workers) / o.Interval.Seconds()}
	start := time.Now()
	h, err := Register(ctx, HeartbeatOptions{Coordinators: o.Coordinators, ClusterID: o.ClusterID, NodePrefix: o.NodePrefix,
		Writers: o.Workers, RegisterAttempts: o.RegisterAttempts, Source: o.Source})
	if err != nil {
		return rep, err
	}
	defer h.Close()
	took := time.Since(start)
	rep.RegisterSeconds = took.Seconds()
	if o.Registered != nil {
		if err := o.Registered(took); err != nil {
			return rep, err
		}
	}
	d := o.Duration
	if d <= 0 {
		d = 1<<63 - 1
	}
	res := RunPaced(ctx, o.Workers, o.Interval, d, h.Beat)
	rep.Result = res
	rep.Heartbeats = res.Summary()
	rep.Sent, rep.Missed = res.Sent, res.Missed
	if res.FirstErr != nil {
		rep.FirstError = res.FirstErr.Error()
	}
	return rep, nil
}
