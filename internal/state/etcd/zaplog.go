package etcd

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core that hands the etcd client's warnings and
// errors to the store's slog.Logger (component etcd-client); its debug and
// info chatter is dropped. Every line names the configured endpoints
// (the client's own "target" is an opaque etcd-endpoints://0x… resolver
// address), and a message repeated within repeatEvery is counted, not
// logged again: an outage logs each kind of warning once per interval.
type slogCore struct {
	log    *slog.Logger
	fields []zapcore.Field
	rep    *repeats
}

// repeatEvery is the least time between two lines of one message.
const repeatEvery = 10 * time.Second

// repeats remembers when each message was last logged and how many
// repeats were suppressed since. Shared by a core and its With children.
type repeats struct {
	now func() time.Time

	mu   sync.Mutex // guards last and held
	last map[string]time.Time
	held map[string]int
}

// admit reports whether msg may be logged now, and how many repeats of it
// were suppressed since it last was.
func (r *repeats) admit(msg string) (ok bool, suppressed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if at, seen := r.last[msg]; seen && now.Sub(at) < repeatEvery {
		r.held[msg]++
		return false, 0
	}
	if len(r.last) > 256 { // bounded: messages are few, but never grow without end
		clear(r.last)
		clear(r.held)
	}
	suppressed = r.held[msg]
	r.last[msg], r.held[msg] = now, 0
	return true, suppressed
}

// clientLogger returns the zap logger the etcd client is given.
func clientLogger(log *slog.Logger, endpoints []string, now func() time.Time) *zap.Logger {
	return zap.New(&slogCore{
		log: log.With("component", "etcd-client", "endpoints", strings.Join(endpoints, ",")),
		rep: &repeats{now: now, last: map[string]time.Time{}, held: map[string]int{}},
	})
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, rep: c.rep, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	ok, suppressed := c.rep.admit(e.Message)
	if !ok {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields)+2)
	for k, v := range enc.Fields {
		if k == "target" {
			continue // etcd-endpoints://0x…: the endpoints attribute names them
		}
		attrs = append(attrs, k, v)
	}
	if suppressed > 0 {
		attrs = append(attrs, "repeats_not_logged", suppressed)
	}
	level := slog.LevelWarn
	if e.Level >= zapcore.ErrorLevel {
		level = slog.LevelError
	}
	c.log.Log(context.Background(), level, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }
