package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	tfrender "github.com/allot-dev/allot/planner/render/terraform"
)

// Set with -ldflags "-X main.version=… -X main.commit=… -X main.date=…" (make
// build and make release do); a go install of a tagged module fills them from
// runtime/debug.BuildInfo instead, a checkout from its VCS stamp.
var (
	version         = ""
	commit          = ""
	date            = ""
	terraformTested = "1.11.4" // the terraform CI runs the tests with
)

// versionInfo is what allot version prints (-o json: these field names).
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	Modified  bool   `json:"modified,omitempty"` // built from a checkout with uncommitted changes
	Go        string `json:"go"`
	Platform  string `json:"platform"`
	Terraform struct {
		Required string `json:"required"`
		Tested   string `json:"tested"`
	} `json:"terraform"`
	// Dependencies are the versions of the main modules linked in, by module path.
	Dependencies map[string]string `json:"dependencies"`
}

// mainDependencies are the modules allot version names.
var mainDependencies = []string{
	"k8s.io/client-go",
	"sigs.k8s.io/controller-runtime",
	"github.com/fluxcd/pkg/runtime",
	"cuelang.org/go",
	"github.com/hashicorp/terraform-exec",
}

func readVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, Date: date, Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Dependencies: map[string]string{}}
	v.Terraform.Required, v.Terraform.Tested = tfrender.RequiredVersion, terraformTested
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.time":
				if v.Date == "" {
					v.Date = s.Value
				}
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
		for _, d := range bi.Deps {
			for _, want := range mainDependencies {
				if d.Path == want {
					if d.Replace != nil {
						d = d.Replace
					}
					v.Dependencies[want] = d.Version
				}
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	if v.Date == "" {
		v.Date = "unknown"
	}
	return v
}

func (v versionInfo) writeText(w io.Writer) {
	fmt.Fprintf(w, "allot %s\n", v.Version)
	commit := v.Commit
	if v.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(w, "  commit:     %s\n  built:      %s\n  go:         %s %s\n", commit, v.Date, v.Go, v.Platform)
	fmt.Fprintf(w, "  terraform:  %s (tested with %s)\n", v.Terraform.Required, v.Terraform.Tested)
	for _, d := range mainDependencies {
		if ver, ok := v.Dependencies[d]; ok {
			fmt.Fprintf(w, "  %s %s\n", d, ver)
		}
	}
}

func init() {
	commands = append(commands, func() *cobra.Command {
		var output string
		c := &cobra.Command{
			Use:   "version",
			Short: "Print allot's version, commit, build date and main dependencies",
			Example: `  allot version
  allot version -o json
  allot --version`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				v := readVersion()
				switch output {
				case "text":
					v.writeText(cmd.OutOrStdout())
				case "json":
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(v)
				default:
					return usageError{fmt.Errorf("-o %s: want text or json", output)}
				}
				return nil
			},
		}
		c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
		return c
	})
}

// versionTemplate is what allot --version prints: the text of allot version.
func versionTemplate() string {
	var b strings.Builder
	readVersion().writeText(&b)
	return b.String()
}
