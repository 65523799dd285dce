package promreg

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func newCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "allot_test_total", Help: "A test counter."}, []string{"k"})
}

func TestRegisterTwiceSharesTheFirst(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := Register(reg, newCounter())
	first.WithLabelValues("a").Inc()
	second := Register(reg, newCounter())
	if second != first {
		t.Fatal("the second registration returned a new collector, not the registered one")
	}
	second.WithLabelValues("a").Inc()
	var m dto.Metric
	if err := first.WithLabelValues("a").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 2 {
		t.Errorf("counter = %v, want 2: both set-ups count into one collector", got)
	}
}

func TestRegisterClashPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	Register(reg, newCounter())
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("a collector of the same name and other labels registered without a panic")
		}
		if !strings.Contains(strings.ToLower(r.(error).Error()), "allot_test_total") {
			t.Errorf("panic %v does not name the metric", r)
		}
	}()
	Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "allot_test_total", Help: "A test counter."}, []string{"other"}))
}
