package apiv1

import "context"

// WhoAmI asks who the client's token authenticates as and what it may do
// on the server that answers.
func (c *Client) WhoAmI(ctx context.Context, opts ...CallOption) (*WhoAmI, error) {
	var out WhoAmI
	_, raw := applyOptions(nil, opts)
	if err := c.getJSON(ctx, PathWhoAmI, nil, raw, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Answered returns the base URL of the server that answered the last
// call (the one the next call tries first).
func (c *Client) Answered() string { return c.bases[int(c.prefer.Load())] }
