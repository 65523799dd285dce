package capacity_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/planner/tfrun/statetest"
)

// smallRepo is a capacity repository of one pool and the teams given (name:
// nominal GPUs of flavor <prefix>-gpu), every name prefixed so that tests
// sharing the suite's API server do not meet.
func smallRepo(prefix string, teams map[string]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `package capacity

clusters: "%[1]s-lab": {provider: "kwok"}

pools: "%[1]s-pool": {
	cluster:     "%[1]s-lab"
	flavor:      "%[1]s-gpu"
	gpusPerNode: 8
	nodes: {min: 0, max: 64}
	price: {onDemandPerNodeHour: 10}
}

tiers: "%[1]s-tier": {priority: 42}
`, prefix)
	for name, nominal := range teams {
		fmt.Fprintf(&b, "\nteams: %q: {costCenter: \"CC-1\", owners: [\"@o\"], quota: %q: {nominal: %d}}\n", name, prefix+"-gpu", nominal)
	}
	return b.String()
}

// newSource creates a CapacitySource of the main branch of repo, checked
// every second, at path.
func newSource(t *testing.T, name string, repo *gitRepo, path string) types.NamespacedName {
	t.Helper()
	newNamespace(t, "hostile")
	key := types.NamespacedName{Namespace: "hostile", Name: name}
	createSource(t, env.Client, key, repo, path, time.Second)
	deleteAtCleanup(t, &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	return key
}

// createSource creates the CapacitySource key of the main branch of repo at
// path.
func createSource(t *testing.T, c client.Client, key types.NamespacedName, repo *gitRepo, path string, interval time.Duration) {
	t.Helper()
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	src.Spec.URL = "file://" + repo.dir
	src.Spec.Ref = &allotv1.GitReference{Branch: "main"}
	src.Spec.Path = path
	src.Spec.Interval = metav1.Duration{Duration: interval}
	if err := c.Create(context.Background(), src); err != nil {
		t.Fatal(err)
	}
}

// A revision whose errors are huge (values of 40 KB where numbers belong,
// in more files than the findings kept) is still reported: Stalled, its
// findings in the status (bounded, so that the status fits in the API
// server), the Ready condition naming the first positions and the revision in
// force, and a ValidationFailed event (whose note the API server bounds to
// 1 KB) — an unbounded message made the status patch fail, and left the
// source saying it was reconciling the last good revision forever.
func TestHugeErrorsAreReported(t *testing.T) {
	repo := newGitRepo(t)
	repo.write("capacity.cue", smallRepo("huge", map[string]int{"huge-a": 16}))
	good := repo.commit("good")
	key := newSource(t, "huge", repo, "")
	waitRevision(t, key, good, true)

	big := strings.Repeat("y", 40<<10)
	for i := range 60 {
		repo.write(fmt.Sprintf("teams/t%02d.cue", i), fmt.Sprintf("package capacity\n\nteams: \"huge-a\": costCenter: %q\nteams: \"huge-b%d\": {costCenter: \"CC\", quota: \"huge-gpu\": {nominal: %q}}\n", big, i, big))
	}
	bad := repo.commit("huge values")
	s := waitRevision(t, key, bad, false)
	if !conditions.IsStalled(s) || conditions.GetReason(s, allotv1.StalledCondition) != capacity.ReasonValidationFailed {
		t.Errorf("Stalled = %v (%s), want True ValidationFailed", conditions.IsStalled(s), conditions.GetReason(s, allotv1.StalledCondition))
	}
	if !strings.HasSuffix(s.Status.LastAppliedRevision, good) {
		t.Errorf("lastAppliedRevision = %q, want the last good %s", s.Status.LastAppliedRevision, good)
	}
	msg := conditions.GetMessage(s, allotv1.ReadyCondition)
	if !strings.Contains(msg, "teams/t00.cue:") || !strings.Contains(msg, good+" stays in force") {
		t.Errorf("Ready message (%d bytes) lacks the first position or the revision in force: %.300s", len(msg), msg)
	}
	if len(s.Status.Findings) == 0 {
		t.Fatal("no findings")
	}
	for _, f := range s.Status.Findings {
		if len(f.Message) > 4096 {
			t.Errorf("finding %s:%d of %d bytes: %.100s...", f.File, f.Line, len(f.Message), f.Message)
			break
		}
	}
	waitEvent(t, env.Client, key, capacity.ReasonValidationFailed, bad[:12])
	if got := getTeam(t, "huge-a").Spec.Quota[0].Nominal; got != 16 {
		t.Errorf("huge-a nominal = %d, want 16 (the last good revision)", got)
	}
}

// A spec.path that goes through a directory the repository made a symbolic
// link to somewhere outside the checkout reads nothing there: the fetch fails
// naming the link, and nothing of the outside files is applied. (The link
// points at a capacity repository, as one on the manager's disk would be.)
func TestPathThroughALinkOutOfTheCheckout(t *testing.T) {
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "capacity"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "capacity", "capacity.cue"), []byte(smallRepo("outside", map[string]int{"outsider": 8})), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := newGitRepo(t)
	repo.write("README.md", "capacity\n")
	if err := os.Symlink(outside, filepath.Join(repo.dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	repo.commit("deploy is a link out")
	key := newSource(t, "linked", repo, "deploy/capacity")
	msg := waitFetchFailed(t, key, "")
	if !strings.Contains(msg, "deploy") || !strings.Contains(msg, "link") {
		t.Errorf("Ready message %q does not name the link", msg)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "outsider"}, &allotv1.Team{}); !apierrors.IsNotFound(err) {
		t.Errorf("Team outsider, from a file outside the checkout: err = %v, want NotFound", err)
	}
}

// The API server refuses one object of a revision (here a platform's
// admission policy: no quota above 64 GPUs a flavor). The revision also adds
// a tier and a team namespace, grows the pool and raises another team's
// quota: none of it is applied, not only the step of the refused object;
// Ready says which object and why, and the last good revision stays in force.
// Once the policy allows it, the revision is applied whole.
func TestRefusedObjectAppliesNothing(t *testing.T) {
	ctx := context.Background()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded-quota-cap"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{allotv1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"teams"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: "!object.metadata.name.startsWith('guarded-') || object.spec.quota.all(q, q.nominal <= 64)",
				Message:    "the platform allows at most 64 GPUs of a flavor per team",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded-quota-cap"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, o) })
	}
	// The policy is in force once a dry run of a refused Team fails.
	eventually(t, 30*time.Second, "the policy in force", func() error {
		team := &allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "guarded-probe"},
			Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "x", Nominal: 65}}}}
		if err := env.Client.Create(ctx, team, client.DryRunAll); err == nil {
			return fmt.Errorf("a Team of 65 GPUs was accepted")
		}
		return nil
	})

	repo := newGitRepo(t)
	repo.write("capacity.cue", smallRepo("guarded", map[string]int{"guarded-a": 16}))
	good := repo.commit("good")
	key := newSource(t, "guarded", repo, "")
	waitRevision(t, key, good, true)
	var pool allotv1.Pool
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "guarded-pool"}, &pool); err != nil {
		t.Fatal(err)
	}
	before := pool.Spec.NodesTarget

	repo.write("capacity.cue", smallRepo("guarded", map[string]int{"guarded-a": 32, "guarded-b": 128})+
		"\ntiers: \"guarded-tier2\": {priority: 7}\n")
	bad := repo.commit("guarded-b: 128 GPUs")
	var msg string
	eventually(t, 30*time.Second, "Ready=False ApplyFailed", func() error {
		s := getSource(t, key)
		msg = conditions.GetMessage(s, allotv1.ReadyCondition)
		if !strings.HasSuffix(s.Status.LastAttemptedRevision, bad) || conditions.IsReady(s) || conditions.GetReason(s, allotv1.ReadyCondition) != capacity.ReasonApplyFailed {
			return fmt.Errorf("ready=%v %s: %s", conditions.IsReady(s), conditions.GetReason(s, allotv1.ReadyCondition), msg)
		}
		return nil
	})
	if !strings.Contains(msg, "guarded-b") || !strings.Contains(msg, "at most 64 GPUs") || !strings.Contains(msg, good+" stays in force") {
		t.Errorf("Ready message %q does not name the refused object, why, and the revision in force", msg)
	}
	if s := getSource(t, key); !strings.HasSuffix(s.Status.LastAppliedRevision, good) {
		t.Errorf("lastAppliedRevision = %q, want %s", s.Status.LastAppliedRevision, good)
	}
	nothing := func(what string, obj client.Object) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKey{Name: obj.GetName()}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s of the refused revision: err = %v, want NotFound", what, obj.GetName(), err)
		}
	}
	nothing("Namespace", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "guarded-b"}})
	nothing("Tier", &allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "guarded-tier2"}})
	nothing("PriorityClass", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "guarded-tier2"}})
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "guarded-pool"}, &pool); err != nil || pool.Spec.NodesTarget != before {
		t.Errorf("pool guarded-pool: %d nodes (%v), want %d: grown for a refused revision", pool.Spec.NodesTarget, err, before)
	}
	if got := getTeam(t, "guarded-a").Spec.Quota[0].Nominal; got != 16 {
		t.Errorf("guarded-a nominal = %d, want 16", got)
	}

	if err := env.Client.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the revision applied once allowed", func() error {
		s := getSource(t, key)
		if !strings.HasSuffix(s.Status.LastAppliedRevision, bad) || !conditions.IsReady(s) {
			return fmt.Errorf("applied %q: %s", s.Status.LastAppliedRevision, conditions.GetMessage(s, allotv1.ReadyCondition))
		}
		return nil
	})
	if got := getTeam(t, "guarded-b").Spec.Quota[0].Nominal; got != 128 {
		t.Errorf("guarded-b nominal = %d, want 128", got)
	}
}

// twoPools is a capacity repository of two pools, p (flavor f) and q (flavor
// g), and the teams given with their quotas of each flavor (0: none).
func twoPools(teams map[string][2]int) string {
	var b strings.Builder
	b.WriteString(`package capacity

clusters: lab: {provider: "kwok"}

pools: p: {cluster: "lab", flavor: "f", gpusPerNode: 8, nodes: {min: 0, max: 8}, price: {onDemandPerNodeHour: 10}}
pools: q: {cluster: "lab", flavor: "g", gpusPerNode: 8, nodes: {min: 0, max: 8}, price: {onDemandPerNodeHour: 10}}

tiers: production: {priority: 500}
`)
	for name, q := range teams {
		fmt.Fprintf(&b, "\nteams: %s: {costCenter: \"CC-1\", owners: [\"@o\"], quota: {", name)
		if q[0] > 0 {
			fmt.Fprintf(&b, "f: {nominal: %d}, ", q[0])
		}
		if q[1] > 0 {
			fmt.Fprintf(&b, "g: {nominal: %d}", q[1])
		}
		b.WriteString("}}\n")
	}
	return b.String()
}

// stopsAt is the capacity of a manager that stops (its process killed, its
// leadership lost) while it resizes the pools of a phase: the reconcile's
// context ends there, and nothing after it runs, the status patch included.
type stopsAt struct {
	phase capacity.Phase
	stop  context.CancelFunc
}

func (c stopsAt) Resize(ctx context.Context, _ *allotv1.CapacitySource, _ capacity.Revision, step capacity.Step) error {
	if c.stop != nil && step.Phase == c.phase {
		c.stop()
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// The manager stops in the middle of a revision, after it applied a new
// team's Namespace and Team, before it could record them in the inventory
// (the shrink of another pool was under way). The next manager finds them
// its own: if the revision was reverted meanwhile, they are pruned (a Team
// Git no longer declares would keep its quota in force); if the revision
// stands, it is applied without taking its own Namespace for another
// source's.
func TestStoppedMidRevision(t *testing.T) {
	tenv := testenv.Start(t)
	c := tenv.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	repo := newGitRepo(t)
	repo.write("capacity.cue", twoPools(map[string][2]int{"alpha": {16, 16}}))
	good := repo.commit("alpha")
	key := types.NamespacedName{Namespace: "gitops", Name: "restart"}
	createSource(t, c, key, repo, "", time.Minute)
	// reconcile runs one reconcile of a fresh manager, which stops in phase
	// when one is given.
	reconcile := func(phase capacity.Phase) (*allotv1.CapacitySource, error) {
		t.Helper()
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		capa := stopsAt{}
		if phase != "" {
			capa = stopsAt{phase: phase, stop: stop}
		}
		r := &capacity.Reconciler{Client: c, Fetcher: capacity.Sources{Git: &capacity.GitFetcher{Dir: t.TempDir()}}, Capacity: capa}
		_, err := r.Reconcile(rctx, ctrl.Request{NamespacedName: key})
		return getSourceOf(t, c, key), err
	}
	applied := func(rev string) *allotv1.CapacitySource {
		t.Helper()
		s, err := reconcile("")
		if err != nil || !conditions.IsReady(s) || !strings.HasSuffix(s.Status.LastAppliedRevision, rev) {
			t.Fatalf("reconcile of %s: %v; applied %s: %s", rev, err, s.Status.LastAppliedRevision, conditions.GetMessage(s, allotv1.ReadyCondition))
		}
		for _, f := range s.Status.Findings {
			if f.Rule == "not-adopted" {
				t.Errorf("finding %+v: the source's own object taken for another's", f)
			}
		}
		return s
	}
	// stopped applies rev until the manager stops in the shrink phase, then
	// checks that team's Team and Namespace are there, and not in the
	// inventory.
	stopped := func(rev, team string) {
		t.Helper()
		s, err := reconcile(capacity.PhaseShrink)
		if err == nil {
			t.Fatal("the stopped reconcile returned no error")
		}
		if strings.HasSuffix(s.Status.LastAttemptedRevision, rev) || slices.Contains(s.Status.Inventory, "Team/"+team) {
			t.Fatalf("the stopped reconcile wrote its status: attempted %s, inventory %v", s.Status.LastAttemptedRevision, s.Status.Inventory)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: team}, &allotv1.Team{}); err != nil {
			t.Fatalf("Team %s, applied before the stop: %v", team, err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: team}, &corev1.Namespace{}); err != nil {
			t.Fatalf("Namespace %s, applied before the stop: %v", team, err)
		}
	}
	applied(good)

	// beta comes, and pool q goes down (alpha leaves flavor g): stopped in
	// the shrink; the revision is reverted before the next manager runs.
	repo.write("capacity.cue", twoPools(map[string][2]int{"alpha": {16, 0}, "beta": {8, 0}}))
	stopped(repo.commit("beta"), "beta")
	repo.write("capacity.cue", twoPools(map[string][2]int{"alpha": {16, 16}}))
	s := applied(repo.commit("revert beta"))
	if err := c.Get(ctx, client.ObjectKey{Name: "beta"}, &allotv1.Team{}); !apierrors.IsNotFound(err) {
		t.Errorf("Team beta of the reverted revision: err = %v, want NotFound (pruned)", err)
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "beta"}, &ns); !apierrors.IsNotFound(err) && (err != nil || ns.DeletionTimestamp == nil) {
		t.Errorf("Namespace beta of the reverted revision: err = %v, want it pruned", err)
	}
	if slices.ContainsFunc(s.Status.Inventory, func(e string) bool { return strings.HasSuffix(e, "/beta") }) {
		t.Errorf("inventory %v names beta", s.Status.Inventory)
	}

	// gamma comes, stopped in the same place; the revision stands.
	repo.write("capacity.cue", twoPools(map[string][2]int{"alpha": {16, 0}, "gamma": {8, 0}}))
	rev := repo.commit("gamma")
	stopped(rev, "gamma")
	s = applied(rev)
	for _, e := range []string{"Namespace/gamma", "Team/gamma"} {
		if !slices.Contains(s.Status.Inventory, e) {
			t.Errorf("inventory %v lacks %s", s.Status.Inventory, e)
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "gamma"}, &ns); err != nil || ns.Labels[capacity.LabelSourceName] != key.Name {
		t.Errorf("Namespace gamma: %v, labels %v", err, ns.Labels)
	}
}

// Terraform's environment comes from a Secret (cloud credentials, TF_VAR_*),
// and the node hook of an onprem pool fails the way a cloud CLI does, printing
// the request with the token it sent. The failure is reported (Ready, an
// event, the error the controller logs, the manager's log of terraform's
// output) with what the hook said, but not one of the Secret's values, nor
// the state backend's password.
func TestTerraformCredentialsStayOut(t *testing.T) {
	tenv := testenv.Start(t)
	c := tenv.Client
	ctx := context.Background()
	const token, password, keyLine = "tok-3f9c1e7a5b", "b4ckend-pa55", "-----PRIVATE b64 KEY LINE 9Zq-----"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "tf-env"}, StringData: map[string]string{
		"CLOUD_TOKEN":     token,
		"TF_VAR_run_id":   "run-" + token,
		"GOOGLE_KEY_FILE": "{\n  \"type\": \"service_account\",\n  \"private_key\": \"" + keyLine + "\"\n}\n",
	}}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops"}}, secret} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	hook := filepath.Join(t.TempDir(), "hook")
	script := `#!/bin/sh
echo "creating $ALLOT_NODE: POST https://cloud.example/v1/nodes?access_token=$CLOUD_TOKEN (run $TF_VAR_run_id): 403 Forbidden"
echo "debug: key $GOOGLE_KEY_FILE" >&2
exit 1
`
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := statetest.New(t)
	srv.Auth = password
	backend := srv.Backend()
	backend.Config["username"], backend.Config["password"] = "allot", password

	cs := kubernetes.NewForConfigOrDie(tenv.Config)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	stop := make(chan struct{})
	broadcaster.StartRecordingToSink(stop)
	t.Cleanup(func() { close(stop); broadcaster.Shutdown() })
	recorder := broadcaster.NewRecorder(tenv.Scheme, "allot-capacity")
	var logged testenv.SyncBuffer
	logger := funcr.New(func(prefix, args string) { fmt.Fprintln(&logged, prefix, args) }, funcr.Options{Verbosity: 1})

	r := &capacity.Reconciler{Client: c, Fetcher: capacity.Sources{Git: &capacity.GitFetcher{Dir: t.TempDir()}}, Recorder: recorder,
		Capacity: &capacity.Terraform{Reader: c, Dir: t.TempDir(), Hook: hook, EnvSecret: client.ObjectKeyFromObject(secret),
			Options: terraform.Options{Backend: backend}, Recorder: recorder, ReadyTimeout: 10 * time.Second}}
	repo := newGitRepo(t)
	repo.write("capacity.cue", kwokRepo(16))
	repo.commit("alpha")
	key := types.NamespacedName{Namespace: "gitops", Name: "creds"}
	createSource(t, c, key, repo, "", time.Minute)
	_, err := r.Reconcile(log.IntoContext(ctx, logger), ctrl.Request{NamespacedName: key})
	if err == nil {
		t.Fatal("the reconcile succeeded with a hook that fails")
	}
	secrets := []string{token, password, keyLine}
	clean := func(what, s string) {
		t.Helper()
		for _, v := range secrets {
			if strings.Contains(s, v) {
				t.Errorf("%s carries the credential %q: %s", what, v, s)
			}
		}
	}
	clean("the reconcile's error", err.Error())
	s := getSourceOf(t, c, key)
	msg := conditions.GetMessage(s, allotv1.ReadyCondition)
	if conditions.GetReason(s, allotv1.ReadyCondition) != capacity.ReasonCapacityFailed || !strings.Contains(msg, "node hook failed") || !strings.Contains(msg, "403 Forbidden") {
		t.Errorf("Ready %s: %q, want the hook's failure and what it said", conditions.GetReason(s, allotv1.ReadyCondition), msg)
	}
	clean("the Ready condition", msg)
	note := ""
	eventually(t, 20*time.Second, "a CapacityFailed event", func() error {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(key.Namespace)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == capacity.ReasonCapacityFailed {
				note = e.Note
				return nil
			}
		}
		return fmt.Errorf("%d events, none CapacityFailed", len(evs.Items))
	})
	clean("the CapacityFailed event", note)
	if out := logged.String(); !strings.Contains(out, "403 Forbidden") {
		t.Errorf("the log lacks terraform's output:\n%s", out)
	} else {
		clean("the manager's log", out)
	}
}

// A revision beyond one of schema's bounds of what is read (folders 33
// deep, a 17 MiB .cue file of zeros, 17 KB in Git; the count of files is
// TestReadCUEBounded's: 10,001 files take go-git minutes to clone here) is
// refused as the manager reads its checkout, by the walk schema.Load makes:
// Ready=False and Stalled, reason LimitExceeded, the message naming the
// bound, where the walk stopped, the revision and the one in force, and the
// last good revision stays applied. Before, the manager read such a checkout
// whole (up to 256 MiB, any number of files, any depth) before the loader's
// bounds applied. Once the repository is back within the bounds, its next
// revision is applied.
func TestHostileCheckoutKeepsTheLastGoodRevision(t *testing.T) {
	repo := newGitRepo(t)
	repo.write("capacity.cue", smallRepo("bounded", map[string]int{"bounded-a": 16}))
	good := repo.commit("good")
	key := newSource(t, "bounded", repo, "")
	waitRevision(t, key, good, true)

	for _, tc := range []struct {
		name, path, bound string
		make              func()
	}{
		{"33 folders", strings.Repeat("d/", 33), "folders nest more than 32 levels deep", func() {
			repo.write(strings.Repeat("d/", 33)+"a.cue", "package capacity\n")
		}},
		{"17 MiB", "zeros.cue", "more than 16 MiB", func() {
			f, err := os.Create(filepath.Join(repo.dir, "zeros.cue"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(17 << 20); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.make()
			bad := repo.commit(tc.name)
			s := waitRevision(t, key, bad, false)
			if r := conditions.GetReason(s, allotv1.ReadyCondition); r != capacity.ReasonLimitExceeded || !conditions.IsStalled(s) {
				t.Errorf("Ready reason %s, Stalled %v; want LimitExceeded, Stalled", r, conditions.IsStalled(s))
			}
			msg := conditions.GetMessage(s, allotv1.ReadyCondition)
			for _, want := range []string{strings.TrimSuffix(tc.path, "/"), tc.bound, "rule limit", bad, good + " stays in force"} {
				if !strings.Contains(msg, want) {
					t.Errorf("Ready message %.400q lacks %q", msg, want)
				}
			}
			if len(s.Status.Findings) != 1 || s.Status.Findings[0].Rule != "limit" || !strings.Contains(s.Status.Findings[0].Message, tc.bound) {
				t.Errorf("findings %+v, want one of rule limit: %s", s.Status.Findings, tc.bound)
			}
			if !strings.HasSuffix(s.Status.LastAppliedRevision, good) {
				t.Errorf("lastAppliedRevision = %q, want the last good %s", s.Status.LastAppliedRevision, good)
			}
			if got := getTeam(t, "bounded-a").Spec.Quota[0].Nominal; got != 16 {
				t.Errorf("bounded-a nominal = %d, want 16 (the last good revision)", got)
			}
			waitEvent(t, env.Client, key, capacity.ReasonLimitExceeded, bad[:12])
			repo.git("rm", "-r", "-q", strings.Split(tc.path, "/")[0])
		})
	}
	repo.write("capacity.cue", smallRepo("bounded", map[string]int{"bounded-a": 24}))
	next := repo.commit("within the bounds again")
	waitRevision(t, key, next, true)
	if got := getTeam(t, "bounded-a").Spec.Quota[0].Nominal; got != 24 {
		t.Errorf("bounded-a nominal = %d, want 24 (the revision within the bounds)", got)
	}
}
