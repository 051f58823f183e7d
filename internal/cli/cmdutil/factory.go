package cmdutil

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cliconfig"
)

// Factory carries what commands need from the process: streams, the
// environment, a clock and the connection flags. NewCmdRoot binds the
// global flags into Conn; commands resolve them with Connection or Client
// when they run. A Factory serves one command execution; it is not safe
// for concurrent use.
type Factory struct {
	IO IOStreams
	// Environ is the process environment as KEY=VALUE pairs; nil reads none.
	Environ []string
	// Clock is the wall clock (watch headers); nil means time.Now.
	Clock func() time.Time
	// Conn receives the global connection flags.
	Conn ConnFlags

	transports []*http.Transport // of the clients built, closed by Close
	// memory is what the clients of this execution learn about the
	// servers (apiv1.ServerMemory), loaded from and saved by Close to the
	// server cache file memoryPath under memoryKey; nil until the first
	// Connection.
	memory     *apiv1.ServerMemory
	memoryKey  string
	memoryPath string
}

// System returns the factory of the real process.
func System() *Factory {
	f := &Factory{Environ: os.Environ(), Clock: time.Now}
	f.IO = SystemIO(f.Environ)
	return f
}

// Getenv returns the value of the environment variable key from Environ
// (the last one wins, like os.Getenv), or "".
func (f *Factory) Getenv(key string) string {
	return lookupEnv(f.Environ, key)
}

// Now returns the clock's time.
func (f *Factory) Now() time.Time {
	if f.Clock == nil {
		return time.Now()
	}
	return f.Clock()
}

// Connection resolves the connection settings: flags, then TALONCTL_*
// environment variables, then the context of the configuration file,
// then defaults. Usage errors (exit 2) name the flag or variable at fault.
// The connection carries the execution's server memory: every client
// built from it tries the server that last answered first (in this
// execution or, within ServerCacheTTL, an earlier one with the same
// context and servers) and pays a silent server's attempt deadline at most
// once.
func (f *Factory) Connection() (*Connection, error) {
	conn, err := f.Conn.resolve(f.Getenv)
	if err != nil {
		return nil, err
	}
	if key := serverCacheKey(conn); f.memory == nil || f.memoryKey != key {
		f.memoryKey, f.memoryPath = key, serverCachePath(f.Getenv, key)
		f.memory = loadServerMemory(f.memoryPath, key, f.Now)
	}
	conn.Memory = f.memory
	return conn, nil
}

// Client resolves the connection and returns an /api/v1 client for it.
func (f *Factory) Client() (*apiv1.Client, error) {
	conn, err := f.Connection()
	if err != nil {
		return nil, err
	}
	return f.ClientFor(conn, 0)
}

// ClientFor returns a client for conn whose attempts are bounded by
// timeout (conn.Timeout when 0). Close releases its idle connections.
func (f *Factory) ClientFor(conn *Connection, timeout time.Duration) (*apiv1.Client, error) {
	cl, tr, err := conn.NewClient(timeout)
	if err != nil {
		return nil, err
	}
	f.transports = append(f.transports, tr)
	return cl, nil
}

// Close releases the idle connections of every client the factory built
// and saves what they learned about the servers in the server cache. The
// clients stay usable (they reconnect).
func (f *Factory) Close() {
	saveServerMemory(f.memoryPath, f.memoryKey, f.memory, f.Now())
	for _, tr := range f.transports {
		tr.CloseIdleConnections()
	}
	f.transports = nil
}

// ConfigFile loads the configuration file: --talonconfig, else
// TALONCTL_CONFIG, else $XDG_CONFIG_HOME/talon/talonctl.yaml (an empty one
// when it does not exist).
func (f *Factory) ConfigFile() (*cliconfig.File, error) {
	path, err := f.Conn.ConfigPath(f.Getenv)
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) {
			return nil, err
		}
		return nil, fmt.Errorf("config file: %w", err)
	}
	return cliconfig.Load(path)
}

// CurrentContext returns the context in effect, and where it was named:
// --context, then TALONCTL_CONTEXT, then the file's current-context. The
// name is empty when none is; it is not checked against the file.
func (f *Factory) CurrentContext(file *cliconfig.File) (name, source string) {
	if name, source = f.Conn.contextOverride(f.Getenv); name != "" {
		return name, source
	}
	if file != nil && file.CurrentContext != "" {
		return file.CurrentContext, "current-context"
	}
	return "", ""
}
