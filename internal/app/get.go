package app

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/format"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
)

type getOptions struct {
	coordinators []string
	output       string
	replicas     int
	blockSize    string
	timeout      time.Duration
	verbose      bool
	verify       bool
	tls          clientTLS
	creds        *pki.Source // resolved from tls; nil for an insecure cluster
}

func newGetCmd(env Env) *cobra.Command {
	opts := getOptions{}
	cmd := &cobra.Command{
		Use:   "get OBJECT",
		Short: "Read an object through the cluster's caches",
		Long: `get reads OBJECT through the workers that own its blocks: for each block it
asks a coordinator for the owners (failing over across --coordinators), reads
from the first owner and falls back to the next replica when one fails. The
length of every block and of the whole object is verified, and (--verify, on
by default) every block's SHA-256 is checked against a digest computed by a
second worker: a worker that serves wrong bytes cannot make get succeed. With -o the object
is written to a temporary file that is renamed into place only when the read
succeeded; without it, to standard output.

--block-size must equal the workers' block size (default 4MiB): placement is
per block.

The control and data ports need a client credential (mutual TLS): give
--tls-ca-file, --tls-cert-file and --tls-key-file (a certificate with
OU=client), or --dir of a running ` + "`talon dev`" + ` cluster, which also supplies the
coordinators; --insecure-control-plane talks to a cluster without TLS.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			creds, fromDir, err := opts.tls.resolve(cmd.Flags(), env.Environ)
			if err != nil {
				return err
			}
			opts.creds = creds
			if v := lookupEnv(env.Environ, "TALON_COORDINATORS"); v != "" && !cmd.Flags().Changed("coordinators") {
				opts.coordinators = strings.Split(v, ",")
			} else if len(fromDir) > 0 && !cmd.Flags().Changed("coordinators") {
				opts.coordinators = fromDir
			}
			return getRun(cmd.Context(), env, opts, args[0])
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.coordinators, "coordinators", []string{"127.0.0.1:7400"}, "coordinator control addresses host:port[,host:port...] (env TALON_COORDINATORS)")
	f.StringVarP(&opts.output, "output", "o", "", "write the object to this file instead of standard output")
	f.IntVar(&opts.replicas, "replicas", 2, fmt.Sprintf("owners looked up per block, tried in order (1 to %d)", protocol.MaxReplicas))
	f.StringVar(&opts.blockSize, "block-size", "4MiB", "block size of the workers")
	f.DurationVar(&opts.timeout, "timeout", 5*time.Minute, "give up after this long")
	f.BoolVarP(&opts.verbose, "verbose", "v", false, "report replica fallbacks on standard error")
	f.BoolVar(&opts.verify, "verify", true, "check every block's SHA-256 against a digest from a second worker; a block that fails is discarded and the next owner tried")
	opts.tls.register(f)
	return cmd
}

func getRun(ctx context.Context, env Env, opts getOptions, object string) error {
	if err := blob.ValidateKey(object); err != nil {
		return &usageError{err}
	}
	if opts.replicas < 1 || opts.replicas > protocol.MaxReplicas {
		return &usageError{fmt.Errorf("--replicas %d: must be from 1 to %d", opts.replicas, protocol.MaxReplicas)}
	}
	bs, err := format.ParseBytes(opts.blockSize)
	if err != nil || bs < 1 || bs > 1<<30 {
		return &usageError{fmt.Errorf("--block-size %q: must be a size such as 4MiB", opts.blockSize)}
	}
	for _, a := range opts.coordinators {
		if err := cluster.ValidateAddress("--coordinators", a, true); err != nil {
			return &usageError{err}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	copts := client.Options{Coordinators: opts.coordinators, CacheTTL: time.Minute}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if opts.creds != nil {
		copts.TLS = opts.creds.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})
		tr.TLSClientConfig = opts.creds.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleWorker}})
	}
	defer tr.CloseIdleConnections()
	cl, err := client.New(copts)
	if err != nil {
		return err
	}
	defer cl.Close()
	r := &client.ObjectReader{
		Client: cl, HTTP: &http.Client{Timeout: time.Minute, Transport: tr}, BlockSize: int64(bs), Replicas: opts.replicas,
		TLS: opts.creds != nil, Verify: opts.verify,
		OnVerifyFailure: func(object string, block int64, worker string, disagree []string) {
			// Always reported: a worker served bytes no other worker's
			// digest confirms.
			fmt.Fprintf(env.Stderr, "talon: block %d of %s from worker %s failed verification (digests of %s disagree); discarded\n", block, object, worker, strings.Join(disagree, ", "))
		},
	}
	if opts.verbose {
		r.OnFallback = func(object string, block int64, owner string, err error) {
			fmt.Fprintf(env.Stderr, "talon: block %d of %s: %s failed (%v); trying the next owner\n", block, object, owner, err)
		}
	}
	if opts.output == "" {
		w := bufio.NewWriterSize(env.Stdout, 1<<20)
		if _, err := r.ReadObject(ctx, object, w); err != nil {
			return err
		}
		return w.Flush()
	}
	tmp, err := createPart(opts.output)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	w := bufio.NewWriterSize(tmp, 1<<20)
	n, err := r.ReadObject(ctx, object, w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), opts.output); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "talon: wrote %s (%s) to %s\n", object, format.Bytes(uint64(n)), opts.output)
	return nil
}

func lookupEnv(environ []string, key string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// createPart creates the hidden temporary file the object is written to
// beside output, with mode 0666 less the umask (as the final file should
// have; os.CreateTemp would make it 0600). Errors name the user's path.
func createPart(output string) (*os.File, error) {
	dir := filepath.Dir(output)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, &usageError{fmt.Errorf("-o %s: directory %s does not exist", output, dir)}
	}
	var b [6]byte
	for range 10 {
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		name := filepath.Join(dir, "."+filepath.Base(output)+".part-"+hex.EncodeToString(b[:]))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("-o %s: cannot create a file in %s: %w", output, dir, errors.Unwrap(err))
		}
		return f, nil
	}
	return nil, fmt.Errorf("-o %s: cannot create a temporary file in %s", output, dir)
}
