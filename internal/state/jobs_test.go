package state

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func sampleJob() Job {
	return Job{ID: "j-1", Op: JobWarm, Targets: []JobTarget{{Key: "a/b"}, {Key: "c/", Prefix: true}}, By: "ops", Coordinator: "c1",
		CreatedAtUnixMs: 1, State: JobRunning,
		Workers: []JobWorker{{NodeID: "w1", State: WorkerRunning, BlocksDone: 1, BlocksTotal: 2, BytesDone: 3, BytesTotal: 4}, {NodeID: "w2", State: WorkerPending}}}
}

// TestJobRules: a job that breaks a rule is refused naming the field; the
// stored form round-trips; a job over MaxJobBytes is refused.
func TestJobRules(t *testing.T) {
	j := sampleJob()
	b, err := EncodeJob(&j)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeJob(b)
	if err != nil || back.ID != j.ID || len(back.Workers) != 2 || back.Workers[0] != j.Workers[0] {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*Job)
	}{
		{"id", func(j *Job) { j.ID = "-j" }},
		{"id", func(j *Job) { j.ID = strings.Repeat("j", MaxJobID+1) }},
		{"op", func(j *Job) { j.Op = "load" }},
		{"targets", func(j *Job) { j.Targets = make([]JobTarget, MaxJobTargets+1) }},
		{"targets[0].key", func(j *Job) { j.Targets[0].Key = "a\nb" }},
		{"state", func(j *Job) { j.State = "paused" }},
		{"workers[1]", func(j *Job) { j.Workers[1].State = "gone" }},
		{"workers", func(j *Job) { j.Workers[1].NodeID = "w0" }},
		{"workers[0]", func(j *Job) { j.Workers[0].Error = strings.Repeat("e", MaxJobError+1) }},
	} {
		j := sampleJob()
		tc.edit(&j)
		err := ValidateJob(&j)
		if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v; want ErrInvalidRecord naming %s", tc.field, err, tc.field)
		}
	}
	big := sampleJob()
	big.Workers = nil
	for i := range MaxJobWorkers {
		big.Workers = append(big.Workers, JobWorker{NodeID: strings.Repeat("w", 200) + string(rune('a'+i%26)) + strings.Repeat("0", i/26), State: WorkerPending})
	}
	SortJobWorkers(big.Workers)
	if _, err := EncodeJob(&big); !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), "stored") {
		t.Fatalf("a job past %d bytes: %v; want refused", MaxJobBytes, err)
	}
}

// FuzzDecodeJob: the store's bytes are untrusted; DecodeJob never panics,
// and whatever it takes validates and encodes again to what decodes the
// same.
func FuzzDecodeJob(f *testing.F) {
	j := sampleJob()
	b, _ := EncodeJob(&j)
	f.Add(b)
	f.Add([]byte(`{"id":"j","op":"free","targets":[{"key":"x"}],"state":"done","workers":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := DecodeJob(data)
		if err != nil {
			return
		}
		if err := ValidateJob(&j); err != nil {
			t.Fatalf("decoded a job that does not validate: %v", err)
		}
		again, err := EncodeJob(&j)
		if err != nil {
			t.Fatalf("a decoded job does not encode: %v", err)
		}
		j2, err := DecodeJob(again)
		if err != nil {
			t.Fatal(err)
		}
		if b2, _ := EncodeJob(&j2); !bytes.Equal(again, b2) {
			t.Fatal("encode is not stable")
		}
	})
}
