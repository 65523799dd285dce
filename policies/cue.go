package policies

import (
	_ "embed"
	"fmt"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/allot-dev/allot/schema"
)

//go:embed rules.cue
var rulesSource string

var compileRules = sync.OnceValues(func() (*cue.Context, cue.Value) {
	ctx := cuecontext.New()
	return ctx, ctx.CompileString(rulesSource, cue.Filename("policies/rules.cue"))
})

type cueQuota struct {
	Nominal        int64 `json:"nominal"`
	BorrowingLimit int64 `json:"borrowingLimit"`
	LendingLimit   int64 `json:"lendingLimit"`
}

type cuePool struct {
	Min               int64 `json:"min"`
	Max               int64 `json:"max"`
	CommittedNodes    int64 `json:"committedNodes"`
	HasCommittedPrice bool  `json:"hasCommittedPrice"`
}

type cueTeam struct {
	CostCenter string              `json:"costCenter"`
	Owners     []string            `json:"owners"`
	Cohort     string              `json:"cohort"`
	Quota      map[string]cueQuota `json:"quota"`
}

type cueInput struct {
	Pools map[string]cuePool `json:"pools"`
	Teams map[string]cueTeam `json:"teams"`
}

type cueFinding struct {
	Rule    string   `json:"rule"`
	Path    []string `json:"path"`
	Message string   `json:"message"`
}

func orUnset(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// checkCUE evaluates the rules of rules.cue on cfg. The CUE context is shared and
// not safe for concurrent use, so evaluations are serialised.
var cueMu sync.Mutex

func checkCUE(cfg *schema.Config) schema.Findings {
	in := cueInput{Pools: map[string]cuePool{}, Teams: map[string]cueTeam{}}
	for n, p := range cfg.Pools {
		in.Pools[string(n)] = cuePool{Min: p.MinNodes, Max: p.MaxNodes, CommittedNodes: p.Price.CommittedNodes, HasCommittedPrice: p.Price.HasCommittedPrice}
	}
	for n, t := range cfg.Teams {
		e := cueTeam{CostCenter: t.CostCenter, Owners: append([]string{}, t.Owners...), Cohort: string(t.Cohort), Quota: map[string]cueQuota{}}
		for f, q := range t.Quota {
			e.Quota[string(f)] = cueQuota{Nominal: q.Nominal, BorrowingLimit: orUnset(q.BorrowingLimit), LendingLimit: orUnset(q.LendingLimit)}
		}
		in.Teams[string(n)] = e
	}

	cueMu.Lock()
	defer cueMu.Unlock()
	ctx, rules := compileRules()
	if rules.Err() != nil {
		return schema.Findings{{Severity: schema.SeverityError, Rule: schema.RuleInternal, Message: fmt.Sprintf("policies/rules.cue: %v", rules.Err())}}
	}
	v := rules.FillPath(cue.ParsePath("input"), ctx.Encode(in))
	var got []cueFinding
	if err := v.LookupPath(cue.ParsePath("findings")).Decode(&got); err != nil {
		return schema.Findings{{Severity: schema.SeverityError, Rule: schema.RuleInternal, Message: fmt.Sprintf("evaluating policies/rules.cue: %v", err)}}
	}
	out := make(schema.Findings, 0, len(got))
	for _, f := range got {
		out = append(out, finding(f.Rule, cfg.Pos(f.Path...), f.Message))
	}
	return out
}
