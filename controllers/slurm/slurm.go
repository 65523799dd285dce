// Package slurm converges a live Slurm cluster's accounting to what
// planner/slurm renders from the capacity repository: it reads the QOS and
// account associations with sacctmgr -nP and runs planner/slurm's Diff with
// sacctmgr -i, each command as argv, never through a shell.
package slurm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	planner "github.com/allot-dev/allot/planner/slurm"
)

// Runner runs sacctmgr against one cluster.
type Runner struct {
	// Env is the commands' environment (SLURM_CONF); nil is this process's.
	Env []string
	// Cluster, when set, restricts what is read to that cluster.
	Cluster string
	// MaxOutput bounds what one command may print (0: DefaultMaxOutput).
	MaxOutput int
}

// DefaultMaxOutput bounds one sacctmgr, squeue or scontrol answer: a site's
// whole accounting is far smaller.
const DefaultMaxOutput = 64 << 20

// errTooMuch stops reading a command that prints more than MaxOutput.
var errTooMuch = errors.New("output over the limit")

// capped is a buffer that refuses to grow past max bytes.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.max {
		c.over = true
		return 0, errTooMuch
	}
	return c.buf.Write(p)
}

func (r Runner) run(ctx context.Context, argv []string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = r.Env
	out := &capped{max: cmp.Or(r.MaxOutput, DefaultMaxOutput)}
	stderr := &capped{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Run(); err != nil {
		if out.over {
			return "", fmt.Errorf("%s: printed more than %d bytes", strings.Join(argv, " "), out.max)
		}
		return "", fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.buf.String()))
	}
	return out.buf.String(), nil
}

// Read returns the cluster's QOS and account associations, parents first.
func (r Runner) Read(ctx context.Context) (*planner.Live, error) {
	live := &planner.Live{}
	out, err := r.run(ctx, []string{"sacctmgr", "-nP", "show", "qos", "format=name,description,priority,preempt,preemptmode"})
	if err != nil {
		return nil, err
	}
	for _, f := range rows(out, 5) {
		prio, _ := strconv.ParseInt(f[2], 10, 64)
		live.QOS = append(live.QOS, planner.QOS{Name: f[0], Description: f[1], Priority: prio, Preempt: planner.SplitList(f[3]), PreemptMode: strings.ToLower(f[4])})
	}
	out, err = r.run(ctx, []string{"sacctmgr", "-nP", "show", "account", "format=account,description,organization"})
	if err != nil {
		return nil, err
	}
	meta := map[string][2]string{}
	for _, f := range rows(out, 3) {
		meta[f[0]] = [2]string{f[1], f[2]}
	}
	args := []string{"sacctmgr", "-nP", "show", "association", "format=account,user,parentname,grptres,fairshare,qos,defaultqos"}
	if r.Cluster != "" {
		args = append(args, "where", "cluster="+r.Cluster)
	}
	out, err = r.run(ctx, args)
	if err != nil {
		return nil, err
	}
	for _, f := range rows(out, 7) {
		if f[1] != "" || f[0] == "root" {
			continue // a user's association, or Slurm's root
		}
		share, _ := strconv.ParseInt(f[4], 10, 64)
		a := planner.Account{Name: f[0], Parent: f[2], Description: meta[f[0]][0], Organization: meta[f[0]][1],
			GrpTRES: planner.ParseTRES(f[3]), Fairshare: share, QOS: planner.SplitList(f[5]), DefaultQOS: f[6]}
		a.Team = len(a.QOS) > 0
		live.Accounts = append(live.Accounts, a)
	}
	return live, nil
}

// Apply runs changes in order, stopping at the first failure; conflicts are
// not run.
func (r Runner) Apply(ctx context.Context, changes []planner.Change) error {
	for _, c := range changes {
		if c.Argv == nil {
			continue
		}
		if _, err := r.run(ctx, c.Argv); err != nil {
			return fmt.Errorf("%s %s %s: %w", c.Op, c.Kind, c.Name, err)
		}
	}
	return nil
}

// rows splits sacctmgr's parseable output into rows of n fields.
func rows(out string, n int) [][]string {
	var rs [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Split(l, "|"); len(f) >= n {
			rs = append(rs, f[:n])
		}
	}
	return rs
}

// jobID is a job, an array task or a het job's component: 12, 12_3, 12+1.
var jobID = regexp.MustCompile(`^[0-9]{1,12}([_+][0-9]{1,9})?$`)

// maxAccountDepth bounds the walk from a job's account up to root.
const maxAccountDepth = 32

// Explain says why Slurm's job id waits (or where it runs): squeue for the
// job, scontrol show assoc_mgr for the limits and use of its account and
// every parent up to root, and of its QOS when that is the reason.
func (r Runner) Explain(ctx context.Context, id string) ([]planner.Explanation, error) {
	if !jobID.MatchString(id) {
		return nil, fmt.Errorf("job %q: want a Slurm job id (12, 12_3 or 12+1)", id)
	}
	out, err := r.run(ctx, []string{"squeue", "-h", "-j", id, "-O", planner.JobFormat})
	if err != nil {
		return nil, err
	}
	jobs, err := planner.ParseJobs(out)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("job %s is not in Slurm's queue (one that ended is in sacct -j %s)", id, id)
	}
	var es []planner.Explanation
	for _, j := range jobs {
		var chain []planner.Usage
		var qos *planner.Usage
		if j.State == "PENDING" && j.Reason == "AssocGrpGRES" {
			if chain, err = r.chain(ctx, j.Account, j.User); err != nil {
				return nil, err
			}
		}
		if j.State == "PENDING" && j.Reason == "QOSGrpGRES" {
			out, err := r.run(ctx, []string{"scontrol", "-o", "show", "assoc_mgr", "flags=qos", "qos=" + j.QOS})
			if err != nil {
				return nil, err
			}
			us, err := planner.ParseAssocMgr(out)
			if err != nil {
				return nil, err
			}
			for i := range us {
				if us[i].QOS == j.QOS {
					qos = &us[i]
				}
			}
		}
		es = append(es, planner.Explain(j, chain, qos))
	}
	return es, nil
}

// chain is user's association in account (when it has one), then
// account's own and each parent's up to root.
func (r Runner) chain(ctx context.Context, account, user string) ([]planner.Usage, error) {
	var chain []planner.Usage
	for depth := 0; account != "" && depth < maxAccountDepth; depth++ {
		out, err := r.run(ctx, []string{"scontrol", "-o", "show", "assoc_mgr", "flags=assoc", "accounts=" + account})
		if err != nil {
			return nil, err
		}
		us, err := planner.ParseAssocMgr(out)
		if err != nil {
			return nil, err
		}
		next := ""
		for _, u := range us {
			if u.Account != account || u.QOS != "" {
				continue
			}
			switch {
			case depth == 0 && u.User != "" && u.User == user:
				chain = append([]planner.Usage{u}, chain...)
			case u.User == "":
				chain = append(chain, u)
				next = u.Parent
			}
		}
		account = next
	}
	return chain, nil
}
