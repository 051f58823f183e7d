// Package s3 is the s3:// blob store (blob.Store) on aws-sdk-go-v2: its
// own package so that only the wiring that opens it (internal/app) links
// the SDK. Package blob's doc gives the URL parameters, versions,
// checksums and errors.
package s3

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/remote"
	"github.com/talonhq/talon/internal/pki/capool"
)

// Store is the s3:// backend: object k is key <prefix>k in the bucket, read
// with ranged GetObject requests through aws-sdk-go-v2. Credentials come
// from the SDK's default chain (environment, shared config and profiles,
// web identity / IRSA, container and instance roles); they are never in
// the URL, and no error, log line or String of this type carries them.
// Safe for concurrent use.
type Store struct {
	bucket string
	prefix string // "" or ending in "/"
	desc   string // s3://bucket/prefix, for errors and logs
	client *awss3.Client
}

// New returns the store of the objects below rawURL,
// s3://bucket[/prefix][?region=R&endpoint=URL&use_path_style=true&profile=P&ca_file=PATH&request_timeout=D&max_attempts=N].
// It reads the SDK's shared configuration files but makes no request.
func New(rawURL string, opts blob.Options) (*Store, error) {
	st := &s3Settings{}
	u, err := remote.ParseURL(rawURL, remote.Scheme{Name: "s3", Host: "bucket", Shape: "s3://bucket/prefix", Params: st.params(),
		Credentials: "S3 credentials come from the environment, the shared config files or the web identity token"})
	if err != nil {
		return nil, err
	}
	st.Settings = u.Settings
	client, err := st.client(opts)
	if err != nil {
		return nil, u.Bad("%v", err)
	}
	desc := "s3://" + u.Host + "/" + u.Prefix
	return &Store{bucket: u.Host, prefix: u.Prefix, desc: desc, client: client}, nil
}

// s3Settings are what an s3:// URL says: the common parameters and its
// own.
type s3Settings struct {
	remote.Settings
	region, profile string
	pathStyle       bool
	caPEM           []byte
}

// params are the parameters only s3:// takes, read into st. region,
// use_path_style and profile (and endpoint) are named as gocloud.dev's
// s3blob names them.
func (st *s3Settings) params() []remote.Param {
	return []remote.Param{
		{Name: "region", Parse: func(v string) error { st.region = v; return nil }},
		{Name: "use_path_style", Parse: func(v string) (err error) {
			if st.pathStyle, err = strconv.ParseBool(v); err != nil {
				return errors.New("must be true or false")
			}
			return nil
		}},
		{Name: "profile", Parse: func(v string) error { st.profile = v; return nil }},
		{Name: "ca_file", Parse: func(v string) (err error) {
			if st.caPEM, err = os.ReadFile(v); err != nil {
				return errors.Unwrap(err)
			}
			_, err = capool.FromPEM(st.caPEM)
			return err
		}},
	}
}

// client builds the SDK client of the settings.
func (st *s3Settings) client(opts blob.Options) (*awss3.Client, error) {
	var hc awsconfig.HTTPClient = opts.HTTPClient
	if opts.HTTPClient == nil {
		// The SDK's buildable client, so that a CA bundle (ca_file, or
		// AWS_CA_BUNDLE in the environment) can be added to it.
		hc = awshttp.NewBuildableClient().WithTimeout(st.Timeout).WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = 32
		})
	}
	loadOpts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithHTTPClient(hc),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = st.Attempts
				o.MaxBackoff = remote.MaxBackoff
				// Every request gets its attempts: a retry budget
				// shared by the process would fail reads at once after
				// an outage instead of backing off.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if st.region != "" {
		loadOpts = append(loadOpts, awsconfig.WithRegion(st.region))
	}
	if st.caPEM != nil {
		loadOpts = append(loadOpts, awsconfig.WithCustomCABundle(bytes.NewReader(st.caPEM)))
	}
	if st.profile != "" {
		loadOpts = append(loadOpts, awsconfig.WithSharedConfigProfile(st.profile))
	}
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), loadOpts...)
	if err != nil {
		// The SDK's text names files and profiles, never secrets.
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // S3-compatible stores ignore it; AWS redirects
	}
	cfg.HTTPClient = sameHostRedirects(cfg.HTTPClient)
	return awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		if st.Endpoint != "" {
			o.BaseEndpoint = aws.String(st.Endpoint)
		}
		o.UsePathStyle = st.pathStyle
		// Checksums of uploads and of whole-object downloads are the
		// reader's business (client.ObjectReader checks them against
		// Stat's); range reads carry none.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
}

// sameHostRedirects returns hc following redirects to the host it asked
// only (307 and 308, which keep the method, as the SDK's own client does).
// A redirect to another host is not followed: the store's answer, the
// 3xx, becomes the error. The SDK's client follows a 307 anywhere,
// dropping only the session token, so a store (or whoever answers for
// it) could send a worker's requests, and take its answers, from a host
// the operator never named. The SDK's client, CA bundle included, is
// rebuilt as a plain http.Client with this rule; any other HTTPClient is
// left as given.
func sameHostRedirects(hc aws.HTTPClient) aws.HTTPClient {
	var c http.Client
	switch v := hc.(type) {
	case *awshttp.BuildableClient:
		c = http.Client{Transport: v.GetTransport(), Timeout: v.GetTimeout()}
	case *http.Client:
		c = *v
	default:
		return hc
	}
	c.CheckRedirect = remote.CheckRedirect
	return &c
}

// String describes the store for logs: s3://bucket/prefix.
func (s *Store) String() string { return s.desc }

// Size returns the object's length.
func (s *Store) Size(ctx context.Context, object string) (int64, error) {
	info, err := s.Stat(ctx, object)
	return info.Size, err
}

// Stat asks HeadObject with checksum mode on. The version is the version
// ID on a versioned bucket, otherwise the ETag. The checksum is the
// object's full-object checksum when S3 keeps one, a cryptographic one
// first: SHA-256, SHA-1, then the ETag when it has the form of an MD5 (a
// single-part upload without SSE-KMS), and only then CRC-64/NVME, CRC-32C
// or CRC-32, which detect corruption but not tampering (see
// Checksum.Cryptographic); a composite checksum of a multipart upload is
// no checksum of the object.
func (s *Store) Stat(ctx context.Context, object string) (blob.Info, error) {
	if err := blob.ValidateKey(object); err != nil {
		return blob.Info{}, err
	}
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + object), ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return blob.Info{}, s.mapErr(ctx, "HEAD", object, err)
	}
	info := blob.Info{Size: aws.ToInt64(out.ContentLength)}
	etag := aws.ToString(out.ETag)
	switch vid := aws.ToString(out.VersionId); {
	case vid != "" && vid != "null":
		info.Version = blob.NormVersion("vid:" + vid)
	case etag != "":
		info.Version = blob.NormVersion("etag:" + etag)
	}
	composite := out.ChecksumType == types.ChecksumTypeComposite
	md5 := aws.String("")
	if b, err := hex.DecodeString(strings.Trim(etag, `"`)); err == nil && len(b) == blob.DigestSize(blob.MD5) {
		md5 = aws.String(base64.StdEncoding.EncodeToString(b))
	}
	for _, c := range []struct {
		alg string
		v   *string
	}{{blob.SHA256, out.ChecksumSHA256}, {blob.SHA1, out.ChecksumSHA1}, {blob.MD5, md5}, {blob.CRC64NVME, out.ChecksumCRC64NVME}, {blob.CRC32C, out.ChecksumCRC32C}, {blob.CRC32, out.ChecksumCRC32}} {
		if composite && c.alg != blob.MD5 {
			continue
		}
		if b, err := base64.StdEncoding.DecodeString(aws.ToString(c.v)); err == nil && len(b) == blob.DigestSize(c.alg) {
			info.Checksum = blob.Checksum{Algorithm: c.alg, Value: b}
			break
		}
	}
	return info, nil
}

// ReadRange streams [off, off+length) of the object's current version.
func (s *Store) ReadRange(ctx context.Context, object string, off, length int64) (io.ReadCloser, error) {
	return s.ReadVersion(ctx, object, "", off, length)
}

// ReadVersion streams [off, off+length) with one ranged GetObject, of the
// version ID, or If-Match the ETag, that version names: S3 answers 412
// (blob.ErrVersionChanged) rather than bytes of another content.
func (s *Store) ReadVersion(ctx context.Context, object, version string, off, length int64) (io.ReadCloser, error) {
	if r, err := blob.RemoteRead(object, off, length); r != nil || err != nil {
		return r, err
	}
	in := &awss3.GetObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + object),
		Range: aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+length-1, 10)),
	}
	if vid, ok := strings.CutPrefix(version, "vid:"); ok {
		in.VersionId = aws.String(vid)
	} else if et, ok := strings.CutPrefix(version, "etag:"); ok {
		in.IfMatch = aws.String(et)
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if statusOf(err) == http.StatusRequestedRangeNotSatisfiable {
			return io.NopCloser(strings.NewReader("")), nil // at or past the end
		}
		return nil, s.mapErr(ctx, "GET", object, err)
	}
	return blob.NewBody(ctx, out.Body, length, object, s), nil
}

// statusOf returns the HTTP status of an S3 answer error, or 0.
func statusOf(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// mapErr maps an SDK error onto the sentinels. An answer error keeps only
// the status and the S3 error code: an S3 message can quote the request
// (SignatureDoesNotMatch echoes the string to sign and the access key
// ID), so it never reaches a log or a client.
func (s *Store) mapErr(ctx context.Context, op, object string, err error) error {
	if cerr := blob.ContextErr(ctx, err); cerr != nil {
		return fmt.Errorf("%s object %q at %s: %w", op, object, s, cerr)
	}
	status := statusOf(err)
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	switch {
	case status == http.StatusNotFound || code == "NoSuchKey" || code == "NotFound":
		return fmt.Errorf("%w: object %q at %s", blob.ErrNotFound, object, s)
	case status == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: object %q at %s changed since it was stat'ed", blob.ErrVersionChanged, object, s)
	case status != 0:
		what := code
		if what == "" {
			what = http.StatusText(status)
		}
		hint := ""
		if status == http.StatusForbidden || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" {
			hint = ": check the worker's S3 credentials and its permission to read the bucket"
		}
		return fmt.Errorf("%w: %s object %q at %s: HTTP %d %s%s", blob.ErrBackend, op, object, s, status, what, hint)
	}
	// No answer: connection failures, timeouts, credential lookups. The
	// SDK's text names endpoints and causes, not secrets.
	return fmt.Errorf("%w: %s object %q at %s: %w", blob.ErrBackend, op, object, s, err)
}

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
