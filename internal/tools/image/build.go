package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the UID and GID the image runs as: distroless's "nonroot", which
// the Helm chart's securityContext names too.
const User = "65532:65532"

type options struct {
	out, version, revision, source string
	created                        time.Time
	binaries                       []platformBinary
}

type platformBinary struct {
	platform v1.Platform
	path     string
}

func parsePlatforms(args []string) ([]platformBinary, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no binary given: want os/arch=PATH arguments")
	}
	var out []platformBinary
	for _, a := range args {
		plat, path, ok := strings.Cut(a, "=")
		osName, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || osName != "linux" || arch == "" || path == "" {
			return nil, fmt.Errorf("argument %q: must be linux/ARCH=PATH", a)
		}
		out = append(out, platformBinary{platform: v1.Platform{OS: osName, Architecture: arch}, path: path})
	}
	return out, nil
}

// labels are the OCI annotation keys set as image labels and as index and
// manifest annotations.
func (o options) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "talon",
		"org.opencontainers.image.description": "Talon distributed block cache (coordinator and worker)",
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.url":         o.source,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.created":     o.created.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// build writes the multi-platform image index to o.out as an OCI layout.
func build(o options) error {
	var adds []mutate.IndexAddendum
	for _, b := range o.binaries {
		img, err := image(o, b)
		if err != nil {
			return err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &b.platform}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	idx = mutate.Annotations(idx, o.labels()).(v1.ImageIndex)
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	p, err := layout.Write(o.out, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.version}))
}

func image(o options, b platformBinary) (v1.Image, error) {
	bin, err := os.ReadFile(b.path)
	if err != nil {
		return nil, fmt.Errorf("%s binary: %w", b.platform, err)
	}
	layerTar, err := rootfs(bin, o.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "internal/tools/image", Comment: "talon binary and nonroot user"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = b.platform.OS, b.platform.Architecture
	cf.Created = v1.Time{Time: o.created}
	cf.Config.Entrypoint = []string{"/" + binaryPath}
	cf.Config.Cmd = nil
	cf.Config.User = User
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/" + path.Dir(binaryPath)}
	cf.Config.Labels = o.labels()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, o.labels()).(v1.Image), nil
}

// binaryPath is where the talon binary lives in the image, and its
// entrypoint: where ko (goreleaser's kos, the release image) puts the
// binary of ./cmd/talon, so both images run the same command line (the
// chart's args, a docker run override).
const binaryPath = "ko-app/talon"

// rootfs is the image's only layer: the binary and the user database.
func rootfs(bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct {
		name string
		mode int64
		body []byte
	}{
		{"etc/", 0o755, nil},
		{"etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path.Dir(binaryPath) + "/", 0o755, nil},
		{binaryPath, 0o755, bin},
		{"tmp/", 0o1777, nil},
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
