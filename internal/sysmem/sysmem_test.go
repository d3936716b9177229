package sysmem

import (
	"runtime"
	"strings"
	"testing"
)

func TestAvailableAndCheck(t *testing.T) {
	avail, src := Available()
	if runtime.GOOS == "linux" && (avail <= 0 || src == "") {
		t.Fatalf("Available() = %d, %q on linux; want a positive figure and its source", avail, src)
	}
	if avail <= 0 {
		t.Skip("available memory unknown on", runtime.GOOS)
	}
	if err := Check(1<<20, "x=1"); err != nil {
		t.Errorf("1 MiB refused: %v", err)
	}
	err := Check(1e21, "buffer_size=1e12 (replay buffer)")
	if err == nil || !strings.Contains(err.Error(), "buffer_size=1e12") || !strings.Contains(err.Error(), "available") {
		t.Errorf("Check(1e21): %v", err)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		b    float64
		want string
	}{{512, "512 B"}, {1536, "1.5 KiB"}, {3 << 30, "3.0 GiB"}, {1e30, "867361737988.4 EiB"}} {
		if got := Format(c.b); got != c.want {
			t.Errorf("Format(%v) = %q, want %q", c.b, got, c.want)
		}
	}
}
