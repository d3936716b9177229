package shmwire

import "testing"

// A shm name is refused unless clients can reach it as the host of
// shm://NAME/ID.
func TestCheckName(t *testing.T) {
	for _, ok := range []string{"herd", "herdtest-123-TestGoShm", "a.b_c-1"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "a:1", "u@h", "a?b", "a b", "a#b"} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) accepted an unreachable name", bad)
		}
	}
}
