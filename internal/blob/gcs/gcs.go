// Package gcs is the gs:// blob store (blob.Store) on
// cloud.google.com/go/storage: its own package so that only the wiring
// that opens it (internal/app) links the SDK. Package blob's doc gives
// the URL parameters, versions, checksums and errors.
//
// The store reads over the JSON API. Built with -tags
// disable_grpc_modules (as the Makefile and goreleaser build talon), the
// client leaves out its gRPC transport's Direct Connectivity: xDS,
// envoyproxy's go-control-plane and the RLS balancer (150 packages,
// 14 MB of a stripped talon). gRPC itself and the client-side metrics
// exporter stay linked (the storage package's gRPC client and metrics
// files have no build tag); WithDisabledClientMetrics keeps the exporter
// from running.
package gcs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/remote"
)

// Store is the gs:// backend: object k is <prefix>k in the bucket, read
// with ranged reads through cloud.google.com/go/storage. Credentials come
// from Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// gcloud's user credentials, the metadata server, workload identity);
// never from the URL, and no error or String of this type carries them.
// Safe for concurrent use.
type Store struct {
	bucket  string
	prefix  string
	desc    string
	timeout time.Duration
	client  *storage.Client
	retry   []storage.RetryOption
}

// New returns the store of the objects below rawURL,
// gs://bucket[/prefix][?endpoint=URL&anonymous=true&request_timeout=D&max_attempts=N].
// endpoint names an emulator or a private endpoint (the JSON API's base,
// such as http://127.0.0.1:4443); anonymous=true sends no credentials
// (an emulator, a public bucket). It makes no request.
func New(rawURL string, opts blob.Options) (*Store, error) {
	c, err := remote.ParseURL(rawURL, remote.Scheme{Name: "gs", Host: "bucket", Shape: "gs://bucket/prefix", Anonymous: true,
		Credentials: "Google Cloud Storage credentials come from Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, the metadata server, workload identity)"})
	if err != nil {
		return nil, err
	}
	client, err := gcsClient(c.Settings, opts)
	if err != nil {
		return nil, c.Bad("%v", err)
	}
	return &Store{
		bucket: c.Host, prefix: c.Prefix, desc: "gs://" + c.Host + "/" + c.Prefix, timeout: c.Settings.Timeout, client: client,
		retry: []storage.RetryOption{
			storage.WithMaxAttempts(c.Settings.Attempts),
			storage.WithBackoff(gax.Backoff{Initial: 100 * time.Millisecond, Max: remote.MaxBackoff, Multiplier: 2}),
			storage.WithPolicy(storage.RetryAlways), // reads only: every one is idempotent
		},
	}, nil
}

// gcsClient builds the storage client: client-side metrics off (a worker
// sends nothing to Cloud Monitoring), requests through cloudHTTPClient
// (same-host redirects only), authorized by Application Default
// Credentials unless anonymous.
func gcsClient(st remote.Settings, opts blob.Options) (*storage.Client, error) {
	ctx := context.Background()
	hc := remote.HTTPClient(opts, st.Timeout)
	copts := []option.ClientOption{storage.WithDisabledClientMetrics()}
	if st.Endpoint != "" {
		copts = append(copts, option.WithEndpoint(st.Endpoint+"/storage/v1/"))
	}
	if st.Anonymous {
		copts = append(copts, option.WithoutAuthentication())
	} else {
		rt, err := htransport.NewTransport(ctx, hc.Transport, option.WithScopes(storage.ScopeReadOnly))
		if err != nil {
			// The auth library's text names files and variables, not secrets.
			return nil, fmt.Errorf("find Application Default Credentials: %w", err)
		}
		hc.Transport = rt
	}
	client, err := storage.NewClient(ctx, append(copts, option.WithHTTPClient(hc))...)
	if err != nil {
		return nil, fmt.Errorf("create the Google Cloud Storage client: %w", err)
	}
	return client, nil
}

// String describes the store for logs: gs://bucket/prefix.
func (g *Store) String() string { return g.desc }

// Close releases the client's connections.
func (g *Store) Close() error { return g.client.Close() }

func (g *Store) object(key string) *storage.ObjectHandle {
	// ReadCompressed: the stored bytes, whose length Stat gives, even of
	// an object stored with Content-Encoding gzip (GCS would otherwise
	// decompress them).
	return g.client.Bucket(g.bucket).Object(g.prefix + key).Retryer(g.retry...).ReadCompressed(true)
}

// Size returns the object's length.
func (g *Store) Size(ctx context.Context, object string) (int64, error) {
	info, err := g.Stat(ctx, object)
	return info.Size, err
}

// Stat reads the object's metadata. The version is its generation; the
// checksum its MD5 when GCS keeps one (not for composite objects), else
// its CRC32C, which GCS keeps for every object.
func (g *Store) Stat(ctx context.Context, object string) (blob.Info, error) {
	if err := blob.ValidateKey(object); err != nil {
		return blob.Info{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	attrs, err := g.object(object).Attrs(tctx)
	if err != nil {
		return blob.Info{}, g.mapErr(ctx, "stat", object, "", err)
	}
	info := blob.Info{Size: attrs.Size, Version: "gen:" + strconv.FormatInt(attrs.Generation, 10)}
	switch {
	case len(attrs.MD5) == blob.DigestSize(blob.MD5):
		info.Checksum = blob.Checksum{Algorithm: blob.MD5, Value: attrs.MD5}
	default:
		info.Checksum = blob.Checksum{Algorithm: blob.CRC32C, Value: binary.BigEndian.AppendUint32(nil, attrs.CRC32C)}
	}
	return info, nil
}

// ReadRange streams [off, off+length) of the object's current generation.
func (g *Store) ReadRange(ctx context.Context, object string, off, length int64) (io.ReadCloser, error) {
	return g.ReadVersion(ctx, object, "", off, length)
}

// ReadVersion streams [off, off+length) of the generation version names:
// GCS answers not found for a generation that is gone, which is
// blob.ErrVersionChanged here, never bytes of another generation.
func (g *Store) ReadVersion(ctx context.Context, object, version string, off, length int64) (io.ReadCloser, error) {
	if r, err := blob.RemoteRead(object, off, length); r != nil || err != nil {
		return r, err
	}
	o := g.object(object)
	if gen, ok := strings.CutPrefix(version, "gen:"); ok {
		n, err := strconv.ParseInt(gen, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: object %q at %s: version %q is not a generation", blob.ErrVersionChanged, object, g, version)
		}
		o = o.Generation(n)
	}
	tctx, cancel := context.WithTimeout(ctx, g.timeout)
	r, err := o.NewRangeReader(tctx, off, length)
	if err != nil {
		cancel()
		if statusOfGCS(err) == http.StatusRequestedRangeNotSatisfiable {
			return io.NopCloser(strings.NewReader("")), nil // at or past the end
		}
		return nil, g.mapErr(ctx, "read", object, version, err)
	}
	return blob.NewBody(tctx, r, length, object, g, cancel), nil
}

func statusOfGCS(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// mapErr maps a client error onto the sentinels, keeping only the status
// (a GCS message is no secret, but the rule is the same for every store).
func (g *Store) mapErr(ctx context.Context, op, object, version string, err error) error {
	if cerr := blob.ContextErr(ctx, err); cerr != nil {
		return fmt.Errorf("%s object %q at %s: %w", op, object, g, cerr)
	}
	status := statusOfGCS(err)
	switch {
	case (errors.Is(err, storage.ErrObjectNotExist) || status == http.StatusNotFound) && version != "":
		return fmt.Errorf("%w: object %q at %s: generation %s is gone", blob.ErrVersionChanged, object, g, strings.TrimPrefix(version, "gen:"))
	case errors.Is(err, storage.ErrObjectNotExist), errors.Is(err, storage.ErrBucketNotExist), status == http.StatusNotFound:
		return fmt.Errorf("%w: object %q at %s", blob.ErrNotFound, object, g)
	case status == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: object %q at %s changed since it was stat'ed", blob.ErrVersionChanged, object, g)
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		return fmt.Errorf("%w: %s object %q at %s: HTTP %d: check the worker's Google Cloud credentials and its permission to read the bucket", blob.ErrBackend, op, object, g, status)
	case status != 0:
		return fmt.Errorf("%w: %s object %q at %s: HTTP %d %s", blob.ErrBackend, op, object, g, status, http.StatusText(status))
	}
	return fmt.Errorf("%w: %s object %q at %s: %w", blob.ErrBackend, op, object, g, err)
}

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
