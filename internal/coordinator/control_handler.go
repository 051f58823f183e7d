package coordinator

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/talonhq/talon/internal/protocol"
)

// handler is the coordinator as the control-protocol server sees it
// (controlHandler): the view, lookups, and the writes within the
// coordinator's admission limits.
type handler struct{ c *Coordinator }

func (h handler) view(ctx context.Context) error {
	_, err := h.c.View(ctx)
	return err
}

func (h handler) lookup(ctx context.Context, m *protocol.PlacementLookup) protocol.Message {
	return h.c.placementResponse(ctx, m)
}

func (h handler) upsert(ctx context.Context, cn *conn, op string, payload []byte) protocol.Message {
	return h.c.admitted(op, func() protocol.Message { return h.c.upsert(ctx, cn, op, payload) })
}

func (h handler) remove(ctx context.Context, cn *conn, m *protocol.Deregister) protocol.Message {
	return h.c.admitted("deregister", func() protocol.Message { return h.c.deregister(ctx, cn, m) })
}

func (h handler) attest(ctx context.Context, cn *conn, token []byte) protocol.Message {
	return h.c.attest(ctx, cn, token)
}

func (h handler) instructions(cn *conn, m *protocol.Instructions) protocol.Message {
	return h.c.instructions(cn, m)
}

func (h handler) jobs(cn *conn, m *protocol.Jobs) protocol.Message {
	return h.c.jobOrders(cn, m)
}

// placementResponse answers a placement lookup.
func (c *Coordinator) placementResponse(ctx context.Context, m *protocol.PlacementLookup) protocol.Message {
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("talon.placement.replicas", int(m.Replicas)), attribute.Int("talon.placement.key_bytes", len(m.Key)))
	owners, version, err := c.Lookup(ctx, string(m.Key), int(m.Replicas))
	if err != nil {
		return wireError(err)
	}
	pr := &protocol.PlacementResponse{Version: uint64(version), Owners: make([]protocol.Owner, len(owners))}
	for i, o := range owners {
		pr.Owners[i] = protocol.Owner{NodeID: o.NodeID, DataAddress: o.Address}
	}
	return pr
}
