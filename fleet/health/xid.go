package health

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// XIDClass says whose fault an XID is.
type XIDClass string

// XID classes.
const (
	// XIDApplication: the job's fault (a bad kernel, a page fault, a job killed
	// mid-flight); the GPU is fine and is not marked.
	XIDApplication XIDClass = "application"
	// XIDHardware: the GPU, its memory, its links or its firmware failed; the GPU
	// is marked unhealthy.
	XIDHardware XIDClass = "hardware"
)

// XIDEntry classifies one XID code.
type XIDEntry struct {
	Class XIDClass `json:"class"`
	// Fatal: the GPU needs a reset or the node a reboot before it can run work
	// again; the node is tainted and stays so until it reboots.
	Fatal bool `json:"fatal,omitempty"`
	// Description is NVIDIA's name for the error.
	Description string `json:"description,omitempty"`
}

// XIDTable classifies XID codes; codes it does not list get Default.
type XIDTable struct {
	Entries map[uint64]XIDEntry
	Default XIDEntry
}

// DefaultXIDTable returns the classification allot ships.
//
// Sources: NVIDIA's XID catalog, "XID Errors" in the GPU deployment and
// management documentation (https://docs.nvidia.com/deploy/xid-errors/), which
// names each code, its likely cause (user application, driver, hardware) and the
// recovery action (none, reset the GPU, reboot the node); and the NVIDIA device
// plugin, which by default leaves a GPU healthy only for the application XIDs
// 13, 31, 43, 45, 68 and 109. As there, an XID this table does not list marks the
// GPU (hardware, not fatal): an unknown error is not assumed harmless.
// "Fatal" follows the catalog's recovery action: codes whose action is a GPU
// reset or node reboot before any work (double-bit ECC, fallen off the bus,
// uncontained ECC, row-remap failure, NVLink and GSP firmware errors) are fatal;
// codes where the GPU keeps running others' work (contained ECC, a recorded row
// remap, high single-bit rate) mark only the GPU.
func DefaultXIDTable() XIDTable {
	app := func(d string) XIDEntry { return XIDEntry{Class: XIDApplication, Description: d} }
	hw := func(d string) XIDEntry { return XIDEntry{Class: XIDHardware, Description: d} }
	fatal := func(d string) XIDEntry { return XIDEntry{Class: XIDHardware, Fatal: true, Description: d} }
	return XIDTable{
		Entries: map[uint64]XIDEntry{
			13:  app("Graphics Engine Exception"),
			31:  app("GPU memory page fault"),
			43:  app("GPU stopped processing"),
			45:  app("Preemptive cleanup, due to previous errors"),
			68:  app("NVDEC0 Exception"),
			69:  app("Graphics Engine class error"),
			109: app("Context Switch Timeout Error"),
			32:  hw("Invalid or corrupted push buffer stream"),
			48:  fatal("Double Bit ECC Error"),
			61:  hw("Internal micro-controller breakpoint/warning"),
			62:  fatal("Internal micro-controller halt"),
			63:  hw("ECC page retirement or row remapping recording event"),
			64:  fatal("ECC page retirement or row remapper recording failure"),
			74:  fatal("NVLink Error"),
			79:  fatal("GPU has fallen off the bus"),
			92:  hw("High single-bit ECC error rate"),
			94:  hw("Contained ECC error"),
			95:  fatal("Uncontained ECC error"),
			119: fatal("GSP RPC Timeout"),
			120: fatal("GSP Error"),
			121: hw("C2C Link corrected error"),
			140: fatal("Unrecovered ECC Error"),
			143: fatal("GPU Initialization Failure"),
			154: fatal("GPU Recovery Action Changed"),
		},
		Default: XIDEntry{Class: XIDHardware, Description: "unlisted XID"},
	}
}

// Classify returns the entry for code.
func (t XIDTable) Classify(code uint64) XIDEntry {
	if e, ok := t.Entries[code]; ok {
		return e
	}
	return t.Default
}

// Codes returns the listed codes in order.
func (t XIDTable) Codes() []uint64 {
	out := make([]uint64, 0, len(t.Entries))
	for c := range t.Entries {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Overrides is the XID overrides file: entries for every cluster, and entries
// per cluster that win over them.
//
//	default: {class: hardware}          # optional: for codes no table lists
//	xids:
//	  "94": {class: hardware, fatal: true}
//	clusters:
//	  onprem-a:
//	    xids:
//	      "43": {class: hardware}
type Overrides struct {
	Default  *XIDEntry                   `json:"default,omitempty"`
	XIDs     map[string]XIDEntry         `json:"xids,omitempty"`
	Clusters map[string]ClusterOverrides `json:"clusters,omitempty"`
}

// ClusterOverrides are the overrides of one cluster.
type ClusterOverrides struct {
	Default *XIDEntry           `json:"default,omitempty"`
	XIDs    map[string]XIDEntry `json:"xids,omitempty"`
}

// ParseOverrides parses an overrides file (YAML or JSON); name is used in errors.
// Unknown fields, codes that are not numbers and contradictory entries (an
// application XID marked fatal) are errors that say where.
func ParseOverrides(name string, data []byte) (Overrides, error) {
	var o Overrides
	if err := yaml.UnmarshalStrict(data, &o); err != nil {
		return Overrides{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := checkEntries(name, "", o.Default, o.XIDs); err != nil {
		return Overrides{}, err
	}
	for _, c := range sortedKeys(o.Clusters) {
		co := o.Clusters[c]
		if err := checkEntries(name, "clusters."+c+".", co.Default, co.XIDs); err != nil {
			return Overrides{}, err
		}
	}
	return o, nil
}

func checkEntries(name, path string, def *XIDEntry, xids map[string]XIDEntry) error {
	if def != nil {
		if err := checkEntry(*def); err != nil {
			return fmt.Errorf("%s: %sdefault: %w", name, path, err)
		}
	}
	for _, k := range sortedKeys(xids) {
		if _, err := parseXID(k); err != nil {
			return fmt.Errorf("%s: %sxids.%s: %w", name, path, k, err)
		}
		if err := checkEntry(xids[k]); err != nil {
			return fmt.Errorf("%s: %sxids.%s: %w", name, path, k, err)
		}
	}
	return nil
}

func checkEntry(e XIDEntry) error {
	switch e.Class {
	case XIDApplication:
		if e.Fatal {
			return fmt.Errorf("an application XID cannot be fatal: it does not mark the GPU")
		}
	case XIDHardware:
	case "":
		return fmt.Errorf("class is required: application or hardware")
	default:
		return fmt.Errorf("class %q: want application or hardware", e.Class)
	}
	return nil
}

func parseXID(s string) (uint64, error) {
	c, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil || c == 0 {
		return 0, fmt.Errorf("%q is not an XID code (a positive integer)", s)
	}
	return c, nil
}

// With returns t with o applied: first the entries for every cluster, then
// those of cluster. t is not changed.
func (t XIDTable) With(o Overrides, cluster string) XIDTable {
	out := XIDTable{Entries: make(map[uint64]XIDEntry, len(t.Entries)), Default: t.Default}
	for c, e := range t.Entries {
		out.Entries[c] = e
	}
	apply := func(def *XIDEntry, xids map[string]XIDEntry) {
		if def != nil {
			out.Default = *def
		}
		for k, e := range xids {
			c, _ := parseXID(k) // checked by ParseOverrides
			if e.Description == "" {
				e.Description = t.Classify(c).Description
			}
			out.Entries[c] = e
		}
	}
	apply(o.Default, o.XIDs)
	if co, ok := o.Clusters[cluster]; ok {
		apply(co.Default, co.XIDs)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
