package terraform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

// ModuleFile is the file name of a rendered root module.
const ModuleFile = "main.tf.json"

// RequiredVersion is the Terraform version the modules need (terraform_data came
// with 1.4).
const RequiredVersion = ">= 1.5.0"

// Provider versions the modules pin.
const (
	GoogleProviderVersion = ">= 6.0, < 8.0"
	AWSProviderVersion    = ">= 5.0, < 7.0"
)

// GPUTaint is the taint GPU node groups carry so that only pods asking for GPUs
// land on them (the NVIDIA device plugin's convention).
var GPUTaint = struct{ Key, Value, Effect string }{"nvidia.com/gpu", "present", "NO_SCHEDULE"}

// DefaultCommand is the hook command of onprem and kwok modules unless the
// module's variable "command" says otherwise.
const DefaultCommand = "echo"

// Options tune the rendered modules.
type Options struct {
	// Backend is where Terraform keeps state; the zero value is the local backend.
	Backend Backend
	// Held are the nodes onprem and kwok pools with repair hold now, by
	// pool: the module keeps their names (fleet.LayoutHeld).
	Held map[schema.PoolName]fleet.Held
}

// Backend is a Terraform backend block: Type is e.g. "local", "gcs" or "s3", and
// Config its settings. Config values may use the placeholder {cluster}, replaced
// by the cluster's name (e.g. a state prefix per cluster). Settings that may
// hold a credential (Credential) are not written into the module: InitConfig
// returns them, for 'terraform init -backend-config' at run time.
type Backend struct {
	Type   string
	Config map[string]string
}

// credentialKeys are parts of the names of backend settings that may hold a
// credential (http's password, s3's access_key and secret_key, gcs's
// credentials and access_token, azurerm's sas_token and client_secret, ...).
var credentialKeys = []string{"password", "secret", "token", "credential", "access_key", "encryption_key", "customer_key", "sas", "private_key", "client_certificate"}

// Credential says whether the backend setting key may hold a credential.
func Credential(key string) bool {
	k := strings.ToLower(key)
	for _, c := range credentialKeys {
		if strings.Contains(k, c) {
			return true
		}
	}
	return false
}

// InitConfig returns the settings of b that may hold credentials, as
// KEY=VALUE for cluster, sorted: they go to 'terraform init
// -backend-config', never into the module.
func (b Backend) InitConfig(cluster schema.ClusterName) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(b.Config)) {
		if Credential(k) {
			out = append(out, k+"="+replaceCluster(b.Config[k], cluster))
		}
	}
	return out
}

// PoolError is a pool its cluster's provider cannot render: the user must change
// the pool (e.g. give a gke or eks pool its machineType).
type PoolError struct {
	Pool   schema.PoolName
	Reason string
}

func (e *PoolError) Error() string { return fmt.Sprintf("pool %s: %s", e.Pool, e.Reason) }

// Modules returns the root module of every cluster of cfg, keyed by cluster,
// but the clusters Slurm runs, whose nodes are the site's (Module refuses them).
// Clusters without pools get a module too, so that removing a cluster's last pool
// destroys its resources rather than leaving them behind.
func Modules(cfg *schema.Config, plan *planner.Plan, opts Options) (map[schema.ClusterName][]byte, error) {
	out := make(map[schema.ClusterName][]byte, len(cfg.Clusters))
	for _, name := range cfg.ClusterNames() {
		if cfg.Clusters[name].Scheduler == schema.SchedulerSlurm {
			continue
		}
		m, err := Module(cfg, plan, name, opts)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		b, err := Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}

// Marshal writes a module as JSON with sorted keys, two-space indentation, no
// HTML escaping and a final newline.
func Marshal(m map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encoding module: %w", err)
	}
	return buf.Bytes(), nil
}

// Module returns the root module of cluster as Terraform JSON values.
func Module(cfg *schema.Config, plan *planner.Plan, cluster schema.ClusterName, opts Options) (map[string]any, error) {
	c := cfg.Clusters[cluster]
	if c == nil {
		return nil, fmt.Errorf("unknown cluster %q", cluster)
	}
	if c.Scheduler == schema.SchedulerSlurm {
		return nil, fmt.Errorf("cluster %s is run by Slurm: its nodes are not made with Terraform", cluster)
	}
	var pools []*schema.Pool
	for _, n := range cfg.PoolNames() {
		if p := cfg.Pools[n]; p.Cluster == cluster {
			pools = append(pools, p)
		}
	}
	targets := map[schema.PoolName]int64{}
	for _, p := range pools {
		pp := plan.Pool(p.Name)
		if pp == nil {
			return nil, fmt.Errorf("pool %s: not in the plan", p.Name)
		}
		if err := checkName(string(p.Name)); err != nil {
			return nil, fmt.Errorf("pool %s: %w", p.Name, err)
		}
		targets[p.Name] = pp.NodesTarget
	}
	m := module{
		terraform: map[string]any{
			"required_version": RequiredVersion,
			"backend":          backend(opts.Backend, cluster),
		},
		variables: map[string]any{},
		providers: map[string]any{},
		resources: map[string]map[string]any{},
		locals:    map[string]any{},
	}
	var err error
	switch c.Provider {
	case schema.ProviderGKE:
		err = gke(&m, c, pools, targets)
	case schema.ProviderEKS:
		err = eks(&m, c, pools, targets)
	case schema.ProviderOnPrem, schema.ProviderKwok:
		err = hooks(&m, cfg, c, pools, targets, opts.Held)
	default:
		err = fmt.Errorf("unknown provider %q", c.Provider)
	}
	if err != nil {
		return nil, err
	}
	return m.values(c, targets), nil
}

type module struct {
	terraform map[string]any
	variables map[string]any
	providers map[string]any
	locals    map[string]any
	resources map[string]map[string]any // type -> name -> body
}

func (m *module) resource(typ, name string, body map[string]any) {
	if m.resources[typ] == nil {
		m.resources[typ] = map[string]any{}
	}
	m.resources[typ][name] = body
}

func (m *module) variable(name, typ, description string, def any) {
	v := map[string]any{"type": typ, "description": description}
	if def != nil {
		v["default"] = def
	}
	m.variables[name] = v
}

func (m *module) values(c *schema.Cluster, targets map[schema.PoolName]int64) map[string]any {
	out := map[string]any{
		"//":        fmt.Sprintf("Rendered by allot render for cluster %s (provider %s). Do not edit: change the capacity repository.", c.Name, c.Provider),
		"terraform": m.terraform,
	}
	nodes := map[string]any{}
	for p, n := range targets {
		nodes[string(p)] = n
	}
	out["output"] = data(map[string]any{
		"nodes_target": map[string]any{
			"description": "The node count of every pool, as planned by allot.",
			"value":       nodes,
		},
	})
	// Variable defaults and descriptions are literal JSON values to Terraform,
	// not templates: they are written as they are.
	if len(m.variables) > 0 {
		out["variable"] = m.variables
	}
	if len(m.providers) > 0 {
		out["provider"] = data(m.providers)
	}
	if len(m.locals) > 0 {
		out["locals"] = data(m.locals)
	}
	if len(m.resources) > 0 {
		r := map[string]any{}
		for t, byName := range m.resources {
			r[t] = byName
		}
		out["resource"] = data(r)
	}
	return out
}

// expr is a Terraform template expression that the renderer writes itself, such
// as "${var.project}". Every other string of a module's arguments, locals and
// outputs comes from the capacity repository (names, machine types, labels) and
// is data: data escapes it so that Terraform reads it literally.
type expr string

// templateEscaper escapes the two sequences that start a Terraform template
// inside a JSON string (and inside a quoted string within an expression):
// "${" is written "$${" and "%{" is written "%%{".
var templateEscaper = strings.NewReplacer("${", "$${", "%{", "%%{")

// data returns v with every string and object key escaped for Terraform's
// template syntax, and every expr written as it is. Object keys are escaped
// too: Terraform reads the keys of a JSON object in an argument as templates.
func data(v any) any {
	switch v := v.(type) {
	case expr:
		return string(v)
	case string:
		return templateEscaper.Replace(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[templateEscaper.Replace(k)] = data(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = data(x)
		}
		return out
	default:
		return v
	}
}

// quoted returns s as a quoted string for use inside an expr: escaped for HCL's
// string syntax (quotes, backslashes, control characters) and for its template
// syntax, so that s is read literally.
func quoted(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return templateEscaper.Replace(b.String())
}

func backend(b Backend, cluster schema.ClusterName) map[string]any {
	typ := b.Type
	if typ == "" {
		typ = "local"
	}
	conf := map[string]any{}
	for k, v := range b.Config {
		if !Credential(k) {
			conf[k] = replaceCluster(v, cluster)
		}
	}
	return map[string]any{typ: conf}
}

func replaceCluster(s string, cluster schema.ClusterName) string {
	return strings.ReplaceAll(s, "{cluster}", string(cluster))
}

// identifier is what Terraform accepts as a resource name.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// ResourceName is the Terraform resource name of pool: the pool's name when
// Terraform accepts it as an identifier, otherwise "pool-" and the name (a
// pool named after a GPU count, such as 8x-h100, starts with a digit).
func ResourceName(pool schema.PoolName) string {
	if identifier.MatchString(string(pool)) {
		return string(pool)
	}
	return "pool-" + string(pool)
}

func checkName(name string) error {
	if !identifier.MatchString("pool-" + name) {
		return fmt.Errorf("name %q cannot be part of a Terraform resource name", name)
	}
	return nil
}

// poolLabels are the node labels every node of a pool carries: pool, flavor,
// cluster, and the topology levels whose domain is the same for the whole pool.
// Labels of bounded levels (rack, block, host) differ per node: on gke and eks
// the fleet controller sets them from the provider's placement; onprem and kwok
// hooks get them per node.
func poolLabels(p *schema.Pool) map[string]any {
	l := map[string]any{
		contract.LabelPool:    string(p.Name),
		contract.LabelFlavor:  string(p.Flavor),
		contract.LabelCluster: string(p.Cluster),
	}
	if p.Topology != nil {
		per := fleet.NodesPerDomain(p.Topology)
		// A one-node layout gives the names of the levels that span the pool.
		for _, d := range fleet.Layout(&schema.Config{Pools: map[schema.PoolName]*schema.Pool{p.Name: p}}, map[schema.PoolName]int64{p.Name: 1})[0].Domains {
			if per[d.Level] == 0 {
				l[contract.TopologyLabel(d.Level)] = d.Name
			}
		}
	}
	return l
}
