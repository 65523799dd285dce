package main

import (
	"bytes"
	"context"
	"flag"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var reportPNG = flag.String("report-png", "", "save the Chromium screenshot of the example report to this file (../../docs/report.png)")

// TestReportGolden locks the report of the example pull request (robotics' H100
// quota 128 -> 160) with its what-if, and of the examples alone.
func TestReportGolden(t *testing.T) {
	t.Run("change", func(t *testing.T) {
		prChange(t)
		code, out, errOut := allot(t, nil, "report", "head", "-o", "report.html", "--base", "base", "--simulate", workloadHere(t))
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr:\n%s", code, errOut)
		}
		if want := "report.html: 5 pools, 7 teams, $2,559,010.62 a month (+$160,716.80 against base)\n"; out != want {
			t.Errorf("stdout %q, want %q", out, want)
		}
		golden(t, "report-pr-simulate.html", readFile(t, "report.html"))
	})
	t.Run("alone", func(t *testing.T) {
		prChange(t)
		code, out, errOut := allot(t, nil, "report", "base", "-o", "-")
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr:\n%s", code, errOut)
		}
		if !strings.HasPrefix(out, "<!DOCTYPE html>") {
			t.Fatalf("-o - writes more than the page: %.80q", out)
		}
		golden(t, "report-base.html", out)
	})
}

// With --usage (the Teams as kubectl prints them), the report sets quota
// against use: robotics used 64 of its 128 H100 on average over 10 days.
func TestReportUsage(t *testing.T) {
	prChange(t)
	teams := `apiVersion: v1
kind: List
items:
- apiVersion: allot.dev/v1alpha1
  kind: Team
  metadata: {name: robotics, creationTimestamp: "2026-11-01T00:00:00Z"}
  spec: {quota: [{flavor: h100-80gb, nominal: 128}]}
  status:
    meteredAt: "2026-11-11T00:00:00Z"
    metered:
    - {flavor: h100-80gb, tier: production, gpuSeconds: 41472000}
    - {flavor: h100-80gb, tier: research, gpuSeconds: 13824000}
`
	if err := os.WriteFile("teams.yaml", []byte(teams), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := allot(t, nil, "report", "base", "-o", "-", "--usage", "teams.yaml")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	for _, want := range []string{
		`<section id="showback">`,
		`<td class="id">robotics</td><td class="id">h100-80gb</td><td class="num">128</td><td class="num">64.0</td><td class="num">50%</td><td class="num">10.0 d</td>`,
		"Idle quota costs <strong>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	golden(t, "report-usage.html", out)
	if code, _, errOut := allot(t, nil, "report", "base", "-o", "-", "--usage", "base/teams/robotics.cue"); code != exitUsage || !strings.Contains(errOut, "--usage") {
		t.Errorf("a CUE file as --usage: exit %d, %s", code, errOut)
	}
}

// With --usage given twice, a cluster's Teams and a Slurm cluster's
// allot slurm usage -o json, a team's use is the sum of both averages:
// robotics used 64 H100 over 10 days on Kubernetes and 32 over a day on
// Slurm (768 GPU-hours), 96 of its 128. Accounts that are no team and GPUs
// of no flavor are left out, each with a warning.
func TestReportSlurmUsage(t *testing.T) {
	prChange(t)
	teams := `apiVersion: v1
kind: List
items:
- apiVersion: allot.dev/v1alpha1
  kind: Team
  metadata: {name: robotics, creationTimestamp: "2026-11-01T00:00:00Z"}
  status:
    meteredAt: "2026-11-11T00:00:00Z"
    metered: [{flavor: h100-80gb, tier: production, gpuSeconds: 55296000}]
`
	slurm := `{"since": "2026-11-10T00:00:00Z", "until": "2026-11-11T00:00:00Z", "usage": [
  {"account": "ops", "gres_type": "h100-80gb", "partition": "gpu", "gpu_hours": 5},
  {"account": "robotics", "gres_type": "h100-80gb", "partition": "gpu", "gpu_hours": 700},
  {"account": "robotics", "gres_type": "h100-80gb", "partition": "batch", "gpu_hours": 68},
  {"account": "robotics", "gres_type": "", "partition": "batch", "gpu_hours": 1},
  {"account": "robotics", "gres_type": "mi300\u001b[31m", "partition": "amd", "gpu_hours": 3}]}
`
	for name, data := range map[string]string{"teams.yaml": teams, "slurm.json": slurm} {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := allot(t, nil, "report", "base", "-o", "-", "--usage", "teams.yaml", "--usage", "slurm.json")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	row := `<td class="id">robotics</td><td class="id">h100-80gb</td><td class="num">128</td><td class="num">96.0</td><td class="num">75%</td><td class="num">10.0 d</td>`
	if !strings.Contains(out, row) {
		t.Errorf("the report lacks %q", row)
	}
	for _, want := range []string{
		`slurm.json: account "ops", GRES type "h100-80gb", partition "gpu" (5.00 GPU-hours) is no team's use`,
		`account "robotics", GRES type "mi300\x1b[31m", partition "amd" (3.00 GPU-hours) is no team's use`,
		`account "robotics", GRES type "", partition "batch" (1.00 GPU-hours) is no team's use`, // untyped, of no Slurm pool's partition
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Count(errOut, "\n") != 3 {
		t.Errorf("stderr has more than the three warnings:\n%s", errOut)
	}

	for name, c := range map[string]struct{ data, want string }{
		"negative":  {`{"since": "2026-11-10T00:00:00Z", "until": "2026-11-11T00:00:00Z", "usage": [{"account": "robotics", "gres_type": "h100-80gb", "gpu_hours": -1}]}`, `usage[0] (account "robotics"): -1 GPU-hours: want a number from 0 to`},
		"huge":      {`{"since": "2026-11-10T00:00:00Z", "until": "2026-11-11T00:00:00Z", "usage": [{"account": "robotics", "gres_type": "h100-80gb", "gpu_hours": 1e300}]}`, `GPU-hours: want a number from 0 to`},
		"backwards": {`{"since": "2026-11-11T00:00:00Z", "until": "2026-11-10T00:00:00Z", "usage": []}`, `since 2026-11-11T00:00:00Z, until 2026-11-10T00:00:00Z: want the window`},
		"no window": {`{"usage": []}`, `want the window allot slurm usage reads`},
		"not usage": {`{"since": "2026-11-10T00:00:00Z", "until": "2026-11-11T00:00:00Z", "usage": {"a": 1}}`, `not the JSON of allot slurm usage`},
		"too much":  {`{"since": "2026-11-10T00:00:00Z", "until": "2026-11-11T00:00:00Z", "usage": [{"account": "robotics", "gres_type": "h100-80gb", "gpu_hours": 2e13}, {"account": "robotics", "gres_type": "h100-80gb", "gpu_hours": 2e13}]}`, `more than 27777777777778 GPU-hours of h100-80gb in all`},
	} {
		if err := os.WriteFile("bad.json", []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := allot(t, nil, "report", "base", "-o", "-", "--usage", "bad.json"); code != exitUsage || !strings.Contains(errOut, "--usage bad.json") || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", name, code, errOut, exitUsage, c.want)
		}
	}
}

func TestReportErrors(t *testing.T) {
	t.Run("no output", func(t *testing.T) {
		prChange(t)
		if code, _, errOut := allot(t, nil, "report", "head"); code != 2 || !strings.Contains(errOut, "report needs -o FILE") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("errors are reported and fail", func(t *testing.T) {
		prChange(t)
		edit(t, "head", "pools.cue", "gpusPerNode: 8", "gpusPerNod: 8")
		code, out, errOut := allot(t, nil, "report", "head", "--base", "base", "-o", "report.html")
		if code != 1 || !strings.Contains(errOut, "pools.cue:11:3: error: unknown-field") || !strings.Contains(out, "does not load") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if page := readFile(t, "report.html"); !strings.Contains(page, "The configuration does not load") || !strings.Contains(page, "gpusPerNod") {
			t.Errorf("the report does not show the findings:\n%s", page)
		}
	})
	t.Run("base does not load", func(t *testing.T) {
		prChange(t)
		edit(t, "base", "pools.cue", "gpusPerNode: 8", "gpusPerNod: 8")
		code, _, errOut := allot(t, nil, "report", "head", "--base", "base", "-o", "report.html")
		if code != 2 || !strings.Contains(errOut, "the base base does not load") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if _, err := os.Stat("report.html"); err == nil {
			t.Error("a report was written although the base does not load")
		}
	})
}

// TestReportRendersInChromium opens the example report in headless Chromium, with
// every host name unresolvable, and checks what a person would see: a page of
// the window's size, not blank, with the header's colour (the inline styles
// applied) and the team bars' colour (the inline SVG drawn), and every team in
// the rendered DOM.
func TestReportRendersInChromium(t *testing.T) {
	browser := chromium(t)
	prChange(t)
	if code, _, errOut := allot(t, nil, "report", "head", "-o", "report.html", "--base", "base", "--simulate", workloadHere(t)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	page, err := filepath.Abs("report.html")
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + page

	shot := filepath.Join(t.TempDir(), "report.png")
	headless(t, browser, "--screenshot="+shot, "--window-size=1280,1600", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("Chromium wrote no screenshot: %v", err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1600 {
		t.Fatalf("screenshot %v, want 1280x1600", b)
	}
	if c := at(img, 20, 20); !near(c, [3]int{0x17, 0x20, 0x36}) {
		t.Errorf("the header is %v, want #172036: the styles did not apply", c)
	}
	var white, bars int
	counts := map[[3]int]int{}
	for y := 0; y < 1600; y++ {
		for x := 0; x < 1280; x++ {
			c := at(img, x, y)
			counts[c]++
			if c[0] > 250 && c[1] > 250 && c[2] > 250 {
				white++
			}
			if near(c, [3]int{0x42, 0x63, 0xeb}) {
				bars++
			}
		}
	}
	var most int
	for _, n := range counts {
		most = max(most, n)
	}
	if total := 1280 * 1600; most > total*8/10 || white > total*9/10 {
		t.Errorf("the page looks blank: %d of %d pixels share one colour, %d are white", most, total, white)
	}
	if bars < 2000 {
		t.Errorf("%d pixels of the team bars' colour: the charts did not render", bars)
	}
	if *reportPNG != "" {
		b, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*reportPNG, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	dom := string(headless(t, browser, "--dump-dom", url))
	for _, team := range []string{"ads", "nlp", "platform", "robotics", "search", "speech", "vision"} {
		if !strings.Contains(dom, "<td class=\"id\">"+team+"</td>") || !strings.Contains(dom, ">"+team+"</text>") {
			t.Errorf("team %s is not in the rendered DOM's table and chart", team)
		}
	}
	if n := strings.Count(dom, "<rect "); n < 20 {
		t.Errorf("the rendered DOM has %d SVG rects", n)
	}
}

// workloadHere copies the example workload to workloads/mixed.csv in the current
// directory and returns that relative path, the one the report then shows.
func workloadHere(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(mixed)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join("workloads", "mixed.csv")
	if err := os.MkdirAll("workloads", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// chromium finds Debian's Chromium; the test fails without it: a report nobody
// saw render has not been tested.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not on PATH: install Debian's package (apt-get update && apt-get install -y chromium) to test the report's rendering")
	return ""
}

// headless runs Chromium without a sandbox (root in CI), GPU, network or
// profile, and returns its stdout.
func headless(t *testing.T, browser string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--user-data-dir=" + t.TempDir()}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

func at(img image.Image, x, y int) [3]int {
	r, g, b, _ := img.At(x, y).RGBA()
	return [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
}

func near(c, want [3]int) bool {
	for i := range c {
		if d := c[i] - want[i]; d < -8 || d > 8 {
			return false
		}
	}
	return true
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEmptyObservedAndUsage: kubectl's output with no list at all (an empty
// file, or only comments: a redirect that failed) is an error at its line 1,
// exit 2, as an empty workload is; it was read as no Pools or no Teams and the
// verb exited 0. A list without items is kubectl's answer for none: fine.
func TestEmptyObservedAndUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, data := range map[string]string{"empty": "", "blank": "\n \n", "comments": "# kubectl get pools.allot.dev -o yaml\n"} {
		f := write(name+".yaml", data)
		for _, args := range [][]string{
			{"plan", "../../examples", "--observed", f},
			{"report", "../../examples", "-o", filepath.Join(dir, "report.html"), "--observed", f},
			{"report", "../../examples", "-o", filepath.Join(dir, "report.html"), "--usage", f},
		} {
			code, _, errOut := allot(t, nil, args...)
			flag := args[len(args)-2]
			if want := flag + " " + f + ":1: empty file: want a "; code != exitUsage || !strings.Contains(errOut, want) {
				t.Errorf("%s %s of a %s file: exit %d, stderr %q; want %d and %q", args[0], flag, name, code, errOut, exitUsage, want)
			}
		}
	}
	none := write("none.yaml", "apiVersion: v1\nkind: List\nitems: []\n")
	for _, args := range [][]string{
		{"plan", "../../examples", "--observed", none},
		{"report", "../../examples", "-o", filepath.Join(dir, "report.html"), "--usage", none},
	} {
		if code, _, errOut := allot(t, nil, args...); code != 0 {
			t.Errorf("%s %s of a list without items: exit %d, %s", args[0], args[len(args)-2], code, errOut)
		}
	}
}
