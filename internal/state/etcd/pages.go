package etcd

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/state"
)

// listPageSize is how many keys one request of a prefix read returns. A
// read of every record in one response holds the whole response, its
// decoded key-values and the records built from them at once: 72 MB of
// response for 50,000 workers, with etcd building as large a reply (and
// refusing one over its request limit). Pages of 1,000 records (about
// 1.5 MB) keep only one page's bytes alive while the records are built,
// as kube-apiserver's reflectors page their lists.
const listPageSize = 1000

// pageRestarts is how many times rangePages starts again when etcd
// compacted its revision between two pages. Talon's compactor runs once
// per interval (minutes), so a second restart means something else is
// compacting constantly.
const pageRestarts = 2

// rangePages reads every key under prefix in pages of listPageSize, all
// at the revision of the first page, so that together they are one
// linearizable read at that revision. page is called with each page's
// key-values, in key order, and must not keep the slice; first says the
// page starts a read (the first, or the first after a restart): the
// caller drops what earlier pages gave it. count is how many keys the
// read holds in all. pageCtx gives each request its context and the
// function that releases it. rev is the revision read at. When etcd
// compacts that revision between two pages the read starts again at the
// current revision, at most pageRestarts times; then it fails with etcd's
// compaction error.
func (s *Store) rangePages(pageCtx func() (context.Context, func()), prefix string, page func(kvs []*mvccpb.KeyValue, count int64, first bool)) (rev int64, err error) {
	for restarts := 0; ; restarts++ {
		rev, err = s.rangePagesOnce(pageCtx, prefix, page)
		if err == nil || restarts == pageRestarts || rev == 0 || !errors.Is(classify(err, false), state.ErrCompacted) {
			return rev, err
		}
		s.log.Debug("etcd compacted a paged read's revision between two pages; reading again", "prefix", prefix, "revision", rev)
	}
}

// rangePagesOnce is one paged read; rev is its revision as soon as the
// first page came, even when a later one fails.
func (s *Store) rangePagesOnce(pageCtx func() (context.Context, func()), prefix string, page func(kvs []*mvccpb.KeyValue, count int64, first bool)) (rev int64, err error) {
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
			return rev, err
		}
		first := rev == 0
		if first {
			rev = resp.Header.Revision
		}
		page(resp.Kvs, resp.Count, first)
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
