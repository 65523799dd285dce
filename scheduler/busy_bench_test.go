package scheduler

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// busy is a fleet already at work: workloads running (single pods and gangs,
// in four tiers, some teams borrowing), as many pending, and a stream of
// completions and arrivals between cycles.
type busy struct {
	cfg     Config
	opts    Options
	s       *Scheduler
	rng     *rand.Rand
	running []WorkloadID
	// at indexes running, so that the harness's own bookkeeping of what
	// ends stays out of the cycle's figures.
	at    map[WorkloadID]int
	next  int
	sec   int
	nodes int
}

// busyTeams share the fleet in one cohort with equal nominal quotas; arrivals
// favour the first ones (a Zipf-like skew), so those borrow from the others.
const busyTeams = 50

// newBusy builds a fleet of n nodes running about n/5 workloads with n/5
// more pending (at 50,000 nodes: 10,000 and 10,000).
func newBusy(tb testing.TB, n int) *busy {
	tb.Helper()
	cfg := Config{Tiers: tiers, Cohorts: []Cohort{{Name: "org"}}}
	for i := range busyTeams {
		cfg.Teams = append(cfg.Teams, Team{Name: TeamName(fmt.Sprintf("t%d", i)), Cohort: "org",
			Quota: map[Flavor]Quota{"h100": {Nominal: GPUs(n * 8 / busyTeams)}}})
	}
	opts := Options{ReserveAfter: 10 * time.Minute}
	s, err := New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	for _, nd := range benchFleet(n) {
		if err := s.AddNode(nd); err != nil {
			tb.Fatal(err)
		}
	}
	b := &busy{cfg: cfg, opts: opts, s: s, rng: rand.New(rand.NewPCG(3, 4)), nodes: n, at: map[WorkloadID]int{}}
	// Fill: submit and admit until n/5 run (or nothing more fits).
	for len(b.running) < n/5 {
		for range n / 5 / 4 {
			b.submit(tb)
		}
		before := len(b.running)
		b.cycle(tb)
		if len(b.running) == before {
			break
		}
	}
	// As many pending as running: what arrives now mostly waits (or preempts).
	for i := 0; b.pending() < len(b.running) && i < 100; i++ {
		for range n / 5 / 4 {
			b.submit(tb)
		}
		b.cycle(tb)
	}
	return b
}

// pending counts the pending workloads.
func (b *busy) pending() int { return countPending(b.s) }

// countPending counts s's pending workloads.
func countPending(s *Scheduler) int {
	n := 0
	for _, w := range s.workloads {
		if w.state == statePending {
			n++
		}
	}
	return n
}

// submit queues a new workload: two in three a single pod of 1-8 GPUs, one in
// three a gang of 2-16 whole nodes (a third of those in one rack, a third in
// one block); the team skewed towards the first ones.
func (b *busy) submit(tb testing.TB) {
	tb.Helper()
	team := min(int(b.rng.ExpFloat64()*busyTeams/4), busyTeams-1)
	w := Workload{ID: WorkloadID(fmt.Sprintf("w%d", b.next)), Team: TeamName(fmt.Sprintf("t%d", team)),
		Tier: tiers[b.rng.IntN(len(tiers))].Name, Submitted: at(b.sec)}
	b.next++
	if b.rng.IntN(3) == 0 {
		w.Pods, w.GPUsPerPod = int64(2+b.rng.IntN(15)), 8
		switch b.rng.IntN(3) {
		case 0:
			w.Require = "rack"
		case 1:
			w.Require = "block"
		}
	} else {
		w.Pods, w.GPUsPerPod = 1, GPUs(1+b.rng.IntN(8))
	}
	if err := b.s.Submit(w); err != nil {
		tb.Fatal(err)
	}
}

// cycle runs one cycle a second after the last and starts what it admitted;
// it returns the decisions (admissions and preemptions).
func (b *busy) cycle(tb testing.TB) int {
	tb.Helper()
	b.sec++
	res := b.s.Cycle(at(b.sec))
	b.apply(tb, res)
	return len(res.Admitted) + len(res.Preempted)
}

func (b *busy) apply(tb testing.TB, res Results) {
	tb.Helper()
	var gone []WorkloadID
	for _, p := range res.Preempted {
		gone = append(gone, p.Victim)
	}
	for _, e := range res.Evicted {
		gone = append(gone, e.Workload)
	}
	b.gone(gone...)
	for _, a := range res.Admitted {
		if err := b.s.Started(a.Workload); err != nil {
			tb.Fatal(err)
		}
		b.at[a.Workload] = len(b.running)
		b.running = append(b.running, a.Workload)
	}
}

// drop takes running[i] off the list.
func (b *busy) drop(i int) {
	last := b.running[len(b.running)-1]
	delete(b.at, b.running[i])
	b.running[i] = last
	b.at[last] = i
	b.running = b.running[:len(b.running)-1]
	if len(b.running) == i {
		delete(b.at, last)
	}
}

// gone takes workloads that no longer run (preempted, evicted) off the list.
func (b *busy) gone(ids ...WorkloadID) {
	for _, id := range ids {
		if i, ok := b.at[id]; ok {
			b.drop(i)
		}
	}
}

// flap marks a node at random unhealthy (its workloads evicted) and healthy
// again.
func (b *busy) flap(tb testing.TB) {
	tb.Helper()
	name := benchNode(b.rng.IntN(b.nodes)).Name
	ids, err := b.s.SetNodeHealth(name, false)
	if err != nil {
		tb.Fatal(err)
	}
	b.gone(ids...)
	if _, err := b.s.SetNodeHealth(name, true); err != nil {
		tb.Fatal(err)
	}
}

// churn ends k running workloads (at random) and submits k new ones.
func (b *busy) churn(tb testing.TB, k int) {
	tb.Helper()
	for range min(k, len(b.running)) {
		i := b.rng.IntN(len(b.running))
		id := b.running[i]
		b.drop(i)
		if err := b.s.Finish(id); err != nil {
			tb.Fatal(err)
		}
	}
	for range k {
		b.submit(tb)
	}
}

// BenchmarkBusyCycle times the cycles of a fleet at work: between two cycles,
// 1% of the running workloads end and as many arrive. 6,250 and 50,000 nodes
// are issue 20's x1 and x8. ns/cycle is the time of one cycle with its
// events (completions, arrivals), cpu-ns/cycle the CPU the process spent on
// it (the garbage collector's on the other core included), ns/decision the
// time over the admissions and preemptions it made.
func BenchmarkBusyCycle(b *testing.B) {
	for _, nodes := range []int{1_000, 6_250, 10_000, 50_000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			w := newBusy(b, nodes)
			k := max(1, len(w.running)/100)
			decisions := 0
			// The fill's garbage is collected before the clock starts, not
			// charged to the first cycles (at 50,000 nodes it is a collection
			// of its own, most of a short run's CPU beside the cycles).
			runtime.GC()
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				w.churn(b, k)
				decisions += w.cycle(b)
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/cycle")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/cycle")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(decisions, 1)), "ns/decision")
			b.ReportMetric(float64(len(w.running)), "running")
			b.ReportMetric(float64(w.pending()), "pending")
		})
	}
}

// flip times a change of a node (off) and its undo, on every seventh of the
// first n nodes in turn from first, the cycle after each not timed; change
// returns the workloads it evicted.
func (b *busy) flip(tb *testing.B, n, first int, change func(name NodeName, off bool) ([]WorkloadID, error)) {
	i := first
	for tb.Loop() {
		name := NodeName(fmt.Sprintf("n%d", i%n))
		i += 7
		for _, off := range []bool{true, false} {
			evicted, err := change(name, off)
			if err != nil {
				tb.Fatal(err)
			}
			tb.StopTimer()
			b.gone(evicted...)
			b.cycle(tb)
			tb.StartTimer()
		}
	}
}

// BenchmarkBusyNodeChange times one node change in a fleet at work, the
// change alone (the cycle after it is not timed): a node added; a node marked
// unhealthy (its workloads evicted) then healthy again (a fault and its
// repair); a node cordoned and uncordoned (the runner holds all its GPUs, then
// none); a node relabelled (the runner removes it, its workloads evicted, and
// adds it again in its new class).
func BenchmarkBusyNodeChange(b *testing.B) {
	for _, nodes := range []int{1_000, 10_000, 50_000} {
		w := newBusy(b, nodes)
		b.Run(fmt.Sprintf("add/nodes=%d", nodes), func(b *testing.B) {
			for b.Loop() {
				if err := w.s.AddNode(benchNode(w.nodes)); err != nil {
					b.Fatal(err)
				}
				w.nodes++
				b.StopTimer()
				w.cycle(b)
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("unhealthy+healthy/nodes=%d", nodes), func(b *testing.B) {
			w.flip(b, nodes, 0, func(name NodeName, off bool) ([]WorkloadID, error) { return w.s.SetNodeHealth(name, !off) })
		})
		b.Run(fmt.Sprintf("cordon+uncordon/nodes=%d", nodes), func(b *testing.B) {
			w.flip(b, nodes, 3, func(name NodeName, off bool) ([]WorkloadID, error) {
				held := GPUs(0)
				if off {
					held = 8
				}
				return nil, w.s.Hold(name, held)
			})
		})
		b.Run(fmt.Sprintf("relabel/nodes=%d", nodes), func(b *testing.B) {
			i := 5
			for b.Loop() {
				spec := benchNode(i % nodes)
				i += 7
				evicted, err := w.s.RemoveNode(spec.Name)
				if err != nil {
					b.Fatal(err)
				}
				spec.Class = fmt.Sprintf("c%d", i%3)
				if err := w.s.AddNode(spec); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				w.gone(evicted...)
				w.cycle(b)
				b.StartTimer()
			}
		})
	}
}

// cpuTime is the CPU the process has used, user and system, on all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
