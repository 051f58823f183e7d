package blob_test

import (
	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/azure"
	"github.com/talonhq/talon/internal/blob/gcs"
	"github.com/talonhq/talon/internal/blob/s3"
)

// cloudStores is the table of cloud schemes, as the wiring (internal/app)
// builds it: the tests here open every backend through blob.Open.
var cloudStores = map[string]blob.Opener{"s3": blob.OpenerOf(s3.New), "gs": blob.OpenerOf(gcs.New), "az": blob.OpenerOf(azure.New)}

// open is blob.Open with every scheme.
func open(rawURL string, opts blob.Options) (blob.Store, error) {
	return blob.Open(rawURL, opts, cloudStores)
}
