package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/render/terraform"
)

// backendFlags choose the Terraform backend of the rendered root modules.
type backendFlags struct {
	kind   string
	config []string
}

func (b *backendFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&b.kind, "backend", "local", "Terraform backend of the root modules: local, gcs, s3, http, ...")
	c.Flags().StringArrayVar(&b.config, "backend-config", nil, "a backend setting KEY=VALUE (repeatable); {cluster} in a value is the cluster's name, e.g. prefix=allot/{cluster}; settings that may hold a credential (password, *token*, *secret*, credentials, access_key, ...) are not written into the modules: the manager passes them to terraform init, and after render give them to terraform init -backend-config yourself")
}

// options returns the render options the flags say.
func (b *backendFlags) options() (terraform.Options, error) {
	be := terraform.Backend{Type: b.kind}
	if be.Type == "local" && len(b.config) == 0 {
		return terraform.Options{}, nil
	}
	be.Config = map[string]string{}
	for _, kv := range b.config {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return terraform.Options{}, usageError{fmt.Errorf("--backend-config %q: want KEY=VALUE", kv)}
		}
		be.Config[k] = v
	}
	return terraform.Options{Backend: be}, nil
}
