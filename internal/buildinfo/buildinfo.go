// Package buildinfo holds the version, commit and build date stamped into
// the binaries by the linker (-X), the way goreleaser does, and renders them.
package buildinfo

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
)

// Set by -ldflags "-X github.com/talonhq/talon/internal/buildinfo.Version=...".
// They are written only by the linker and never at run time.
var (
	Version = "dev"
	Commit  = "none"
	Date    = "unknown"
)

// Info is the build information of a binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this binary's build information.
func Get() Info {
	return Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// Write prints info as text (one "key: value" a line) or, with format
// "json", as one JSON object.
func (i Info) Write(w io.Writer, name, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(i)
	case "", "text":
		_, err := fmt.Fprintf(w, "%s\n  version: %s\n  commit: %s\n  built: %s\n  go: %s\n  platform: %s\n", name, i.Version, i.Commit, i.Date, i.GoVersion, i.Platform)
		return err
	}
	return fmt.Errorf("output format %q: must be text or json", format)
}
