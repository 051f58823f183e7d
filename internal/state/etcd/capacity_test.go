package etcd

import (
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
)

// TestCapacityOfACluster: on three members named host:port, the store
// reports a capacity with the quota etcd reports, and when the first
// member hangs, each poll still reads the others and the alarm list: a
// paused member costs its own request timeout, not the whole poll's.
func TestCapacityOfACluster(t *testing.T) {
	testenv.SkipIfShort(t)
	c := testenv.StartEtcdCluster(t, testenv.EtcdClusterOptions{Host: "127.0.0.21"})
	o := DefaultOptions()
	for _, ep := range c.Endpoints() {
		o.Endpoints = append(o.Endpoints, strings.TrimPrefix(ep, "https://"))
	}
	f := c.TLSFiles()
	o.TLS = TLSOptions{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
	o.CacheSnapshots = false
	o.CapacityInterval, o.RequestTimeout = time.Second, time.Second
	s := newStore(t, o)
	testsupport.WaitFor(t, 20*time.Second, "the capacity known", func() bool { return s.Capacity().Known })
	if cp := s.Capacity(); cp.QuotaBytes != DefaultQuotaBytes || cp.DBSizeBytes <= 0 || len(cp.Alarms) != 0 {
		t.Fatalf("capacity %+v", cp)
	}

	c.Pause(0)
	defer c.Resume(0)
	paused := time.Now()
	testsupport.WaitFor(t, 20*time.Second, "a poll answered by the other members", func() bool {
		return s.Capacity().CheckedAt.After(paused.Add(time.Second))
	})
}

// TestAlarmNames: alarms are reported once each, sorted, NONE left out.
func TestAlarmNames(t *testing.T) {
	got := alarmNames([]*pb.AlarmMember{
		{MemberID: 1, Alarm: pb.AlarmType_NOSPACE}, {MemberID: 2, Alarm: pb.AlarmType_CORRUPT},
		{MemberID: 3, Alarm: pb.AlarmType_NOSPACE}, {MemberID: 4, Alarm: pb.AlarmType_NONE}, nil,
	})
	if strings.Join(got, ",") != "CORRUPT,NOSPACE" {
		t.Fatalf("alarmNames = %v", got)
	}
}
