package capacity_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/source"
)

// A Git repository holding the examples is applied end to end; a quota raise
// follows; an invalid commit changes nothing and is Stalled with positions; a
// removed team is pruned; a requested reconcile is handled; the metrics say so.
func TestGitOpsEndToEnd(t *testing.T) {
	ctx := context.Background()
	repo := newGitRepo(t)
	repo.copyExamples("fleet")
	repo.write("README.md", "capacity repository\n")
	head := repo.commit("examples")

	newNamespace(t, "gitops")
	key := types.NamespacedName{Namespace: "gitops", Name: "fleet"}
	src := &allotv1.CapacitySource{}
	src.Namespace, src.Name = key.Namespace, key.Name
	src.Spec.URL = "file://" + repo.dir
	src.Spec.Ref = &allotv1.GitReference{Branch: "main"}
	src.Spec.Path = "fleet"
	src.Spec.Interval = metav1.Duration{Duration: time.Second}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, src)

	// The examples, judged and planned by the same code as the CLI.
	fsys, err := source.Dir(repo.dir + "/fleet")
	if err != nil {
		t.Fatal(err)
	}
	cfg, findings := schema.Load(fsys)
	if findings.HasErrors() {
		t.Fatalf("examples: %v", findings)
	}
	plan := planner.Build(cfg)

	t.Run("applied", func(t *testing.T) {
		s := waitRevision(t, key, head, true)
		if want := "main@sha1:" + head; s.Status.LastAppliedRevision != want {
			t.Errorf("lastAppliedRevision = %q, want %q", s.Status.LastAppliedRevision, want)
		}
		if s.Status.Plan == nil || s.Status.Plan.Teams != int64(len(cfg.Teams)) || s.Status.Plan.MonthlyUSD != allotv1.Decimal(plan.TotalMonthlyUSD.Fixed(2)) {
			t.Errorf("plan summary = %+v, want %d teams, $%s", s.Status.Plan, len(cfg.Teams), plan.TotalMonthlyUSD.Fixed(2))
		}
		var teams allotv1.TeamList
		if err := env.Client.List(ctx, &teams, client.MatchingLabels{capacity.LabelSourceName: "fleet"}); err != nil {
			t.Fatal(err)
		}
		if len(teams.Items) != len(cfg.Teams) {
			t.Errorf("%d Teams, want %d", len(teams.Items), len(cfg.Teams))
		}
		robotics := getTeam(t, "robotics")
		if got := robotics.Spec.Quota[0]; got.Flavor != "h100-80gb" || got.Nominal != 128 {
			t.Errorf("robotics quota = %+v, want h100-80gb 128", got)
		}
		for _, pp := range plan.Pools {
			var p allotv1.Pool
			if err := env.Client.Get(ctx, client.ObjectKey{Name: string(pp.Pool)}, &p); err != nil {
				t.Fatal(err)
			}
			if p.Spec.NodesTarget != pp.NodesTarget {
				t.Errorf("pool %s nodesTarget = %d, want %d", pp.Pool, p.Spec.NodesTarget, pp.NodesTarget)
			}
		}
		for name := range cfg.Teams {
			var ns corev1.Namespace
			if err := env.Client.Get(ctx, client.ObjectKey{Name: string(name)}, &ns); err != nil {
				t.Errorf("namespace %s: %v", name, err)
			}
		}
		for name := range cfg.Tiers {
			var pc schedulingv1.PriorityClass
			if err := env.Client.Get(ctx, client.ObjectKey{Name: string(name)}, &pc); err != nil {
				t.Errorf("priority class %s: %v", name, err)
			}
		}
		if !slices.Contains(s.Status.Inventory, "Team/robotics") || !slices.Contains(s.Status.Inventory, "Namespace/robotics") {
			t.Errorf("inventory lacks robotics: %v", s.Status.Inventory)
		}
		if got := managers(robotics.ManagedFields); got != "allot" {
			t.Errorf("field managers of Team/robotics = %q, want only allot", got)
		}
	})

	t.Run("quota raise", func(t *testing.T) {
		body := strings.Replace(repo.read("fleet/teams/robotics.cue"), "nominal: 128", "nominal: 192", 1)
		repo.write("fleet/teams/robotics.cue", strings.Replace(body, "monthlyUSD: 500000", "monthlyUSD: 2000000", 1))
		rev := repo.commit("robotics: 192 H100")
		waitRevision(t, key, rev, true)
		if got := getTeam(t, "robotics").Spec.Quota[0].Nominal; got != 192 {
			t.Errorf("robotics nominal = %d, want 192", got)
		}
	})

	var good string
	t.Run("invalid commit changes nothing", func(t *testing.T) {
		good = getSource(t, key).Status.LastAppliedRevision
		before := getTeam(t, "robotics")
		body := repo.read("fleet/teams/robotics.cue")
		body = strings.Replace(body, "nominal: 192", "nominal: 256", 1)
		body = strings.Replace(body, "costCenter:", "costCentre:", 1)
		repo.write("fleet/teams/robotics.cue", body)
		rev := repo.commit("robotics: typo")
		s := waitRevision(t, key, rev, false)
		if !conditions.IsStalled(s) || conditions.GetReason(s, allotv1.StalledCondition) != capacity.ReasonValidationFailed {
			t.Errorf("Stalled = %v (%s), want True ValidationFailed", conditions.IsStalled(s), conditions.GetReason(s, allotv1.StalledCondition))
		}
		if s.Status.LastAppliedRevision != good {
			t.Errorf("lastAppliedRevision = %q, want the last good %q", s.Status.LastAppliedRevision, good)
		}
		line := 1 + strings.Count(body[:strings.Index(body, "costCentre")], "\n")
		i := slices.IndexFunc(s.Status.Findings, func(f allotv1.Finding) bool { return f.Rule == "unknown-field" })
		if i < 0 {
			t.Fatalf("findings = %+v, want an unknown-field", s.Status.Findings)
		}
		if f := s.Status.Findings[i]; f.File != "teams/robotics.cue" || f.Line != int64(line) || f.Column != 2 || !strings.Contains(f.Message, "costCenter") {
			t.Errorf("finding = %+v, want teams/robotics.cue:%d:2 suggesting costCenter", f, line)
		}
		msg := conditions.GetMessage(s, allotv1.ReadyCondition)
		if !strings.Contains(msg, fmt.Sprintf("teams/robotics.cue:%d:2", line)) || !strings.Contains(msg, good+" stays in force") {
			t.Errorf("Ready message = %q, want the position and the revision in force", msg)
		}
		after := getTeam(t, "robotics")
		if after.Spec.Quota[0].Nominal != 192 || after.ResourceVersion != before.ResourceVersion {
			t.Errorf("Team robotics changed by an invalid revision: nominal %d, resourceVersion %s -> %s", after.Spec.Quota[0].Nominal, before.ResourceVersion, after.ResourceVersion)
		}
		eventually(t, 10*time.Second, "a ValidationFailed event", func() error {
			var evs eventsv1.EventList
			if err := env.Client.List(ctx, &evs, client.InNamespace(key.Namespace)); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Regarding.Name == key.Name && e.Reason == capacity.ReasonValidationFailed && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, "robotics.cue") {
					return nil
				}
			}
			return fmt.Errorf("%d events, none ValidationFailed", len(evs.Items))
		})
	})

	t.Run("fix and prune", func(t *testing.T) {
		// Fix the typo, remove the speech team and keep a pod in the vision
		// namespace, whose team is removed too: the namespace must stay.
		repo.write("fleet/teams/robotics.cue", strings.Replace(repo.read("fleet/teams/robotics.cue"), "costCentre:", "costCenter:", 1))
		repo.git("rm", "-q", "fleet/teams/speech.cue", "fleet/teams/vision.cue")
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = "vision", "train-0"
		pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
		pod.Spec.SchedulerName = "none"
		if err := env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		deleteAtCleanup(t, pod)
		rev := repo.commit("remove speech and vision")
		s := waitRevision(t, key, rev, true)
		if conditions.IsStalled(s) {
			t.Errorf("still Stalled after the fix")
		}
		if got := getTeam(t, "robotics").Spec.Quota[0].Nominal; got != 256 {
			t.Errorf("robotics nominal = %d, want 256", got)
		}
		for _, name := range []string{"speech", "vision"} {
			err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &allotv1.Team{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("Team %s: err = %v, want NotFound (pruned)", name, err)
			}
		}
		eventually(t, 20*time.Second, "namespace speech deleted", func() error {
			var ns corev1.Namespace
			err := env.Client.Get(ctx, client.ObjectKey{Name: "speech"}, &ns)
			if apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil) {
				return nil
			}
			return fmt.Errorf("namespace speech still there: %v", err)
		})
		var ns corev1.Namespace
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "vision"}, &ns); err != nil || ns.DeletionTimestamp != nil {
			t.Errorf("namespace vision with a pod: err=%v deleting=%v, want kept", err, ns.DeletionTimestamp)
		}
		if !slices.ContainsFunc(s.Status.Findings, func(f allotv1.Finding) bool {
			return f.Rule == "namespace-kept" && strings.Contains(f.Message, "vision")
		}) {
			t.Errorf("findings = %+v, want namespace-kept for vision", s.Status.Findings)
		}
	})

	t.Run("requested reconcile", func(t *testing.T) {
		check(t, env.Client, key)
	})

	t.Run("a pool short of healthy GPUs is reported", func(t *testing.T) {
		// The Pool health reconciler's view: 2 of eks-p5's 9 nodes down.
		var p allotv1.Pool
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "eks-p5"}, &p); err != nil {
			t.Fatal(err)
		}
		p.Status.Nodes, p.Status.ReadyNodes, p.Status.HealthyGPUs = 9, 7, 56
		if err := env.Client.Status().Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
		// Judged on the statuses from the reconcile that handled this
		// request on (the Pool's status may be left from an earlier run of
		// the test).
		check(t, env.Client, key)
		eventually(t, 20*time.Second, "the pool-unhealthy-capacity finding", func() error {
			s := getSource(t, key)
			for _, f := range s.Status.Findings {
				if f.Rule == "pool-unhealthy-capacity" && f.Severity == "warning" && strings.Contains(f.Message, "eks-p5 has 56 healthy GPUs") && f.Line > 0 {
					return nil
				}
			}
			return fmt.Errorf("findings %+v", getSource(t, key).Status.Findings)
		})
		if !conditions.IsReady(getSource(t, key)) {
			t.Errorf("a health finding made the source not Ready")
		}
	})

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("parsing /metrics: %v", err)
		}
		ready := families["allot_capacity_source_ready"]
		if ready == nil || !slices.ContainsFunc(ready.Metric, func(m *dto.Metric) bool {
			return label(m, "name") == "fleet" && m.GetGauge().GetValue() == 1
		}) {
			t.Errorf("allot_capacity_source_ready{name=fleet} is not 1: %v", ready)
		}
		if h := families["allot_capacity_reconcile_duration_seconds"]; h == nil || len(h.Metric) == 0 {
			t.Errorf("no allot_capacity_reconcile_duration_seconds")
		}
		nodes := families["allot_plan_pool_nodes_target"]
		if nodes == nil {
			t.Fatal("no allot_plan_pool_nodes_target")
		}
		for _, pp := range plan.Pools {
			if !slices.ContainsFunc(nodes.Metric, func(m *dto.Metric) bool { return label(m, "pool") == string(pp.Pool) }) {
				t.Errorf("allot_plan_pool_nodes_target lacks pool %s", pp.Pool)
			}
		}
	})
}

func getTeam(t *testing.T, name string) *allotv1.Team {
	t.Helper()
	var team allotv1.Team
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &team); err != nil {
		t.Fatal(err)
	}
	return &team
}

func managers(fields []metav1.ManagedFieldsEntry) string {
	var out []string
	for _, f := range fields {
		if f.Subresource == "" && !slices.Contains(out, f.Manager) {
			out = append(out, f.Manager)
		}
	}
	return strings.Join(out, ",")
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
