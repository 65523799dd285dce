package workload

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SlurmJob is what Slurm's accounting (sacct) says of a job beyond Spec:
// the names a capacity repository maps onto its teams and flavors.
type SlurmJob struct {
	// Account is the account the job was charged to: when the repository
	// has a team of that name, the job is that team's.
	Account   string
	Partition string
	// GRESType is the type of the GPUs it was allocated (h100 of
	// gres/gpu:h100=8); empty when untyped or of several types.
	GRESType string
}

// MaxSlurmName bounds a name of a sacct record (account, user, partition,
// QOS, GRES type) and a job ID: Slurm's own names are far shorter.
const MaxSlurmName = 256

// sacctNeed is what the sacct layout cannot do without, beyond the columns
// it needs (jobid, submit, start).
func sacctNeed(cols map[string]int) error {
	switch {
	case !has(cols, "end") && !has(cols, "elapsedraw"):
		return errors.New("it has neither End nor ElapsedRaw: a job needs how long it ran")
	case !has(cols, "alloctres") && !has(cols, "reqtres"):
		return errors.New("it has neither AllocTRES nor ReqTRES: a job needs its GPUs")
	}
	return nil
}

// parseSacct reads a line of `sacct -P` (or -p) output. Only allocations
// are jobs: a step (123.batch, 123.0, 123.extern) is left out, an array
// task (123_4) and a het job's component (123+0) are jobs of their own. A
// job that never started (Start Unknown or None, or no AllocTRES: cancelled
// while pending) or has not ended (End Unknown: running) is left out; one
// that ran is replayed for as long as it ran, whatever its state. Its GPUs
// are the TRES gres/gpu (else the sum of gres/gpu:TYPE), spread over its
// nodes as a gang of whole nodes.
func parseSacct(r *row, _ *float64) (Spec, bool) {
	id := r.str("jobid")
	j := Spec{ID: id, User: r.str("user"), Tier: r.str("qos")}
	sj := &SlurmJob{Account: r.str("account"), Partition: r.str("partition")}
	for _, c := range []string{"jobid", "account", "user", "partition", "qos"} {
		if s := r.str(c); len(s) > MaxSlurmName {
			r.fail("column %s: %d bytes; at most %d", c, len(s), MaxSlurmName)
			return j, false
		}
	}
	switch {
	case id == "":
		r.fail("column JobID is empty")
		return j, false
	case strings.ContainsRune(id, '.'):
		return j, false // a step of a job
	}
	j.Team = sj.Account
	if j.Team == "" {
		j.Team = j.User
	}
	j.Submit = r.submit("submit")
	state, _, _ := strings.Cut(r.str("state"), " ") // CANCELLED by 1000
	if _, _, started := r.instant("start"); !started || r.errs != nil {
		return j, false
	}
	switch {
	case has(r.cols, "end"):
		var ok bool
		if j.Duration, ok = r.span("start", "end"); !ok {
			return j, false
		}
	case !ended(state):
		return j, false
	default:
		j.Duration = r.num("elapsedraw", 0)
	}
	tres := r.str("alloctres")
	col := "AllocTRES"
	if tres == "" && !has(r.cols, "alloctres") {
		tres, col = r.str("reqtres"), "ReqTRES"
	}
	if tres == "" {
		return j, false // nothing allocated: cancelled before it started
	}
	gpus, typ, tresNodes, err := parseTRES(tres)
	if err != nil {
		r.fail("column %s: %v", col, err)
		return j, false
	}
	sj.GRESType = typ
	nodes := r.count("nnodes", 0)
	if nodes == 0 {
		nodes = max(tresNodes, 1)
	}
	if nodes > MaxNodes {
		r.fail("column NNodes: %d nodes; at most %d", nodes, MaxNodes)
		return j, false
	}
	j.Slurm = sj
	if gpus == 0 {
		return j, false // a CPU job
	}
	j.Pods, j.GPUsPerPod = gang(gpus, nodes, 0)
	if j.GPUsPerPod > MaxNodeGPUs {
		r.fail("column %s: %d GPUs on each of %d nodes; at most %d a node", col, j.GPUsPerPod, j.Pods, MaxNodeGPUs)
		return j, false
	}
	return j, true
}

// ended tells whether a job in a Slurm state has ended (for a file without
// End, whose ElapsedRaw of a running job still grows).
func ended(state string) bool {
	switch state {
	case "PENDING", "RUNNING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED":
		return false
	}
	return true // no State column: ElapsedRaw is trusted
}

// parseTRES reads a TRES list (billing=1,cpu=2,gres/gpu:h100=8,gres/gpu=8,node=1):
// the job's GPUs (gres/gpu, else the sum of its typed counts), their GRES
// type when there is one, and its nodes (node=).
func parseTRES(s string) (gpus int64, typ string, nodes int64, err error) {
	var total, typed int64 = -1, 0
	types := 0
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return 0, "", 0, fmt.Errorf("%q is not NAME=COUNT", kv)
		}
		if k != "node" && !strings.HasPrefix(k, "gres/gpu") {
			continue // cpu, mem=1000M, billing, licenses
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 || n > 1<<40 {
			return 0, "", 0, fmt.Errorf("%s=%q is not a count up to 2^40", k, v)
		}
		switch t, isTyped := strings.CutPrefix(k, "gres/gpu:"); {
		case k == "node":
			nodes = n
		case k == "gres/gpu":
			total = n
		case isTyped && t != "" && len(t) <= MaxSlurmName:
			if n > 0 {
				typed += n
				types++
				typ = t
			}
		default:
			return 0, "", 0, fmt.Errorf("%q is not gres/gpu or gres/gpu:TYPE", k)
		}
	}
	if types != 1 {
		typ = "" // untyped, or of several types: any flavor
	}
	if total < 0 {
		total = typed
	}
	return total, typ, nodes, nil
}

// SlurmFlavors gives every job read from sacct the flavor its GPUs' GRES
// type names (byGRES: a repository's Slurm GRES types, and its flavors'
// names for pools not on Slurm), else its partition's (byPartition); a job
// that matches neither accepts any flavor.
func SlurmFlavors(jobs []Spec, byGRES, byPartition map[string]string) {
	for i := range jobs {
		if sj := jobs[i].Slurm; sj != nil {
			if f := SlurmFlavor(sj.GRESType, sj.Partition, byGRES, byPartition); f != "" {
				jobs[i].Flavors = []string{f}
			}
		}
	}
}

// SlurmFlavor is the flavor of GPUs of GRES type gres ("" untyped) in
// partition: byGRES's for the type, else byPartition's; "" when neither
// names one.
func SlurmFlavor(gres, partition string, byGRES, byPartition map[string]string) string {
	f, ok := byGRES[gres]
	if !ok || gres == "" {
		f = byPartition[partition]
	}
	return f
}

// SlurmUsage is the GPU-hours one Slurm account used of one GRES type in
// one partition.
type SlurmUsage struct {
	Account   string  `json:"account"`
	GRESType  string  `json:"gres_type"`
	Partition string  `json:"partition"`
	GPUHours  float64 `json:"gpu_hours"`
}

// SumSlurmUsage adds up the GPU-hours (GPUs × how long they ran) of jobs
// read from sacct, per account, GRES type ("" untyped) and partition,
// sorted by account, type and partition. Jobs of other layouts are left
// out.
func SumSlurmUsage(jobs []Spec) []SlurmUsage {
	type key struct{ account, gres, partition string }
	sums := map[key]float64{}
	for _, j := range jobs {
		if sj := j.Slurm; sj != nil {
			sums[key{sj.Account, sj.GRESType, sj.Partition}] += float64(j.GPUs()) * j.Duration / 3600
		}
	}
	out := make([]SlurmUsage, 0, len(sums))
	for k, v := range sums {
		out = append(out, SlurmUsage{Account: k.account, GRESType: k.gres, Partition: k.partition, GPUHours: v})
	}
	slices.SortFunc(out, func(a, b SlurmUsage) int {
		return cmp.Or(strings.Compare(a.Account, b.Account), strings.Compare(a.GRESType, b.GRESType), strings.Compare(a.Partition, b.Partition))
	})
	return out
}
