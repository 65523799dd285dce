package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/allot-dev/allot/internal/slurmtest"
)

// slurmRepo is the Slurm demo's capacity repository: the harness's two
// nodes of four H100 as one pool, team alpha with 2 GPUs and beta with 4.
const slurmRepo = `package capacity

clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: h100: {cluster: "hpc", flavor: "h100", gpusPerNode: 4, nodes: {min: 2, max: 2},
	price: onDemandPerNodeHour: 12
	slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1}}
tiers: prod: priority: 10
teams: {
	alpha: {costCenter: "research", owners: ["@alpha-leads"], quota: h100: nominal: 2}
	beta: {costCenter: "research", owners: ["@beta-leads"], quota: h100: nominal: 4}
}
`

// slurmResult is what the Slurm demo saw, for its test.
type slurmResult struct {
	// reason is Slurm's pending reason of alpha's second job before the
	// change; explain what allot explain said of it; plan the pull
	// request's plan; runningAfter whether the job ran after the merge.
	reason, explain, plan string
	runningAfter          bool
	// harness is the harness's folder, removed when the demo ends.
	harness string
}

// runSlurm is 'make demo-slurm': a real Slurm cluster (the test harness:
// munge, MariaDB, slurmdbd, slurmctld and two slurmd with fake GPUs), a
// capacity repository in Git applied with allot slurm apply, a job pending
// on its team's GPU limit, the pull request's plan, the merge, and the job
// running.
func runSlurm(ctx context.Context, o options) (_ *slurmResult, err error) {
	d := &demo{o: o, started: time.Now()}
	res := &slurmResult{}
	defer d.stopAll(ctx, &err)
	if err := d.findBinary(); err != nil {
		return nil, err
	}
	fmt.Fprintln(o.out, "allot Slurm demo: a quota change through Git reaching a real Slurm cluster")

	d.header("A Slurm cluster: munge, MariaDB, slurmdbd, slurmctld and two slurmd with four fake H100 each")
	c, err := slurmtest.New(slurmtest.Options{Nodes: 2, GPUsPerNode: 4, GPUType: "h100", Partition: "gpu"})
	if err != nil {
		return nil, fmt.Errorf("starting Slurm: %w", err)
	}
	res.harness = c.Dir
	d.onCleanup(func() string {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(d.o.out, "         stopping Slurm: %v\n", err)
		}
		return "the Slurm cluster"
	})
	d.say("nodes n1, n2 idle; SLURM_CONF=%s", c.Conf)

	d.header("The capacity repository in Git: alpha may use 2 H100, beta 4")
	if d.dir, err = os.MkdirTemp("", "allot-slurm-demo-"); err != nil {
		return nil, err
	}
	dir := d.dir
	d.onCleanup(func() string { os.RemoveAll(dir); return "the repository" })
	d.repo = gitRepo{dir: filepath.Join(dir, "capacity")}
	if err := os.MkdirAll(d.repo.dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(d.repo.dir, "capacity.cue"), []byte(slurmRepo), 0o644); err != nil {
		return nil, err
	}
	if _, err := d.repo.git(ctx, "init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	rev, err := d.repo.commit(ctx, "hpc: alpha 2 H100, beta 4")
	if err != nil {
		return nil, err
	}
	d.say("commit %.12s on main", rev)

	d.header("allot slurm apply: the accounts, QOS and GPU limits (sacctmgr)")
	if err := d.slurmApply(ctx, c.Env()); err != nil {
		return nil, err
	}
	user, err := c.Output("id", "-un")
	if err != nil {
		return nil, err
	}
	// Users are the site's: allot adds none to its accounts.
	if _, err := c.Output("sacctmgr", "-i", "add", "user", strings.TrimSpace(user), "account=alpha,beta"); err != nil {
		return nil, err
	}

	d.header("alpha submits two jobs of 2 GPUs: one runs, the other waits on alpha's limit")
	var ids [2]string
	for i := range ids {
		out, err := c.Output("sbatch", "--parsable", "-A", "alpha", "--gres=gpu:h100:2", "--wrap", "sleep 600")
		if err != nil {
			return nil, err
		}
		ids[i] = strings.TrimSpace(out)
	}
	if err := d.waitJob(ctx, c, ids[0], "RUNNING", ""); err != nil {
		return nil, err
	}
	if err := d.waitJob(ctx, c, ids[1], "PENDING", "AssocGrpGRES"); err != nil {
		return nil, err
	}
	res.reason = "AssocGrpGRES"
	d.say("job %s runs; job %s is PENDING (AssocGrpGRES)", ids[0], ids[1])
	d.say("$ allot explain slurm/%s", ids[1])
	if res.explain, err = d.allot(ctx, c.Env(), "explain", "slurm/"+ids[1]); err != nil {
		return nil, err
	}
	d.sayLines(res.explain)

	d.header("A pull request raises alpha to 4 H100; CI posts its plan")
	if _, err := d.repo.git(ctx, "checkout", "-q", "-b", "alpha-4"); err != nil {
		return nil, err
	}
	raised := strings.Replace(slurmRepo, "alpha-leads\"], quota: h100: nominal: 2", "alpha-leads\"], quota: h100: nominal: 4", 1)
	if err := os.WriteFile(filepath.Join(d.repo.dir, "capacity.cue"), []byte(raised), 0o644); err != nil {
		return nil, err
	}
	if _, err := d.repo.commit(ctx, "hpc: alpha 4 H100"); err != nil {
		return nil, err
	}
	d.say("$ allot plan . --base ref:main")
	if res.plan, err = d.allot(ctx, nil, "plan", d.repo.dir, "--base", "ref:main"); err != nil {
		return nil, err
	}
	d.sayLines(res.plan)

	d.header("Merged; allot slurm apply converges the cluster")
	if _, err := d.repo.git(ctx, "checkout", "-q", "main"); err != nil {
		return nil, err
	}
	if _, err := d.repo.git(ctx, "merge", "-q", "--ff-only", "alpha-4"); err != nil {
		return nil, err
	}
	if err := d.slurmApply(ctx, c.Env()); err != nil {
		return nil, err
	}

	d.header("alpha's second job runs")
	if err := d.waitJob(ctx, c, ids[1], "RUNNING", ""); err != nil {
		return nil, err
	}
	res.runningAfter = true
	out, err := c.Output("squeue", "-h", "-o", "%i %a %T %b %N")
	if err != nil {
		return nil, err
	}
	d.say("$ squeue")
	d.sayLines(out)
	fmt.Fprintf(o.out, "\n[%5.1fs] Done.\n", d.elapsed())
	return res, nil
}

// slurmApply runs allot slurm apply on the repository's main and prints
// what it changed.
func (d *demo) slurmApply(ctx context.Context, env []string) error {
	d.say("$ allot slurm apply . --cluster hpc")
	out, err := d.allot(ctx, env, "slurm", "apply", d.repo.dir, "--cluster", "hpc")
	d.sayLines(out)
	return err
}

// allot runs the allot binary with env (nil: the demo's) and returns what
// it printed, stdout then stderr.
func (d *demo) allot(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, d.bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("allot %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String() + errOut.String(), nil
}

// sayLines prints each line of s in the current step.
func (d *demo) sayLines(s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		d.say("  %s", l)
	}
}

// waitJob waits until Slurm's job id is in state (and pends for reason,
// when set).
func (d *demo) waitJob(ctx context.Context, c *slurmtest.Cluster, id, state, reason string) error {
	return d.waitUntil(ctx, 60*time.Second, "job "+id+" not "+state, func(context.Context) (bool, string, error) {
		out, err := c.Output("squeue", "-h", "-j", id, "-o", "%T|%r")
		if err != nil {
			return false, "", err
		}
		got, why, _ := strings.Cut(strings.TrimSpace(out), "|")
		return got == state && (reason == "" || why == reason), strings.TrimSpace(out), nil
	})
}
