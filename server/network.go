package server

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-sandbox/airlock"
)

// netMetrics count the network decisions of every run.
type netMetrics struct {
	decisions *prometheus.CounterVec
	bytes     *prometheus.CounterVec
}

func newNetMetrics(reg *prometheus.Registry) *netMetrics {
	m := &netMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_network_requests_total", Help: "Network requests of runs, by decision: allowed or denied.",
		}, []string{"decision"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_network_bytes_total", Help: "Body bytes of allowed network requests, by direction: sent or received.",
		}, []string{"direction"}),
	}
	reg.MustRegister(m.decisions, m.bytes)
	return m
}

func (m *netMetrics) observe(res *airlock.Result) {
	if m == nil || res == nil {
		return
	}
	for _, d := range res.Network {
		if d.Allowed {
			m.decisions.WithLabelValues("allowed").Inc()
			m.bytes.WithLabelValues("sent").Add(float64(d.RequestBytes))
			m.bytes.WithLabelValues("received").Add(float64(d.ResponseBytes))
		} else {
			m.decisions.WithLabelValues("denied").Inc()
		}
	}
}

// errNetwork is a request's network field the server cannot take.
var errNetwork = errors.New("network")

// networkPolicy is the policy a request's network field asks for: nil
// (absent) takes the server's own rules, as the Sandbox does; rules must
// each lie within one of the server's (airlock.NetworkPolicy.Narrow), so
// a client can narrow them, never widen them; [] is an empty allow-list.
func (s *Server) networkPolicy(rules []string) (*airlock.NetworkPolicy, error) {
	if rules == nil {
		return nil, nil
	}
	if s.cfg.Network == nil {
		if len(rules) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: this server allows no network (start it with --allow-net)", errNetwork)
	}
	p := airlock.NetworkPolicy{}
	for _, r := range rules {
		rule, err := airlock.ParseNetworkRule(r, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errNetwork, err)
		}
		p.Rules = append(p.Rules, rule)
	}
	out, err := p.Narrow(*s.cfg.Network)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNetwork, err)
	}
	return &out, nil
}

func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
}

// formatNetwork lists a run's network decisions for a language model.
func formatNetwork(b *strings.Builder, ds []airlock.NetworkDecision) {
	if len(ds) == 0 {
		return
	}
	b.WriteString("--- network ---\n")
	for _, d := range ds {
		// The guest chose the path: no control character may pass for a
		// line of this report.
		d.URL, d.Reason = printable(d.URL), printable(d.Reason)
		switch {
		case !d.Allowed:
			fmt.Fprintf(b, "  denied %s %s: %s\n", d.Method, d.URL, d.Reason)
		case d.Reason != "":
			fmt.Fprintf(b, "  allowed %s %s (rule %s): failed: %s\n", d.Method, d.URL, d.Rule, d.Reason)
		default:
			fmt.Fprintf(b, "  allowed %s %s (rule %s): %d, %d bytes\n", d.Method, d.URL, d.Rule, d.Status, d.ResponseBytes)
		}
	}
}
