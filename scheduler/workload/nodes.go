package workload

import (
	"errors"
	"io"
)

// Node is one node of a node list that defines its own fleet (openb's).
type Node struct {
	Name   string
	Flavor string
	GPUs   int64
}

// Bounds of a node list, as the schema bounds a repository's fleet (its
// #MaxGPUsPerNode and MaxFleetNodes): the simulator lays out every node and
// indexes every GPU.
const (
	MaxNodeGPUs = 128
	MaxNodes    = 1_000_000
)

// ReadNodes reads a node list: openb's (sn,...,gpu,model) or name,gpus,flavor.
// Nodes without GPUs are left out.
func ReadNodes(in io.Reader, name string) ([]Node, error) {
	recs := NewRecords(in, name, ',')
	header, _, err := recs.Read()
	if err != nil {
		if err == io.EOF {
			return nil, &Error{File: name, Line: 1, Err: errors.New("empty file: want a CSV header")}
		}
		return nil, err
	}
	cols := map[string]int{}
	for i, h := range header {
		cols[columnName(h)] = i
	}
	nameCol, gpuCol, flavorCol := "sn", "gpu", "model"
	if !has(cols, "sn", "gpu", "model") {
		if !has(cols, "name", "gpus", "flavor") {
			return nil, &Error{File: name, Line: 1, Err: errors.New("unknown header: want sn,gpu,model (openb) or name,gpus,flavor")}
		}
		nameCol, gpuCol, flavorCol = "name", "gpus", "flavor"
	}
	var out []Node
	seen := map[string]bool{}
	for {
		rec, line, err := recs.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if blank(rec) {
			continue
		}
		r := &row{cols: cols, rec: rec, line: line, file: name}
		n := Node{Name: r.str(nameCol), Flavor: r.str(flavorCol), GPUs: r.count(gpuCol, 0)}
		if n.Name == "" {
			r.fail("column %s is empty", nameCol)
		}
		if seen[n.Name] {
			r.fail("node %s listed twice", n.Name)
		}
		if n.GPUs > MaxNodeGPUs {
			r.fail("column %s: %d GPUs on one node; at most %d", gpuCol, n.GPUs, MaxNodeGPUs)
		}
		if len(out) >= MaxNodes {
			r.fail("more than %d nodes", MaxNodes)
		}
		if err := r.err(); err != nil {
			return nil, err
		}
		seen[n.Name] = true
		if n.GPUs > 0 {
			out = append(out, n)
		}
	}
}
