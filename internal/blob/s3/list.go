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
	var keys []string
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix + prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, false, s.mapErr(ctx, "LIST", prefix, err)
		}
		for _, o := range page.Contents {
			key := strings.TrimPrefix(aws.ToString(o.Key), s.prefix)
			if blob.ValidateKey(key) != nil {
				continue
			}
			if len(keys) == max {
				return keys, true, nil
			}
			keys = append(keys, key)
		}
	}
	return keys, false, nil
}

var _ blob.Lister = (*Store)(nil)
