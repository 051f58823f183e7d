// Command image builds Talon's container image without a container daemon:
// a multi-platform OCI image layout whose images hold only the static talon
// binary (as /talon, the entrypoint) and /etc/passwd and /etc/group naming
// the unprivileged user 65532 (nonroot) that the image runs as. There is no
// shell and no package manager. TLS roots come from the binary itself
// (golang.org/x/crypto/x509roots/fallback), so the image needs no CA bundle.
//
// `make image` runs it; release images are built by goreleaser's kos
// section instead, on a distroless base with the same user and entrypoint.
//
//	go run ./internal/tools/image -out dist/image -version v1.2.3 \
//	    -revision $(git rev-parse HEAD) linux/amd64=bin/linux_amd64/talon linux/arm64=bin/linux_arm64/talon
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.out, "out", "dist/image", "directory of the OCI image layout to write (replaced)")
	flag.StringVar(&o.version, "version", "dev", "image version (org.opencontainers.image.version and the ref.name tag)")
	flag.StringVar(&o.revision, "revision", "", "source revision (org.opencontainers.image.revision)")
	flag.StringVar(&o.source, "source", "https://github.com/talonhq/talon", "source repository (org.opencontainers.image.source)")
	created := flag.String("created", "", "creation time, RFC 3339 (default: $SOURCE_DATE_EPOCH, else the Unix epoch, for reproducible images)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: image [flags] os/arch=BINARY...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	var err error
	if o.created, err = creationTime(*created, os.Getenv("SOURCE_DATE_EPOCH")); err == nil {
		o.binaries, err = parsePlatforms(flag.Args())
	}
	if err == nil {
		err = build(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func creationTime(flagValue, epoch string) (time.Time, error) {
	switch {
	case flagValue != "":
		t, err := time.Parse(time.RFC3339, flagValue)
		if err != nil {
			return time.Time{}, fmt.Errorf("-created %q: must be an RFC 3339 time", flagValue)
		}
		return t.UTC(), nil
	case epoch != "":
		s, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: must be Unix seconds", epoch)
		}
		return time.Unix(s, 0).UTC(), nil
	}
	return time.Unix(0, 0).UTC(), nil
}
