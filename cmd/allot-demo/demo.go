package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
	"github.com/allot-dev/allot/schema/source"
)

// Bounds on what the demo waits for.
const (
	managerReadyTimeout = 30 * time.Second
	applyTimeout        = 60 * time.Second
	settleTimeout       = 30 * time.Second
	pollEvery           = 200 * time.Millisecond
)

// The CapacitySource the demo creates, and where the repository sits in Git.
const (
	sourceNamespace = "allot-system"
	sourceName      = "examples"
	repoPath        = "examples"
)

// The quota change the demo commits: platform's H100 quota (no cohort, so no
// borrowing) is doubled, with the budget that pays for it, so that the gang
// change.workload, over quota until then, runs; and the lab team's L4 quota is
// doubled, which needs its Terraform-made pool grown first (labWorkload).
var change = struct {
	message, workload string
	// edits are the replacements per file.
	edits map[string][][2]string
}{
	message:  "platform: 32 H100 for the eval gang; lab: 32 L4",
	workload: "platform/eval",
	edits: map[string][][2]string{
		"teams/platform.cue": {
			{`"h100-80gb": {nominal: 16}`, `"h100-80gb": {nominal: 32}`},
			{"monthlyUSD: 100000", "monthlyUSD: 150000"},
		},
		labTeamFile: {{`quota: l4: {nominal: 16}`, `quota: l4: {nominal: 32}`}},
	},
}

// The simulated lab the demo adds to the repository: a kwok cluster whose
// pool Terraform makes (the manager runs with --terraform-clusters lab, and
// the kwok module's node hook creates the Node objects), so that a quota
// raise grows capacity first. The cluster and pool are the platform's file,
// the team its own (rule file-scope).
const (
	labCluster  = "lab"
	labFile     = "lab.cue"
	labTeamFile = "teams/lab.cue"
	labWorkload = "lab/finetune"
	labCUE      = `package capacity

// A simulated lab: a kwok cluster whose nodes Terraform creates as Node
// objects through allot's node hook (the demo's manager runs Terraform for
// this cluster only). The price is a nominal one for the demo.
clusters: lab: {provider: "kwok"}

pools: "lab-l4": {
	cluster:     "lab"
	flavor:      "l4"
	gpusPerNode: 8
	nodes: {min: 0, max: 8}
	price: onDemandPerNodeHour: 8.00
	// A node unusable for 5 seconds is replaced, within nodes.max.
	` + labRepair + `
}
`
	labTeamCUE = `package capacity

teams: lab: {
	costCenter: "CC-0002"
	owners: ["@acme/ml-platform"]
	quota: l4: {nominal: 16}
	budget: monthlyUSD: 60000
}
`
)

// result is what the demo saw, for its test.
type result struct {
	before, after *snapshot
	// revisions are the applied revisions before and after the change.
	revisions [2]string
	plan      string
	dir       string
	// repair are the lab pool's repair events, in order, and retired the
	// node it retired.
	repair  []string
	retired string
}

// errInterrupted ends the demo on SIGINT or SIGTERM, after cleaning up.
var errInterrupted = errors.New("interrupted")

// demo is one run: what it started, and how to stop it.
type demo struct {
	o       options
	started time.Time
	step    int
	dir     string
	env     *testenv.Env
	c       client.Client
	mgr     *manager
	// bin is the allot binary's absolute path.
	bin     string
	repo    gitRepo
	cleanup []func() string
	res     result
}

// run runs the demo until it ends, fails or ctx ends, and stops all it started.
func run(ctx context.Context, o options) (_ *result, err error) {
	d := &demo{o: o, started: time.Now()}
	// The demo's own client logs nothing: what matters is printed, and the
	// manager's logs are its own.
	ctrl.SetLogger(logr.Discard())
	defer d.stopAll(ctx, &err)
	if err := d.findBinary(); err != nil {
		return nil, err
	}
	fmt.Fprintln(o.out, "allot demo: the example organisation, GitOps and the embedded scheduler on a local control plane")
	for _, s := range []func(context.Context) error{
		d.startControlPlane,
		d.createRepository,
		d.startManager,
		d.applySource,
		d.createNodes,
		d.submit,
		func(ctx context.Context) error {
			s, err := d.showScheduling(ctx, "The scheduling", nil)
			d.res.before = s
			return err
		},
		d.commitChange,
		d.applyChange,
		func(ctx context.Context) error {
			s, err := d.showScheduling(ctx, "The scheduling after the change", d.res.before)
			d.res.after = s
			return err
		},
		d.heal,
	} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s(ctx); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(o.out, "\n[%5.1fs] Done.\n", d.elapsed())
	return &d.res, nil
}

// stopAll stops what the demo started, last first, and says so; an error of
// an interrupted demo becomes errInterrupted.
func (d *demo) stopAll(ctx context.Context, err *error) {
	var done []string
	for _, f := range slices.Backward(d.cleanup) {
		done = append(done, f())
	}
	if len(done) > 0 {
		fmt.Fprintf(d.o.out, "\n[%5.1fs] Cleaned up: %s.\n", d.elapsed(), strings.Join(done, ", "))
	}
	if ctx.Err() != nil && *err != nil {
		*err = errInterrupted
	}
}

// findBinary sets d.bin to the allot binary's absolute path.
func (d *demo) findBinary() error {
	bin, err := filepath.Abs(d.o.allot)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		return fmt.Errorf("the allot binary %s is missing: run 'make build' or pass --allot", d.o.allot)
	}
	d.bin = bin
	return nil
}

func (d *demo) elapsed() float64 { return time.Since(d.started).Seconds() }

// header starts a numbered step.
func (d *demo) header(title string) {
	d.step++
	fmt.Fprintf(d.o.out, "\n[%5.1fs] %d. %s\n", d.elapsed(), d.step, title)
}

// say prints a line of the current step.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintln(d.o.out, strings.TrimRight("         "+fmt.Sprintf(format, args...), " "))
}

// onCleanup registers f, which stops something and says what; they run last
// registered first.
func (d *demo) onCleanup(f func() string) { d.cleanup = append(d.cleanup, f) }

// waitUntil polls check until it is done, or returns an error that waiting
// cannot mend. It fails with "<what> after <timeout>: <detail>" when the time
// runs out, with the manager's last words when it exited, and with ctx's error
// when the demo is interrupted.
func (d *demo) waitUntil(ctx context.Context, timeout time.Duration, what string, check func(context.Context) (done bool, detail string, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, detail, err := check(ctx)
		if done || err != nil {
			return err
		}
		if d.mgr != nil {
			if err := d.mgr.gone(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s after %ds: %s", what, int(timeout.Seconds()), oneLine(detail))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// oneLine joins a multi-line message into one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (d *demo) startControlPlane(ctx context.Context) error {
	d.header("Start the control plane (kube-apiserver and etcd from bin/, allot's CRDs)")
	dir, err := os.MkdirTemp("", "allot-demo-")
	if err != nil {
		return err
	}
	d.dir, d.res.dir = dir, dir
	d.onCleanup(func() string {
		os.RemoveAll(dir)
		return "removed " + dir
	})
	env, stop, err := testenv.StartMain()
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	d.onCleanup(func() string {
		if err := stop(); err != nil {
			return "stopping the control plane: " + err.Error()
		}
		return "stopped the control plane"
	})
	d.env, d.c = env, env.Client
	d.say("API server %s", env.Config.Host)
	return ctx.Err()
}

func (d *demo) createRepository(ctx context.Context) error {
	d.header("Put examples/ in a local Git repository")
	d.repo = gitRepo{dir: filepath.Join(d.dir, "capacity")}
	if err := copyTree(d.o.examples, filepath.Join(d.repo.dir, repoPath)); err != nil {
		return fmt.Errorf("copying %s: %w", d.o.examples, err)
	}
	for name, text := range map[string]string{labFile: labCUE, labTeamFile: labTeamCUE} {
		if err := os.WriteFile(filepath.Join(d.repo.dir, repoPath, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	if _, err := d.repo.git(ctx, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	head, err := d.repo.commit(ctx, "the example organisation")
	if err != nil {
		return err
	}
	d.say("%s: commit %s on main (with %s and %s, a kwok lab cluster whose nodes Terraform makes, and its team)", d.repo.dir, head[:7], labFile, labTeamFile)
	return nil
}

func (d *demo) startManager(ctx context.Context) error {
	d.header("Start allot manager (GitOps reconciler and embedded scheduler)")
	kubeconfig := filepath.Join(d.dir, "kubeconfig")
	if err := d.env.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	m, err := startManager(d.bin, kubeconfig, d.dir)
	if err != nil {
		return err
	}
	d.mgr = m
	d.onCleanup(func() string {
		m.stop()
		return fmt.Sprintf("stopped allot manager (pid %d)", m.cmd.Process.Pid)
	})
	err = d.waitUntil(ctx, managerReadyTimeout, "allot manager not ready", func(ctx context.Context) (bool, string, error) {
		return m.ready(ctx), "last log: " + m.lastLog(), nil
	})
	if err != nil {
		return err
	}
	d.say("%s manager --kubeconfig %s --leader-elect=false ... (pid %d)", d.o.allot, kubeconfig, m.cmd.Process.Pid)
	return nil
}

func (d *demo) sourceKey() client.ObjectKey {
	return client.ObjectKey{Namespace: sourceNamespace, Name: sourceName}
}

// waitApplied waits until the CapacitySource has applied rev and is Ready.
func (d *demo) waitApplied(ctx context.Context, rev string) (*allotv1.CapacitySource, error) {
	src := &allotv1.CapacitySource{}
	err := d.waitUntil(ctx, applyTimeout, "CapacitySource not Ready", func(ctx context.Context) (bool, string, error) {
		if err := d.c.Get(ctx, d.sourceKey(), src); err != nil {
			return false, err.Error(), nil
		}
		msg := conditions.GetMessage(src, allotv1.ReadyCondition)
		if msg == "" {
			msg = "no Ready condition yet"
		}
		attempted := strings.HasSuffix(src.Status.LastAttemptedRevision, rev)
		if attempted && conditions.IsStalled(src) {
			// Stalled waits for a new revision: there is nothing to wait for.
			return false, "", fmt.Errorf("CapacitySource stalled on %s: %s", rev[:7], oneLine(msg))
		}
		ok := attempted && strings.HasSuffix(src.Status.LastAppliedRevision, rev) && conditions.IsReady(src) && !conditions.IsReconciling(src)
		return ok, msg, nil
	})
	return src, err
}

// sayApplied prints the source's Ready message and plan summary.
func (d *demo) sayApplied(src *allotv1.CapacitySource, note string) {
	d.say("capacitysource/%s: %s%s", sourceName, conditions.GetMessage(src, allotv1.ReadyCondition), note)
	if p := src.Status.Plan; p != nil {
		cost := "$" + string(p.MonthlyUSD)
		if m, err := quantity.Parse(string(p.MonthlyUSD)); err == nil {
			cost = quantity.USD(m)
		}
		d.say("plan: %d teams, %d pools, %d nodes, %d GPUs, %s a month", p.Teams, p.Pools, p.Nodes, p.GPUs, cost)
	}
}

func (d *demo) applySource(ctx context.Context) error {
	d.header("Create a CapacitySource for the repository and wait until it is applied")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sourceNamespace}}
	if err := d.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: sourceNamespace, Name: sourceName}}
	src.Spec.URL = "file://" + d.repo.dir
	src.Spec.Ref = &allotv1.GitReference{Branch: "main"}
	src.Spec.Path = repoPath
	src.Spec.Interval = metav1.Duration{Duration: 10 * time.Second}
	if err := d.c.Create(ctx, src); err != nil {
		return err
	}
	head, err := d.repo.git(ctx, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if src, err = d.waitApplied(ctx, head); err != nil {
		return err
	}
	d.res.revisions[0] = src.Status.LastAppliedRevision
	d.sayApplied(src, "")
	kinds := map[string]int{}
	for _, o := range src.Status.Inventory {
		kind, _, _ := strings.Cut(o, "/")
		kinds[kind]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
	}
	d.say("applied: %s", strings.Join(parts, ", "))
	return nil
}

// ensureNodes creates the Node objects of every Pool the cluster has, up to the
// pool's nodesTarget and at most maxNodes, laid out as fleet lays pools out. It
// returns the pools and how many nodes each has.
func (d *demo) ensureNodes(ctx context.Context) ([]allotv1.Pool, map[string]int64, error) {
	fsys, err := source.Dir(filepath.Join(d.repo.dir, repoPath))
	if err != nil {
		return nil, nil, err
	}
	cfg, findings := schema.Load(fsys)
	if findings.HasErrors() {
		return nil, nil, fmt.Errorf("loading the capacity repository: %v", findings)
	}
	var pools allotv1.PoolList
	if err := d.c.List(ctx, &pools); err != nil {
		return nil, nil, err
	}
	counts := map[schema.PoolName]int64{}
	have := map[string]int64{}
	for _, p := range pools.Items {
		if p.Spec.Cluster == labCluster {
			// Terraform made these.
			var nodes corev1.NodeList
			if err := d.c.List(ctx, &nodes, client.MatchingLabels{contract.LabelPool: p.Name}); err != nil {
				return nil, nil, err
			}
			have[p.Name] = int64(len(nodes.Items))
			continue
		}
		counts[schema.PoolName(p.Name)] = min(p.Spec.NodesTarget, d.o.maxNodes)
	}
	for _, n := range fleet.Layout(cfg, counts) {
		have[string(n.Pool)]++
		err := d.c.Get(ctx, client.ObjectKey{Name: n.Name}, &corev1.Node{})
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		if _, err := testenv.CreateNode(ctx, d.c, n.Name, n.GPUs, n.Labels()); err != nil {
			return nil, nil, fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}
	return pools.Items, have, nil
}

func (d *demo) createNodes(ctx context.Context) error {
	d.header("Create the pools' nodes (Ready Node objects with allot's pool, flavor and topology labels)")
	pools, have, err := d.ensureNodes(ctx)
	if err != nil {
		return err
	}
	var declared, created int64
	clusters := map[string]bool{}
	tw := newTable(d.o.out, "POOL", "FLAVOR", "NODES", "GPUS", "TOPOLOGY")
	for _, p := range pools {
		declared += p.Spec.NodesTarget
		clusters[p.Spec.Cluster] = true
		created += have[p.Name]
		var levels []string
		if p.Spec.Topology != nil {
			for _, l := range p.Spec.Topology.Levels {
				levels = append(levels, l.Name)
			}
		}
		topo := strings.Join(levels, " > ")
		if topo == "" {
			topo = "-"
		}
		made := fmt.Sprintf("%d of %d", have[p.Name], p.Spec.NodesTarget)
		if p.Spec.Cluster == labCluster {
			made += " by Terraform"
		}
		tw.row(p.Name, p.Spec.Flavor, made, have[p.Name]*p.Spec.GPUsPerNode, topo)
	}
	tw.flush()
	if created < declared {
		d.say("%d of the %d nodes the plan sizes: at most %d per pool keeps the demo small (--max-nodes-per-pool).", created, declared, d.o.maxNodes)
	}
	if len(clusters) > 1 {
		d.say("The examples declare %d clusters; here the nodes of all of them share one API server.", len(clusters))
	}
	return nil
}

func (d *demo) submit(ctx context.Context) error {
	d.header("Submit a mixed workload (pods with schedulerName allot, in the teams' namespaces)")
	tw := newTable(d.o.out, "WORKLOAD", "TIER", "PODS", "FLAVOR", "TOPOLOGY", "NOTE")
	for _, j := range workload {
		if err := j.create(ctx, d.c); err != nil {
			return fmt.Errorf("submitting %s: %w", j.id(), err)
		}
		topo := "-"
		if j.require != "" {
			topo = "require " + j.require
		}
		tw.row(j.id(), j.tier, fmt.Sprintf("%d×%d GPU", j.pods, j.gpus), j.flavor, topo, j.note)
	}
	tw.flush()
	return nil
}

// showScheduling waits until the scheduling settled and prints it, and what
// changed since before when before is set.
func (d *demo) showScheduling(ctx context.Context, title string, before *snapshot) (*snapshot, error) {
	d.header(title)
	var s *snapshot
	var last string
	stable := 0
	err := d.waitUntil(ctx, settleTimeout, "scheduling not settled", func(ctx context.Context) (bool, string, error) {
		cur, detail, err := d.snapshot(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		if detail != "" {
			stable, last = 0, ""
			return false, detail, nil
		}
		// Settled: consistent, and the same over a second of polls.
		if text := cur.String(); text == last {
			stable++
		} else {
			stable, last = 0, text
		}
		s = cur
		return stable >= 4, "still changing", nil
	})
	if err != nil {
		return nil, err
	}
	s.print(d.o.out)
	if before != nil {
		fmt.Fprintln(d.o.out)
		d.say("What changed:")
		for _, l := range s.changes(before) {
			d.say("  %s", l)
		}
	}
	return s, nil
}

func (d *demo) commitChange(ctx context.Context) error {
	d.header(fmt.Sprintf("Commit a quota change: %q", change.message))
	for _, file := range slices.Sorted(maps.Keys(change.edits)) {
		path := filepath.Join(d.repo.dir, repoPath, file)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		body := string(b)
		for _, e := range change.edits[file] {
			if !strings.Contains(body, e[0]) {
				return fmt.Errorf("%s/%s no longer holds %s: update the demo's change", repoPath, file, e[0])
			}
			body = strings.Replace(body, e[0], e[1], 1)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return err
		}
	}
	if _, err := d.repo.commit(ctx, change.message); err != nil {
		return err
	}
	diff, err := d.repo.git(ctx, "diff", "-U0", "HEAD~1", "--", repoPath)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(diff, "\n") {
		if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") {
			d.say("%s", l)
		}
	}
	fmt.Fprintln(d.o.out)
	d.say("$ allot plan %s --base HEAD~1", repoPath)
	cmd := exec.CommandContext(ctx, d.bin, "plan", repoPath, "--base", "HEAD~1", "-o", "text")
	cmd.Dir = d.repo.dir
	out, err := cmd.CombinedOutput()
	d.res.plan = string(out)
	lines := planExcerpt(string(out))
	for _, l := range lines {
		d.say("%s", l)
	}
	if err != nil {
		return fmt.Errorf("allot plan --base HEAD~1: %v", err)
	}
	return nil
}

// planExcerpt keeps the plan's first line and its diff against the base.
func planExcerpt(out string) []string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Against ") })
	if i < 0 {
		return lines
	}
	return append([]string{lines[0], "..."}, lines[i:]...)
}

func (d *demo) applyChange(ctx context.Context) error {
	d.header("Wait until the manager applied the new revision")
	head, err := d.repo.git(ctx, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	// Ask for a reconcile now rather than at the next interval, as 'flux
	// reconcile' does.
	src := &allotv1.CapacitySource{}
	if err := d.c.Get(ctx, d.sourceKey(), src); err != nil {
		return err
	}
	patch := client.MergeFrom(src.DeepCopy())
	if src.Annotations == nil {
		src.Annotations = map[string]string{}
	}
	src.Annotations[fluxmeta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	if err := d.c.Patch(ctx, src, patch); err != nil {
		return err
	}
	t0 := time.Now()
	if src, err = d.waitApplied(ctx, head); err != nil {
		return err
	}
	d.res.revisions[1] = src.Status.LastAppliedRevision
	d.sayApplied(src, fmt.Sprintf(" (%.1fs after the request)", time.Since(t0).Seconds()))
	// Pool targets may have moved; the capped nodes follow them.
	if _, _, err := d.ensureNodes(ctx); err != nil {
		return err
	}
	for _, id := range []string{change.workload, labWorkload} {
		err := d.waitUntil(ctx, settleTimeout, id+" still not running after the change", func(ctx context.Context) (bool, string, error) {
			s, _, err := d.snapshot(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			w := s.workload(id)
			if w == nil {
				return false, "", fmt.Errorf("%s was not submitted", id)
			}
			return w.running(), w.reason, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
