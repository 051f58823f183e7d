package tui

import (
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/talonhq/talon/internal/apiv1"
)

// FetchFunc starts fetch number seq and returns the command that performs
// it. The command must end with a PollMsg or a FetchErrorMsg carrying
// the same seq (it should bound itself with a timeout so that it always
// ends). FetchFunc itself must not block.
type FetchFunc func(seq uint64) tea.Cmd

// Poll is one read of the cluster: the cluster summary and the node
// list. The two come from separate requests and may reflect slightly
// different store revisions; the header shows the summary's.
type Poll struct {
	Cluster apiv1.Cluster
	// Nodes are all live nodes, in any order.
	Nodes []apiv1.Node
	// Server is the base URL that answered, when the fetcher knows it;
	// Cluster.ServedBy names the coordinator either way.
	Server string
	// Events are the answering coordinator's newest events, oldest first
	// (at most MaxEvents); nil when it gave none. A tall terminal shows
	// them below the table.
	Events []apiv1.Event
}

// MaxEvents is how many events a Poll carries at most.
const MaxEvents = 50

// PollMsg delivers the result of a successful fetch.
type PollMsg struct {
	// Seq is the fetch's sequence number (FetchFunc's seq).
	Seq  uint64
	Poll *Poll
}

// FetchErrorMsg delivers the error of a failed fetch. Err is shown to the
// operator; an *apiv1.APIError's RetryAfter lengthens the backoff.
type FetchErrorMsg struct {
	Seq uint64
	Err error
}

// refreshMsg is a refresh timer firing; gen identifies the timer so that a
// superseded one is ignored.
type refreshMsg struct{ gen uint64 }

// clockMsg redraws relative times (data age, retry countdown) once a
// second.
type clockMsg struct{}

// clockInterval is how often relative times are redrawn.
const clockInterval = time.Second

// after returns a command that delivers msg after d, or nil as soon as
// done is closed, so that no timer goroutine outlives the program.
func after(done <-chan struct{}, d time.Duration, msg tea.Msg) tea.Cmd {
	return func() tea.Msg {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return msg
		case <-done:
			return nil
		}
	}
}
