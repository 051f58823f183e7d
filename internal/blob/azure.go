package blob

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
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// EnvAzureConnectionString names the environment variable holding an
// Azure Storage connection string: when set, the az:// backend signs with
// its account key (or SAS) and uses its blob endpoint.
const EnvAzureConnectionString = "AZURE_STORAGE_CONNECTION_STRING"

// Azure is the az:// backend: object k is blob <prefix>k in the
// container, read with ranged downloads through azblob. Credentials come
// from AZURE_STORAGE_CONNECTION_STRING when set, else from
// DefaultAzureCredential (environment, workload identity, managed
// identity, the Azure CLI); never from the URL, and no error or String of
// this type carries them. Safe for concurrent use.
type Azure struct {
	prefix  string
	desc    string
	timeout time.Duration
	client  *container.Client
}

// NewAzure returns the store of the blobs below rawURL,
// az://account/container[/prefix][?endpoint=URL&anonymous=true&request_timeout=D&max_attempts=N].
// endpoint replaces the account's https://account.blob.core.windows.net
// (an emulator, a private endpoint); anonymous=true sends no credentials
// (a public container). It makes no request.
func NewAzure(rawURL string, opts Options) (*Azure, error) {
	c, err := parseCloudURL(rawURL, "az", []string{"container"}, "az://account/container/prefix",
		"Azure credentials come from "+EnvAzureConnectionString+" or DefaultAzureCredential (environment, workload or managed identity, the Azure CLI)")
	if err != nil {
		return nil, err
	}
	account, containerName := c.host, c.segments[0]
	copts := &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{
		MaxRetries: int32(c.settings.attempts - 1), TryTimeout: c.settings.timeout,
		RetryDelay: 100 * time.Millisecond, MaxRetryDelay: s3MaxBackoff,
	}}}
	copts.Transport = cloudHTTPClient(opts, c.settings.timeout)
	client, err := azureClient(account, c.settings, copts)
	if err != nil {
		return nil, c.bad("%v", err)
	}
	return &Azure{
		prefix: c.prefix, desc: "az://" + account + "/" + containerName + "/" + c.prefix, timeout: c.settings.timeout,
		client: client.ServiceClient().NewContainerClient(containerName),
	}, nil
}

// azureClient builds the service client from the connection string, the
// default credential chain or no credential.
func azureClient(account string, st cloudSettings, copts *azblob.ClientOptions) (*azblob.Client, error) {
	serviceURL := st.endpoint
	if serviceURL == "" {
		serviceURL = "https://" + account + ".blob.core.windows.net"
	}
	serviceURL += "/"
	if cs := os.Getenv(EnvAzureConnectionString); cs != "" && !st.anonymous {
		if name := connStringField(cs, "AccountName"); name != "" && name != account {
			return nil, fmt.Errorf("the account is %q but %s names account %q", account, EnvAzureConnectionString, name)
		}
		client, err := azblob.NewClientFromConnectionString(cs, copts)
		if err != nil {
			// Never the SDK's text: it may quote the string.
			return nil, fmt.Errorf("%s does not parse as an Azure Storage connection string", EnvAzureConnectionString)
		}
		return client, nil
	}
	if st.anonymous {
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
func (a *Azure) String() string { return a.desc }

// Size returns the object's length.
func (a *Azure) Size(ctx context.Context, object string) (int64, error) {
	info, err := a.Stat(ctx, object)
	return info.Size, err
}

// Stat reads the blob's properties. The version is its ETag; the checksum
// its Content-MD5 when the blob has one (Azure sets it for blobs uploaded
// in one request; a blob committed from blocks has one only if its writer
// set it).
func (a *Azure) Stat(ctx context.Context, object string) (Info, error) {
	if err := ValidateKey(object); err != nil {
		return Info{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	props, err := a.client.NewBlobClient(a.prefix+object).GetProperties(tctx, nil)
	if err != nil {
		return Info{}, a.mapErr(ctx, "stat", object, err)
	}
	info := Info{}
	if props.ContentLength != nil {
		info.Size = *props.ContentLength
	}
	if props.ETag != nil {
		info.Version = normVersion("etag:" + string(*props.ETag))
	}
	if len(props.ContentMD5) == checksumLen[MD5] {
		info.Checksum = Checksum{Algorithm: MD5, Value: props.ContentMD5}
	}
	return info, nil
}

// ReadRange streams [off, off+length) of the blob as it is now.
func (a *Azure) ReadRange(ctx context.Context, object string, off, length int64) (io.ReadCloser, error) {
	return a.ReadVersion(ctx, object, "", off, length)
}

// ReadVersion streams [off, off+length) with one ranged download,
// If-Match the ETag version names: Azure answers 412 (ErrVersionChanged)
// rather than bytes of another content.
func (a *Azure) ReadVersion(ctx context.Context, object, version string, off, length int64) (io.ReadCloser, error) {
	if r, err := remoteRead(object, off, length); r != nil || err != nil {
		return r, err
	}
	o := &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: off, Count: length}}
	if et, ok := strings.CutPrefix(version, "etag:"); ok {
		etag := azcore.ETag(et)
		o.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}}
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
	return timedBody{&backendBody{ctx: tctx, body: resp.Body, r: io.LimitReader(resp.Body, length), object: object, store: a}, cancel}, nil
}

// mapErr maps an SDK error onto the sentinels. It keeps only the status
// and Azure's error code: the SDK's text quotes the request URL, which
// carries a SAS token when the connection string has one.
func (a *Azure) mapErr(ctx context.Context, op, object string, err error) error {
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
		return fmt.Errorf("%w: %s object %q at %s: %v", ErrBackend, op, object, a, cause)
	}
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) || re.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: object %q at %s", ErrNotFound, object, a)
	case bloberror.HasCode(err, bloberror.ConditionNotMet) || re.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: object %q at %s changed since it was stat'ed", ErrVersionChanged, object, a)
	case re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w: %s object %q at %s: HTTP %d %s: check the worker's Azure credentials and its permission to read the container", ErrBackend, op, object, a, re.StatusCode, re.ErrorCode)
	}
	return fmt.Errorf("%w: %s object %q at %s: HTTP %d %s", ErrBackend, op, object, a, re.StatusCode, re.ErrorCode)
}
