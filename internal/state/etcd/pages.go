package etcd

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// listPageSize is how many keys one request of a prefix read returns. A
// read of every record in one response holds the whole response, its
// decoded key-values and the records built from them at once: 72 MB of
// response for 50,000 workers, with etcd building as large a reply (and
// refusing one over its request limit). Pages of 1,000 records (about
// 1.5 MB) keep only one page's bytes alive while the records are built,
// as kube-apiserver's reflectors page their lists.
const listPageSize = 1000

// rangePages reads every key under prefix in pages of listPageSize, all
// at the revision of the first page, so that together they are one
// linearizable read at that revision. page is called with each page's
// key-values, in key order, and must not keep the slice. pageCtx gives
// each request its context and the function that releases it. rev is the
// revision read at; a revision compacted between pages fails the read
// with etcd's compaction error, and the caller reads again.
func (s *Store) rangePages(pageCtx func() (context.Context, func()), prefix string, page func(kvs []*mvccpb.KeyValue, count int64)) (rev int64, err error) {
	key, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	size := int64(listPageSize)
	if s.opts.pageSize > 0 {
		size = int64(s.opts.pageSize)
	}
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(size)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		ctx, done := pageCtx()
		resp, err := s.client.Get(ctx, key, opts...)
		done()
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		page(resp.Kvs, resp.Count)
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		// The next page starts just after this one's last key.
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		if s.opts.afterPage != nil {
			s.opts.afterPage()
		}
	}
}
