package fleet

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/schema"
)

// Domain is one topology domain a node belongs to.
type Domain struct {
	Level string `json:"level"`
	Name  string `json:"name"`
}

// Node is one node of a pool.
type Node struct {
	Name    string
	Pool    schema.PoolName
	Cluster schema.ClusterName
	Flavor  schema.Flavor
	GPUs    int64
	// Domains are ordered widest level first.
	Domains []Domain
}

// Labels returns the node labels that describe n (package contract).
func (n Node) Labels() map[string]string {
	l := map[string]string{
		contract.LabelPool:    string(n.Pool),
		contract.LabelFlavor:  string(n.Flavor),
		contract.LabelCluster: string(n.Cluster),
	}
	for _, d := range n.Domains {
		l[contract.TopologyLabel(d.Level)] = d.Name
	}
	return l
}

// NodeName is the name of node index of pool: "<pool>-<index>", index from 0.
func NodeName(pool schema.PoolName, index int64) string { return fmt.Sprintf("%s-%d", pool, index) }

// NodesPerDomain returns, per topology level of the pool, how many nodes one domain
// of that level holds; 0 means the level is unbounded (the whole pool is one domain).
// The narrowest level without a size is the host itself: one node per domain.
func NodesPerDomain(t *schema.Topology) map[string]int64 {
	out := map[string]int64{}
	if t == nil {
		return out
	}
	below := int64(1) // nodes per domain of the next narrower level
	for i := len(t.Levels) - 1; i >= 0; i-- {
		l := t.Levels[i]
		s := t.Sizes[l]
		switch {
		case s > 0 && i == len(t.Levels)-1:
			below = s
		case s > 0 && below > 0:
			below *= s
		case i == len(t.Levels)-1:
			below = 1
		default:
			below = 0
		}
		out[l] = below
	}
	return out
}

// Layout returns the nodes of every pool at the given node counts, in pool-name
// order and index order within a pool, laid out in topology domains in index order
// (hosts 0..3 in rack 0 when a rack holds 4 hosts, and so on). Pools missing from
// counts have no nodes.
func Layout(cfg *schema.Config, counts map[schema.PoolName]int64) []Node {
	return LayoutHeld(cfg, counts, nil)
}

// Held is what a pool whose nodes may be retired (fleet/elastic) holds now:
// the names of its nodes, and its retired nodes, by name: true while one
// stays (kept for repair, or a gang still runs on it).
type Held struct {
	Names   []string
	Retired map[string]bool
}

// LayoutHeld is Layout where the pools in held keep the nodes they have: a
// pool's count of nodes are its nodes that are not retired, lowest index
// first, then the lowest free indices, and its kept retired nodes are laid
// out too, without a seat. A node keeps its name (and its domains) as long as
// it is there, so that a retired node's going never moves another's seat.
// Names that are not the pool's are ignored.
func LayoutHeld(cfg *schema.Config, counts map[schema.PoolName]int64, held map[schema.PoolName]Held) []Node {
	var out []Node
	for _, name := range cfg.PoolNames() {
		p := cfg.Pools[name]
		n := counts[name]
		per := NodesPerDomain(p.Topology)
		node := func(i int64) Node {
			nd := Node{Name: NodeName(name, i), Pool: name, Cluster: p.Cluster, Flavor: p.Flavor, GPUs: p.GPUsPerNode}
			if p.Topology != nil {
				nd.Domains = make([]Domain, 0, len(p.Topology.Levels))
				for _, l := range p.Topology.Levels {
					nd.Domains = append(nd.Domains, Domain{Level: l, Name: domainName(name, l, per[l], i)})
				}
			}
			return nd
		}
		h, ok := held[name]
		if !ok {
			for i := range n {
				out = append(out, node(i))
			}
			continue
		}
		taken := map[int64]bool{}
		var seats, kept []int64
		for _, nodeName := range h.Names {
			i, ok := NodeIndex(name, nodeName)
			if !ok || taken[i] {
				continue
			}
			taken[i] = true
			switch stays, retired := h.Retired[nodeName]; {
			case !retired:
				seats = append(seats, i)
			case stays:
				kept = append(kept, i)
			}
		}
		slices.Sort(seats)
		seats = seats[:min(int64(len(seats)), n)]
		for i := int64(0); int64(len(seats)) < n; i++ {
			if !taken[i] {
				seats = append(seats, i)
			}
		}
		all := append(seats, kept...)
		slices.Sort(all)
		for _, i := range all {
			out = append(out, node(i))
		}
	}
	return out
}

// NodeIndex reads the index of a node name of pool (NodeName), if it is one,
// and within twice #MaxNodes (pool.cue) of indices.
func NodeIndex(pool schema.PoolName, node string) (int64, bool) {
	rest, ok := strings.CutPrefix(node, string(pool)+"-")
	if !ok || rest == "" || len(rest) > 7 || strings.Trim(rest, "0123456789") != "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	i, err := strconv.ParseInt(rest, 10, 64)
	return i, err == nil && i < 2*maxPoolNodes
}

func domainName(pool schema.PoolName, level string, per, index int64) string {
	switch per {
	case 0:
		return fmt.Sprintf("%s-%s-0", pool, level)
	case 1:
		return NodeName(pool, index)
	}
	return fmt.Sprintf("%s-%s-%d", pool, level, index/per)
}

// maxPoolNodes is pool.cue's #MaxNodes.
const maxPoolNodes = 100000
