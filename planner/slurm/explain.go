package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// Job is what squeue says of one job: the fields JobFormat asks for.
type Job struct {
	ID, Account, User, QOS, Partition string
	// State is Slurm's (PENDING, RUNNING, …); Reason is why it pends
	// (AssocGrpGRES, Resources, Priority, None, …).
	State, Reason string
	Nodes         int64
	NodeList      string
	// TRES is what it asks for (pending) or holds (running).
	TRES map[string]int64
}

// JobFormat is the squeue -O format ParseJobs reads: every field is
// Slurm's or the administrator's (no job name, command or path a user
// writes), each ended by "|".
const JobFormat = "JobID:|,Account:|,UserName:|,QOS:|,Partition:|,State:|,Reason:|,NumNodes:|,NodeList:|,tres-alloc:|"

// jobFields is how many fields JobFormat asks for.
const jobFields = 10

// MaxJobLines bounds the lines of one squeue answer read: an array job's
// pending tasks print as one line, its running ones one each.
const MaxJobLines = 64

// ParseJobs reads squeue -h -O JobFormat.
func ParseJobs(out string) ([]Job, error) {
	var jobs []Job
	for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if len(jobs) == MaxJobLines {
			return nil, fmt.Errorf("squeue line %d: more than %d lines", i+1, MaxJobLines)
		}
		f := strings.Split(line, "|")
		if len(f) != jobFields+1 || strings.TrimSpace(f[jobFields]) != "" {
			return nil, fmt.Errorf("squeue line %d: %d fields, want %d ended by |", i+1, len(f)-1, jobFields)
		}
		for k := range f {
			f[k] = strings.TrimSpace(f[k])
			if len(f[k]) > 4096 {
				return nil, fmt.Errorf("squeue line %d: field %d is over 4096 bytes", i+1, k+1)
			}
		}
		nodes, err := strconv.ParseInt(f[7], 10, 64)
		if err != nil || nodes < 0 {
			return nil, fmt.Errorf("squeue line %d: NumNodes %q: not a count", i+1, f[7])
		}
		j := Job{ID: f[0], Account: f[1], User: f[2], QOS: f[3], Partition: f[4], State: f[5], Reason: f[6], Nodes: nodes, NodeList: f[8], TRES: map[string]int64{}}
		for _, kv := range SplitList(f[9]) {
			k, v, _ := strings.Cut(kv, "=")
			if strings.HasPrefix(k, TRESGPU) {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("squeue line %d: TRES %s=%q: not a count", i+1, k, v)
				}
				j.TRES[k] = n
			}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// Usage is one association's or QOS's GPU limits and use, from scontrol
// show assoc_mgr: GrpTRES=…,gres/gpu=8(6) is a limit of 8 with 6 in use; N
// is no limit (-1).
type Usage struct {
	// Account (empty for a QOS), User (empty for an account's own
	// association), Parent (the parent account), QOS (empty for an
	// association).
	Account, User, Parent, QOS string
	Limit, Used                map[string]int64
}

// ParseAssocMgr reads scontrol -o show assoc_mgr flags=assoc|qos: one
// record a line, key=value pairs (names are Slurm's and the
// administrator's).
func ParseAssocMgr(out string) ([]Usage, error) {
	var us []Usage
	for i, line := range strings.Split(out, "\n") {
		var u Usage
		var grp string
		for _, kv := range strings.Fields(line) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			switch k {
			case "Account":
				u.Account = v
			case "UserName":
				u.User, _, _ = strings.Cut(v, "(")
			case "ParentAccount":
				u.Parent, _, _ = strings.Cut(v, "(")
			case "QOS":
				u.QOS, _, _ = strings.Cut(v, "(")
			case "GrpTRES":
				if grp == "" {
					grp = v
				}
			}
		}
		if u.Account == "" && u.QOS == "" {
			continue // a heading
		}
		u.Limit, u.Used = map[string]int64{}, map[string]int64{}
		for _, t := range SplitList(grp) {
			k, v, _ := strings.Cut(t, "=")
			if !strings.HasPrefix(k, TRESGPU) {
				continue
			}
			lim, used, ok := strings.Cut(strings.TrimSuffix(v, ")"), "(")
			un, err := strconv.ParseInt(used, 10, 64)
			if !ok || err != nil {
				return nil, fmt.Errorf("assoc_mgr line %d: GrpTRES %s=%q: want LIMIT(USED)", i+1, k, v)
			}
			ln := int64(-1)
			if lim != "N" {
				if ln, err = strconv.ParseInt(lim, 10, 64); err != nil {
					return nil, fmt.Errorf("assoc_mgr line %d: GrpTRES %s=%q: want LIMIT(USED)", i+1, k, v)
				}
			}
			u.Limit[k], u.Used[k] = ln, un
		}
		us = append(us, u)
	}
	return us, nil
}

// Explanation says why a Slurm job waits, in allot's words.
type Explanation struct {
	Job Job
	// GRESType is the GPU type it asks for ("" untyped); GPUs how many in
	// all.
	GRESType string
	GPUs     int64
	// Code is allot's reason (scheduler.ReasonCode's values: OverQuota,
	// CohortExhausted, InsufficientNodes, WaitingBehindHigherTier,
	// NoMatchingNodes, Queued), "" when Slurm's reason is no matter of
	// quota or capacity, or the job is not pending.
	Code string
	// Message states the numbers; Advice what lets it run on Slurm.
	Message, Advice string
}

// Slurm's pending reasons that name no limit of allot's.
var nodeReasons = map[string]bool{
	"ReqNodeNotAvail": true, "PartitionNodeLimit": true, "BadConstraints": true, "NodeDown": true,
	"PartitionConfig": true, "InvalidQOS": true,
}

// Explain says why j waits. chain is the job's associations from its
// user's (if any) up through its account's parents; qos the job's QOS's
// record (nil when not read).
func Explain(j Job, chain []Usage, qos *Usage) Explanation {
	e := Explanation{Job: j, GPUs: j.TRES[TRESGPU]}
	for k, n := range j.TRES {
		if t, ok := strings.CutPrefix(k, TRESGPU+":"); ok && n > 0 {
			e.GRESType = t
		}
	}
	what := e.GPUKind()
	if j.State != "PENDING" {
		if j.State == "RUNNING" {
			e.Message = fmt.Sprintf("it runs on %s (%d node(s), %d %s)", j.NodeList, j.Nodes, e.GPUs, what)
		} else {
			e.Message = "it is " + j.State
		}
		return e
	}
	switch r := j.Reason; {
	case r == "AssocGrpGRES":
		e.Code = "OverQuota"
		team := 0 // the job's account's own association
		if len(chain) > 0 && chain[0].User != "" {
			team = 1
		}
		for i, u := range chain {
			key, lim, used, ok := binding(u, e.GRESType, j.TRES)
			if !ok {
				continue
			}
			who := "team " + u.Account
			switch {
			case u.User != "":
				who = "user " + u.User + " in account " + u.Account
				e.Advice = "The limit is on the user's own association, which allot does not set: the site's administrator does."
			case i > team:
				e.Code, who = "CohortExhausted", "cohort "+u.Account
				e.Advice = "The team is within its own limit, but its cohort's account (the teams' nominal sum) is in use. Slurm does not lend: it runs when the cohort's other jobs end; a pull request raising the team's nominal lets it run within it."
			default:
				e.Advice = "The team's GPU limit (GrpTRES, its nominal plus borrowing limit) is in use. It runs when the team's running jobs end; a pull request raising the team's quota raises the limit after allot slurm apply."
			}
			e.Message = fmt.Sprintf("%s may use %d of %s (%s); %d in use, it asks for %d", who, lim, what, key, used, j.TRES[key])
			return e
		}
		if len(chain) == 0 {
			e.Message = fmt.Sprintf("a GPU limit of account %s or a parent is in use; it asks for %d %s (the limits are not readable here)", j.Account, e.GPUs, what)
			e.Advice = "scontrol show assoc_mgr showed none of the job's associations: where PrivateData hides them, run allot explain as a Slurm operator for the numbers."
			return e
		}
		e.Message = fmt.Sprintf("the account's GPU limit was in use when Slurm last looked; it asks for %d %s", e.GPUs, what)
		e.Advice = "No limit of the job's associations is full now: Slurm starts it at its next scheduling pass."
	case r == "QOSGrpGRES":
		e.Code = "OverQuota"
		e.Message = fmt.Sprintf("QOS %s's GPU limit is in use; it asks for %d %s", j.QOS, e.GPUs, what)
		if qos != nil {
			if key, lim, used, ok := binding(*qos, e.GRESType, j.TRES); ok {
				e.Message = fmt.Sprintf("QOS %s may use %d of %s (%s); %d in use, it asks for %d", j.QOS, lim, what, key, used, j.TRES[key])
			}
		}
		e.Advice = "allot sets no GPU limit on a tier's QOS: this one is the site's. It runs when the QOS's running jobs end."
	case r == "Resources":
		e.Code = "InsufficientNodes"
		e.Message = fmt.Sprintf("partition %s's nodes lack %d free %s on %d node(s)", j.Partition, e.GPUs, what, j.Nodes)
		e.Advice = "The team's limits allow it; the nodes are busy. It runs when work ends; a pool too small for its quotas shows in allot plan."
	case r == "Priority":
		e.Code = "WaitingBehindHigherTier"
		e.Message = fmt.Sprintf("jobs of higher priority wait for the same nodes of partition %s", j.Partition)
		e.Advice = "Jobs of a higher tier's QOS, or of accounts further below their fair share, go first."
	case nodeReasons[r]:
		e.Code = "NoMatchingNodes"
		e.Message = fmt.Sprintf("no node of partition %s can take it now (%s)", j.Partition, r)
		e.Advice = "Its node constraints or partition rule out the nodes that would fit it, or they are down: see scontrol show job and sinfo -R."
	case r == "None" || r == "":
		e.Code = "Queued"
		e.Message = "Slurm has not considered it yet"
		e.Advice = "The next scheduling pass will."
	default:
		e.Message = "Slurm holds it: " + r
		e.Advice = "This is no matter of allot's quotas or capacity (a dependency, a begin time, a hold, a site limit): see scontrol show job."
	}
	return e
}

// GPUKind names the GPUs the job asks for: "h100 GPUs", or "GPUs" when
// untyped.
func (e Explanation) GPUKind() string {
	if e.GRESType == "" {
		return "GPUs"
	}
	return e.GRESType + " GPUs"
}

// binding is the GPU limit of u that the job's request tres exceeds, typed
// first: its TRES, limit and use.
func binding(u Usage, gresType string, tres map[string]int64) (key string, limit, used int64, ok bool) {
	keys := []string{TRESGPU}
	if gresType != "" {
		keys = []string{TRESGPUType(gresType), TRESGPU}
	}
	for _, k := range keys {
		if l, has := u.Limit[k]; has && l >= 0 && u.Used[k]+tres[k] > l {
			return k, l, u.Used[k], true
		}
	}
	return "", 0, 0, false
}
