package etcd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

func TestOptionsValidate(t *testing.T) {
	valid := func() Options {
		o := DefaultOptions()
		o.Endpoints = []string{"https://etcd-0:2379", "etcd-1:2379"}
		return o
	}
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr string // substring; empty means valid
	}{
		{"valid", func(*Options) {}, ""},
		{"credentials", func(o *Options) { o.Username, o.Password = "talon", "pw" }, ""},
		{"no endpoints", func(o *Options) { o.Endpoints = nil }, "endpoints: at least one"},
		{"empty endpoint", func(o *Options) { o.Endpoints = []string{""} }, `endpoints[0] "": must not be empty`},
		{"bad scheme", func(o *Options) { o.Endpoints = []string{"ftp://etcd:2379"} }, `endpoints[0] "ftp://etcd:2379": scheme "ftp"`},
		{"no port", func(o *Options) { o.Endpoints = []string{"etcd"} }, "must be host:port or an"},
		{"password without user", func(o *Options) { o.Password = "pw" }, "username: required"},
		{"user without password", func(o *Options) { o.Username = "talon" }, `password: required for username "talon"`},
		{"cert without key", func(o *Options) { o.TLS.CertFile = "c.pem" }, `certFile "c.pem" and keyFile "" must be set together`},
		{"negative dial timeout", func(o *Options) { o.DialTimeout = -time.Second }, "dialTimeout -1s: must be positive"},
		{"negative request timeout", func(o *Options) { o.RequestTimeout = -time.Second }, "requestTimeout -1s: must be positive"},
		{"relative prefix", func(o *Options) { o.Prefix = "talon" }, `prefix "talon": must start with "/"`},
		{"trailing slash", func(o *Options) { o.Prefix = "/talon/" }, `prefix "/talon/": must not end with "/"`},
		{"root prefix", func(o *Options) { o.Prefix = "/" }, `prefix "/": must not end with "/"`},
		{"double slash", func(o *Options) { o.Prefix = "/a//b" }, `must not contain "//"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.mutate(&o)
			err := o.withDefaults().Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRejectsOptionsBeforeDialing(t *testing.T) {
	_, err := New(context.Background(), Options{Prefix: "nope"})
	if err == nil || !strings.Contains(err.Error(), "endpoints") || !strings.Contains(err.Error(), `prefix "nope"`) {
		t.Fatalf("New = %v, want errors naming endpoints and prefix", err)
	}
	o := DefaultOptions()
	o.Endpoints = []string{"127.0.0.1:1"}
	o.TLS.CAFile = "/does/not/exist.pem"
	if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "/does/not/exist.pem") {
		t.Fatalf("New = %v, want an error naming the CA file", err)
	}
}

func TestOptionsRedactPassword(t *testing.T) {
	const secret = "s3cret-Pa55word"
	o := DefaultOptions()
	o.Endpoints = []string{"etcd:2379"}
	o.Username, o.Password = "talon", secret

	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "etcd", o)
	js, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	type wrapper struct{ Etcd Options }
	for name, out := range map[string]string{
		"String": o.String(),
		"%v":     fmt.Sprintf("%v", o),
		"%+v":    fmt.Sprintf("%+v", o),
		"%#v":    fmt.Sprintf("%#v", o),
		//lint:ignore S1025 the redaction must hold for every verb, %s included
		"%s":              fmt.Sprintf("%s", o),
		"pointer %v":      fmt.Sprintf("%v", &o),
		"nested %+v":      fmt.Sprintf("%+v", wrapper{o}),
		"slog JSON":       logged.String(),
		"encoding/json":   string(js),
		"nested %#v":      fmt.Sprintf("%#v", wrapper{o}),
		"slog text group": slogText(o),
	} {
		if strings.Contains(out, secret) {
			t.Errorf("%s leaks the password: %s", name, out)
		}
		if name != "encoding/json" && !strings.Contains(out, "talon") {
			t.Errorf("%s lost the username: %s", name, out)
		}
	}
	if !strings.Contains(o.String(), redacted) {
		t.Errorf("String does not show that a password is set: %s", o.String())
	}
}

func slogText(o Options) string {
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Info("config", slog.Any("etcd", o))
	return b.String()
}

func TestKeys(t *testing.T) {
	k := keys{prefix: "/talon"}
	key := cluster.Key{ClusterID: "prod-1", Role: cluster.RoleWorker, NodeID: "w-7.a"}
	slot := k.slot(key)
	if slot != "/talon/clusters/prod-1/nodes/worker/w-7.a" {
		t.Fatalf("slot = %q", slot)
	}
	if !strings.HasPrefix(slot, k.cluster("prod-1")) || strings.HasPrefix(slot, k.cluster("prod")) {
		t.Fatalf("cluster prefix of %q is ambiguous", slot)
	}
	got, ok := k.parse(slot)
	if !ok || got != key {
		t.Fatalf("parse(%q) = %v %t", slot, got, ok)
	}
	for _, bad := range []string{
		"/talon/clusters/prod-1/nodes/worker",           // no node
		"/talon/clusters/prod-1/nodes/gateway/n1",       // unknown role
		"/talon/clusters/prod-1/nodes/worker/a/b",       // node with a slash
		"/talon/clusters/prod-1/other/worker/n1",        // not nodes
		"/talon/clusters//nodes/worker/n1",              // empty cluster
		"/other/clusters/prod-1/nodes/worker/n1",        // another prefix
		"/talon/clusters/-bad/nodes/worker/n1",          // invalid cluster ID
		"/talon/clusters/prod-1/nodes/worker/",          // empty node
		"/talon/clusters/",                              // the revision probe
		"/talon/clusters/prod-1/nodes/coordinator/\x00", // control byte
	} {
		if got, ok := k.parse(bad); ok {
			t.Errorf("parse(%q) = %v, want not a record key", bad, got)
		}
	}
	if _, ok := k.parse(k.revisionProbe()); ok {
		t.Fatal("the revision probe parses as a record key")
	}
}

// FuzzParseKey checks that every key parse accepts round-trips through
// slot, so a key read from etcd is never misattributed to another slot.
func FuzzParseKey(f *testing.F) {
	k := keys{prefix: "/talon"}
	f.Add("/talon/clusters/prod-1/nodes/worker/w1")
	f.Add("/talon/clusters/a/nodes/coordinator/nodes")
	f.Add("/talon/clusters/a/nodes/b/nodes/worker/c")
	f.Fuzz(func(t *testing.T, s string) {
		key, ok := k.parse(s)
		if !ok {
			return
		}
		if back := k.slot(key); back != s {
			t.Fatalf("parse(%q) = %v, whose slot is %q", s, key, back)
		}
	})
}
