package algo

import (
	"fmt"
	"strings"
)

// Matrix is the capability table of a build: its executors and its
// algorithms, with what each executor runs derived by Refusal. The CLI's
// help and the docs print it, so neither lists pairs of its own.
type Matrix struct {
	Executors []Executor
	Specs     []Spec
}

// matrixHeader is the header the table is computed for: one policy, the
// executor's default counts.
func matrixHeader(ex Executor) Header {
	h := DefaultHeader()
	h.Runtime.Executor = ex.Name
	return h
}

// Refusal is Refusal for the pair under the default runtime settings.
func (m Matrix) Refusal(ex Executor, spec Spec) string {
	h := matrixHeader(ex)
	h.Algo = spec.Name
	return Refusal(ex, h, spec)
}

// needsText says what ex needs: by default, with runtime.learners > 1 and
// for several policies, where those differ.
func needsText(ex Executor) string {
	text := func(h Header) string {
		if ex.Needs == nil {
			return "any algorithm"
		}
		needs := ex.Needs(h)
		if len(needs) == 0 {
			return "any algorithm"
		}
		return needsString(needs)
	}
	h := matrixHeader(ex)
	base := text(h)
	out := base
	hm := h
	hm.Runtime.Learners = 2
	if s := text(hm); s != base {
		out += "; with runtime.learners > 1: " + s
	}
	if ex.Requires != 0 {
		out += "; every run: " + ex.Requires.String()
	}
	hp := h
	hp.MultiAgent = MultiAgentConfig{Policies: []string{"a", "b"}}
	switch s := text(hp); {
	case !ex.Policies:
		out += "; several policies: not trained"
	case s != base:
		out += "; several policies: " + s
	}
	return out
}

// Markdown renders the table for the docs: what each algorithm can do,
// what each executor needs and reads, which pairs train, and one line per
// refused pair saying why.
func (m Matrix) Markdown() string {
	var b strings.Builder
	b.WriteString("| algorithm | can |")
	for _, ex := range m.Executors {
		fmt.Fprintf(&b, " %s |", ex.Name)
	}
	b.WriteString("\n| --- | --- |")
	for range m.Executors {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	var refused []string
	for _, s := range m.Specs {
		fmt.Fprintf(&b, "| %s | %s |", s.Name, s.Can)
		for _, ex := range m.Executors {
			if r := m.Refusal(ex, s); r != "" {
				b.WriteString(" refused |")
				refused = append(refused, fmt.Sprintf("- %s × %s: %s", s.Name, ex.Name, r))
				continue
			}
			b.WriteString(" trains |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n| executor | needs | runtime keys |\n| --- | --- | --- |\n")
	for _, ex := range m.Executors {
		keys := "—"
		if len(ex.Keys) > 0 {
			keys = "`" + strings.Join(ex.Keys, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", ex.Name, needsText(ex), keys)
	}
	if len(refused) > 0 {
		b.WriteString("\nRefused pairs, each with the reason `herd train` gives:\n\n")
		b.WriteString(strings.Join(refused, "\n"))
		b.WriteString("\n")
	}
	return b.String()
}

// Text renders the table for `herd train --help`: per executor, its
// description, what it needs and the algorithms it runs.
func (m Matrix) Text() string {
	var b strings.Builder
	for _, ex := range m.Executors {
		var runs []string
		for _, s := range m.Specs {
			if m.Refusal(ex, s) == "" {
				runs = append(runs, s.Name)
			}
		}
		fmt.Fprintf(&b, "  %s: %s.\n    needs %s.\n    runs: %s\n", ex.Name, ex.Doc, needsText(ex), strings.Join(runs, ", "))
	}
	return b.String()
}
