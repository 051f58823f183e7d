package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// The shared event log (state.EventLog) is core/v1 Events in the store's
// namespace, so `kubectl get events` lists them: one Event per node event,
// named talon-<event-id> (a Create of an existing name is AlreadyExists:
// another coordinator wrote it), involving the node's Lease, with reason
// the event type in CamelCase and a human-readable message. The exact
// event rides in the AnnotationEvent annotation. The API server deletes
// Events after its --event-ttl (1h by default); every eventTrimEvery
// creates, the writer also deletes the oldest beyond state.DefaultEventMax.
const (
	// AnnotationEvent holds the JSON of the state.NodeEvent.
	AnnotationEvent = "talon.io/event"
	// EventComponent is the Events' source and reporting controller.
	EventComponent = "talon-coordinator"
	eventTrimEvery = 32
)

// eventLog is the shared event log (state.EventLog, state.EventWatcher):
// the namespace's Events of Talon.
type eventLog struct {
	events    corev1client.EventInterface
	namespace string
	timeout   time.Duration // Options.RequestTimeout
	now       func() time.Time
	// created counts this log's creates, to trim every eventTrimEvery.
	created atomic.Uint64
}

// EventName returns the name of the Event of the event with ID id.
func EventName(id string) string { return "talon-" + id }

// AppendEvent implements state.EventLog.
func (g *eventLog) AppendEvent(ctx context.Context, ev state.NodeEvent) (bool, error) {
	if err := state.ValidateEvent(ev); err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	obj, err := g.kubeEvent(ev)
	if err != nil {
		return false, err
	}
	_, err = g.events.Create(ctx, obj, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, mapError("kube append event", err)
	}
	if g.created.Add(1)%eventTrimEvery == 0 {
		if err := g.trimEvents(ctx, ev.ClusterID); err != nil {
			return true, mapError("kube trim events", err)
		}
	}
	return true, nil
}

// opCtx bounds one request of the logs by timeout, unless ctx has a
// deadline of its own.
func opCtx(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// kubeEvent builds the core/v1 Event of ev.
func (g *eventLog) kubeEvent(ev state.NodeEvent) (*corev1.Event, error) {
	raw, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	involved := corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: g.namespace,
		Name: "talon-cluster-" + LabelValue(ev.ClusterID)}
	if k := (cluster.Key{ClusterID: ev.ClusterID, Role: cluster.Role(ev.Role), NodeID: ev.NodeID}); k.Role.Valid() && ev.NodeID != "" {
		involved.Name = LeaseName(k)
	}
	t := metav1.NewTime(ev.Time)
	kind := corev1.EventTypeNormal
	if strings.Contains(string(ev.Type), "removed") || strings.Contains(string(ev.Type), "revoked") || ev.New == string(cluster.HealthUnhealthy) {
		kind = corev1.EventTypeWarning
	}
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name: EventName(ev.ID), Namespace: g.namespace,
			Labels:      map[string]string{LabelManagedBy: ManagedByValue, LabelCluster: LabelValue(ev.ClusterID)},
			Annotations: map[string]string{AnnotationEvent: string(raw)},
		},
		InvolvedObject: involved, Reason: CamelCase(string(ev.Type)), Message: EventMessage(ev), Type: kind,
		Source: corev1.EventSource{Component: EventComponent, Host: ev.Coordinator}, FirstTimestamp: t, LastTimestamp: t, Count: 1,
		ReportingController: "talon.io/coordinator", ReportingInstance: ev.Coordinator,
	}, nil
}

// CamelCase turns an event type (node_expired_or_removed) into an Event
// reason (NodeExpiredOrRemoved).
func CamelCase(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(s, "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// EventMessage is the human-readable message of ev.
func EventMessage(ev state.NodeEvent) string {
	msg := strings.ReplaceAll(string(ev.Type), "_", " ")
	if ev.NodeID != "" {
		msg = ev.Role + " " + ev.NodeID + ": " + msg
	}
	if ev.Old != "" || ev.New != "" {
		msg += fmt.Sprintf(" (%s -> %s)", orNone(ev.Old), orNone(ev.New))
	}
	if ev.Reason != "" {
		msg += ": " + ev.Reason
	}
	return msg
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// readEvents returns the cluster's events, oldest first.
func (g *eventLog) readEvents(ctx context.Context, clusterID string) ([]state.NodeEvent, error) {
	list, err := g.events.List(ctx, metav1.ListOptions{LabelSelector: clusterSelector(clusterID)})
	if err != nil {
		return nil, err
	}
	out := make([]state.NodeEvent, 0, len(list.Items))
	for _, obj := range list.Items {
		var e state.NodeEvent
		if json.Unmarshal([]byte(obj.Annotations[AnnotationEvent]), &e) != nil || e.ClusterID != clusterID || EventName(e.ID) != obj.Name {
			continue
		}
		out = append(out, e)
	}
	state.SortEvents(out)
	return out, nil
}

// trimEvents deletes the Events beyond state.DefaultEventMax that
// state.Evict chooses (a source over its quota first, operator and
// security events last); NotFound (another writer's trim) is no error.
func (g *eventLog) trimEvents(ctx context.Context, clusterID string) error {
	all, err := g.readEvents(ctx, clusterID)
	if err != nil {
		return err
	}
	for _, e := range state.Evict(all, state.DefaultEventMax) {
		if err := g.events.Delete(ctx, EventName(e.ID), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// ListEvents implements state.EventLog.
func (g *eventLog) ListEvents(ctx context.Context, clusterID string, since time.Time, limit int) ([]state.NodeEvent, error) {
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	all, err := g.readEvents(ctx, clusterID)
	if err != nil {
		return nil, mapError("kube list events", err)
	}
	if floor := g.now().Add(-state.DefaultEventMaxAge); since.Before(floor) {
		since = floor
	}
	// A writer trims after its creates; until then the log may hold more
	// than the bound, and the list shows what the next trim keeps.
	return state.TrimEvents(state.KeepEvents(all, state.DefaultEventMax), since, limit), nil
}

var (
	_ state.EventLog = (*Store)(nil)
	_ state.EventLog = (*eventLog)(nil)
)

// WatchEvents implements state.EventWatcher: a watch of the cluster's
// Events from the resource version of a one-item list (so the API server
// does not first replay every Event it keeps).
func (g *eventLog) WatchEvents(ctx context.Context, clusterID string) <-chan state.NodeEvent {
	out := make(chan state.NodeEvent, 64)
	go func() {
		defer close(out)
		lctx, cancel := opCtx(ctx, g.timeout)
		list, err := g.events.List(lctx, metav1.ListOptions{LabelSelector: clusterSelector(clusterID), Limit: 1})
		cancel()
		if err != nil {
			return
		}
		w, err := g.events.Watch(ctx, metav1.ListOptions{LabelSelector: clusterSelector(clusterID), ResourceVersion: list.ResourceVersion})
		if err != nil {
			return
		}
		defer w.Stop()
		for wev := range w.ResultChan() {
			obj, ok := wev.Object.(*corev1.Event)
			if !ok || (wev.Type != watch.Added && wev.Type != watch.Modified) {
				if wev.Type == watch.Error {
					return
				}
				continue
			}
			var e state.NodeEvent
			if json.Unmarshal([]byte(obj.Annotations[AnnotationEvent]), &e) != nil || e.ClusterID != clusterID || EventName(e.ID) != obj.Name {
				continue
			}
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

var _ state.EventWatcher = (*Store)(nil)
