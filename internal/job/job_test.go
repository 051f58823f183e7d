package job

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func sampleJob() Job {
	return Job{ID: "j-1", Op: Warm, Targets: []Target{{Key: "a/b"}, {Key: "c/", Prefix: true}}, By: "ops", Coordinator: "c1",
		CreatedAtUnixMs: 1, State: Running,
		Workers: []Part{{NodeID: "w1", State: PartRunning, BlocksDone: 1, BlocksTotal: 2, BytesDone: 3, BytesTotal: 4}, {NodeID: "w2", State: PartPending}}}
}

// TestJobRules: a job that breaks a rule is refused naming the field; the
// stored form round-trips; a job over MaxBytes is refused.
func TestJobRules(t *testing.T) {
	j := sampleJob()
	b, err := Encode(&j)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(b)
	if err != nil || back.ID != j.ID || len(back.Workers) != 2 || back.Workers[0] != j.Workers[0] {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*Job)
	}{
		{"id", func(j *Job) { j.ID = "-j" }},
		{"id", func(j *Job) { j.ID = strings.Repeat("j", MaxID+1) }},
		{"op", func(j *Job) { j.Op = "load" }},
		{"targets", func(j *Job) { j.Targets = make([]Target, MaxTargets+1) }},
		{"targets[0].key", func(j *Job) { j.Targets[0].Key = "a\nb" }},
		{"state", func(j *Job) { j.State = "paused" }},
		{"workers[1]", func(j *Job) { j.Workers[1].State = "gone" }},
		{"workers", func(j *Job) { j.Workers[1].NodeID = "w0" }},
		{"workers[0]", func(j *Job) { j.Workers[0].Error = strings.Repeat("e", MaxError+1) }},
	} {
		j := sampleJob()
		tc.edit(&j)
		err := Validate(&j)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v; want ErrInvalid naming %s", tc.field, err, tc.field)
		}
	}
	big := sampleJob()
	big.Workers = nil
	for i := range MaxParts {
		big.Workers = append(big.Workers, Part{NodeID: strings.Repeat("w", 200) + string(rune('a'+i%26)) + strings.Repeat("0", i/26), State: PartPending})
	}
	SortParts(big.Workers)
	if _, err := Encode(&big); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "stored") {
		t.Fatalf("a job past %d bytes: %v; want refused", MaxBytes, err)
	}
}

// FuzzDecodeJob: the store's bytes are untrusted; Decode never panics,
// and whatever it takes validates and encodes again to what decodes the
// same.
func FuzzDecode(f *testing.F) {
	j := sampleJob()
	b, _ := Encode(&j)
	f.Add(b)
	f.Add([]byte(`{"id":"j","op":"free","targets":[{"key":"x"}],"state":"done","workers":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := Decode(data)
		if err != nil {
			return
		}
		if err := Validate(&j); err != nil {
			t.Fatalf("decoded a job that does not validate: %v", err)
		}
		again, err := Encode(&j)
		if err != nil {
			t.Fatalf("a decoded job does not encode: %v", err)
		}
		j2, err := Decode(again)
		if err != nil {
			t.Fatal(err)
		}
		if b2, _ := Encode(&j2); !bytes.Equal(again, b2) {
			t.Fatal("encode is not stable")
		}
	})
}
