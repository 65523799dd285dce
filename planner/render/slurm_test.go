package render

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render/kube"
	"github.com/allot-dev/allot/planner/render/kueue"
	"github.com/allot-dev/allot/schema"
)

// fleetWithSlurm is a Kubernetes cluster and a Slurm cluster, both planned
// with GPUs of h100, so that each holds a share of alpha's quota.
const fleetWithSlurm = `package capacity
clusters: {
	gke: {provider: "gke", region: "us-central1"}
	hpc: {provider: "onprem", scheduler: "slurm"}
}
pools: {
	cloud: {cluster: "gke", flavor: "h100", machineType: "a3-highgpu-8g", gpusPerNode: 8, nodes: {min: 2, max: 4}, price: onDemandPerNodeHour: 88}
	dgx: {cluster: "hpc", flavor: "h100", gpusPerNode: 8, nodes: {min: 1, max: 2}, price: onDemandPerNodeHour: 60,
		slurm: {partition: "gpu", nodePrefix: "dgx"}}
	a100s: {cluster: "hpc", flavor: "a100", gpusPerNode: 8, nodes: max: 1, price: onDemandPerNodeHour: 30,
		slurm: partition: "gpu"}
}
tiers: prod: priority: 10
teams: {
	alpha: {costCenter: "A", owners: ["@a"], quota: h100: {nominal: 30, borrowingLimit: 6}}
	beta: {costCenter: "B", owners: ["@b"], quota: a100: nominal: 8}
}
`

// TestRenderSkipsSlurm: for every target, nothing of a Slurm cluster is
// rendered as Kubernetes or Terraform: no module, no Kueue directory, no
// Pool, ResourceFlavor or quota share of it; each team's quota there is its
// Kubernetes clusters' share, which with the Slurm cluster's adds up to the
// team's quota.
func TestRenderSkipsSlurm(t *testing.T) {
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(fleetWithSlurm)}})
	if cfg == nil || findings.HasErrors() {
		t.Fatal(findings)
	}
	plan := planner.Build(cfg)
	gke, hpc := planner.ForCluster(cfg, plan, "gke"), planner.ForCluster(cfg, plan, "hpc")
	alphaGKE, alphaHPC := gke.Teams["alpha"].Quota["h100"], hpc.Teams["alpha"].Quota["h100"]
	if alphaGKE.Nominal == 0 || alphaHPC.Nominal == 0 || alphaGKE.Nominal+alphaHPC.Nominal != 30 ||
		*alphaGKE.BorrowingLimit+*alphaHPC.BorrowingLimit != 6 {
		t.Fatalf("the fixture does not split alpha's quota between the clusters: gke %+v, hpc %+v", alphaGKE, alphaHPC)
	}
	for _, target := range Targets() {
		files, err := Render(cfg, plan, Options{Target: target})
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		byPath := map[string][]byte{}
		for _, f := range files {
			byPath[f.Path] = f.Data
			if strings.Contains(f.Path, "hpc") || bytes.Contains(f.Data, []byte("hpc")) || bytes.Contains(f.Data, []byte("dgx")) || bytes.Contains(f.Data, []byte("a100s")) {
				t.Errorf("%s: %s names the Slurm cluster or its pools:\n%s", target, f.Path, f.Data)
			}
		}
		if byPath["terraform/gke/main.tf.json"] == nil {
			t.Errorf("%s: no module of the Kubernetes cluster", target)
		}
		switch target {
		case TargetAllot:
			var pools []string
			for _, p := range docs[v1alpha1.Pool](t, byPath["kubernetes/"+kube.PoolsFile]) {
				pools = append(pools, p.Name)
			}
			if strings.Join(pools, ",") != "cloud" {
				t.Errorf("allot: Pools %v, want cloud only", pools)
			}
			quota := map[string]map[string]int64{}
			for _, team := range docs[v1alpha1.Team](t, byPath["kubernetes/"+kube.TeamsFile]) {
				quota[team.Name] = map[string]int64{}
				for _, q := range team.Spec.Quota {
					quota[team.Name][q.Flavor] = q.Nominal
				}
			}
			if quota["alpha"]["h100"] != alphaGKE.Nominal || quota["beta"]["a100"] != 0 {
				t.Errorf("allot: quotas %v, want alpha's h100 %d (the Kubernetes share) and beta's a100 0 (all in Slurm)", quota, alphaGKE.Nominal)
			}
		case TargetKueue:
			var dirs []string
			for p := range byPath {
				if d, rest, ok := strings.Cut(strings.TrimPrefix(p, KueueDir+"/"), "/"); ok && strings.HasPrefix(p, KueueDir+"/") && rest == kueue.ClusterQueuesFile {
					dirs = append(dirs, d)
				}
			}
			if strings.Join(dirs, ",") != "gke" {
				t.Errorf("kueue: ClusterQueues of %v, want gke only", dirs)
			}
			if q := byPath[KueueDir+"/gke/"+kueue.ClusterQueuesFile]; !bytes.Contains(q, []byte("nominalQuota: \""+strconv.FormatInt(alphaGKE.Nominal, 10)+"\"\n")) {
				t.Errorf("kueue: alpha's ClusterQueue lacks its Kubernetes share %d:\n%s", alphaGKE.Nominal, q)
			}
		}
	}
}

// docs decodes a multi-document YAML manifest into objects of type T.
func docs[T any](t *testing.T, data []byte) []T {
	t.Helper()
	var out []T
	for _, doc := range strings.Split(string(data), "---\n") {
		var obj T
		if err := yaml.UnmarshalStrict([]byte(doc), &obj); err != nil {
			t.Fatalf("%v:\n%s", err, doc)
		}
		out = append(out, obj)
	}
	return out
}
