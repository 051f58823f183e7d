package app

import (
	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/azure"
	"github.com/talonhq/talon/internal/blob/gcs"
	"github.com/talonhq/talon/internal/blob/s3"
)

// cloudStores are the blob-store schemes beyond file and http(s): each
// cloud store is its own package, wired in here only, so that no other
// package (the data-path contract, the client, talonctl) links a cloud
// SDK.
func cloudStores() map[string]blob.Opener {
	return map[string]blob.Opener{
		"s3": blob.OpenerOf(s3.New),
		"gs": blob.OpenerOf(gcs.New),
		"az": blob.OpenerOf(azure.New),
	}
}

// openBlobStore opens the blob store rawURL names, of any scheme Talon
// has.
func openBlobStore(rawURL string) (blob.Store, error) {
	return blob.Open(rawURL, blob.Options{}, cloudStores())
}
