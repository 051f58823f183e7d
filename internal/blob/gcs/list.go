package gcs

import (
	"context"
	"errors"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/talonhq/talon/internal/blob"
)

// List implements blob.Lister: the bucket's objects under the store's
// prefix and prefix, in key order (the order GCS lists in).
func (g *Store) List(ctx context.Context, prefix string, max int) ([]string, bool, error) {
	it := g.client.Bucket(g.bucket).Objects(ctx, &storage.Query{Prefix: g.prefix + prefix, Projection: storage.ProjectionNoACL})
	keys := blob.Keys{Max: max}
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return keys.List, false, nil
		}
		if err != nil {
			return nil, false, g.mapErr(ctx, "list", prefix, "", err)
		}
		if keys.Add(strings.TrimPrefix(attrs.Name, g.prefix)) {
			return keys.List, true, nil
		}
	}
}

var _ blob.Lister = (*Store)(nil)
