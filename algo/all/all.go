package all

import (
	"herd/algo"
	"herd/algo/a2c"
	"herd/algo/a3c"
	"herd/algo/impala"
	"herd/algo/ppo"
)

// Specs returns every algorithm herd can train, on-policy ones first, then
// those of offPolicy (algo/all/offpolicy.go). The slice is new on each call.
func Specs() []algo.Spec {
	specs := []algo.Spec{ppo.Spec(), a2c.Spec(), a3c.Spec(), impala.Spec()}
	return append(specs, offPolicy()...)
}

// Lookup returns the Spec named name.
func Lookup(name string) (algo.Spec, bool) {
	for _, s := range Specs() {
		if s.Name == name {
			return s, true
		}
	}
	return algo.Spec{}, false
}
