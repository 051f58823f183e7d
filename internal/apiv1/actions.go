package apiv1

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// CordonNode asks the coordinators to cordon worker nodeID: the first that
// answers marks its record in the shared store, so every coordinator
// leaves it out of placement, and the worker learns it over its control
// connection. persist keeps the cordon across the worker's restarts. It
// goes to the client's coordinator addresses only, never to an address a
// worker advertises; a coordinator that fails closed (503) is passed over
// for the next, since the cordon is the same write whoever takes it.
func (c *Client) CordonNode(ctx context.Context, nodeID string, persist bool) (*Cordon, error) {
	q := url.Values{}
	if persist {
		q.Set(ParamPersist, "true")
	}
	return c.nodeAction(ctx, NodeActionPath(nodeID, SuffixCordon), q)
}

// UncordonNode asks the coordinators to lift worker nodeID's cordon,
// persisted or not.
func (c *Client) UncordonNode(ctx context.Context, nodeID string) (*Cordon, error) {
	return c.nodeAction(ctx, NodeActionPath(nodeID, SuffixUncordon), nil)
}

func (c *Client) nodeAction(ctx context.Context, path string, q url.Values) (*Cordon, error) {
	var out Cordon
	err := c.doMethod(ctx, http.MethodPost, path, q, true, func(resp *http.Response, base string) error {
		body, err := readBody(resp)
		if err != nil {
			return fmt.Errorf("admin api %s: reading %s: %w", base, path, err)
		}
		if resp.StatusCode != http.StatusOK {
			return c.apiError(resp, body, base)
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return fmt.Errorf("admin api %s: decoding %s: %w", base, path, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// WithRole asks Node for the node of that role (coordinator or worker)
// only: the role query parameter, needed when a coordinator and a worker
// share a node ID.
func WithRole(role string) CallOption { return func(o *callOptions) { o.role = role } }
