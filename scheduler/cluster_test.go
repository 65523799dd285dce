package scheduler

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// clustered puts nodes into cluster c at cost per GPU-hour; the domain names
// stay as they are, so two clusters built alike share every domain name.
func clustered(c string, cost int64, nodes []Node) []Node {
	for i := range nodes {
		nodes[i].Name = NodeName(c + "/" + string(nodes[i].Name))
		nodes[i].Cluster, nodes[i].Cost = c, cost
	}
	return nodes
}

func oneTeam(nominal GPUs) Config {
	return Config{Teams: []Team{teamQ("ml", "", nominal, nil, nil)}}
}

// TestRouting is the routing rule as a table: a cluster is a hard boundary, a
// workload goes to the cheapest cluster where it fits now, then the best fit,
// and a pinned one to its own cluster or nowhere.
func TestRouting(t *testing.T) {
	cases := []struct {
		name  string
		nodes []Node
		// before are admitted first (all must be), one cycle each.
		before []Workload
		w      Workload
		// cluster is where w must land; "" means it must wait with code.
		cluster string
		code    ReasonCode
	}{
		{
			name:    "a gang never spans clusters",
			nodes:   append(clustered("east", 1, rack("n", "a", 2, 8, 0, 0)), clustered("west", 1, rack("n", "a", 2, 8, 0, 0))...),
			w:       wl("g", "ml", "production", 3, 8, 0),
			code:    ReasonInsufficientNodes,
			cluster: "",
		},
		{
			name:    "the cheapest cluster where it fits",
			nodes:   append(clustered("dear", 3, rack("n", "a", 4, 8, 0, 0)), clustered("cheap", 1, rack("n", "a", 4, 8, 0, 0))...),
			w:       wl("g", "ml", "production", 2, 8, 0),
			cluster: "cheap",
		},
		{
			name:    "the dearer cluster when the cheap one is too small",
			nodes:   append(clustered("dear", 3, rack("n", "a", 4, 8, 0, 0)), clustered("cheap", 1, rack("n", "a", 2, 8, 0, 0))...),
			w:       wl("g", "ml", "production", 3, 8, 0),
			cluster: "dear",
		},
		{
			name:    "the dearer cluster when the cheap one is busy",
			nodes:   append(clustered("dear", 3, rack("n", "a", 2, 8, 0, 0)), clustered("cheap", 1, rack("n", "a", 2, 8, 0, 0))...),
			before:  []Workload{wl("b", "ml", "production", 1, 4, 0)},
			w:       wl("g", "ml", "production", 2, 8, 0),
			cluster: "dear",
		},
		{
			name:    "equally cheap: the best fit (the fuller cluster)",
			nodes:   append(clustered("x", 1, rack("n", "a", 2, 8, 0, 0)), clustered("y", 1, rack("n", "a", 2, 8, 0, 0))...),
			before:  []Workload{withCluster(wl("b", "ml", "production", 1, 8, 0), "y")},
			w:       wl("g", "ml", "production", 1, 8, 0),
			cluster: "y",
		},
		{
			name:    "pinned to the dearer cluster",
			nodes:   append(clustered("dear", 3, rack("n", "a", 2, 8, 0, 0)), clustered("cheap", 1, rack("n", "a", 2, 8, 0, 0))...),
			w:       withCluster(wl("g", "ml", "production", 1, 8, 0), "dear"),
			cluster: "dear",
		},
		{
			name:  "pinned to a full cluster waits",
			nodes: append(clustered("dear", 3, rack("n", "a", 2, 8, 0, 0)), clustered("cheap", 1, rack("n", "a", 2, 8, 0, 0))...),
			w:     withCluster(wl("g", "ml", "production", 3, 8, 0), "cheap"),
			code:  ReasonInsufficientNodes,
		},
		{
			name:  "pinned to a cluster the flavor is not in",
			nodes: clustered("east", 1, rack("n", "a", 2, 8, 0, 0)),
			w:     withCluster(wl("g", "ml", "production", 1, 8, 0), "west"),
			code:  ReasonNoMatchingNodes,
		},
		{
			name:  "pinned on nodes that name no cluster",
			nodes: rack("n", "a", 2, 8, 0, 0),
			w:     withCluster(wl("g", "ml", "production", 1, 8, 0), "east"),
			code:  ReasonNoMatchingNodes,
		},
		{
			// Both clusters have a rack named n-r0 of two hosts: they are two racks.
			name:  "a domain name shared by two clusters is two domains",
			nodes: append(clustered("east", 1, rack("n", "a", 1, 8, 2, 0)), clustered("west", 1, rack("n", "a", 1, 8, 2, 0))...),
			w:     withRequire(wl("g", "ml", "production", 2, 8, 0), "rack"),
			code:  ReasonNoTopologyDomain,
		},
		{
			name:    "a required domain in the cheapest cluster that has one",
			nodes:   append(clustered("cheap", 1, rack("n", "a", 4, 8, 1, 0)), clustered("dear", 2, rack("n", "a", 4, 8, 2, 0))...),
			w:       withRequire(wl("g", "ml", "production", 2, 8, 0), "rack"),
			cluster: "dear",
		},
		{
			name:    "a preferred level inside the routed cluster",
			nodes:   append(clustered("cheap", 1, rack("n", "a", 4, 8, 2, 0)), clustered("dear", 2, rack("n", "a", 4, 8, 4, 0))...),
			w:       withPrefer(wl("g", "ml", "production", 4, 8, 0), "rack"),
			cluster: "cheap",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFx(t, oneTeam(1000), c.nodes, noReserve())
			for i, b := range c.before {
				f.submit(b)
				if res := f.cycle(i); len(res.Admitted) != 1 {
					t.Fatalf("%s not admitted: %+v", b.ID, res)
				}
			}
			f.submit(c.w)
			res := f.cycle(len(c.before))
			if err := f.s.checkInvariants(); err != nil {
				t.Fatal(err)
			}
			if c.cluster == "" {
				if len(res.Admitted) != 0 {
					t.Fatalf("admitted %+v, want it to wait", res.Admitted)
				}
				r, _ := f.s.Reason(c.w.ID)
				if r.Code != c.code {
					t.Fatalf("reason %v, want %s", r, c.code)
				}
				t.Logf("waits: %v", r)
				return
			}
			if len(res.Admitted) != 1 {
				r, _ := f.s.Reason(c.w.ID)
				t.Fatalf("not admitted: %v", r)
			}
			a := res.Admitted[0]
			if a.Cluster != c.cluster {
				t.Fatalf("routed to %q, want %q (%+v)", a.Cluster, c.cluster, a.Pods)
			}
			for _, p := range a.Pods {
				if !strings.HasPrefix(string(p.Node), c.cluster+"/") {
					t.Fatalf("pod on %s, outside cluster %s", p.Node, c.cluster)
				}
			}
		})
	}
}

func withCluster(w Workload, c string) Workload { w.Cluster = c; return w }

// TestClusterReasons: the pending reason says a gang fits in no one cluster,
// with the largest room of one.
func TestClusterReasons(t *testing.T) {
	nodes := append(clustered("east", 1, rack("n", "a", 2, 8, 0, 0)), clustered("west", 1, rack("n", "a", 2, 8, 0, 0))...)
	f := newFx(t, oneTeam(1000), nodes, noReserve())
	f.submit(wl("g", "ml", "production", 3, 8, 0))
	f.cycle(0)
	r, _ := f.s.Reason("g")
	if r.Code != ReasonInsufficientNodes || r.Level != ClusterLevel || r.Available != 16 || r.Limit != 32 {
		t.Fatalf("reason %+v", r)
	}
	if s := r.String(); !strings.Contains(s, "any one cluster") {
		t.Fatalf("reason text %q", s)
	}
}

// TestNodesOfAFlavorAgreeOnClusters: a flavor's nodes all name a cluster or
// none does.
func TestNodesOfAFlavorAgreeOnClusters(t *testing.T) {
	s, err := New(oneTeam(8), noReserve())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddNode(Node{Name: "a", Flavor: "a", GPUs: 8, Cluster: "east"}); err != nil {
		t.Fatal(err)
	}
	err = s.AddNode(Node{Name: "b", Flavor: "a", GPUs: 8})
	if err == nil || !strings.Contains(err.Error(), "either all name a cluster") {
		t.Fatalf("err %v", err)
	}
	if err := s.AddNode(Node{Name: "c", Flavor: "b", GPUs: 8}); err != nil {
		t.Fatalf("another flavor may name none: %v", err)
	}
}

// TestReservationInOneCluster: a gang that waited long enough drains nodes of
// one cluster, never some of each.
func TestReservationInOneCluster(t *testing.T) {
	nodes := append(clustered("east", 1, rack("n", "a", 2, 8, 0, 0)), clustered("west", 2, rack("n", "a", 2, 8, 0, 0))...)
	f := newFx(t, oneTeam(1000), nodes, Options{ReserveAfter: 0})
	// One small job on each node: the gang of two whole nodes fits nowhere.
	for i := range 4 {
		f.submit(wl(fmt.Sprintf("s%d", i), "ml", "production", 1, 6, 0))
	}
	f.cycle(0)
	if len(f.running()) != 4 {
		t.Fatalf("running %v", f.running())
	}
	f.submit(wl("g", "ml", "production", 2, 8, 1))
	res := f.cycle(1)
	r, _ := f.s.Reason("g")
	if r.Code != ReasonWaitingForReservation {
		t.Fatalf("reason %v %+v", r, res)
	}
	w := f.s.workloads["g"]
	c := w.reserved[0].spec.Cluster
	for _, n := range w.reserved {
		if n.spec.Cluster != c {
			t.Fatalf("reserved %s of %s and of %s", n.spec.Name, n.spec.Cluster, c)
		}
	}
	// The work on the reserved nodes ends: the gang starts there.
	for _, id := range f.running() {
		if nodesOf := f.nodesOf(id); strings.HasPrefix(string(nodesOf[0]), c+"/") {
			f.finish(id)
		}
	}
	res = f.cycle(2)
	if len(res.Admitted) != 1 || res.Admitted[0].Cluster != c {
		t.Fatalf("admitted %+v", res.Admitted)
	}
}

// TestPropertiesAcrossClusters drives random fleets split into clusters whose
// domains share names, with some workloads pinned, through the property
// test's random steps: no gang spans clusters, a pinned one runs in its own,
// and every other invariant holds.
// inClusters deals nodes of a random world into two or three clusters of
// random costs, rack by rack, the rack names repeating in every cluster; it
// returns the clusters' names.
func inClusters(rng *rand.Rand, nodes []Node) []string {
	names := []string{"c0", "c1", "c2"}[:2+rng.IntN(2)]
	costs := map[string]int64{}
	for _, c := range names {
		costs[c] = int64(rng.IntN(3))
	}
	for i := range nodes {
		c := names[i%len(names)]
		nodes[i].Cluster, nodes[i].Cost = c, costs[c]
		for j := range nodes[i].Domains {
			if nodes[i].Domains[j].Level == "rack" {
				nodes[i].Domains[j].Name = "r" + fmt.Sprint(i/len(names)/2)
			}
		}
	}
	return names
}

func TestPropertiesAcrossClusters(t *testing.T) {
	for seed := range 40 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			cfg, nodes := randomWorld(rng)
			names := inClusters(rng, nodes)
			runProperties(t, rng, cfg, nodes, func(w *Workload) {
				if rng.IntN(4) == 0 {
					w.Cluster = names[rng.IntN(len(names))]
				}
			})
		})
	}
}

// BenchmarkCycleClusters is BenchmarkCycle's 10,000 nodes as one fleet of ten
// clusters of 1,000 nodes at three prices: what routing adds to a decision.
func BenchmarkCycleClusters(b *testing.B) {
	for _, clusters := range []int{1, 10} {
		b.Run(fmt.Sprintf("clusters=%d", clusters), func(b *testing.B) {
			benchCycles(b, func() *Scheduler {
				return benchWorldWith(b, 10_000, func(n *Node, i int) {
					c := i * clusters / 10_000
					n.Cluster, n.Cost = fmt.Sprintf("c%d", c), int64(c%3)
				})
			})
		})
	}
}
