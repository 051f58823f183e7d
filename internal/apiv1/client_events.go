package apiv1

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// EventFilter selects events in Events. Zero fields do not filter.
type EventFilter struct {
	NodeID string
	Types  []string
	// After returns only events with a larger sequence number.
	After uint64
	// SinceUnixMs returns only events at or after this time.
	SinceUnixMs int64
	// Limit bounds the page; 0 means the server's DefaultEventLimit.
	Limit int
	// Watch makes the server wait up to WatchSeconds (0: its default) for
	// a matching event after After when none is kept yet: a long poll.
	Watch        bool
	WatchSeconds int
}

// watchKey carries a long poll's wait into attempt, which extends the
// attempt's timeout by it.
type watchKey struct{}

// Events returns one page of the answering coordinator's events. Events
// are per coordinator: to see every coordinator's, use one client per
// coordinator.
func (c *Client) Events(ctx context.Context, f EventFilter, opts ...CallOption) (*EventList, error) {
	q := url.Values{}
	if f.NodeID != "" {
		q.Set(ParamNode, f.NodeID)
	}
	for _, t := range f.Types {
		q.Add(ParamType, t)
	}
	if f.After != 0 {
		q.Set(ParamAfter, strconv.FormatUint(f.After, 10))
	}
	if f.SinceUnixMs != 0 {
		q.Set(ParamSince, strconv.FormatInt(f.SinceUnixMs, 10))
	}
	if f.Limit != 0 {
		q.Set(ParamLimit, strconv.Itoa(f.Limit))
	}
	if f.Watch {
		q.Set(ParamWatch, "true")
		wait := f.WatchSeconds
		if wait == 0 {
			wait = DefaultWatchSeconds
		}
		q.Set(ParamTimeout, strconv.Itoa(wait))
		ctx = context.WithValue(ctx, watchKey{}, time.Duration(wait)*time.Second)
	}
	var out EventList
	q, raw := applyOptions(q, opts)
	if err := c.getJSON(ctx, PathEvents, q, raw, &out); err != nil {
		return nil, err
	}
	if out.Items == nil {
		out.Items = []Event{}
	}
	return &out, nil
}
