package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/yaml"
)

// TestImage builds the image from a real executable (this test binary
// stands in for talon: the image does not depend on what the binary does)
// for two platforms and reads the OCI layout back as a runtime would.
func TestImage(t *testing.T) {
	koEntrypoint := releaseEntrypoint(t)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := options{
		out: filepath.Join(t.TempDir(), "image"), version: "v1.2.3", revision: "0123abcd", source: "https://github.com/talonhq/talon",
		created:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		binaries: []platformBinary{{v1.Platform{OS: "linux", Architecture: "amd64"}, bin}, {v1.Platform{OS: "linux", Architecture: "arm64"}, bin}},
	}
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	idx := readIndex(t, o.out)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.Annotations["org.opencontainers.image.version"] != "v1.2.3" || im.Annotations["org.opencontainers.image.revision"] != "0123abcd" {
		t.Errorf("index annotations %v lack version and revision", im.Annotations)
	}
	var arches []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		arches = append(arches, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532 (non-root)", d.Platform.Architecture, cf.Config.User)
		}
		if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != koEntrypoint {
			t.Errorf("%s: entrypoint %v, want [%s], the release image's (ko)", d.Platform.Architecture, cf.Config.Entrypoint, koEntrypoint)
		}
		if cf.Architecture != d.Platform.Architecture || cf.OS != "linux" {
			t.Errorf("config platform %s/%s, index says %s", cf.OS, cf.Architecture, d.Platform.Architecture)
		}
		for k, want := range map[string]string{"org.opencontainers.image.source": o.source, "org.opencontainers.image.revision": o.revision, "org.opencontainers.image.version": o.version} {
			if cf.Config.Labels[k] != want {
				t.Errorf("%s: label %s = %q, want %q", d.Platform.Architecture, k, cf.Config.Labels[k], want)
			}
		}
		files := layerFiles(t, img)
		if h, ok := files[strings.TrimPrefix(koEntrypoint, "/")]; !ok || h.Mode&0o111 == 0 || h.Size == 0 {
			t.Errorf("%s: %s missing or not executable: %+v", d.Platform.Architecture, koEntrypoint, h)
		}
		for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox"} {
			if _, ok := files[shell]; ok {
				t.Errorf("%s: image has a shell: /%s", d.Platform.Architecture, shell)
			}
		}
	}
	if len(arches) != 2 || arches[0] != "linux/amd64" || arches[1] != "linux/arm64" {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", arches)
	}

	// The same inputs give the same image: the digest is reproducible.
	d1, _ := idx.Digest()
	o.out = filepath.Join(t.TempDir(), "again")
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	if d2, _ := readIndex(t, o.out).Digest(); d1 != d2 {
		t.Errorf("rebuilding gave index %s, first build %s", d2, d1)
	}
}

func TestParsePlatformsRejects(t *testing.T) {
	for _, args := range [][]string{nil, {"linux/amd64"}, {"darwin/arm64=talon"}, {"linux=talon"}, {"linux/amd64="}} {
		if _, err := parsePlatforms(args); err == nil {
			t.Errorf("parsePlatforms(%q) accepted", args)
		}
	}
}

func readIndex(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	rm, err := root.IndexManifest()
	if err != nil || len(rm.Manifests) != 1 || rm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] == "" {
		t.Fatalf("layout index.json: want one tagged image index, got %+v (%v)", rm, err)
	}
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func layerFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("want one layer, got %d (%v)", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

// releaseEntrypoint is the entrypoint of the release image: ko puts the
// binary of a kos entry's main package at /ko-app/<last element of its
// path>, read here from goreleaser.yaml.
func releaseEntrypoint(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Kos []struct {
			ID   string `json:"id"`
			Main string `json:"main"`
		} `json:"kos"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Kos) != 1 || cfg.Kos[0].Main == "" {
		t.Fatalf("goreleaser.yaml: want one kos entry with a main package, got %+v", cfg.Kos)
	}
	return "/ko-app/" + path.Base(cfg.Kos[0].Main)
}
