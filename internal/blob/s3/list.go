package s3

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/talonhq/talon/internal/blob"
)

// List implements blob.Lister: ListObjectsV2 pages under the store's
// prefix and prefix, in key order (the order S3 lists in).
func (s *Store) List(ctx context.Context, prefix string, max int) ([]string, bool, error) {
	keys := blob.Keys{Max: max}
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix + prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, false, s.mapErr(ctx, "LIST", prefix, err)
		}
		for _, o := range page.Contents {
			if keys.Add(strings.TrimPrefix(aws.ToString(o.Key), s.prefix)) {
				return keys.List, true, nil
			}
		}
	}
	return keys.List, false, nil
}

var _ blob.Lister = (*Store)(nil)
