package nn

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestKernels: the kernels a process reports are the ones its build and
// CPU allow (AVX-512F, then AVX2/FMA assembly on amd64 unless the build has
// the purego tag; the portable loops everywhere else), or the slower path
// HERD_KERNELS names.
func TestKernels(t *testing.T) {
	want := "portable"
	if runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 && cpu.X86.HasFMA && !purego {
		want = "avx2-fma"
		if cpu.X86.HasAVX512F {
			want = "avx512"
		}
	}
	if env := os.Getenv("HERD_KERNELS"); env != "" && KernelsErr() == nil {
		want = env
	}
	if got := Kernels(); got != want {
		t.Errorf("Kernels() = %q, want %q", got, want)
	}
	if got := kernelsOf("go"); got != "portable" {
		t.Errorf("the go backend runs %q", got)
	}
}
