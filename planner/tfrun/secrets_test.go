package tfrun

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/planner/tfrun/statetest"
)

// TestEnvVariables drives a module with a required variable, as the gke and
// eks modules have (project, subnet_ids, ...), with its value in allot's
// environment as TF_VAR_project: terraform-exec keeps TF_VAR_* from
// terraform's environment, so the runner passes it as -var. A TF_VAR_ of a
// variable the module does not declare is ignored, as terraform would.
func TestEnvVariables(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	t.Setenv("TF_VAR_project", "acme-prod")
	t.Setenv("TF_VAR_not_declared", "x")
	l.writeFile(filepath.Join(l.dir, terraform.ModuleFile), `{
  "variable": {
    "project": {"type": "string", "description": "required, as the gke module's"},
    "zone": {"type": "string", "default": "none"}
  },
  "resource": {"terraform_data": {"pool": {"input": "${var.project}/${var.zone}"}}},
  "output": {"where": {"value": "${terraform_data.pool.output}"}}
}
`, 0o644)
	r, err := New(ctx, "lab", l.dir, WithEnv(l.env()), WithEnv(map[string]string{"TF_VAR_zone": "us-east1-b"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	l.converge(ctx, r)
	out, err := l.command("output", "-raw", "where").Output()
	if err != nil {
		t.Fatalf("terraform output: %v", err)
	}
	if got := string(out); got != "acme-prod/us-east1-b" {
		t.Errorf("output where = %q, want the variables of the environment, acme-prod/us-east1-b", got)
	}
}

// TestBackendCredentialsAtInit renders the lab's module with an http backend
// whose password is a --backend-config setting: the module holds no password,
// terraform init gets it (-backend-config) and reaches the state store that
// wants it, and the state is stored there.
func TestBackendCredentialsAtInit(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	srv := statetest.New(t)
	srv.Auth = "s3cret-token"
	l.backend = srv.Backend()
	l.backend.Config["username"] = "allot"
	l.backend.Config["password"] = srv.Auth
	l.size(map[string]int64{"a100": 1})
	b, err := os.ReadFile(filepath.Join(l.dir, terraform.ModuleFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), srv.Auth) {
		t.Fatalf("the password is written into the module:\n%s", b)
	}
	r := l.runner(ctx, WithBackendConfig(l.backend.InitConfig("lab")))
	if err := r.Init(ctx); err != nil {
		t.Fatalf("init with the password at run time: %v", err)
	}
	l.converge(ctx, r)
	state := string(srv.State())
	if !strings.Contains(state, `"a100-0"`) {
		t.Errorf("the remote state lacks the node a100-0:\n%.500s", state)
	}
}

// TestOutputHoldsNoState: WithOutput (the manager's log) gets what init,
// plan and apply print, not the state nor the plan's JSON that the runner
// reads (terraform-exec writes those to the same writers): they hold a
// value the module marks sensitive in clear, where plan and apply print
// "(sensitive value)".
func TestOutputHoldsNoState(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	t.Setenv("TF_VAR_token", "tok-in-state-7f3a")
	l.writeFile(filepath.Join(l.dir, terraform.ModuleFile), `{
  "variable": {"token": {"type": "string", "sensitive": true}},
  "resource": {"terraform_data": {"pool": {"input": "${var.token}"}}}
}
`, 0o644)
	var out strings.Builder
	r, err := New(ctx, "lab", l.dir, WithEnv(l.env()), WithOutput(&out))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	l.converge(ctx, r)
	// The value is in the state, and the runner read it.
	if st, err := l.command("state", "pull").Output(); err != nil || !strings.Contains(string(st), "tok-in-state-7f3a") {
		t.Fatalf("the state lacks the value (%v): the test proves nothing", err)
	}
	if _, err := r.Plan(ctx, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "tok-in-state-7f3a") {
		t.Errorf("the output holds the sensitive value:\n%s", got)
	}
	for _, want := range []string{"Terraform has been successfully initialized", "Apply complete", "(sensitive value)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q: init, plan and apply print there:\n%s", want, got)
		}
	}
}
