package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
)

// ClusterPrefix in the node column of an events file names a whole cluster:
// the event applies to each of its nodes (a cluster lost, or back).
const ClusterPrefix = "cluster/"

// ReadEvents reads an events file: CSV time,node,event with event fail or
// recover (node may be cluster/NAME); name is used in errors.
func ReadEvents(in io.Reader, name string) ([]Event, error) {
	recs := workload.NewRecords(in, name, ',')
	header, _, err := recs.Read()
	if err != nil {
		if err == io.EOF {
			return nil, &workload.Error{File: name, Line: 1, Err: errors.New("empty file: want the header time,node,event")}
		}
		return nil, err
	}
	cols := map[string]int{}
	for i, h := range header {
		cols[strings.ToLower(strings.TrimSpace(h))] = i
	}
	for _, c := range []string{"time", "node", "event"} {
		if _, ok := cols[c]; !ok {
			return nil, &workload.Error{File: name, Line: 1, Err: errors.New("want the header time,node,event")}
		}
	}
	var out []Event
	for {
		rec, line, err := recs.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		get := func(c string) string {
			if i := cols[c]; i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		t, err := strconv.ParseFloat(get("time"), 64)
		if err != nil || t < 0 || math.IsInf(t, 0) || math.IsNaN(t) || t > workload.MaxSeconds {
			return nil, &workload.Error{File: name, Line: line, Err: fmt.Errorf("time %q is not a non-negative number of seconds up to 1e9 (about 31 years)", get("time"))}
		}
		e := Event{Time: t, Node: scheduler.NodeName(get("node")), Kind: EventKind(get("event"))}
		if e.Node == "" || string(e.Node) == ClusterPrefix {
			return nil, &workload.Error{File: name, Line: line, Err: errors.New("node is empty")}
		}
		if e.Kind != Fail && e.Kind != Recover {
			return nil, &workload.Error{File: name, Line: line, Err: fmt.Errorf("event %q: want fail or recover", e.Kind)}
		}
		out = append(out, e)
	}
}
