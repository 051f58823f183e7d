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
