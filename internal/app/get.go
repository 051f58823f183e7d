package app

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	// sourceVouchers is --source-vouchers (ObjectReader.SourceVouchers).
	sourceVouchers int
	// parallel is --parallel (ObjectReader.Parallel).
	parallel int
	source   string
	tls      clientTLS
	creds    *pki.Source // resolved from tls; nil for an insecure cluster
}

// Bounds of get --parallel: each block in flight is buffered whole.
const (
	defaultGetParallel = 4
	maxGetParallel     = 64
)

func newGetCmd(env Env) *cobra.Command {
	opts := getOptions{}
	cmd := &cobra.Command{
		Use:   "get OBJECT",
		Short: "Read an object through the cluster's caches",
		Long: `get reads OBJECT through the workers that own its blocks: for each block it
asks a coordinator for the owners (failing over across --coordinators), reads
from the first owner and falls back to the next owner when one fails (a
connection failure, an error, not found, a failed check). The length of every
block and of the whole object is verified, and (--verify, on by default)
every block's SHA-256 must be vouched for by a strict majority of the workers
placement names for it (--replicas + 2, at least two), with every one of them
answering and none disagreeing: an owner that does not answer (refused, timed
out, reset) is no consent, so the block is read from the store (--source) or
the read fails, naming the silent owner. A read never mixes versions of the object: it reads the
version its first answer (or the store) names, and fails, or with -o starts
over, when the object changes meanwhile. With -o the object is written to a
temporary file that is renamed into place only when the read succeeded;
without it, to standard output.

--source gives the blob store's URL (as the workers' --blob-store, with the
same credential chain: for s3:// the AWS environment, shared config and
profiles, or web identity; for gs:// Application Default Credentials; for
az:// AZURE_STORAGE_CONNECTION_STRING or DefaultAzureCredential). get then
takes the object's size, version and checksum from the store itself, checks
the assembled object against the store's checksum, reads from the store any
block no worker can serve, that workers disagree about or that an owner was
silent about, and names the workers the store contradicts. With -o, an object
that fails the store's checksum is read again from the store alone. Only a
cryptographic checksum vouches for the object against tampering: S3's
full-object SHA-256 or SHA-1 or an ETag that is an MD5, GCS's MD5, Azure's
Content-MD5. A CRC (S3's CRC-64/NVME, CRC-32C, CRC-32; GCS's CRC32C) detects
corruption only, and a store that keeps no checksum (file://, most
http(s)://) cannot check the whole: with either, every block a worker serves
is also read from the store and compared, and the store's bytes win (--source-vouchers N skips
that for a block N or more workers vouch for, trusting that N workers do not
all collude). No set of colluding workers can then make get exit 0 with
wrong bytes. get says on standard error what it verified and which evidence
vouches for the bytes.

--block-size must equal the workers' block size (default 4MiB): placement is
per block. --parallel blocks (default 4) are read at once, each from its
owners, and written in order; each is buffered whole, so memory is about
--parallel times the block size.

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
	f.BoolVar(&opts.verify, "verify", true, "accept a block only when a strict majority of the workers placement names vouch for its SHA-256 and none disagrees; off, an object of several blocks whose store names no version (no ETag or Last-Modified) is refused, since its blocks could come from two contents")
	f.StringVar(&opts.source, "source", "", "blob store URL (file://, http(s)://, s3://, gs://, az://...) to check the object against the store's checksum and to read blocks no worker serves or that workers disagree about")
	f.IntVar(&opts.parallel, "parallel", defaultGetParallel, fmt.Sprintf("blocks read at once, from their owners, written in order (1 to %d)", maxGetParallel))
	f.IntVar(&opts.sourceVouchers, "source-vouchers", 0, fmt.Sprintf("with --source on a store that keeps no cryptographic checksum (none, or a CRC): accept a block without reading it from the store when this many workers vouch for it (--verify); 0 reads every block from the store too (0 to %d)", protocol.MaxReplicas+2))
	opts.tls.register(f)
	return cmd
}

// validate checks the flags and the object name, and returns the block
// size; every error is a usage error naming the flag, the value and the
// limit.
func (opts *getOptions) validate(object string) (uint64, error) {
	if err := blob.ValidateKey(object); err != nil {
		return 0, &usageError{err}
	}
	if opts.parallel < 1 || opts.parallel > maxGetParallel {
		return 0, &usageError{fmt.Errorf("--parallel %d: must be from 1 to %d", opts.parallel, maxGetParallel)}
	}
	if opts.sourceVouchers < 0 || opts.sourceVouchers > protocol.MaxReplicas+2 {
		return 0, &usageError{fmt.Errorf("--source-vouchers %d: must be from 0 to %d", opts.sourceVouchers, protocol.MaxReplicas+2)}
	}
	if opts.replicas < 1 || opts.replicas > protocol.MaxReplicas {
		return 0, &usageError{fmt.Errorf("--replicas %d: must be from 1 to %d", opts.replicas, protocol.MaxReplicas)}
	}
	bs, err := format.ParseBytes(opts.blockSize)
	if err != nil || bs < 1 || bs > 1<<30 {
		return 0, &usageError{fmt.Errorf("--block-size %q: must be a size such as 4MiB", opts.blockSize)}
	}
	for _, a := range opts.coordinators {
		if err := cluster.ValidateAddress("--coordinators", a, true); err != nil {
			return 0, &usageError{err}
		}
	}
	return bs, nil
}

func getRun(ctx context.Context, env Env, opts getOptions, object string) error {
	bs, err := opts.validate(object)
	if err != nil {
		return err
	}
	var src blob.Store
	if opts.source != "" {
		if src, err = openBlobStore(opts.source); err != nil {
			return &usageError{fmt.Errorf("--source: %w", err)}
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
		TLS: opts.creds != nil, Verify: opts.verify, Source: src, SourceVouchers: opts.sourceVouchers, Parallel: opts.parallel,
		OnVerifyFailure: func(object string, block int64, msg string) {
			// Always reported: workers disagree about the bytes.
			fmt.Fprintf(env.Stderr, "talon: block %d of %s failed verification: %s\n", block, object, msg)
		},
	}
	if opts.verbose {
		r.OnFallback = func(object string, block int64, owner string, err error) {
			fmt.Fprintf(env.Stderr, "talon: block %d of %s: %s failed (%v); trying the next owner\n", block, object, owner, err)
		}
	}
	if opts.output == "" {
		w := bufio.NewWriterSize(env.Stdout, 1<<20)
		res, err := r.Read(ctx, object, w)
		if err != nil {
			if errors.Is(err, client.ErrChecksum) {
				// The bytes are out already: say so plainly.
				return fmt.Errorf("%w (the bytes written to standard output are wrong; use -o to have get read the object again from the store)", err)
			}
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "talon: verified: %s\n", res.Describe(opts.verify, src != nil))
		return nil
	}
	tmp, err := createPart(opts.output)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	res, err := readToFile(ctx, env, r, object, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), opts.output); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "talon: wrote %s (%s) to %s; verified: %s\n", object, format.Bytes(uint64(res.N)), opts.output, res.Describe(opts.verify, src != nil))
	return nil
}

// maxObjectReads bounds how often get starts a read over because the
// object changed during it.
const maxObjectReads = 3

// readToFile reads the object into f, starting over (truncating f) when
// the object changed during the read, and reading it from the store alone
// when the workers' bytes fail the store's checksum.
func readToFile(ctx context.Context, env Env, r *client.ObjectReader, object string, f *os.File) (*client.ReadResult, error) {
	restart := func() error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return f.Truncate(0)
	}
	for try := 1; ; try++ {
		w := bufio.NewWriterSize(f, 1<<20)
		res, err := r.Read(ctx, object, w)
		if err == nil {
			return res, w.Flush()
		}
		switch {
		case errors.Is(err, client.ErrChecksum) && r.Source != nil:
			fmt.Fprintf(env.Stderr, "talon: %v; reading the object again from the store alone\n", err)
			if err := restart(); err != nil {
				return nil, err
			}
			w = bufio.NewWriterSize(f, 1<<20)
			res, err = r.ReadFromSource(ctx, object, w)
			if err != nil {
				return nil, err
			}
			return res, w.Flush()
		case errors.Is(err, client.ErrObjectChanged) && try < maxObjectReads:
			fmt.Fprintf(env.Stderr, "talon: %v; starting over\n", err)
			if err := restart(); err != nil {
				return nil, err
			}
		default:
			return nil, err
		}
	}
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
