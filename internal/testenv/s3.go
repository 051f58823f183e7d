package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// EnvS3Bin names a prebuilt versitygw binary; when unset, S3Binary runs
// build-s3.sh, which builds it from its Go module once and caches it.
const EnvS3Bin = "TALON_S3_BIN"

// S3Binary returns the path of the versitygw binary: $TALON_S3_BIN when
// set, otherwise the one build-s3.sh builds (or finds in its cache). It
// fails t when neither yields an executable file; it never skips.
func S3Binary(t testing.TB) string {
	t.Helper()
	return toolBinary(t, EnvS3Bin, "build-s3.sh", "versitygw")
}

// S3 is a running versitygw: a real S3 server over a posix directory on
// 127.0.0.1, with one root credential. Stop and Start restart it on the
// same port and data.
type S3 struct {
	t testing.TB
	p *proc
	// Endpoint is http://127.0.0.1:PORT.
	Endpoint string
	// AccessKey and SecretKey are the root credential.
	AccessKey, SecretKey string
	// Dir is the posix directory: bucket B's object K is Dir/B/K.
	Dir string
}

// S3Region is the region the test server answers for.
const S3Region = "us-east-1"

// StartS3 starts versitygw and waits until it answers. A cleanup kills it.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	bin := S3Binary(t)
	dir := t.TempDir()
	s := &S3{
		t: t, Dir: filepath.Join(dir, "data"),
		AccessKey: "AKIATALON" + strings.ToUpper(randomToken()[:11]),
		SecretKey: "talon-test-secret-" + randomToken(),
		p:         &proc{name: "versitygw", bin: bin, logPath: filepath.Join(dir, "versitygw.log"), env: childEnv()},
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.p.stop(0); err != nil {
			t.Errorf("testenv: %v", err)
		}
		if t.Failed() {
			t.Logf("--- versitygw log %s ---\n%s", s.p.logPath, s.p.logTail())
		}
	})
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			t.Fatalf("testenv: versitygw: %v", err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		s.Endpoint = "http://" + addr
		s.p.mu.Lock()
		// The credential is given in the environment, not in argv, so
		// that it does not show in ps.
		s.p.env = append(childEnv(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
		s.p.args = []string{"--port", addr, "--region", S3Region, "--quiet", "posix", s.Dir}
		s.p.mu.Unlock()
		err = s.startAndWait()
		if err == nil {
			return s
		}
		tail := s.p.logTail()
		_ = s.p.stop(0)
		if attempt < startAttempts && strings.Contains(tail, "address already in use") {
			continue
		}
		t.Fatalf("testenv: versitygw did not start: %v\n--- log ---\n%s", err, tail)
	}
}

func (s *S3) startAndWait() error {
	if err := s.p.start(); err != nil {
		return err
	}
	host := strings.TrimPrefix(s.Endpoint, "http://")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.p.exited():
			return fmt.Errorf("versitygw exited: %s", s.p.exitStatus())
		default:
		}
		if c, err := net.DialTimeout("tcp", host, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("versitygw at %s did not accept connections within 60s", s.Endpoint)
}

// Stop kills the server (the store is down); Start brings it back on the
// same port and data.
func (s *S3) Stop() {
	s.t.Helper()
	if err := s.p.stop(0); err != nil {
		s.t.Fatalf("testenv: %v", err)
	}
}

// Start restarts a stopped server.
func (s *S3) Start() {
	s.t.Helper()
	if err := s.startAndWait(); err != nil {
		s.t.Fatalf("testenv: restart versitygw: %v\n%s", err, s.p.logTail())
	}
}

// PID is the server's process id, 0 while it is stopped: a benchmark
// reads the CPU time it used from /proc.
func (s *S3) PID() int { return s.p.pid() }

// Env is the environment that gives an AWS SDK the root credential and
// turns off the instance metadata lookup (no request may leave loopback).
func (s *S3) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + S3Region, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	}
}

// URL is the blob-store URL of bucket/prefix on this server.
func (s *S3) URL(bucket, prefix string) string { return s.URLVia(s.Endpoint, bucket, prefix) }

// URLVia is the blob-store URL of bucket/prefix on this server reached
// at endpoint (http://host:port), a proxy in front of it: requests are
// signed for the proxy's address, which forwards the Host header as it is.
func (s *S3) URLVia(endpoint, bucket, prefix string) string {
	u := "s3://" + bucket
	if prefix != "" {
		u += "/" + prefix
	}
	return u + "?endpoint=" + url.QueryEscape(endpoint) + "&use_path_style=true&region=" + S3Region
}

// Client returns an S3 client of the root credential.
func (s *S3) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       S3Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient:   &http.Client{Timeout: time.Minute},
	})
}

// CreateBucket creates a bucket.
func (s *S3) CreateBucket(t testing.TB, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("testenv: create bucket %s: %v", bucket, err)
	}
}

// Put uploads data as bucket/key with a full-object SHA-256 checksum.
func (s *S3) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum := sha256.Sum256(data)
	_, err := s.Client().PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	})
	if err != nil {
		t.Fatalf("testenv: put %s/%s: %v", bucket, key, err)
	}
}
