package main

import (
	"flag"
	"os"

	"github.com/airlock-sandbox/airlock"
)

// netFlags are --allow-net rules: none means no network.
type netFlags struct{ rules multiFlag }

func (n *netFlags) register(fs *flag.FlagSet) {
	fs.Var(&n.rules, "allow-net", "let the code reach this HTTP(S) endpoint through the host (repeatable): api.example.com, api.example.com:8443, https://api.example.com/v1/, 'GET,POST https://api.example.com/v1/', with 'header:NAME=$VAR' after the target to add a header the code never sees (its value from the environment); no scheme means https")
}

// policy is the rules' policy, nil without rules.
func (n *netFlags) policy() (*airlock.NetworkPolicy, error) {
	if len(n.rules) == 0 {
		return nil, nil
	}
	p := &airlock.NetworkPolicy{}
	for _, s := range n.rules {
		r, err := airlock.ParseNetworkRule(s, os.LookupEnv)
		if err != nil {
			return nil, usageError{"--allow-net: " + err.Error()}
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

func hasHeaders(p *airlock.NetworkPolicy) bool {
	if p == nil {
		return false
	}
	for _, r := range p.Rules {
		if len(r.Headers) > 0 {
			return true
		}
	}
	return false
}

// remoteRules are a policy's rules as a server's "network" field takes
// them; nil leaves the server's own.
func remoteRules(p *airlock.NetworkPolicy) []string {
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(p.Rules))
	for _, r := range p.Rules {
		out = append(out, r.String())
	}
	return out
}
