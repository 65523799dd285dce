package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/planner/evaluate"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/schema"
)

// TestAcceptedRepositoriesApply is the promise of `allot validate` to the
// apply that follows a merge: a repository it accepts renders, for both
// targets, into objects a real API server accepts (Kubernetes' own
// validation, allot's CRDs, Kueue's CRDs with their rules) and, for the
// clusters whose Terraform needs no download, into a root module that
// `terraform validate` accepts. Repositories are drawn at random with names
// and strings at their bounds, every provider, many flavors, tiers and
// cohorts, strings a finance team might type (a cost centre with spaces and
// quotes, "${...}"); those the policies reject are counted, not applied.
// ALLOT_RANDOM_REPOS=N draws N (default 40).
func TestAcceptedRepositoriesApply(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and runs terraform")
	}
	n := 40
	if s := os.Getenv("ALLOT_RANDOM_REPOS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("ALLOT_RANDOM_REPOS=%q: want a positive number", s)
		}
	}
	env := testenv.Start(t)
	testenv.InstallKueueCRDs(t, env)
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("terraform is not on PATH (go test -short skips this test): %v", err)
	}
	accepted, modules := 0, 0
	for seed := range uint64(n) {
		src := randomRepository(rand.New(rand.NewPCG(seed, 0xa110)))
		shown := src // in a failure's message, cut
		if len(shown) > 8<<10 {
			shown = shown[:8<<10] + "…"
		}
		r := evaluate.Repository(fstest.MapFS{"capacity.cue": {Data: []byte(src)}}, nil)
		if r.Config == nil || r.Findings.HasErrors() {
			for _, f := range r.Findings {
				if f.Severity == schema.SeverityError {
					t.Logf("seed %d: rejected: %s: %s", seed, f.Rule, f.Message)
					break
				}
			}
			continue
		}
		accepted++
		for _, target := range Targets() {
			files, err := Render(r.Config, r.Plan, Options{Target: target})
			if err != nil {
				t.Errorf("seed %d: validate accepts the repository, render --target %s fails: %v\n%s", seed, target, err, shown)
				continue
			}
			for _, f := range files {
				switch {
				case strings.HasSuffix(f.Path, ".yaml"):
					if err := applyDryRun(env, f.Data); err != nil {
						t.Errorf("seed %d: --target %s: the API server refuses %s: %v\n%s", seed, target, f.Path, err, shown)
					}
				case target == TargetAllot && strings.HasPrefix(f.Path, TerraformDir+"/"):
					cluster := schema.ClusterName(path.Base(path.Dir(f.Path)))
					if p := r.Config.Clusters[cluster].Provider; p != schema.ProviderOnPrem && p != schema.ProviderKwok {
						// gke and eks modules need their providers, which
						// nothing here may download: their JSON is checked.
						if !json.Valid(f.Data) {
							t.Errorf("seed %d: %s is not JSON", seed, f.Path)
						}
						continue
					}
					modules++
					if err := terraformValidate(t, tf, f.Data); err != nil {
						t.Errorf("seed %d: %s: %v\n%s", seed, f.Path, err, shown)
					}
				}
			}
		}
	}
	// The draw must reach the apply: most repositories are meant to pass.
	if accepted < n/2 || modules == 0 {
		t.Errorf("only %d of %d random repositories were accepted, %d Terraform modules validated: the generator no longer exercises render", accepted, n, modules)
	}
	t.Logf("%d of %d repositories accepted; %d Terraform modules validated", accepted, n, modules)
}

// applyDryRun creates every object of a multi-document YAML manifest with a
// server-side dry run; a namespace it needs is created for real first.
func applyDryRun(env *testenv.Env, data []byte) error {
	ctx := context.Background()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var errs []error
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if ns := obj.GetNamespace(); ns != "" {
			err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, err)
				continue
			}
		}
		err := env.Client.Create(ctx, obj, client.DryRunAll)
		if obj.GetKind() == "Namespace" && apierrors.IsAlreadyExists(err) {
			// Created for real by an earlier object or repository.
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// terraformValidate runs terraform init (nothing to download: the module uses
// the built-in provider) and validate on a root module.
func terraformValidate(t *testing.T, bin string, module []byte) error {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, terraform.ModuleFile), module, 0o600); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-backend=false", "-input=false"}, {"validate", "-no-color"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1",
			"TF_CLI_CONFIG_FILE="+filepath.Join(dir, "none.tfrc"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// randomRepository draws a capacity repository, as CUE, meant to pass the
// policies: names are lowercase DNS labels of 1 to their most characters,
// references resolve, quotas fit the pools; what is free text (cost
// centres, descriptions, regions, machine types) is drawn from what people
// type and what reaches other languages.
func randomRepository(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("package capacity\n")
	names := map[string]bool{}
	// name returns a fresh lowercase DNS label of at most max characters:
	// often short, sometimes exactly max.
	name := func(prefix string, max int) string {
		for {
			var s string
			switch r.IntN(4) {
			case 0:
				s = prefix + strings.Repeat("x", max-len(prefix)-3) + fmt.Sprintf("%03d", r.IntN(1000))
			case 1:
				s = fmt.Sprintf("%s-%d-%s", prefix, r.IntN(100), "a1")
			default:
				s = fmt.Sprintf("%s%d", prefix, r.IntN(1000))
			}
			if len(s) > max {
				s = s[:max]
			}
			s = strings.TrimRight(s, "-")
			if !names[s] {
				names[s] = true
				return s
			}
		}
	}
	text := func() string {
		if r.IntN(40) == 0 {
			return strings.Repeat("x", 300_000) // more than an object's annotations hold
		}
		return []string{
			"ML Research", "cc-1234", `R&D "Vision" / EU`, "${var.secret}", "%{ if true }x%{ endif }",
			"finance:gpu\tops", "Ünïcødé 研究", strings.Repeat("long-", 51), "", "a\nb", "<script>alert(1)</script>",
		}[r.IntN(11)]
	}
	cloud := func() string {
		return []string{"us-central1", "europe-west4-a", "p5.48xlarge", "a3-highgpu-8g", "Standard_ND96asr_v4", "x_y.Z-9", strings.Repeat("a", 63)}[r.IntN(7)]
	}
	providers := []string{"gke", "eks", "onprem", "kwok"}
	var clusters, providerOf []string
	for range 1 + r.IntN(3) {
		c := name("c", 63)
		clusters = append(clusters, c)
		providerOf = append(providerOf, providers[r.IntN(len(providers))])
		fmt.Fprintf(&b, "clusters: %q: {provider: %q", c, providerOf[len(providerOf)-1])
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, ", region: %q", cloud())
		}
		b.WriteString("}\n")
	}
	// flavors and the GPUs their pools reach at nodes.max
	var flavors []string
	capacity := map[string]int64{}
	nflavors := 1 + r.IntN(4)
	if r.IntN(10) == 0 {
		nflavors = 40 + r.IntN(40) // up to more than a Kueue resource group takes
	}
	for range nflavors {
		flavors = append(flavors, name("gpu", 63))
	}
	for _, f := range flavors {
		for range 1 + r.IntN(2) {
			p := name("p", 56)
			gpus := []int64{1, 4, 8, 128}[r.IntN(4)]
			c := r.IntN(len(clusters))
			if nflavors > 16 {
				c = 0 // all in one cluster's ClusterQueues
			}
			maxN := []int64{0, 1, 16, 1000, 100000}[r.IntN(5)]
			if providerOf[c] == "onprem" || providerOf[c] == "kwok" {
				// A Terraform instance per node: terraform validate of
				// 100,000 takes minutes and gigabytes.
				maxN = min(maxN, 40)
			}
			minN := maxN / int64(1+r.IntN(4))
			capacity[f] += gpus * maxN
			fmt.Fprintf(&b, "pools: %q: {cluster: %q, flavor: %q, gpusPerNode: %d, nodes: {min: %d, max: %d}",
				p, clusters[c], f, gpus, minN, maxN)
			// Every pool names a machine type (gke and eks need one).
			fmt.Fprintf(&b, ", machineType: %q", cloud())
			if r.IntN(2) == 0 {
				levels := []string{"block", "rack", "host"}
				switch r.IntN(4) {
				case 0:
					levels = []string{"zone", strings.Repeat("l", 63), "host"}
				case 1:
					levels = nil
					for i := range 1 + r.IntN(18) { // Kueue takes at most 16
						levels = append(levels, fmt.Sprintf("level-%d", i))
					}
				}
				lv, _ := json.Marshal(levels)
				fmt.Fprintf(&b, ", topology: {levels: %s", lv)
				if levels[0] == "block" {
					fmt.Fprintf(&b, ", hostsPerRack: %d, racksPerBlock: %d", 1+r.IntN(32), 1+r.IntN(16))
				}
				b.WriteString("}")
			}
			fmt.Fprintf(&b, ", price: {onDemandPerNodeHour: %s", []string{"0", "0.0001", "98.32", "1000000"}[r.IntN(4)])
			if r.IntN(2) == 0 {
				fmt.Fprintf(&b, ", committedPerNodeHour: 1.5, committedNodes: %d", r.Int64N(maxN+1))
			}
			fmt.Fprintf(&b, "}, headroom: %s, spareNodes: %d}\n", []string{"0", "0.1", "1", "10"}[r.IntN(4)], r.IntN(3))
		}
	}
	var tiers []string
	for i := range 1 + r.IntN(4) {
		tr := name("t", 63)
		tiers = append(tiers, tr)
		// Unique priorities, at the bounds too.
		prio := []int64{-1000000000 + int64(i), 1000000000 - int64(i), int64(100*i + 1)}[r.IntN(3)]
		fmt.Fprintf(&b, "tiers: %q: {priority: %d, preemptible: %t, borrowOnly: %t", tr, prio, r.IntN(2) == 0, i > 0 && r.IntN(3) == 0)
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, ", description: %q", text())
		}
		b.WriteString("}\n")
	}
	var cohorts []string
	for range r.IntN(4) {
		co := name("co", 63)
		fmt.Fprintf(&b, "cohorts: %q: {", co)
		if len(cohorts) > 0 && r.IntN(2) == 0 {
			fmt.Fprintf(&b, "parent: %q", cohorts[r.IntN(len(cohorts))])
		}
		b.WriteString("}\n")
		cohorts = append(cohorts, co)
	}
	used := map[string]int64{}
	owners := []string{"@alice", "@org/ml-platform", "@org/finance", "@bob_corp"}
	for range 1 + r.IntN(6) {
		tm := name("team", 63)
		fmt.Fprintf(&b, "teams: %q: {costCenter: %q, owners: [%q]", tm, text(), owners[r.IntN(len(owners))])
		if len(cohorts) > 0 && r.IntN(3) > 0 {
			fmt.Fprintf(&b, ", cohort: %q", cohorts[r.IntN(len(cohorts))])
		}
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, ", tiers: [%q]", tiers[r.IntN(len(tiers))])
		}
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, ", namespaces: [%q, %q]", name("ns", 63), name("ns", 63))
		}
		fmt.Fprintf(&b, ", weight: %s, quota: {", []string{"1", "0.001", "1000000", "2.5", "0.000000001", "123456.789"}[r.IntN(6)])
		all := r.IntN(4) == 0 // sometimes every flavor
		for i, f := range flavors {
			if i > 0 && !all && r.IntN(2) == 0 {
				continue
			}
			nominal := r.Int64N(min(capacity[f]-used[f], 10000000) + 1)
			used[f] += nominal
			fmt.Fprintf(&b, "%q: {nominal: %d", f, nominal)
			if r.IntN(3) == 0 {
				fmt.Fprintf(&b, ", borrowingLimit: %d, lendingLimit: %d", r.Int64N(10000000), r.Int64N(nominal+1))
			}
			b.WriteString("}, ")
		}
		b.WriteString("}}\n")
	}
	if r.IntN(2) == 0 {
		fmt.Fprintf(&b, "policy: {financeApprovalAboveMonthlyUSD: 1000, financeApprovers: [%q], platformApprovers: [%q]}\n", owners[r.IntN(4)], owners[r.IntN(4)])
	}
	return b.String()
}
