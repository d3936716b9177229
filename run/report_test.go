package run

import (
	"testing"

	"herd/algo"
)

func TestDirMode(t *testing.T) {
	for _, c := range []struct {
		force, resume bool
		want          algo.DirMode
		fails         bool
	}{
		{false, false, algo.DirNew, false},
		{true, false, algo.DirForce, false},
		{false, true, algo.DirResume, false},
		{true, true, 0, true},
	} {
		got, err := DirMode(c.force, c.resume)
		if (err != nil) != c.fails || got != c.want {
			t.Errorf("DirMode(%v, %v) = %v, %v", c.force, c.resume, got, err)
		}
	}
}
