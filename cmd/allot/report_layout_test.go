package main

import (
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// measure is appended to a report: it writes, into the DOM that --dump-dom
// prints, each chart's accessible name, its text count and every text element
// that does not lie inside the chart's box (getBoundingClientRect).
const measure = `<script>
const charts = [];
document.querySelectorAll("figure.chart svg").forEach(svg => {
  const b = svg.getBoundingClientRect(), out = [];
  const texts = svg.querySelectorAll("text");
  texts.forEach(t => {
    const r = t.getBoundingClientRect();
    if (r.width === 0 && t.textContent !== "") out.push("not drawn: " + t.textContent);
    if (r.left < b.left - 0.5 || r.right > b.right + 0.5 || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5)
      out.push(t.textContent + " at " + [r.left, r.right, r.top, r.bottom].map(Math.round) + ", chart " + [b.left, b.right, b.top, b.bottom].map(Math.round));
  });
  charts.push({name: svg.getAttribute("aria-label"), texts: Array.from(texts, t => t.textContent), outside: out});
});
const pre = document.createElement("pre");
pre.id = "measure";
pre.textContent = JSON.stringify(charts);
document.body.appendChild(pre);
</script>`

// TestReportChartsFitInChromium draws the finance report with the longest team
// and flavor names the schema allows, a recommendation (its "← recommended"
// and its curves) and a hostile flavor name in the recommendation's curve, in
// headless Chromium at two widths, and checks every text element of every
// chart lies inside the chart's box and each chart's accessible name is its own.
func TestReportChartsFitInChromium(t *testing.T) {
	browser := chromium(t)
	dir := copyExamples(t)
	longTeam := "robotics-" + strings.Repeat("w", 54)                        // 63 characters, all wide
	longFlavor := "h100-80gb-" + strings.Repeat("m", 53)                     // the pattern's limit
	hostile := `</text><script>alert(1)</script>` + strings.Repeat("Ｗ", 300) // from a JSON file
	rename := func(file string) {
		p := filepath.Join(dir, file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer("teams: robotics:", `teams: "`+longTeam+`":`, "h100-80gb", longFlavor, "robotics", longTeam).Replace(string(b))
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"pools.cue", "teams/ads.cue", "teams/nlp.cue", "teams/platform.cue", "teams/robotics.cue", "teams/search.cue", "teams/vision.cue", "workloads/mixed.csv"} {
		rename(f)
	}
	if err := os.Rename(filepath.Join(dir, "teams", "robotics.cue"), filepath.Join(dir, "teams", longTeam+".cue")); err != nil { // file-scope
		t.Fatal(err)
	}
	t.Chdir(dir)
	code, rec, errOut := allot(t, nil, "recommend", ".", "--workload", "workloads/mixed.csv", "--target", "wait_p95=15m", "--curve", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("recommend: exit %d: %s", code, errOut)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(rec), &doc); err != nil {
		t.Fatal(err)
	}
	curve, _ := doc["curve"].([]any)
	for _, p := range curve {
		if p := p.(map[string]any); p["flavor"] == "a100-40gb" {
			p["flavor"] = hostile
		}
	}
	b, _ := json.Marshal(doc)
	if err := os.WriteFile("rec.json", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := allot(t, nil, "report", ".", "-o", "report.html", "--recommendation", "rec.json"); code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	page := readFile(t, "report.html")
	if strings.Contains(page, "<script>alert") {
		t.Fatal("the hostile flavor name is in the page unescaped")
	}
	if err := os.WriteFile("measured.html", []byte(strings.Replace(page, "</body>", measure+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("measured.html")
	for _, size := range []string{"1280,4000", "700,4000"} {
		dom := string(headless(t, browser, "--window-size="+size, "--dump-dom", "file://"+abs))
		m := regexp.MustCompile(`(?s)<pre id="measure">(.*?)</pre>`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("%s: the measuring script wrote nothing", size)
		}
		var charts []struct {
			Name    string
			Texts   []string
			Outside []string
		}
		if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &charts); err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		var all string
		for _, c := range charts {
			if names[c.Name] || c.Name == "" {
				t.Errorf("%s: two charts, or none, named %q", size, c.Name)
			}
			names[c.Name] = true
			if len(c.Texts) == 0 {
				t.Errorf("%s: chart %q has no text", size, c.Name)
			}
			for _, o := range c.Outside {
				t.Errorf("%s: chart %q: text outside the chart: %s", size, c.Name, o)
			}
			all += strings.Join(c.Texts, "\n") + "\n"
		}
		if len(charts) < 6 || !names["p95 wait at each size, "+longFlavor] || !strings.Contains(all, "← recommended") ||
			!strings.Contains(all, "robotics-www") || !strings.Contains(all, "…") {
			t.Errorf("%s: charts %v: want the report's charts, one curve per flavor, the long team (cut), and a recommended point", size, names)
		}
	}
}
