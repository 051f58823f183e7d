package faults

// Issue 24's "Done when", on real processes with mutual TLS: coordinators
// agree at every revision, and no coordinator's or store's fault drops a
// live worker. Each test reports its figures in one line per phase and
// asserts the figure the issue names.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// settle waits up to timeout until every coordinator answers 200 with n
// eligible workers on one PlacementVersion, and reports how long it took
// and whether it happened; unlike talontest.WaitEligible it does not fail the test,
// so a phase can report its figures first.
func settle(t *testing.T, timeout time.Duration, n int, coords ...*talontest.Proc) (time.Duration, bool) {
	began := time.Now()
	for time.Since(began) < timeout {
		version, ok := "", true
		for _, p := range coords {
			cl, err := p.API(t).Cluster(context.Background())
			if err != nil || cl.EligibleWorkers != n || (version != "" && cl.PlacementVersion != version) {
				ok = false
				break
			}
			version = cl.PlacementVersion
		}
		if ok {
			return time.Since(began), true
		}
		time.Sleep(talontest.PollEvery)
	}
	for _, p := range coords {
		cl, err := p.API(t).Cluster(context.Background())
		if err != nil {
			t.Logf("not settled: %s: %v", p.Name, err)
			continue
		}
		t.Logf("not settled: %s: revision %s, %d eligible, version %s, workers %+v", p.Name, cl.Revision, cl.EligibleWorkers, cl.PlacementVersion, cl)
	}
	return time.Since(began), false
}

func TestLivenessAgreementEtcd(t *testing.T) {
	talontest.SkipShort(t)
	testAgreement(t, talontest.NewEtcdCluster(t, talontest.FastTiming, 2))
}

func TestLivenessAgreementKube(t *testing.T) {
	talontest.SkipShort(t)
	testAgreement(t, talontest.NewKubeCluster(t, talontest.FastTiming, 2))
}

// testAgreement: coordinator A runs all along with workers 1 and 2;
// worker 2 is killed, and coordinator B is started at an offset from that
// death, 20 offsets from -1 s to unhealthy-after + request-timeout. At
// every revision both answered, they must answer the same PlacementVersion
// and eligible count.
func testAgreement(t *testing.T, c *talontest.LiveCluster) {
	a := c.Coordinator("coord-a")
	b := c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	ctls := []string{a.Addr}
	c.Worker("worker-1", ctls, talontest.LiveTiming{})
	w2 := c.Worker("worker-2", ctls, talontest.LiveTiming{})
	talontest.WaitEligible(t, 60*time.Second, 2, a, b)
	b.Kill()
	pl := talontest.StartPoller(t, c.Client, talontest.TargetOf(a), talontest.TargetOf(b))

	const runs = 20
	lo, hi := -time.Second, c.Timing.Unhealthy+c.Timing.Request
	total, totalShared, notSettled := 0, 0, 0
	for i := range runs {
		off := lo + time.Duration(i)*(hi-lo)/(runs-1)
		if i > 0 {
			w2.Restart()
			if _, ok := settle(t, 60*time.Second, 2, a); !ok {
				t.Fatalf("offset %v: worker-2 not back on A", off)
			}
		}
		from := time.Now()
		var death time.Time
		if off < 0 {
			b.Restart()
			time.Sleep(-off)
			death = time.Now()
			w2.Kill()
		} else {
			death = time.Now()
			w2.Kill()
			time.Sleep(off)
			b.Restart()
		}
		_, ok := settle(t, 2*c.Timing.LeaseTTL+20*time.Second, 1, a, b)
		settled := time.Since(death)
		if !ok {
			notSettled++
		}
		time.Sleep(300 * time.Millisecond) // a few samples of the settled state
		b.Kill()
		samples := pl.Since(from)
		bad, shared := talontest.Disagreements(samples, "")
		f := talontest.Summarize(samples, nil)
		total += len(bad)
		totalShared += shared
		t.Logf("offset %6v: revisions both answered %3d | disagreements %d | settled %v after the death (%v) | %s",
			off.Round(time.Millisecond), shared, len(bad), settled.Round(time.Millisecond), ok, f)
		for j, d := range bad {
			if j == 3 {
				t.Logf("  ... %d more", len(bad)-3)
				break
			}
			t.Logf("  %v", d)
		}
	}
	t.Logf("agreement: offsets %d | revisions both answered %d | disagreements %d | runs not settled %d", runs, totalShared, total, notSettled)
	if total != 0 {
		t.Errorf("%d revisions at which the coordinators disagreed, want 0", total)
	}
	if totalShared == 0 {
		t.Errorf("no revision was answered by both coordinators: the test measured nothing")
	}
	if notSettled != 0 {
		t.Errorf("%d runs never settled on one eligible worker on both coordinators", notSettled)
	}
}

// TestLivenessStall: three coordinators; the workers heartbeat through
// coordinators 1 and 2 only; coordinator 3 is stopped (SIGSTOP) for 2 x
// lease-ttl and continued. No live worker's record may expire, and
// coordinator 3 must never answer 200 with a membership that differs from
// its peers' at the same revision.
func TestLivenessStall(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewEtcdCluster(t, talontest.FastTiming, 3)
	c1, c2, c3 := c.Coordinator("coord-1"), c.Coordinator("coord-2"), c.Coordinator("coord-3")
	testsupport.WaitFor(t, 60*time.Second, "three coordinators ready", func() bool { return talontest.Ready(t, c1) && talontest.Ready(t, c2) && talontest.Ready(t, c3) })
	const nWorkers = 4
	var workers []*talontest.Proc
	for i := 1; i <= nWorkers; i++ {
		workers = append(workers, c.Worker(fmt.Sprintf("worker-%d", i), []string{c1.Addr, c2.Addr}, talontest.LiveTiming{}))
	}
	talontest.WaitEligible(t, 60*time.Second, nWorkers, c1, c2, c3)
	before := c.WorkerKeys(t)
	from := time.Now()
	pl := talontest.StartPoller(t, c.Client, talontest.TargetOf(c1), talontest.TargetOf(c2), talontest.TargetOf(c3))
	time.Sleep(time.Second)

	stall := 2 * c.Timing.LeaseTTL
	c3.Signal(syscall.SIGSTOP)
	time.Sleep(stall)
	c3.Signal(syscall.SIGCONT)
	resumed := time.Now()
	time.Sleep(stall) // observe the resumed coordinator
	took, ok := settle(t, 30*time.Second, nWorkers, c1, c2, c3)
	pl.Stop()
	recreated := talontest.Changed(before, c.WorkerKeys(t), nil)

	samples := pl.Since(from)
	bad, shared := talontest.Disagreements(samples, "coord-3")
	for _, name := range []string{"coord-1", "coord-2", "coord-3"} {
		var mine []talontest.Sample
		for _, s := range samples {
			if s.Coord == name {
				mine = append(mine, s)
			}
		}
		t.Logf("stall %v, %s: %s", stall, name, talontest.Summarize(mine, talontest.Constant(nWorkers)))
	}
	var after []talontest.Sample
	for _, s := range samples {
		if s.Coord == "coord-3" && s.At.After(resumed) {
			after = append(after, s)
		}
	}
	f := talontest.Summarize(samples, talontest.Constant(nWorkers))
	t.Logf("stall: live workers %d | worker records expired/recreated %d %v | 200s naming fewer than alive %d | coord-3 revisions shared %d, disagreements %d | coord-3 after resume: %s | settled %v (%v)",
		nWorkers, len(recreated), recreated, f.Dropped, shared, len(bad), talontest.Summarize(after, talontest.Constant(nWorkers)), took.Round(time.Millisecond), ok)
	for j, d := range bad {
		if j == 3 {
			break
		}
		t.Logf("  %v", d)
	}
	if len(recreated) != 0 {
		t.Errorf("live workers' records expired or were recreated: %v", recreated)
	}
	if f.Dropped != 0 {
		t.Errorf("%d answers named fewer than %d live workers", f.Dropped, nWorkers)
	}
	if len(bad) != 0 {
		t.Errorf("coord-3 disagreed with its peers at %d revisions", len(bad))
	}
	for _, w := range workers {
		if w.Exited() {
			t.Errorf("%s exited", w.Name)
		}
	}
}

// TestStoreFaultsEtcd: an etcd leader kill and a 15 s quorum loss drop no
// live worker and fail no lookup with no_workers; a 2 x lease-ttl outage of
// every member never yields a 200 that names fewer workers than are alive,
// and every worker is back afterwards.
func TestStoreFaultsEtcd(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewEtcdCluster(t, talontest.FastTiming, 2)
	const nWorkers = 3
	a, b := c.PairWithWorkers(t, nWorkers)
	pl := talontest.StartPoller(t, c.Client, talontest.TargetOf(a), talontest.TargetOf(b))
	time.Sleep(time.Second)

	phase := func(name string, fault func() string) (talontest.Figures, []string, bool) {
		t.Helper()
		before := c.WorkerKeys(t)
		from := time.Now()
		detail := fault()
		took, ok := settle(t, 60*time.Second, nWorkers, a, b)
		time.Sleep(time.Second)
		f := talontest.Summarize(pl.Since(from), talontest.Constant(nWorkers))
		recreated := talontest.Changed(before, c.WorkerKeys(t), nil)
		t.Logf("%s: %s | %s | worker records recreated %d | all back after %v (%v)", name, detail, f, len(recreated), took.Round(time.Millisecond), ok)
		return f, recreated, ok
	}

	f, recreated, ok := phase("leader kill", func() string {
		ch := c.Etcd.KillLeader(t)
		time.Sleep(2 * c.Timing.Heartbeat)
		c.Etcd.Restart(ch.Old)
		c.Etcd.WaitHealthy(t, time.Minute)
		return fmt.Sprintf("m%d -> m%d, election %v", ch.Old, ch.New, ch.Election.Round(time.Millisecond))
	})
	if f.Dropped != 0 || f.NoWorkers != 0 || len(recreated) != 0 || !ok {
		t.Errorf("leader kill: %d answers short of live workers, %d no_workers, records recreated %v, all back %v; want 0, 0, none, true", f.Dropped, f.NoWorkers, recreated, ok)
	}

	f, _, ok = phase("quorum loss 15s", func() string {
		out := c.Etcd.LoseQuorum(t, 15*time.Second, testenv.FaultPause)
		return fmt.Sprintf("paused m%v for %v, healthy %v later", out.Members, out.Down.Round(time.Millisecond), out.Recovery.Round(time.Millisecond))
	})
	// Recreated records are reported, not asserted: the criterion
	// is what readers see (no answer without a live worker, no
	// no_workers). When the paused leader resumes it revokes every lease
	// whose TTL ran out while nobody could renew it (etcd's behaviour:
	// TestEtcdClusterQuorumLoss/pause reports a kept-alive lease lost,
	// /kill one kept), so records come back through re-registration.
	if f.Dropped != 0 || f.NoWorkers != 0 || !ok {
		t.Errorf("quorum loss: %d answers short of live workers, %d no_workers, all back %v; want 0, 0, true", f.Dropped, f.NoWorkers, ok)
	}

	f, _, ok = phase(fmt.Sprintf("store outage %v", 2*c.Timing.LeaseTTL), func() string {
		out := c.Etcd.StopAll(t, 2*c.Timing.LeaseTTL, testenv.FaultPause)
		return fmt.Sprintf("paused all members for %v, healthy %v later", out.Down.Round(time.Millisecond), out.Recovery.Round(time.Millisecond))
	})
	if f.Dropped != 0 || !ok {
		t.Errorf("store outage: %d answers short of live workers, all back %v; want 0, true", f.Dropped, ok)
	}
}

// TestStoreOutageKube: the kube-apiserver is killed for 2 x lease-ttl and
// started again: no 200 names fewer workers than are alive, and no live
// process's Lease is deleted (its UID is the same before and after).
func TestStoreOutageKube(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewKubeCluster(t, talontest.FastTiming, 2)
	const nWorkers = 3
	a, b := c.PairWithWorkers(t, nWorkers)
	before := c.LeaseUIDs(t)
	pl := talontest.StartPoller(t, c.Client, talontest.TargetOf(a), talontest.TargetOf(b))
	time.Sleep(time.Second)

	from := time.Now()
	c.Kube.Kill()
	time.Sleep(2 * c.Timing.LeaseTTL)
	c.Kube.Start()
	down := time.Since(from)
	took, ok := settle(t, 90*time.Second, nWorkers, a, b)
	time.Sleep(time.Second)
	f := talontest.Summarize(pl.Since(from), talontest.Constant(nWorkers))
	deleted := talontest.Changed(before, c.LeaseUIDs(t), nil) // every process stayed alive
	t.Logf("kube-apiserver outage %v: %s | live processes %d, Leases deleted/recreated %d %v | all back after %v (%v)",
		down.Round(time.Millisecond), f, len(before), len(deleted), deleted, took.Round(time.Millisecond), ok)
	if f.Dropped != 0 {
		t.Errorf("%d answers named fewer than %d live workers", f.Dropped, nWorkers)
	}
	if len(deleted) != 0 {
		t.Errorf("Leases of live processes deleted: %v", deleted)
	}
	if !ok {
		t.Errorf("workers not all back on both coordinators")
	}
}

// TestCrashLoop drives 20 registrations of one node with distinct
// incarnations within one second through the control protocol (starting
// 20 real processes that fast is not possible on a loaded two-core
// machine), then replays the delayed registrations of the 19 dead
// incarnations after the last one, while the last keeps heartbeating and
// re-registers when refused, as a live process does. The last incarnation
// must hold the record within one heartbeat interval of the replays.
func TestCrashLoop(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewEtcdCluster(t, talontest.FastTiming, 2)
	a, b := c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	const node, restarts = "w-crash", 20
	conns := []*protocol.Conn{c.PKI.DialAs(t, a.Addr, pki.RoleWorker, node), c.PKI.DialAs(t, b.Addr, pki.RoleWorker, node)}
	liveConn := c.PKI.DialAs(t, a.Addr, pki.RoleWorker, node)
	base := time.Now().UnixMilli()
	incarnation := func(i int) string { return fmt.Sprintf("crash-%02d", i) }
	rec := func(i int, seq uint64) *cluster.Record {
		return &cluster.Record{FeatureLevel: cluster.BuildLevel, ClusterID: "it", NodeID: node, Role: cluster.RoleWorker, IncarnationID: incarnation(i),
			Address: "127.0.0.1:9", Version: "sim", StartTimeUnixMs: base + int64(i), HeartbeatSeq: seq,
			Health: cluster.HealthHealthy, Ready: true}
	}
	call := func(cn *protocol.Conn, register bool, r *cluster.Record) string {
		var msg protocol.Message
		var err error
		if register {
			msg, err = protocol.NewRegister(r)
		} else {
			msg, err = protocol.NewHeartbeat(r)
		}
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cn.Call(ctx, msg)
		if err != nil {
			return "error/" + protocol.CodeOf(err).String()
		}
		return resp.(*protocol.Ack).Outcome.String()
	}

	outcomes := map[string]int{}
	loopStart := time.Now()
	for i := 1; i <= restarts; i++ {
		next := loopStart.Add(time.Duration(i) * time.Second / restarts)
		outcomes["register/"+call(conns[i%2], true, rec(i, 0))]++
		outcomes["heartbeat/"+call(conns[i%2], false, rec(i, 1))]++
		if i < restarts {
			time.Sleep(time.Until(next))
		}
	}
	loop := time.Since(loopStart)

	// The live process: heartbeats every interval, re-registers when refused.
	stop := make(chan struct{})
	liveDone := make(chan map[string]int)
	go func() {
		got := map[string]int{}
		seq := uint64(2)
		tick := time.NewTicker(c.Timing.Heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				liveDone <- got
				return
			case <-tick.C:
			}
			o := call(liveConn, false, rec(restarts, seq))
			got["heartbeat/"+o]++
			seq++
			if o != "accepted" {
				o = call(liveConn, true, rec(restarts, seq))
				got["register/"+o]++
				seq++
			}
		}
	}()
	// watch follows the record for a lease TTL and returns how long after
	// from the last incarnation last did not hold it (0: held throughout).
	holders := map[string]bool{}
	watch := func(from time.Time) time.Duration {
		var lastNotHeld time.Time
		for time.Since(from) < c.Timing.LeaseTTL+time.Second {
			n, err := a.API(t).Node(context.Background(), node)
			holder := "none"
			if err == nil {
				holder = n.Node.IncarnationID
			}
			holders[holder] = true
			if holder != incarnation(restarts) {
				lastNotHeld = time.Now()
			}
			time.Sleep(20 * time.Millisecond)
		}
		if lastNotHeld.IsZero() {
			return 0
		}
		return lastNotHeld.Sub(from)
	}
	// Phase 1: every dead incarnation's delayed registration, oldest first.
	for i := 1; i < restarts; i++ {
		outcomes["replay/"+call(conns[i%2], true, rec(i, 0))]++
	}
	lostAll := watch(time.Now())
	// Phase 2: one straggler, the first incarnation's registration, alone:
	// after it, the live incarnation is among the few a record remembers.
	outcomes["straggler/"+call(conns[0], true, rec(1, 0))]++
	lostOne := watch(time.Now())
	close(stop)
	live := <-liveDone
	t.Logf("crash loop: %d incarnations in %v | outcomes %v | live process %v | holders seen %d | last incarnation without the record for %v after the 19 replays, %v after the straggler (limit %v)",
		restarts, loop.Round(time.Millisecond), outcomes, live, len(holders), lostAll.Round(time.Millisecond), lostOne.Round(time.Millisecond), c.Timing.Heartbeat)
	if loop > time.Second+c.Timing.Request {
		t.Logf("note: the registrations took %v, not within one second", loop)
	}
	for _, x := range []struct {
		what string
		lost time.Duration
	}{{"the 19 replays", lostAll}, {"the straggler", lostOne}} {
		if x.lost > c.Timing.Heartbeat {
			t.Errorf("after %s the last incarnation did not hold the record for %v, want at most one heartbeat interval %v", x.what, x.lost, c.Timing.Heartbeat)
		}
	}
	if n := outcomes["replay/accepted"] + outcomes["straggler/accepted"]; n != 0 {
		t.Logf("note: %d delayed registrations of dead incarnations were accepted (took the slot)", n)
	}
}

// TestCrashLoopProcesses is TestCrashLoop with real processes: one worker
// node is killed (SIGKILL) and started again 20 times, as fast as 50 ms
// apart, so registrations of dead processes are still in flight when the
// next one starts. Once the last process's admin listener answers, it must
// hold the record within one heartbeat interval and keep it.
func TestCrashLoopProcesses(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewEtcdCluster(t, talontest.FastTiming, 2)
	a, b := c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	const node, restarts = "w-crash", 20
	w := c.Worker(node, []string{a.Addr, b.Addr}, talontest.LiveTiming{})
	talontest.WaitEligible(t, 60*time.Second, 1, a, b)

	// A sampler records who holds the record from the first kill on.
	type held struct {
		at     time.Time
		holder string
	}
	var (
		mu      sync.Mutex
		samples []held
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		api := a.API(t)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			// Only an answer says who holds the record: "none" when the
			// coordinator answers that there is no record, "?" when it
			// does not answer (a read that timed out on a loaded machine
			// says nothing about the record).
			holder := "?"
			n, err := api.Node(context.Background(), node)
			switch {
			case err == nil:
				holder = n.Node.IncarnationID
			case errors.Is(err, apiv1.ErrNotFound):
				holder = "none"
			}
			mu.Lock()
			samples = append(samples, held{time.Now(), holder})
			mu.Unlock()
		}
	}()
	loopStart := time.Now()
	for i := 1; i < restarts; i++ {
		time.Sleep(time.Until(loopStart.Add(time.Duration(i) * time.Second / restarts)))
		w.Kill()
		w.Restart()
	}
	loop := time.Since(loopStart)
	var inc string
	testsupport.WaitFor(t, 30*time.Second, "the last process's admin listener", func() bool {
		st, err := w.API(t).Status(context.Background())
		if err == nil {
			inc = st.IncarnationID
		}
		return err == nil
	})
	up := time.Now()
	time.Sleep(c.Timing.LeaseTTL + time.Second)
	close(stop)
	wg.Wait()
	var lastNotHeld time.Time
	holders := map[string]bool{}
	after := map[string]int{} // samples after up, by holder
	for _, h := range samples {
		if h.holder == "?" {
			if h.at.After(up) {
				after["no answer"]++
			}
			continue
		}
		holders[h.holder] = true
		if !h.at.After(up) {
			continue
		}
		switch h.holder {
		case inc:
			after["the last process"]++
		case "none":
			after["no record"]++
		default:
			after["an earlier process"]++
		}
		if h.holder != inc {
			lastNotHeld = h.at
		}
	}
	if after["the last process"] == 0 {
		t.Errorf("no sample after the last process was up shows it holding the record (samples after up: %v)", after)
	}
	lost := time.Duration(0)
	if !lastNotHeld.IsZero() {
		lost = lastNotHeld.Sub(up)
	}
	t.Logf("crash loop (processes): %d starts in %v | last process up %v after the last start | incarnations seen holding the record %d | last process without the record for %v after it was up (limit %v) | samples after up: %v",
		restarts, loop.Round(time.Millisecond), up.Sub(loopStart.Add(loop)).Round(time.Millisecond), len(holders), lost.Round(time.Millisecond), c.Timing.Heartbeat, after)
	if lost > c.Timing.Heartbeat {
		t.Errorf("the last process did not hold the record for %v after it was up, want at most one heartbeat interval %v", lost, c.Timing.Heartbeat)
	}
}

// TestTimingMismatch: a worker started with a 5 s heartbeat interval joins
// a cluster whose coordinators use 1 s; it must adopt the interval each Ack
// carries and stay healthy, with no PlacementVersion change for a minute.
func TestTimingMismatch(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewEtcdCluster(t, talontest.MismatchCluster, 2)
	talontest.MismatchWorker.Check(t)
	a, b := c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	w := c.Worker("worker-slow", []string{a.Addr, b.Addr}, talontest.MismatchWorker)
	talontest.WaitEligible(t, 60*time.Second, 1, a, b)
	pl := talontest.StartPoller(t, c.Client, talontest.TargetOf(a), talontest.TargetOf(b))
	const watch = time.Minute
	beatsBefore := talontest.AcceptedHeartbeats(w)
	from := time.Now()
	time.Sleep(watch)
	pl.Stop()
	beats := uint64(talontest.AcceptedHeartbeats(w) - beatsBefore)
	// A worker that adopted the cluster's 1 s interval sends about 60 in
	// the minute, one that kept its own 5 s about 12; half of 60 leaves
	// room for a loaded machine.
	minBeats := uint64(watch / talontest.MismatchCluster.Heartbeat / 2)
	samples := pl.Since(from)
	changes := talontest.VersionChanges(samples)
	f := talontest.Summarize(samples, talontest.Constant(1))
	t.Logf("timing mismatch (worker %v, cluster %v) over %v: heartbeats accepted %d (adopted interval means >= %d) | version changes %v | 200s without the worker %d | %s",
		talontest.MismatchWorker.Heartbeat, talontest.MismatchCluster.Heartbeat, watch, beats, minBeats, changes, f.Dropped, f)
	if beats < minBeats {
		t.Errorf("the worker sent %d heartbeats in %v, want at least %d: it did not adopt the %v interval of the Acks", beats, watch, minBeats, talontest.MismatchCluster.Heartbeat)
	}
	if n := changes["coord-a"] + changes["coord-b"]; n != 0 {
		t.Errorf("%d PlacementVersion changes, want 0", n)
	}
	if f.Dropped != 0 {
		t.Errorf("%d answers without the live worker, want 0", f.Dropped)
	}
	if w.Exited() {
		t.Error("worker exited")
	}
}
