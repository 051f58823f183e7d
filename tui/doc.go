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
//     role toggles change, never per frame: the parent computes the rows
//     and the node table orders them in setRows, setFilter and its Update.
//     View renders only the rows that fit the window (nodeTable.View), so
//     its cost does not grow with the number of nodes.
//
// Styles are rendered in full colour and downsampled by whatever writes
// the frame: bubbletea's renderer for the live view (its colour profile,
// NoTTY for NO_COLOR), a colorprofile.Writer for one frame (--once). With
// the NoTTY or Ascii profile the output has no escape sequences; everything
// that colour conveys (STALE, late heartbeats, unhealthy rows, the filter
// line's cursor) is also said in text. No package of this module's TUI
// stack queries the terminal before a program runs (textinput's clipboard
// package looks up its helper programs on PATH when it is loaded, and
// never runs them: paste is off).
//
// Concurrency: a Model is not safe for concurrent use; bubbletea calls Init,
// Update and View from one goroutine. Commands returned by the model run on
// bubbletea's goroutines and touch no model state; its timers return as soon
// as Options.Done is closed.
//
// # Sub-models
//
// The model is composed as bubbletea's composable-views example is: a
// parent that owns the program-level state and routes messages and keys,
// and sub-models that each own their state and have a small Update and
// View, pure functions of that state, the message and what the parent
// passes in (sizes, the clock's now, the selected row).
//
//   - Model (model.go) owns the fetch sequencing (seq, applied), the
//     refresh timer and backoff, the applied poll and error, the header and
//     STALE banner, the help, the : command line, the coordinators pane and
//     the focus: the body shown (nodes, :events, :coordinators), whether
//     the detail pane is open, and through the filter line whether it is
//     editing. It routes every key: ctrl+c, then a focused line (filter,
//     command), then the keys of every view (q, ?, r, :), then the focused
//     body's. Per poll it computes the rows, late threshold and late count
//     once and hands them to the sub-models.
//   - nodeTable (nodetable.go, nodetable_view.go) owns the rows, the
//     filter applied to them, sort, role and problem toggles, the visible
//     order, the cursor and the vertical and horizontal scroll. The parent
//     tells it its size (width, rows that fit under the chrome) before each
//     change, since only the parent knows the chrome. It keeps its own
//     row renderer rather than bubbles' table: that one renders cells with
//     a lipgloss style each and up to twice the window's rows per move,
//     aligns every column left, styles rows only as selected or not, and
//     scrolls by its own rule; the node table right-aligns numbers, marks
//     late rows with ! and colours rows by health, drops and scrolls
//     columns by priority, and renders only the rows in the window.
//   - filterModel (filter.go) owns the filter text and its editing, in a
//     bubbles textinput; the parent copies the text to the node table
//     whenever it changes (typing filters as you go). It draws its line
//     itself with a █ cursor, which a screen without colour still shows
//     (textinput's cursor is reverse video), and its blinking cursor and
//     clipboard paste are off: the one would need a timer that Options.Done
//     does not end, the other reads the clipboard from inside the model.
//   - detailModel (detail.go) owns the detail pane's scroll; the parent
//     gives it the selected node's row, the poll's timing, and before each
//     key how far the text can scroll.
//   - eventsModel (panes.go) owns the answering coordinator's newest
//     events, taken from each PollMsg the parent applied, drawn as a pane
//     under the table of a tall terminal (taking the rows a short table
//     leaves, rather than blank lines) or as the :events body (each event
//     wrapped to the width, never cut).
package tui
