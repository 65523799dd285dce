package health

import (
	"strings"
	"testing"
)

func TestDefaultXIDTable(t *testing.T) {
	tab := DefaultXIDTable()
	for _, c := range []uint64{13, 31, 43, 45, 68, 109} {
		if e := tab.Classify(c); e.Class != XIDApplication || e.Fatal {
			t.Errorf("XID %d = %+v: want application", c, e)
		}
	}
	for _, c := range []uint64{48, 63, 64, 74, 79, 94, 95, 119, 120} {
		if e := tab.Classify(c); e.Class != XIDHardware {
			t.Errorf("XID %d = %+v: want hardware", c, e)
		}
	}
	for _, c := range tab.Codes() {
		e := tab.Entries[c]
		if err := checkEntry(e); err != nil || e.Description == "" {
			t.Errorf("XID %d = %+v: %v (every entry needs a class and NVIDIA's name)", c, e, err)
		}
	}
}

const overridesFile = `
xids:
  "43": {class: hardware}
  "94": {class: hardware, fatal: true}
clusters:
  onprem-a:
    default: {class: application}
    xids:
      "43": {class: hardware, fatal: true}
      "79": {class: hardware, fatal: false, description: "bus drops on our risers"}
`

func TestOverrides(t *testing.T) {
	o, err := ParseOverrides("xids.yaml", []byte(overridesFile))
	if err != nil {
		t.Fatal(err)
	}
	base := DefaultXIDTable()
	tests := map[string]struct {
		cluster string
		code    uint64
		want    XIDEntry
	}{
		"global override":              {cluster: "gke-use1", code: 43, want: XIDEntry{Class: XIDHardware, Description: "GPU stopped processing"}},
		"global override, fatal":       {cluster: "gke-use1", code: 94, want: XIDEntry{Class: XIDHardware, Fatal: true, Description: "Contained ECC error"}},
		"untouched code":               {cluster: "gke-use1", code: 79, want: base.Classify(79)},
		"unlisted code, default":       {cluster: "gke-use1", code: 999, want: base.Default},
		"cluster wins over global":     {cluster: "onprem-a", code: 43, want: XIDEntry{Class: XIDHardware, Fatal: true, Description: "GPU stopped processing"}},
		"cluster entry with its words": {cluster: "onprem-a", code: 79, want: XIDEntry{Class: XIDHardware, Description: "bus drops on our risers"}},
		"cluster default":              {cluster: "onprem-a", code: 999, want: XIDEntry{Class: XIDApplication}},
		"cluster inherits global":      {cluster: "onprem-a", code: 94, want: XIDEntry{Class: XIDHardware, Fatal: true, Description: "Contained ECC error"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := base.With(o, tc.cluster).Classify(tc.code); got != tc.want {
				t.Errorf("XID %d on %s = %+v, want %+v", tc.code, tc.cluster, got, tc.want)
			}
		})
	}
	if base.Classify(43).Class != XIDApplication {
		t.Fatal("With changed the table it was called on")
	}
}

func TestOverridesErrors(t *testing.T) {
	tests := map[string]struct{ file, want string }{
		"not a code":        {`xids: {"abc": {class: hardware}}`, `f.yaml: xids.abc: "abc" is not an XID code`},
		"zero":              {`xids: {"0": {class: hardware}}`, `xids.0: "0" is not an XID code`},
		"bad class":         {`xids: {"79": {class: hw}}`, `f.yaml: xids.79: class "hw": want application or hardware`},
		"no class":          {`xids: {"79": {fatal: true}}`, `xids.79: class is required`},
		"fatal application": {`clusters: {a: {xids: {"13": {class: application, fatal: true}}}}`, `f.yaml: clusters.a.xids.13: an application XID cannot be fatal`},
		"bad default":       {`default: {class: nope}`, `f.yaml: default: class "nope"`},
		"unknown field":     {`xid: {"79": {class: hardware}}`, `f.yaml: error unmarshaling JSON: while decoding JSON: json: unknown field "xid"`},
		"not YAML":          {"xids: [", `f.yaml: `},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseOverrides("f.yaml", []byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestThresholdsValidate(t *testing.T) {
	if err := DefaultThresholds().Validate(); err != nil {
		t.Fatalf("default policy: %v", err)
	}
	bad := DefaultThresholds()
	bad.ThrottleFaults = append(bad.ThrottleFaults, "Hot")
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `throttle reason "Hot"`) {
		t.Fatalf("unknown throttle reason: %v", err)
	}
	bad = DefaultThresholds()
	bad.NVLinksPerGPU = 19
	if err := bad.Validate(); err == nil {
		t.Fatal("19 NVLinks per GPU: want an error")
	}
	rs, err := ParseThrottleReasons("HwThermalSlowdown, SwPowerCap")
	if err != nil || len(rs) != 2 || rs[1] != ThrottleSWPowerCap {
		t.Fatalf("ParseThrottleReasons = %v, %v", rs, err)
	}
	if _, err := ParseThrottleReasons("HwThermal"); err == nil {
		t.Fatal("ParseThrottleReasons(HwThermal): want an error")
	}
}
