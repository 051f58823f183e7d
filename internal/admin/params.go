package admin

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
)

// query checks a request's query parameters against the ones a route
// accepts and hands out their values. Unknown parameters and repeated
// single-valued ones are errors: a mistyped filter must not silently
// widen an answer.
type query struct {
	v url.Values
}

// parseQuery parses raw, accepting the parameters in single (at most one
// value) and multi (repeatable).
func parseQuery(raw string, single, multi []string) (query, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return query{}, badParam("query", raw, "must be a valid URL query: %v", err)
	}
	for name, vals := range v {
		switch {
		case name == "":
			return query{}, badParam("query", raw, "has a parameter without a name")
		case contains(multi, name):
		case contains(single, name):
			if len(vals) > 1 {
				return query{}, badParam(name, strings.Join(vals, ","), "must be given at most once")
			}
		default:
			accepted := append(append([]string{}, single...), multi...)
			return query{}, badParam(name, strings.Join(vals, ","), "is not a parameter of this endpoint (accepted: %s)", strings.Join(accepted, ", "))
		}
	}
	return query{v: v}, nil
}

// cut returns s, cut to n bytes with "..." when longer.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// get returns the value of a single-valued parameter and whether it was given.
func (q query) get(name string) (string, bool) {
	vals, ok := q.v[name]
	if !ok || len(vals) == 0 {
		return "", false
	}
	return vals[0], true
}

// boolean parses a true/false parameter; absent is def.
func (q query) boolean(name string, def bool) (bool, error) {
	s, ok := q.get(name)
	if !ok {
		return def, nil
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, badParam(name, s, "must be true or false")
}

// intRange parses an integer parameter in [lo, hi]; absent is def.
func (q query) intRange(name string, def, lo, hi int) (int, error) {
	s, ok := q.get(name)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badParam(name, s, "must be an integer from %d to %d", lo, hi)
	}
	return n, nil
}

// nodeFilter is the parsed filter of GET /api/v1/nodes.
type nodeFilter struct {
	role   cluster.Role   // "" = any
	health cluster.Health // "" = any
	ready  *bool
	labels [][2]string // all must match
	// selector is the labelSelector; nil selects everything.
	selector labels.Selector
}

// match reports whether rec, whose effective health is health, passes.
func (f *nodeFilter) match(rec *cluster.Record, health cluster.Health) bool {
	if f.role != "" && rec.Role != f.role {
		return false
	}
	if f.health != "" && health != f.health {
		return false
	}
	if f.ready != nil && rec.Ready != *f.ready {
		return false
	}
	for _, kv := range f.labels {
		if v, ok := rec.Labels[kv[0]]; !ok || v != kv[1] {
			return false
		}
	}
	if f.selector != nil && !f.selector.Matches(labels.Set(rec.Labels)) {
		return false
	}
	return true
}

// listParams are the parameters of GET /api/v1/nodes.
type listParams struct {
	filter     nodeFilter
	limit      int
	after      *cursor // nil: from the start
	allowStale bool
}

func parseListParams(raw string) (*listParams, error) {
	q, err := parseQuery(raw,
		[]string{apiv1.ParamRole, apiv1.ParamHealth, apiv1.ParamReady, apiv1.ParamLimit, apiv1.ParamContinue, apiv1.ParamAllowStale, apiv1.ParamLabelSelector},
		[]string{apiv1.ParamLabel})
	if err != nil {
		return nil, err
	}
	p := &listParams{}
	if s, ok := q.get(apiv1.ParamRole); ok {
		if p.filter.role, err = cluster.ParseRole(s); err != nil {
			return nil, badParam(apiv1.ParamRole, s, "must be coordinator or worker")
		}
	}
	if s, ok := q.get(apiv1.ParamHealth); ok {
		if p.filter.health, err = cluster.ParseHealth(s); err != nil {
			return nil, badParam(apiv1.ParamHealth, s, "must be healthy, degraded, unhealthy or unknown")
		}
	}
	if _, ok := q.get(apiv1.ParamReady); ok {
		r, err := q.boolean(apiv1.ParamReady, false)
		if err != nil {
			return nil, err
		}
		p.filter.ready = &r
	}
	exact := q.v[apiv1.ParamLabel]
	if len(exact) > cluster.MaxLabels {
		return nil, badParam(apiv1.ParamLabel, strings.Join(exact, ","), "must be given at most %d times", cluster.MaxLabels)
	}
	for _, s := range exact {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, badParam(apiv1.ParamLabel, s, "must be key=value")
		}
		if err := cluster.ValidateLabelKey(k); err != nil {
			return nil, badParam(apiv1.ParamLabel, s, "key: %v", err)
		}
		if len(v) > cluster.MaxLabelValueBytes {
			return nil, badParam(apiv1.ParamLabel, s, "value must be at most %d bytes", cluster.MaxLabelValueBytes)
		}
		p.filter.labels = append(p.filter.labels, [2]string{k, v})
	}
	if s, ok := q.get(apiv1.ParamLabelSelector); ok {
		if p.filter.selector, err = apiv1.ParseLabelSelector(s); err != nil {
			// The library's detail can quote a long regular expression.
			return nil, badParam(apiv1.ParamLabelSelector, s, "%s", cut(err.Error(), 280))
		}
	}
	if p.limit, err = q.intRange(apiv1.ParamLimit, apiv1.DefaultLimit, 1, apiv1.MaxLimit); err != nil {
		return nil, err
	}
	if s, ok := q.get(apiv1.ParamContinue); ok && s != "" {
		c, err := decodeContinue(s)
		if err != nil {
			return nil, badParam(apiv1.ParamContinue, s, "%v", err)
		}
		p.after = &c
	}
	if p.allowStale, err = q.boolean(apiv1.ParamAllowStale, false); err != nil {
		return nil, err
	}
	return p, nil
}

// parseStaleOnly parses the parameters of an endpoint that takes
// allowStale and the extra single-valued parameters.
func parseStaleOnly(raw string, extra ...string) (query, bool, error) {
	q, err := parseQuery(raw, append([]string{apiv1.ParamAllowStale}, extra...), nil)
	if err != nil {
		return query{}, false, err
	}
	stale, err := q.boolean(apiv1.ParamAllowStale, false)
	return q, stale, err
}

// placementParams are the parameters of GET /api/v1/placement.
type placementParams struct {
	key        string
	replicas   int
	allowStale bool
}

// parsePlacementParams parses the query; a request that gives no replicas
// gets defaultReplicas, the replicas the cluster's clients read with.
func parsePlacementParams(raw string, defaultReplicas int) (*placementParams, error) {
	q, err := parseQuery(raw, []string{apiv1.ParamKey, apiv1.ParamReplicas, apiv1.ParamAllowStale}, nil)
	if err != nil {
		return nil, err
	}
	p := &placementParams{}
	key, ok := q.get(apiv1.ParamKey)
	switch {
	case !ok || key == "":
		return nil, badParam(apiv1.ParamKey, key, "is required: 1 to %d bytes", apiv1.MaxPlacementKeyBytes)
	case len(key) > apiv1.MaxPlacementKeyBytes:
		return nil, badParam(apiv1.ParamKey, key, "must be at most %d bytes, the limit of a PlacementLookup key", apiv1.MaxPlacementKeyBytes)
	}
	p.key = key
	if p.replicas, err = q.intRange(apiv1.ParamReplicas, min(max(defaultReplicas, 1), apiv1.MaxPlacementReplicas), 1, apiv1.MaxPlacementReplicas); err != nil {
		return nil, err
	}
	if p.allowStale, err = q.boolean(apiv1.ParamAllowStale, false); err != nil {
		return nil, err
	}
	return p, nil
}

// cursor is a keyset position in the (role, node ID) order: a page starts
// after it. Being a key, not an offset or a revision, it stays valid
// across snapshots: nodes added or removed before it do not shift the
// next page.
type cursor struct {
	role   cluster.Role
	nodeID string
}

// continueVersion prefixes every token so its format can change.
const continueVersion = "c1"

// maxContinueBytes bounds a token before it is decoded.
const maxContinueBytes = 1024

// encodeContinue renders c as an opaque URL-safe token.
func encodeContinue(c cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(continueVersion + "\x00" + string(c.role) + "\x00" + c.nodeID))
}

// decodeContinue parses a token made by encodeContinue; it rejects
// anything else with an error saying what is wrong.
func decodeContinue(s string) (cursor, error) {
	if len(s) > maxContinueBytes {
		return cursor{}, errContinue("is longer than %d bytes", maxContinueBytes)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, errContinue("is not a token this server issued (not base64url)")
	}
	parts := strings.Split(string(b), "\x00")
	if len(parts) != 3 || parts[0] != continueVersion {
		return cursor{}, errContinue("is not a token this server issued")
	}
	role, err := cluster.ParseRole(parts[1])
	if err != nil {
		return cursor{}, errContinue("is not a token this server issued (bad role)")
	}
	if err := cluster.ValidateID("nodeId", parts[2]); err != nil {
		return cursor{}, errContinue("is not a token this server issued (bad node ID)")
	}
	return cursor{role: role, nodeID: parts[2]}, nil
}

func errContinue(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}
