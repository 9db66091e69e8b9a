package server

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-sandbox/airlock"
)

// installMetrics count the package installs of every run (the operator's
// index, airlock.WithPackageIndex; a client cannot name one).
type installMetrics struct {
	installs *prometheus.CounterVec
	wheels   prometheus.Counter
}

func newInstallMetrics(reg *prometheus.Registry) *installMetrics {
	m := &installMetrics{
		installs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_package_installs_total", Help: "Package installs runs asked for, by outcome: allowed or refused.",
		}, []string{"outcome"}),
		wheels: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_package_wheels_mounted_total", Help: "Wheels mounted into runs by allowed installs.",
		}),
	}
	reg.MustRegister(m.installs, m.wheels)
	return m
}

func (m *installMetrics) observe(res *airlock.Result) {
	if m == nil || res == nil {
		return
	}
	for _, in := range res.Installs {
		if in.Allowed {
			m.installs.WithLabelValues("allowed").Inc()
			m.wheels.Add(float64(len(in.Packages)))
		} else {
			m.installs.WithLabelValues("refused").Inc()
		}
	}
}

// formatInstalls lists a run's installs for a language model.
func formatInstalls(b *strings.Builder, ins []airlock.PackageInstall) {
	if len(ins) == 0 {
		return
	}
	b.WriteString("--- package installs ---\n")
	for _, in := range ins {
		reqs := strings.Join(in.Requirements, " ")
		if !in.Allowed {
			fmt.Fprintf(b, "refused %s: %s\n", reqs, in.Reason)
			continue
		}
		var got []string
		for _, p := range in.Packages {
			got = append(got, p.Name+"=="+p.Version)
		}
		if len(got) == 0 {
			got = append(got, "already satisfied")
		}
		fmt.Fprintf(b, "installed %s: %s\n", reqs, strings.Join(got, " "))
	}
}
