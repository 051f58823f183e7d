// Package azure is the az:// blob store (blob.Store) on the Azure SDK's
// azblob: its own package so that only the wiring that opens it
// (internal/app) links the SDK. Package blob's doc gives the URL
// parameters, versions, checksums and errors.
package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/remote"
)

// EnvConnectionString names the environment variable holding an
// Azure Storage connection string: when set, the az:// backend signs with
// its account key (or SAS) and uses its blob endpoint.
const EnvConnectionString = "AZURE_STORAGE_CONNECTION_STRING"

// Store is the az:// backend: object k is blob <prefix>k in the
// container, read with ranged downloads through azblob. Credentials come
// from AZURE_STORAGE_CONNECTION_STRING when set, else from
// DefaultAzureCredential (environment, workload identity, managed
// identity, the Azure CLI); never from the URL, and no error or String of
// this type carries them. Safe for concurrent use.
type Store struct {
	prefix  string
	desc    string
	timeout time.Duration
	client  *container.Client
}

// New returns the store of the blobs below rawURL,
// az://account/container[/prefix][?endpoint=URL&anonymous=true&request_timeout=D&max_attempts=N].
// endpoint replaces the account's https://account.blob.core.windows.net
// (an emulator, a private endpoint); anonymous=true sends no credentials
// (a public container). It makes no request.
func New(rawURL string, opts blob.Options) (*Store, error) {
	c, err := remote.ParseURL(rawURL, remote.Scheme{Name: "az", Host: "account", Segments: []string{"container"}, Shape: "az://account/container/prefix", Anonymous: true,
		Credentials: "Azure credentials come from " + EnvConnectionString + " or DefaultAzureCredential (environment, workload or managed identity, the Azure CLI)"})
	if err != nil {
		return nil, err
	}
	account, containerName := c.Host, c.Segments[0]
	copts := &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{
		MaxRetries: int32(c.Settings.Attempts - 1), TryTimeout: c.Settings.Timeout,
		RetryDelay: 100 * time.Millisecond, MaxRetryDelay: remote.MaxBackoff,
	}}}
	copts.Transport = remote.HTTPClient(opts, c.Settings.Timeout)
	client, err := azureClient(account, c.Settings, copts)
	if err != nil {
		return nil, c.Bad("%v", err)
	}
	return &Store{
		prefix: c.Prefix, desc: "az://" + account + "/" + containerName + "/" + c.Prefix, timeout: c.Settings.Timeout,
		client: client.ServiceClient().NewContainerClient(containerName),
	}, nil
}

// azureClient builds the service client from the connection string, the
// default credential chain or no credential.
func azureClient(account string, st remote.Settings, copts *azblob.ClientOptions) (*azblob.Client, error) {
	serviceURL := st.Endpoint
	if serviceURL == "" {
		serviceURL = "https://" + account + ".blob.core.windows.net"
	}
	serviceURL += "/"
	if cs := os.Getenv(EnvConnectionString); cs != "" && !st.Anonymous {
		if name := connStringField(cs, "AccountName"); name != "" && name != account {
			return nil, fmt.Errorf("the account is %q but %s names account %q", account, EnvConnectionString, name)
		}
		client, err := azblob.NewClientFromConnectionString(cs, copts)
		if err != nil {
			// Never the SDK's text: it may quote the string.
			return nil, fmt.Errorf("%s does not parse as an Azure Storage connection string", EnvConnectionString)
		}
		return client, nil
	}
	if st.Anonymous {
		return azblob.NewClientWithNoCredential(serviceURL, copts)
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("find the Azure default credential: %w", err)
	}
	return azblob.NewClient(serviceURL, cred, copts)
}

// connStringField returns the value of key in a connection string.
func connStringField(cs, key string) string {
	for part := range strings.SplitSeq(cs, ";") {
		if k, v, ok := strings.Cut(part, "="); ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// String describes the store for logs: az://account/container/prefix.
func (a *Store) String() string { return a.desc }

// Size returns the object's length.
func (a *Store) Size(ctx context.Context, object string) (int64, error) {
	info, err := a.Stat(ctx, object)
	return info.Size, err
}

// Stat reads the blob's properties. The version is its ETag; the checksum
// its Content-MD5 when the blob has one (Azure sets it for blobs uploaded
// in one request; a blob committed from blocks has one only if its writer
// set it).
func (a *Store) Stat(ctx context.Context, object string) (blob.Info, error) {
	if err := blob.ValidateKey(object); err != nil {
		return blob.Info{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	props, err := a.client.NewBlobClient(a.prefix+object).GetProperties(tctx, nil)
	if err != nil {
		return blob.Info{}, a.mapErr(ctx, "stat", object, err)
	}
	info := blob.Info{}
	if props.ContentLength != nil {
		info.Size = *props.ContentLength
	}
	if props.ETag != nil {
		info.Version = blob.NormVersion("etag:" + string(*props.ETag))
	}
	if len(props.ContentMD5) == blob.DigestSize(blob.MD5) {
		info.Checksum = blob.Checksum{Algorithm: blob.MD5, Value: props.ContentMD5}
	}
	return info, nil
}

// ReadRange streams [off, off+length) of the blob as it is now.
func (a *Store) ReadRange(ctx context.Context, object string, off, length int64) (io.ReadCloser, error) {
	return a.ReadVersion(ctx, object, "", off, length)
}

// ReadVersion streams [off, off+length) with one ranged download,
// If-Match the ETag version names: Azure answers 412 (blob.ErrVersionChanged)
// rather than bytes of another content.
func (a *Store) ReadVersion(ctx context.Context, object, version string, off, length int64) (io.ReadCloser, error) {
	if r, err := blob.RemoteRead(object, off, length); r != nil || err != nil {
		return r, err
	}
	o := &azblobblob.DownloadStreamOptions{Range: azblobblob.HTTPRange{Offset: off, Count: length}}
	if et, ok := strings.CutPrefix(version, "etag:"); ok {
		etag := azcore.ETag(et)
		o.AccessConditions = &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &etag}}
	}
	tctx, cancel := context.WithTimeout(ctx, a.timeout)
	resp, err := a.client.NewBlobClient(a.prefix+object).DownloadStream(tctx, o)
	if err != nil {
		cancel()
		if bloberror.HasCode(err, bloberror.InvalidRange) {
			return io.NopCloser(strings.NewReader("")), nil // at or past the end
		}
		return nil, a.mapErr(ctx, "read", object, err)
	}
	return blob.NewBody(tctx, resp.Body, length, object, a, cancel), nil
}

// mapErr maps an SDK error onto the sentinels. It keeps only the status
// and Azure's error code: the SDK's text quotes the request URL, which
// carries a SAS token when the connection string has one.
func (a *Store) mapErr(ctx context.Context, op, object string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s object %q at %s: %w", op, object, a, ctx.Err())
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		// No answer: connection failures, timeouts, credential lookups.
		// A transport error quotes the request URL: keep only its cause.
		cause := err
		var ue *url.Error
		if errors.As(err, &ue) {
			cause = ue.Err
		}
		return fmt.Errorf("%w: %s object %q at %s: %v", blob.ErrBackend, op, object, a, cause)
	}
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) || re.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: object %q at %s", blob.ErrNotFound, object, a)
	case bloberror.HasCode(err, bloberror.ConditionNotMet) || re.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: object %q at %s changed since it was stat'ed", blob.ErrVersionChanged, object, a)
	case re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w: %s object %q at %s: HTTP %d %s: check the worker's Azure credentials and its permission to read the container", blob.ErrBackend, op, object, a, re.StatusCode, re.ErrorCode)
	}
	return fmt.Errorf("%w: %s object %q at %s: HTTP %d %s", blob.ErrBackend, op, object, a, re.StatusCode, re.ErrorCode)
}

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
