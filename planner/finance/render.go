package finance

import (
	"bytes"
	_ "embed"
	"html/template"
	"io"

	"github.com/allot-dev/allot/schema/quantity"
)

var (
	//go:embed report.html.tmpl
	pageTemplate string
	//go:embed report.css
	pageCSS string
)

// money is one row's cost cells: before, after and the change, or the cost
// alone without a base.
type money struct {
	HasBase       bool
	Before, After quantity.Decimal
}

func (m money) Delta() quantity.Decimal { return m.After.Sub(m.Before) }

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"css":    func() template.CSS { return template.CSS(pageCSS) },
	"usd":    quantity.USD,
	"signed": quantity.SignedUSD,
	"annual": func(d quantity.Decimal) quantity.Decimal { return d.MulInt(12) },
	"add":    func(a, b int64) int64 { return a + b },
	"trend":  trend,
	"percent": func(delta, before quantity.Decimal) string {
		if before.IsZero() {
			return ""
		}
		p := delta.MulInt(100).Quo(before)
		if p.Round(1).Sign() > 0 {
			return "+" + p.Fixed(1) + "%"
		}
		return p.Fixed(1) + "%"
	},
	"row":   func(r *Report, c CostRow) money { return money{r.HasBase(), c.Before, c.After} },
	"pool":  func(r *Report, p PoolRow) money { return money{r.HasBase(), p.Before, p.Spend.Total()} },
	"total": func(r *Report) money { return money{r.HasBase(), r.TotalBefore, r.Total} },
}).Parse(pageTemplate))

// trend classes a change of cost: up (it grows), down, or zero to the cent.
func trend(d quantity.Decimal) string {
	switch d.Round(2).Sign() {
	case 1:
		return "up"
	case -1:
		return "down"
	}
	return "zero"
}

// HTML writes r as one self-contained HTML page: styles inline, charts as
// inline SVG, no script, nothing loaded from elsewhere. The same report gives
// the same bytes.
func HTML(w io.Writer, r *Report) error {
	var b bytes.Buffer
	if err := page.Execute(&b, r); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}
