package security

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"hash/crc64"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/talonhq/talon/internal/blob"
	s3store "github.com/talonhq/talon/internal/blob/s3"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// putCRCOnly uploads data as bucket/key in two parts with a full-object
// CRC-64/NVME (crc64 true) or CRC-32C checksum: the object's ETag is
// not an MD5 (a multipart upload's), so the store keeps no cryptographic
// checksum of it, only the CRC (CRC-64/NVME is S3's default).
func putCRCOnly(t *testing.T, srv *testenv.S3, bucket, key string, data []byte, partSize int, crc64NVME bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := srv.Client()
	alg := types.ChecksumAlgorithmCrc32c
	if crc64NVME {
		alg = types.ChecksumAlgorithmCrc64nvme
	}
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		ChecksumAlgorithm: alg, ChecksumType: types.ChecksumTypeFullObject})
	if err != nil {
		t.Fatalf("create multipart upload: %v", err)
	}
	var parts []types.CompletedPart
	for i, off := int32(1), 0; off < len(data); i, off = i+1, off+partSize {
		part := data[off:min(off+partSize, len(data))]
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId, PartNumber: aws.Int32(i),
			Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part))), ChecksumAlgorithm: alg})
		if err != nil {
			t.Fatalf("upload part %d: %v", i, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(i), ChecksumCRC64NVME: out.ChecksumCRC64NVME, ChecksumCRC32C: out.ChecksumCRC32C})
	}
	in := &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, ChecksumType: types.ChecksumTypeFullObject}
	if crc64NVME {
		sum := binary.BigEndian.AppendUint64(nil, crc64.Checksum(data, crc64.MakeTable(0x9a6c9329ac4bc9b5)))
		in.ChecksumCRC64NVME = aws.String(base64.StdEncoding.EncodeToString(sum))
	} else {
		sum := binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
		in.ChecksumCRC32C = aws.String(base64.StdEncoding.EncodeToString(sum))
	}
	if _, err := c.CompleteMultipartUpload(ctx, in); err != nil {
		t.Fatalf("complete multipart upload: %v", err)
	}
}

// forgery is what the forgers serve of one object: its forged bytes,
// claimed at the object's real version.
type forgery struct {
	forged  []byte
	version string
}

// forger is a compromised worker that colludes with the others started
// with the same forgeries: it holds a valid worker credential, keeps its
// record alive, claims each object's real size and version, and answers
// every read with the forged bytes and every digest with their digest.
func forger(t *testing.T, p *talontest.PKI, ctl, node string, objects map[string]forgery) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, digest := strings.CutPrefix(r.URL.Path, datav1.DigestPrefix)
		if !digest {
			key = strings.TrimPrefix(r.URL.Path, datav1.PathPrefix)
		}
		f, ok := objects[key]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		serveBytes(w, r, key, digest, f.forged, f.version)
	})
	rogueWorker(t, p, ctl, node, h)
}

// serveBytes answers a data request of object key, a block or (digest)
// its digest, with data's bytes from the requested offset, claiming
// data's size and version.
func serveBytes(w http.ResponseWriter, r *http.Request, key string, digest bool, data []byte, version string) {
	size := int64(len(data))
	off, length := queryInt(r, "offset", 0), queryInt(r, "length", talontest.BlockSize)
	body := data[min(off, size):min(max(off+length, off), size)]
	w.Header().Set(datav1.ObjectSizeHeader, strconv.FormatInt(size, 10))
	w.Header().Set(datav1.ObjectVersionHeader, version)
	if digest {
		sum := sha256.Sum256(body)
		_ = json.NewEncoder(w).Encode(datav1.Digest{Object: key, Offset: off, Length: int64(len(body)), ObjectSize: size, SHA256: hex.EncodeToString(sum[:]), Version: version})
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

var (
	comparedRE  = regexp.MustCompile(`(\d+) of \d+ blocks compared with the store's bytes`)
	fromStoreRE = regexp.MustCompile(`(\d+) blocks? read from the store`)
)

// storeChecked returns how many blocks get's summary says it compared
// with the store's bytes plus how many it read from the store (a block
// that failed the comparison counts in both).
func storeChecked(stderr string) int {
	n := 0
	for _, re := range []*regexp.Regexp{comparedRE, fromStoreRE} {
		if m := re.FindStringSubmatch(stderr); m != nil {
			v, _ := strconv.Atoi(m[1])
			n += v
		}
	}
	return n
}

// TestCRCForgeryOnS3 is the review's second attack on a real S3 server
// (versitygw): the store keeps only a CRC of each object (CRC-64/NVME,
// S3's default, and CRC-32C; multipart uploads, whose ETag is no MD5),
// and colluding workers serve forgeries with the same CRC (one byte
// changed, eight or four correcting bytes). A CRC is no evidence against
// tampering, so `talon get --source` compares every block with the
// store's bytes, writes the right object, names the colluders the store
// contradicts and says what the CRC is worth; without --source, get never
// exits 0 with the forged bytes. It holds with the honest worker beside
// two forgers, and with the two forgers alone (every owner placement
// names). (Before issue 47, get --source accepted the forgery with exit
// 0: "the object matches the store's crc64nvme checksum".)
func TestCRCForgeryOnS3(t *testing.T) {
	talontest.SkipShort(t)
	srv := testenv.StartS3(t)
	srv.CreateBucket(t, "talon")
	const size, blocks = 6*talontest.BlockSize + 5, 7
	blobURL := srv.URL("talon", "data")
	env := srv.Env()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	store, err := s3store.New(blobURL, blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// One byte changed in block 2, corrected in block 4.
	at, fix := 2*talontest.BlockSize+100, 4*talontest.BlockSize+200
	wants, forgeries := map[string][]byte{}, map[string]forgery{}
	for i, tc := range []struct {
		object string
		alg    string
		forge  func([]byte, int, int) []byte
	}{
		{"crc64.bin", blob.CRC64NVME, testsupport.ForgeCRC64NVME},
		{"crc32c.bin", blob.CRC32C, testsupport.ForgeCRC32C},
	} {
		want := talontest.WriteBlob(t, t.TempDir(), tc.object, size, uint64(47+i))
		putCRCOnly(t, srv, "talon", "data/"+tc.object, want, 5<<20, tc.alg == blob.CRC64NVME)
		info, err := blob.Stat(context.Background(), store, tc.object)
		if err != nil {
			t.Fatal(err)
		}
		if info.Checksum.Algorithm != tc.alg || info.Checksum.Cryptographic() {
			t.Fatalf("the store keeps checksum %q of %s, want only %s: the test would prove nothing", info.Checksum.Algorithm, tc.object, tc.alg)
		}
		wants[tc.object], forgeries[tc.object] = want, forgery{tc.forge(want, at, fix), info.Version}
	}

	p := talontest.NewPKI(t)
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), p.Args(t, pki.RoleCoordinator, "coord")...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	args := talontest.WorkerArgs("honest-1", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, "/unused", t.TempDir(), p.Args(t, pki.RoleWorker, "honest-1")...)
	args[slices.Index(args, "--blob-store")+1] = blobURL
	honestProc := talontest.StartWithEnv(t, "honest-1", env, args...)
	forger(t, p, ctl, "bad-1", forgeries)
	forger(t, p, ctl, "bad-2", forgeries)
	waitWorkers := func(n int) {
		testsupport.WaitFor(t, 30*time.Second, "eligible workers", func() bool {
			cl, err := coord.API(t).Cluster(context.Background())
			return err == nil && cl.EligibleWorkers == n
		})
	}
	f := p.Files(t, pki.RoleClient, "reader")
	creds := []string{"--coordinators", ctl, "--block-size", "1MiB", "--tls-ca-file", f.CAFile, "--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile, "--timeout", "50s"}
	dir := t.TempDir()
	check := func(t *testing.T, name string, withSource bool) {
		for object, want := range wants {
			out := filepath.Join(dir, name+"-"+object)
			args := append([]string{"get", object, "-o", out}, creds...)
			if withSource {
				args = append(args, "--source", blobURL)
			}
			res := talontest.RunTalon(t, env, args...)
			got, _ := os.ReadFile(out)
			right := bytes.Equal(got, want)
			t.Logf("%s: exit %d, right bytes %t\n%s", object, res.Code, right, talontest.Tail(res.Stderr, 1500))
			alg := strings.TrimSuffix(object, ".bin")
			if alg == "crc64" {
				alg = blob.CRC64NVME
			}
			switch {
			case res.Code == 0 && !right:
				t.Fatalf("talon get %s exit 0 with the forged bytes:\n%s", object, res.Stderr)
			case contradicted(res.Stderr)["honest-1"]:
				t.Fatalf("talon get %s named the honest worker as contradicted by the store:\n%s", object, res.Stderr)
			case !withSource:
			case res.Code != 0 || !right:
				t.Fatalf("%s with --source: exit %d, right bytes %t; want the right object\n%s", object, res.Code, right, res.Stderr)
			case !contradicted(res.Stderr)["bad-1"] && !contradicted(res.Stderr)["bad-2"]:
				t.Fatalf("%s with --source, no forger named:\n%s", object, res.Stderr)
			case !strings.Contains(res.Stderr, "store's "+alg+" checksum") || !strings.Contains(res.Stderr, "evidence is the store's bytes"):
				t.Fatalf("%s with --source, get does not say the %s is no evidence and what is:\n%s", object, alg, res.Stderr)
			case storeChecked(res.Stderr) < blocks:
				t.Fatalf("%s with --source, %d of %d blocks compared with or read from the store; want every one:\n%s", object, storeChecked(res.Stderr), blocks, res.Stderr)
			}
		}
	}
	waitWorkers(3)
	t.Run("two forgers of three", func(t *testing.T) { check(t, "2of3", false) })
	t.Run("two forgers of three with source", func(t *testing.T) { check(t, "2of3s", true) })
	honestProc.Kill()
	waitWorkers(2)
	t.Run("two forgers alone with source", func(t *testing.T) { check(t, "2alones", true) })
}
