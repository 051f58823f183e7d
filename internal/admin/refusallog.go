package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/talonhq/talon/internal/netlimit"
)

// refusalEvery is the window of the refusal log: the first refusal of a
// principal or client in a window is logged at once, in full; the others
// are counted, and one line at the window's end says how many ("N
// refusals from X in the last minute").
const refusalEvery = time.Minute

// maxRefusalKeys bounds the principals and clients whose refusals are
// being counted; past it the idlest are dropped, their uncounted
// refusals summed into one line of their own.
const maxRefusalKeys = 10000

// refusalLines bounds the refusal log's lines a minute in all (its burst;
// refilled at one a second), and maxSummaries the summaries of one flush
// (the most refused first, the rest in one line): refusals from many
// addresses (an IPv6 prefix) cost at most that many lines, not one each.
const (
	refusalLines = 60
	maxSummaries = 20
)

// maxLoggedBytes bounds what of a request (its path, its method) a log
// line carries.
const maxLoggedBytes = 256

// refusalKey is whom refusals are counted for: a principal (a token's
// name, for the audit lines of refused writes), else a client address.
type refusalKey struct {
	principal string
	client    netip.Addr
}

func (k refusalKey) attr() slog.Attr {
	if k.principal != "" {
		return slog.String("principal", k.principal)
	}
	return slog.String("client", k.client.String())
}

func (k refusalKey) String() string {
	if k.principal != "" {
		return "principal " + k.principal
	}
	return "client " + k.client.String()
}

// refusalLog rate-limits and aggregates the log lines of refused admin
// requests, per principal or client: a scanner, a client retrying in a
// loop or a token without the scope it uses costs two lines a minute,
// whatever its rate, and memory for at most maxRefusalKeys of them.
type refusalLog struct {
	log  *slog.Logger
	now  func() time.Time
	keys *netlimit.Keyed[refusalKey, *refusals]
	// lines is the budget of lines of all keys (refusalLines).
	lines *rate.Limiter
	// lost counts refusals not yet summarized when their key was
	// dropped to make room, or not logged for want of lines.
	lost atomic.Int64
}

type refusals struct {
	level   slog.Level
	since   time.Time // the window's start: its first refusal, logged
	count   int       // refusals since, not logged one by one
	lastOp  string    // the latest of them
	lastSts int
}

// refusalSummary is one "N refusals" line to write.
type refusalSummary struct {
	key    refusalKey
	r      refusals
	window time.Duration
}

func newRefusalLog(log *slog.Logger, now func() time.Time) *refusalLog {
	l := &refusalLog{log: log, now: now, lines: rate.NewLimiter(rate.Every(time.Second), refusalLines)}
	l.keys = netlimit.NewKeyed[refusalKey](maxRefusalKeys, refusalEvery, func() *refusals { return &refusals{} },
		func(_ refusalKey, r *refusals) { l.lost.Add(int64(r.count)) })
	return l
}

// note logs a refusal of key, at level with msg and args, when it is the
// first of key's window; otherwise it is counted, and summarized with
// op and status when the window ends (at the next refusal or flush).
func (l *refusalLog) note(key refusalKey, level slog.Level, op string, status int, msg string, args ...any) {
	now := l.now()
	var first bool
	var sum *refusalSummary
	l.keys.Do(key, now, func(r *refusals) {
		if !r.since.IsZero() && now.Sub(r.since) < refusalEvery {
			r.count++
			r.lastOp, r.lastSts = op, status
			return
		}
		if r.count > 0 {
			sum = &refusalSummary{key: key, r: *r, window: now.Sub(r.since)}
		}
		*r = refusals{level: level, since: now}
		first = true
	})
	if sum != nil {
		l.summarize(*sum, now)
	}
	if first && !l.lines.AllowN(now, 1) {
		l.lost.Add(1)
		return
	}
	if first {
		l.log.Log(context.Background(), level, msg, append(args, "logged", "the first refusal a minute of each principal or client; the rest are counted")...)
	}
}

// flush writes the summary of every window that has ended, and of the
// refusals whose keys were dropped. Serve calls it every refusalEvery.
func (l *refusalLog) flush() {
	now := l.now()
	var sums []refusalSummary
	l.keys.Each(func(k refusalKey, r *refusals) bool {
		if r.count > 0 && now.Sub(r.since) >= refusalEvery {
			sums = append(sums, refusalSummary{key: k, r: *r, window: now.Sub(r.since)})
			r.count = 0
		}
		return true
	})
	slices.SortFunc(sums, func(a, b refusalSummary) int { return b.r.count - a.r.count })
	for i, s := range sums {
		if i >= maxSummaries {
			l.lost.Add(int64(s.r.count))
			continue
		}
		l.summarize(s, now)
	}
	if n := l.lost.Swap(0); n > 0 {
		l.log.Warn(fmt.Sprintf("%d more refusals in the last minute, from principals or clients beyond the %d summarized or no longer tracked", n, maxSummaries), "refusals", n)
	}
}

// summarize writes s's line, or counts it as lost when the line budget
// is spent.
func (l *refusalLog) summarize(s refusalSummary, now time.Time) {
	if !l.lines.AllowN(now, 1) {
		l.lost.Add(int64(s.r.count))
		return
	}
	l.log.Log(context.Background(), s.r.level, fmt.Sprintf("%d refusals from %s in the last %s", s.r.count, s.key, s.window.Round(time.Second)),
		"refusals", s.r.count, s.key.attr(), "since", s.r.since, "last_operation", s.r.lastOp, "last_status", s.r.lastSts)
}

// loggable is s as a log line may carry it: as it is when short and
// plain (a node ID, a method), else %q-quoted and cut to maxLoggedBytes
// with its length noted, so that a request cannot put control
// characters, or kilobytes, in a line.
func loggable(s string) string {
	if len(s) <= maxLoggedBytes && plain(s) {
		return s
	}
	if len(s) > maxLoggedBytes {
		return fmt.Sprintf("%q... (%d bytes)", s[:maxLoggedBytes], len(s))
	}
	return strconv.Quote(s)
}

func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == ' ') {
			return false
		}
	}
	return s != ""
}
