//go:build linux

package envsvc

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkPipeRoundTrip is the floor under BenchmarkRemoteVectorStepPython:
// one byte to a second process and one byte back over two pipes, blocking
// reads and nothing else, so what a request and its answer cost on this
// machine before any transport, encoding or env work. A round trip wakes
// each process once. Where the two sleep on different cores every wake-up
// crosses cores, which on a VM means an interrupt to a halted virtual CPU;
// run under `taskset -c 0` both share one core and a wake-up is a context
// switch. Comparing the two runs tells how much of a remote env's per-message
// cost is the machine's and how much herd's.
func BenchmarkPipeRoundTrip(b *testing.B) {
	var req, resp [2]int
	if err := unix.Pipe2(req[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	if err := unix.Pipe2(resp[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	childIn, childOut := os.NewFile(uintptr(req[0]), "request"), os.NewFile(uintptr(resp[1]), "answer")
	cmd := exec.Command(os.Args[0], "-test.run=^TestPipeEchoChild$")
	cmd.Env = append(os.Environ(), "HERD_PIPE_ECHO=1")
	cmd.ExtraFiles = []*os.File{childIn, childOut} // fds 3 and 4
	err := cmd.Start()
	childIn.Close()
	childOut.Close()
	if err != nil {
		unix.Close(req[1])
		unix.Close(resp[0])
		b.Fatal(err)
	}
	b.Cleanup(func() {
		unix.Close(req[1]) // the child reads EOF and exits
		cmd.Wait()
		unix.Close(resp[0])
	})
	var buf [1]byte
	roundTrip := func() {
		if _, err := unix.Write(req[1], buf[:]); err != nil {
			b.Fatal(err)
		}
		if n, err := unix.Read(resp[0], buf[:]); n != 1 || err != nil {
			b.Fatalf("echo child: read %d bytes: %v", n, err)
		}
	}
	for range 100 {
		roundTrip()
	}
	reportCPU := cpuPerOp(b, cmd.Process.Pid)
	b.ResetTimer()
	for range b.N {
		roundTrip()
	}
	b.StopTimer()
	reportCPU() // use -benchtime 100000x (10 ms ticks for the child)
}

// TestPipeEchoChild is BenchmarkPipeRoundTrip's second process: it echoes
// fd 3's bytes to fd 4 until fd 3 ends. Run by the test binary on its own,
// it only skips.
func TestPipeEchoChild(t *testing.T) {
	if os.Getenv("HERD_PIPE_ECHO") != "1" {
		t.Skip("the echo process of BenchmarkPipeRoundTrip")
	}
	var buf [1]byte
	for {
		if n, err := unix.Read(3, buf[:]); n != 1 || err != nil {
			return
		}
		if _, err := unix.Write(4, buf[:]); err != nil {
			return
		}
	}
}
