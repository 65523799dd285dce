package slurm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// squeueOut is squeue -h -O JobFormat of 22.05: a pending job and a
// running one.
const squeueOut = "3|alpha|root|normal|gpu|PENDING|AssocGrpGRES|1||cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1,gres/gpu:h100=1|\n" +
	"1|alpha|root|normal|gpu|RUNNING|None|1|n1|cpu=1,node=1,billing=1,gres/gpu=2,gres/gpu:h100=2|\n"

// assocOut is scontrol -o show assoc_mgr flags=assoc accounts=alpha of
// 22.05 (trimmed of the limits that are not GPUs'), and its parent's.
const assocOut = `Current Association Manager state
Association Records
ClusterName=allot Account=alpha UserName= Partition= Priority=0 ID=4 ParentAccount=lab(3) Lft=3 DefAssoc=No GrpJobs=N(1) GrpTRES=cpu=N(1),mem=N(0),node=N(1),gres/gpu=2(2),gres/gpu:h100=2(2) GrpTRESMins=cpu=N(0),gres/gpu=N(0),gres/gpu:h100=N(0) MaxTRESPJ=
ClusterName=allot Account=alpha UserName=root(0) Partition= Priority=0 ID=5 ParentAccount= Lft=4 DefAssoc=No GrpTRES=cpu=N(1),gres/gpu=N(2),gres/gpu:h100=N(2) GrpTRESMins=gres/gpu=N(0)
`

const labOut = `ClusterName=allot Account=lab UserName= Partition= Priority=0 ID=3 ParentAccount=root(1) GrpTRES=cpu=N(1),gres/gpu=4(2),gres/gpu:h100=4(2)
`

func TestParseJobs(t *testing.T) {
	jobs, err := ParseJobs(squeueOut)
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: "3", Account: "alpha", User: "root", QOS: "normal", Partition: "gpu", State: "PENDING", Reason: "AssocGrpGRES", Nodes: 1,
			TRES: map[string]int64{"gres/gpu": 1, "gres/gpu:h100": 1}},
		{ID: "1", Account: "alpha", User: "root", QOS: "normal", Partition: "gpu", State: "RUNNING", Reason: "None", Nodes: 1, NodeList: "n1",
			TRES: map[string]int64{"gres/gpu": 2, "gres/gpu:h100": 2}},
	}
	if d := cmp.Diff(want, jobs); d != "" {
		t.Errorf("jobs (-want +got):\n%s", d)
	}
	for in, msg := range map[string]string{
		"3|alpha|root|normal|gpu|PENDING|None|1||gres/gpu=1\n":           "9 fields, want 10 ended by |",
		"3|alpha|root|normal|gpu|PENDING|None|x||gres/gpu=1|\n":          `NumNodes "x": not a count`,
		"3|alpha|root|normal|gpu|PENDING|None|1||gres/gpu=-4|\n":         `TRES gres/gpu="-4": not a count`,
		"3|a|b|c|d|e|f|1|g|h|extra|\n":                                   "11 fields",
		strings.Repeat("3|a|root|q|p|PENDING|None|1||gres/gpu=1|\n", 65): "more than 64 lines",
	} {
		if _, err := ParseJobs(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseJobs(%.40q): %v, want %q", in, err, msg)
		}
	}
}

func TestParseAssocMgr(t *testing.T) {
	us, err := ParseAssocMgr(assocOut + labOut)
	if err != nil {
		t.Fatal(err)
	}
	want := []Usage{
		{Account: "alpha", Parent: "lab", Limit: map[string]int64{"gres/gpu": 2, "gres/gpu:h100": 2}, Used: map[string]int64{"gres/gpu": 2, "gres/gpu:h100": 2}},
		{Account: "alpha", User: "root", Limit: map[string]int64{"gres/gpu": -1, "gres/gpu:h100": -1}, Used: map[string]int64{"gres/gpu": 2, "gres/gpu:h100": 2}},
		{Account: "lab", Parent: "root", Limit: map[string]int64{"gres/gpu": 4, "gres/gpu:h100": 4}, Used: map[string]int64{"gres/gpu": 2, "gres/gpu:h100": 2}},
	}
	if d := cmp.Diff(want, us); d != "" {
		t.Errorf("usage (-want +got):\n%s", d)
	}
	if _, err := ParseAssocMgr("Account=a GrpTRES=gres/gpu=4\n"); err == nil || !strings.Contains(err.Error(), "want LIMIT(USED)") {
		t.Errorf("a limit without its use: %v", err)
	}
}

// TestExplain maps each kind of Slurm reason to allot's.
func TestExplain(t *testing.T) {
	jobs, _ := ParseJobs(squeueOut)
	us, _ := ParseAssocMgr(assocOut + labOut)
	pending := jobs[0]
	user, team, lab := us[1], us[0], us[2]
	with := func(reason string, gpus int64) Job {
		j := pending
		j.Reason, j.TRES = reason, map[string]int64{"gres/gpu": gpus, "gres/gpu:h100": gpus}
		return j
	}
	userLimited := user
	userLimited.Limit = map[string]int64{"gres/gpu": 2}
	qos := Usage{QOS: "normal", Limit: map[string]int64{"gres/gpu": 8}, Used: map[string]int64{"gres/gpu": 8}}
	for _, c := range []struct {
		name       string
		job        Job
		chain      []Usage
		qos        *Usage
		code, text string
	}{
		{"team", pending, []Usage{user, team, lab}, nil, "OverQuota", "team alpha may use 2 of h100 GPUs (gres/gpu:h100); 2 in use, it asks for 1"},
		{"team, no user record", pending, []Usage{team, lab}, nil, "OverQuota", "team alpha may use 2 of h100 GPUs"},
		{"cohort", with("AssocGrpGRES", 3), []Usage{user, {Account: "alpha", Parent: "lab", Limit: map[string]int64{"gres/gpu": 4}, Used: map[string]int64{"gres/gpu": 0}}, lab}, nil,
			"CohortExhausted", "cohort lab may use 4 of h100 GPUs (gres/gpu:h100); 2 in use, it asks for 3"},
		{"the user's own limit", pending, []Usage{userLimited, team, lab}, nil, "OverQuota", "user root in account alpha may use 2"},
		{"no limit full now", with("AssocGrpGRES", 0), []Usage{team, lab}, nil, "OverQuota", "was in use when Slurm last looked"},
		{"limits hidden", pending, nil, nil, "OverQuota", "a GPU limit of account alpha or a parent is in use; it asks for 1 h100 GPUs (the limits are not readable here)"},
		{"qos", with("QOSGrpGRES", 1), nil, &qos, "OverQuota", "QOS normal may use 8 of h100 GPUs (gres/gpu); 8 in use, it asks for 1"},
		{"qos unread", with("QOSGrpGRES", 1), nil, nil, "OverQuota", "QOS normal's GPU limit is in use"},
		{"resources", with("Resources", 4), nil, nil, "InsufficientNodes", "partition gpu's nodes lack 4 free h100 GPUs on 1 node(s)"},
		{"priority", with("Priority", 4), nil, nil, "WaitingBehindHigherTier", "jobs of higher priority"},
		{"nodes", with("ReqNodeNotAvail", 4), nil, nil, "NoMatchingNodes", "(ReqNodeNotAvail)"},
		{"not yet", with("None", 4), nil, nil, "Queued", "not considered it yet"},
		{"held", with("JobHeldUser", 4), nil, nil, "", "Slurm holds it: JobHeldUser"},
		{"running", jobs[1], nil, nil, "", "it runs on n1 (1 node(s), 2 h100 GPUs)"},
	} {
		e := Explain(c.job, c.chain, c.qos)
		if e.Code != c.code || !strings.Contains(e.Message, c.text) || (e.Code != "" && e.Advice == "") {
			t.Errorf("%s: %q %q (advice %q), want %q containing %q", c.name, e.Code, e.Message, e.Advice, c.code, c.text)
		}
	}
}

// FuzzParseSlurm: the squeue and assoc_mgr parsers never panic, and what
// they keep is bounded.
func FuzzParseSlurm(f *testing.F) {
	f.Add(squeueOut)
	f.Add(assocOut + labOut)
	f.Add("Account=a GrpTRES=gres/gpu=N(x)")
	f.Add("|||||||||||\n")
	f.Fuzz(func(t *testing.T, s string) {
		if jobs, err := ParseJobs(s); err == nil {
			if len(jobs) > MaxJobLines {
				t.Fatalf("%d jobs", len(jobs))
			}
			for _, j := range jobs {
				Explain(j, nil, nil)
			}
		}
		if us, err := ParseAssocMgr(s); err == nil && len(us) > 0 {
			jobs, _ := ParseJobs(squeueOut)
			Explain(jobs[0], us, &us[0])
		}
	})
}
