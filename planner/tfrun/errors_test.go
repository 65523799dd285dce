package tfrun

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClassify reads Terraform's stderr, as terraform-exec returns it, into
// the typed errors. The tests with the real binary trigger each of them; these
// cover the messages of backends and providers that need a network.
func TestClassify(t *testing.T) {
	tests := map[string]struct {
		stderr string
		want   error
	}{
		"local lock": {
			stderr: `
Error: Error acquiring the state lock

Error message: resource temporarily unavailable
Lock Info:
  ID:        4c1f7a0e-55f6-f6a4-6f0d-6a0a5e4f1b2c
  Path:      terraform.tfstate
  Operation: OperationTypeApply
  Who:       allot@manager-0
  Version:   1.11.4
  Created:   2026-11-23 08:00:00 +0000 UTC
  Info:

Terraform acquires a state lock to protect the state from being written
by multiple users at the same time.`,
			want: &LockError{ID: "4c1f7a0e-55f6-f6a4-6f0d-6a0a5e4f1b2c", Path: "terraform.tfstate", Operation: "OperationTypeApply",
				Who: "allot@manager-0", Created: "2026-11-23 08:00:00 +0000 UTC", Detail: "resource temporarily unavailable"},
		},
		"gcs lock, boxed": {
			stderr: `╷
│ Error: Error acquiring the state lock
│ 
│ Error message: writing "gs://tf-state/allot/gke-use1/default.tflock"
│ failed: googleapi: Error 412: At least one of the pre-conditions you
│ specified did not hold., conditionNotMet
│ Lock Info:
│   ID:        1712345678901234
│   Path:      gs://tf-state/allot/gke-use1/default.tflock
│   Operation: OperationTypeApply
│   Who:       allot@manager-7d9f
│   Version:   1.11.4
│   Created:   2026-11-23 08:00:00 +0000 UTC
│   Info:      
╵`,
			want: &LockError{ID: "1712345678901234", Path: "gs://tf-state/allot/gke-use1/default.tflock", Operation: "OperationTypeApply",
				Who: "allot@manager-7d9f", Created: "2026-11-23 08:00:00 +0000 UTC",
				Detail: `writing "gs://tf-state/allot/gke-use1/default.tflock" failed: googleapi: Error 412: At least one of the pre-conditions you specified did not hold., conditionNotMet`},
		},
		"stale plan": {
			stderr: `
Error: Saved plan is stale

The given plan file can no longer be applied because the state was changed
by another operation after the plan was created.`,
			want: &DriftError{Reason: "the state changed since the plan was made"},
		},
		"aws credentials": {
			stderr: `
Error: No valid credential sources found

  with provider["registry.terraform.io/hashicorp/aws"],
  on main.tf.json line 1:
   1: {

Please see https://registry.terraform.io/providers/hashicorp/aws
for more information about providing credentials.`,
			want: &ProviderError{Credentials: true, Summary: "No valid credential sources found",
				Detail: `with provider["registry.terraform.io/hashicorp/aws"], on main.tf.json line 1: 1: { Please see https://registry.terraform.io/providers/hashicorp/aws for more information about providing credentials.`},
		},
		"google credentials": {
			stderr: `
Error: Attempted to load application default credentials since neither ` + "`credentials`" + ` nor ` + "`access_token`" + ` was set in the provider block.  No credentials loaded.`,
			want: &ProviderError{Credentials: true, Summary: "Attempted to load application default credentials since neither `credentials` nor `access_token` was set in the provider block.  No credentials loaded."},
		},
		"gcs backend without access": {
			stderr: `
Error: Failed to get existing workspaces: querying Cloud Storage failed: googleapi: Error 403: allot@proj.iam.gserviceaccount.com does not have storage.objects.list access, forbidden`,
			want: &BackendError{Credentials: true, Summary: "Failed to get existing workspaces: querying Cloud Storage failed: googleapi: Error 403: allot@proj.iam.gserviceaccount.com does not have storage.objects.list access, forbidden"},
		},
		"backend changed": {
			stderr: `
Error: Backend configuration changed

A change in the backend configuration has been detected, which may require
migrating existing state.`,
			want: &BackendError{Summary: "Backend configuration changed",
				Detail: "A change in the backend configuration has been detected, which may require migrating existing state."},
		},
		"hook": {
			stderr: `
Error: local-exec provisioner error

  with terraform_data.a100_nodes["a100-2"],
  on main.tf.json line 1, in resource.terraform_data.a100_nodes.provisioner[0].local-exec:
   1: {

Error running command '/opt/allot/kwok-hook': exit status 3. Output: cannot
reach a100-2`,
			want: &HookError{Resource: `terraform_data.a100_nodes["a100-2"]`, Output: "cannot\nreach a100-2"},
		},
		"anything else": {
			stderr: `
Error: Invalid reference

A reference to a resource type must be followed by at least one attribute
access.`,
			want: &Error{Diagnostics: []string{"Invalid reference: A reference to a resource type must be followed by at least one attribute access."}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := errors.New("exit status 1\n" + tc.stderr)
			got := classify(err)
			if e, ok := got.(*Error); ok {
				e.Err = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got.Error() == "" {
				t.Error("empty message")
			}
		})
	}
}
