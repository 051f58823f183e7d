package apiv1

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Get fetches path?q from the first server that answers and returns a 200
// answer's body as sent, whatever its content type (profiles, metrics,
// configuration text): for diagnostics that store what the server said.
func (c *Client) Get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	var out []byte
	err := c.do(ctx, path, q, true, func(resp *http.Response, base string) error {
		body, err := readBody(resp)
		if err != nil {
			return fmt.Errorf("admin api %s: reading %s: %w", base, path, err)
		}
		if resp.StatusCode != http.StatusOK {
			return c.apiError(resp, body, base)
		}
		out = body
		return nil
	})
	return out, err
}
