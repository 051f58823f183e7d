package coordinator

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/talonhq/talon/internal/protocol"
)

// handler serves the control requests (controlHandler): the view,
// placement lookups, and the writes of workers (registrations,
// heartbeats, deregistrations, attestations) within the coordinator's
// admission limits, and a worker's questions about itself (instructions,
// jobs). It owns those limits: the write slots, the per-node and per-peer
// rates and the log limiter of the store's authorization refusals; the
// rest it reads from the coordinator it serves.
type handler struct {
	*Coordinator
	writeSlots  chan struct{} // one token per store write in flight (Limits.MaxInflightWrites)
	rates       *writeRates   // per-node write rates
	attestRates *writeRates   // per-peer attestations (TokenReviews)
	authzLog    *rate.Limiter // the store's authorization refusals of client writes, for the log
}

func newHandler(c *Coordinator) *handler {
	l := c.opts.Limits
	return &handler{
		Coordinator: c,
		writeSlots:  make(chan struct{}, l.MaxInflightWrites),
		rates:       newWriteRates(c.opts.Timing.HeartbeatInterval, l.NodeWritesPerInterval, l.MaxRecords),
		attestRates: newPeerRates(attestEvery, attestBurst, 2*l.MaxRecords),
		authzLog:    rate.NewLimiter(rate.Every(10*time.Second), 1),
	}
}

func (h *handler) view(ctx context.Context) error {
	_, err := h.View(ctx)
	return err
}

func (h *handler) upsert(ctx context.Context, cn *conn, op string, payload []byte) protocol.Message {
	return h.admitted(op, func() protocol.Message { return h.upsertRecord(ctx, cn, op, payload) })
}

func (h *handler) remove(ctx context.Context, cn *conn, m *protocol.Deregister) protocol.Message {
	return h.admitted("deregister", func() protocol.Message { return h.deregister(ctx, cn, m) })
}

// lookup answers a placement lookup.
func (h *handler) lookup(ctx context.Context, m *protocol.PlacementLookup) protocol.Message {
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("talon.placement.replicas", int(m.Replicas)), attribute.Int("talon.placement.key_bytes", len(m.Key)))
	owners, version, err := h.Lookup(ctx, string(m.Key), int(m.Replicas))
	if err != nil {
		return wireError(err)
	}
	pr := &protocol.PlacementResponse{Version: uint64(version), Owners: make([]protocol.Owner, len(owners))}
	for i, o := range owners {
		pr.Owners[i] = protocol.Owner{NodeID: o.NodeID, DataAddress: o.Address}
	}
	return pr
}
