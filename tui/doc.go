// Package tui holds the bubbletea model of `talonctl top`, a live view of a
// Talon cluster read through /api/v1 (internal/apiv1).
//
// The model does no I/O. Cluster data arrives as messages (PollMsg,
// FetchErrorMsg); the model asks for data by calling Options.Fetch, a
// function supplied by the command that returns a tea.Cmd doing the HTTP
// call. Update and View are therefore pure functions of the model, the
// message and the injected clock (Options.Now), and tests drive them
// directly or through teatest with a fixed clock.
//
// A Poll is one read of /api/v1 (the cluster summary and the node list).
// "Snapshot" is kept for what the coordinator serves it from, the store read
// of package state; the screen says "snapshot" too, as operators know it.
//
// Invariants:
//
//   - Last good data stays. An error (unreachable, timeout, 503, anything
//     else) never clears the poll on screen and never quits: the model
//     keeps the last poll it applied, dims it and shows a STALE banner
//     with the poll's observation time and age, the error, and when the
//     next attempt is due. The banner goes as soon as a fresh poll is
//     applied. Before the first poll the same banner explains why there
//     is no data yet.
//   - Ordering. Every fetch carries a sequence number from Fetch's seq
//     argument. A response (poll or error) whose sequence number is not
//     greater than that of the newest response applied is dropped, so a
//     slow old response never overwrites a newer one.
//   - One timer. At most one refresh timer is live: each newly scheduled
//     timer supersedes the previous one (generation counter), and a timer is
//     scheduled only by the response to the newest fetch issued, so pressing
//     r or receiving late responses never multiplies the polling rate.
//   - Backoff. After n consecutive failures the next attempt waits
//     Backoff.Delay(n): exponential from the refresh interval, with jitter,
//     capped, and never shorter than a server's Retry-After (within the cap).
//   - Rates are computed between the consecutive polls of one
//     incarnation, over the interval between the two heartbeats that carried
//     the counters. A new incarnation or a counter that went backwards starts
//     a new baseline: the rate is unknown until the next heartbeat.
//   - Scale. Per-poll work (rates, cell text, column widths, filtering,
//     sorting) is done once when a poll, the filter, the sort or the
//     role toggles change, never per frame. View renders only the rows that
//     fit the window, so its cost does not grow with the number of nodes.
//
// Styles are rendered in full colour and downsampled by whatever writes
// the frame: bubbletea's renderer for the live view (its colour profile,
// NoTTY for NO_COLOR), a colorprofile.Writer for one frame (--once). With
// the NoTTY or Ascii profile the output has no escape sequences; everything
// that colour conveys (STALE, late heartbeats, unhealthy rows) is also said
// in text. No package of this module's TUI stack queries the terminal
// before a program runs.
//
// Concurrency: a Model is not safe for concurrent use; bubbletea calls Init,
// Update and View from one goroutine. Commands returned by the model run on
// bubbletea's goroutines and touch no model state; its timers return as soon
// as Options.Done is closed.
package tui
