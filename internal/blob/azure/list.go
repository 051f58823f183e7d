package azure

import (
	"context"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/talonhq/talon/internal/blob"
)

// List implements blob.Lister: the container's blobs under the store's
// prefix and prefix, in key order (the order Azure lists in).
func (a *Store) List(ctx context.Context, prefix string, max int) ([]string, bool, error) {
	full := a.prefix + prefix
	pager := a.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &full})
	keys := blob.Keys{Max: max}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, false, a.mapErr(ctx, "list", prefix, err)
		}
		for _, item := range page.Segment.BlobItems {
			if item == nil || item.Name == nil {
				continue
			}
			if keys.Add(strings.TrimPrefix(*item.Name, a.prefix)) {
				return keys.List, true, nil
			}
		}
	}
	return keys.List, false, nil
}

var _ blob.Lister = (*Store)(nil)
